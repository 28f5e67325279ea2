// Adds the CPU kernels to the operators the device-neutral definitions registered.
#include "ops/cpu/register.h"

namespace weft::cpu {

void register_all_kernels(OpRegistry& r) {
  register_elemwise_kernels(r);
  register_reduce_kernels(r);
  register_shape_kernels(r);
  register_nn_dnnl_kernels(r);
  register_nn_norm_kernels(r);
  register_rnn_kernels(r);
  register_init_kernels(r);
  register_optimizer_kernels(r);
  register_pick_kernels(r);
  register_image_kernels(r);
}

}  // namespace weft::cpu
