// The bias gradient of Convolution/Deconvolution on CUDA (ops/cuda/conv_bias_grad.cu).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "ops/op.h"

namespace weft::cuda {

/// db[c] (=, or += when `add`) Σ over n < batch and s < size of dy[n, c, s], on the op's stream;
/// float32, float64, float16, bfloat16 (summed in float for the 16-bit types).
void channel_bias_grad(const OpContext& ctx, DType dtype, const void* dy, int64_t batch,
                       int64_t channels, int64_t size, void* db, bool add);

}  // namespace weft::cuda
