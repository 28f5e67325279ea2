// The CPU kernels of the normalisation group (each part in its own file; the group's entry point
// register_nn_norm_kernels is here).
#include "ops/cpu/norm_kernels.h"
#include "ops/cpu/register.h"

namespace weft::cpu {

void register_nn_norm_kernels(OpRegistry& r) {
  register_batch_norm_kernels(r);
  register_layer_norm_kernels(r);
  register_softmax_kernels(r);
  register_activation_kernels(r);
  register_dropout_kernels(r);
  register_ctc_loss_kernels(r);
}

}  // namespace weft::cpu
