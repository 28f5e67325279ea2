// The dense-algebra helpers of the CUDA kernels of FullyConnected and dot (fully_connected.cc,
// dot.cc): the cuBLAS GEMM (blas.cc), and, written in blas_kernels.cu, the bias of a dense layer,
// its gradient and the activation of _fused_fc_act. All run on the op's stream.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"
#include "ops/op.h"

namespace weft::cuda {

/// Row-major C = op(A)·op(B) (+ C when `add`), `batch` times with element strides sa/sb/sc
/// between the matrices, on the op's stream through cuBLAS (blas.cc, Note [cuBLAS precision]). A
/// k of 0 gives zeros (or leaves C when adding). `what` names the op in errors.
void gemm(const OpContext& ctx, DType dtype, const char* what, bool ta, bool tb, int64_t m,
          int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, bool add,
          void* c, int64_t ldc, int64_t batch = 1, int64_t sa = 0, int64_t sb = 0, int64_t sc = 0);

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
