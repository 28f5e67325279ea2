// The cuBLAS GEMM the CUDA kernels of FullyConnected (fully_connected.cc) and dot / batch_dot
// (dot.cc) share: row-major products with the CPU kernels' operand choices (ops/cpu/
// fully_connected.cc, ops/cpu/dot.cc), so that each output is the same product.
//
// Note [cuBLAS precision]: float32 runs with CUBLAS_COMPUTE_32F on a handle in the default math
// mode, which keeps TF32 off, so results match the CPU kernels to float rounding; float16 and
// bfloat16 accumulate in float (CUBLAS_COMPUTE_32F); float64 in double.
#include <cuda_runtime.h>

#include "ops/cuda/blas_kernels.h"
#include "ops/cuda/kernel_util.h"

namespace weft::cuda {
namespace {

cudaDataType_t cuda_type(DType t, const char* what) {
  switch (t) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kFloat64:
      return CUDA_R_64F;
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    default:
      WEFT_THROW(NotImplemented) << what << ": no CUDA kernel for dtype " << dtype_name(t);
  }
}

}  // namespace

void gemm(const OpContext& ctx, DType dtype, const char* what, bool ta, bool tb, int64_t m,
          int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, bool add,
          void* c, int64_t ldc, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  const cudaDataType_t t = cuda_type(dtype, what);
  if (k <= 0) {
    if (!add) {
      // C is compact here (ldc == n) for every caller that can have k == 0.
      const size_t bytes = static_cast<size_t>(batch * m * ldc) * dtype_size(dtype);
      memset_on_stream(ctx, c, 0, bytes);
    }
    return;
  }
  const double one_d = 1.0, beta_d = add ? 1.0 : 0.0;
  const float one_f = 1.0f, beta_f = add ? 1.0f : 0.0f;
  const bool dbl = dtype == DType::kFloat64;
  const void* alpha = dbl ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
  const cublasComputeType_t compute = dbl ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  cublasHandle_t h = handles(ctx).cublas;
  // Row-major C (m × n) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands.
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  WEFT_CHECK(n <= INT32_MAX && m <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX &&
             ldb <= INT32_MAX && ldc <= INT32_MAX && batch <= INT32_MAX)
      << what << ": GEMM dimensions exceed cuBLAS's 32-bit sizes";
  if (batch == 1) {
    WEFT_CUDA_CALL(
        cublasGemmEx(h, opb, opa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                     alpha, b, t, static_cast<int>(ldb), a, t, static_cast<int>(lda), beta, c, t,
                     static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT),
        device_of(ctx));
  } else {
    WEFT_CUDA_CALL(
        cublasGemmStridedBatchedEx(h, opb, opa, static_cast<int>(n), static_cast<int>(m),
                                   static_cast<int>(k), alpha, b, t, static_cast<int>(ldb), sb, a,
                                   t, static_cast<int>(lda), sa, beta, c, t, static_cast<int>(ldc),
                                   sc, static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
        device_of(ctx));
  }
}

}  // namespace weft::cuda
