// CUDA kernels of UpSampling and _backward_UpSampling: not written yet; the CPU kernel serves.
#include "ops/cuda/register.h"

namespace weft::cuda {

void register_misc_upsampling_kernels(OpRegistry&) {}

}  // namespace weft::cuda
