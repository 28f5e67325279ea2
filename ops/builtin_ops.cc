// Registers every built-in operator group, in a fixed order.
#include "ops/builtin_ops.h"

#include "base/build_config.h"
#include "ops/cpu/register.h"
#include "ops/op.h"

namespace weft::detail {

void register_builtin_ops(OpRegistry& r) {
  register_elemwise_ops(r);
  register_reduce_ops(r);
  register_shape_ops(r);
  register_nn_dnnl_ops(r);
  register_nn_norm_ops(r);
  register_rnn_ops(r);
  register_init_ops(r);
  register_optimizer_ops(r);
  register_pick_ops(r);
  register_image_ops(r);
  cpu::register_all_kernels(r);  // after the definitions: adds a CPU kernel to each op
#if WEFT_USE_CUDA
  register_cuda_kernels(r);  // after the definitions: adds a CUDA kernel to each op
#endif
}

}  // namespace weft::detail
