// Elementwise helpers of the blas family (ops/cuda/blas.cc), written in blas_kernels.cu: the bias
// of a dense layer, its gradient, and the activation of _fused_fc_act. All run on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"

namespace weft::cuda {

/// y[r, j] += b[j] for an m × h row-major y.
void add_bias_rows(DType dtype, void* y, const void* b, int64_t m, int64_t h, cudaStream_t stream);

/// db[j] (=, or += when `add`) Σ_r dy[r, j] for an m × h row-major dy.
void bias_grad_rows(DType dtype, const void* dy, int64_t m, int64_t h, void* db, bool add,
                    cudaStream_t stream);

/// The activations of FusedAct (ops/defs/conv_common.h), by kind index: 1 relu, 2 leaky, 3 elu,
/// 4 sigmoid, 5 tanh, 6 softrelu, 7 clip. y[i] = act(y[i]) for n elements.
void fused_act_inplace(DType dtype, int kind, float alpha, float beta, void* y, int64_t n,
                       cudaStream_t stream);

}  // namespace weft::cuda
