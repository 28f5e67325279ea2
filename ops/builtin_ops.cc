// Registers every built-in operator group, in a fixed order: the definitions (ops/defs/), then the
// kernels of each device folder (ops/cpu/, ops/cuda/). The only place that knows all three.
#include "ops/builtin_ops.h"

#include "base/build_config.h"
#include "ops/cpu/register.h"
#include "ops/op.h"
#if WEFT_USE_CUDA
#include "ops/cuda/register.h"
#endif

namespace weft::detail {

namespace {

// Runs one registration function with its name as the registry's registrar, so that
// OpRegistry::freeze names it in its messages (Note [Definitions and kernels] in ops/op.h).
void run(OpRegistry& r, const char* where, void (*fn)(OpRegistry&)) {
  r.set_registrar(where);
  fn(r);
}

}  // namespace

void register_builtin_ops(OpRegistry& r) {
  run(r, "ops/defs register_elemwise_ops", register_elemwise_ops);
  run(r, "ops/defs register_reduce_ops", register_reduce_ops);
  run(r, "ops/defs register_shape_ops", register_shape_ops);
  run(r, "ops/defs register_conv_dense_ops", register_conv_dense_ops);
  run(r, "ops/defs register_nn_norm_ops", register_nn_norm_ops);
  run(r, "ops/defs register_rnn_ops", register_rnn_ops);
  run(r, "ops/defs register_init_ops", register_init_ops);
  run(r, "ops/defs register_optimizer_ops", register_optimizer_ops);
  run(r, "ops/defs register_pick_ops", register_pick_ops);
  run(r, "ops/defs register_image_ops", register_image_ops);

  run(r, "ops/cpu register_elemwise_kernels", cpu::register_elemwise_kernels);
  run(r, "ops/cpu register_reduce_kernels", cpu::register_reduce_kernels);
  run(r, "ops/cpu register_shape_kernels", cpu::register_shape_kernels);
  run(r, "ops/cpu register_conv_dense_kernels", cpu::register_conv_dense_kernels);
  run(r, "ops/cpu register_nn_norm_kernels", cpu::register_nn_norm_kernels);
  run(r, "ops/cpu register_rnn_kernels", cpu::register_rnn_kernels);
  run(r, "ops/cpu register_init_kernels", cpu::register_init_kernels);
  run(r, "ops/cpu register_optimizer_kernels", cpu::register_optimizer_kernels);
  run(r, "ops/cpu register_pick_kernels", cpu::register_pick_kernels);
  run(r, "ops/cpu register_image_kernels", cpu::register_image_kernels);

#if WEFT_USE_CUDA
  run(r, "ops/cuda register_elemwise_kernels", cuda::register_elemwise_kernels);
  run(r, "ops/cuda register_init_kernels", cuda::register_init_kernels);
  run(r, "ops/cuda register_reduce_kernels", cuda::register_reduce_kernels);
  run(r, "ops/cuda register_shape_kernels", cuda::register_shape_kernels);
  run(r, "ops/cuda register_indexing_kernels", cuda::register_indexing_kernels);
  run(r, "ops/cuda register_fully_connected_kernels", cuda::register_fully_connected_kernels);
  run(r, "ops/cuda register_dot_kernels", cuda::register_dot_kernels);
  run(r, "ops/cuda register_cudnn_kernels", cuda::register_cudnn_kernels);
  run(r, "ops/cuda register_norm_kernels", cuda::register_norm_kernels);
  run(r, "ops/cuda register_rnn_kernels", cuda::register_rnn_kernels);
  run(r, "ops/cuda register_misc_kernels", cuda::register_misc_kernels);
#endif
}

}  // namespace weft::detail
