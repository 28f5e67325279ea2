// Adds the CUDA kernels to the operators the device-neutral definitions registered.
#include "ops/cuda/register.h"

namespace weft::detail {

void register_cuda_kernels(OpRegistry& r) {
  cuda::register_elemwise_kernels(r);
  cuda::register_init_kernels(r);
  cuda::register_reduce_kernels(r);
  cuda::register_shape_kernels(r);
  cuda::register_indexing_kernels(r);
  cuda::register_blas_kernels(r);
  cuda::register_cudnn_kernels(r);
  cuda::register_norm_kernels(r);
  cuda::register_rnn_kernels(r);
  cuda::register_misc_kernels(r);
}

}  // namespace weft::detail
