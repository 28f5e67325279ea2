// CUDA kernels: the rnn family (see ops/cuda/register.h). Not written yet: RNN and _backward_RNN
// have no CUDA kernel.
#include "ops/cuda/register.h"

namespace weft::cuda {

void register_rnn_kernels(OpRegistry&) {}

}  // namespace weft::cuda
