// Elementwise helpers of the blas family; see blas_kernels.h.
#include "ops/cuda/blas_kernels.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernel_util.h"

namespace weft::cuda {
namespace {

template <typename T>
__global__ void add_bias_rows_kernel(T* y, const T* b, int64_t n, int64_t h) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { y[i] = from_acc<T>(to_acc(y[i]) + to_acc(b[i % h])); }
}

// Note [Bias gradient]: a block owns 32 columns; its 8 warps-rows stride down the rows so reads of
// one row are coalesced, then fold their partial sums in shared memory. Deterministic (fixed
// order), unlike atomics.
constexpr int kColTile = 32, kRowThreads = 8;

template <typename T>
__global__ void bias_grad_rows_kernel(const T* dy, int64_t m, int64_t h, T* db, bool add) {
  using A = acc_t<T>;
  __shared__ A part[kRowThreads][kColTile];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  A sum = A(0);
  if (j < h) {
    for (int64_t r = threadIdx.y; r < m; r += kRowThreads) sum += to_acc(dy[r * h + j]);
  }
  part[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < h) {
    A total = A(0);
    for (int k = 0; k < kRowThreads; ++k) total += part[k][threadIdx.x];
    db[j] = from_acc<T>(add ? to_acc(db[j]) + total : total);
  }
}

template <typename T>
__global__ void fused_act_kernel(T* y, int64_t n, int kind, float al, float be) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    using A = acc_t<T>;
    const A v = to_acc(y[i]);
    A r = v;
    switch (kind) {
      case 1:
        r = v > A(0) ? v : A(0);
        break;
      case 2:
        r = v > A(0) ? v : A(al) * v;
        break;
      case 3:
        r = v > A(0) ? v : A(al) * expm1(v);
        break;
      case 4:
        r = A(1) / (A(1) + exp(-v));
        break;
      case 5:
        r = tanh(v);
        break;
      case 6:
        r = v > A(20) ? v : log1p(exp(v));
        break;
      case 7:
        r = v < A(al) ? A(al) : (v > A(be) ? A(be) : v);
        break;
      default:
        break;
    }
    y[i] = from_acc<T>(r);
  }
}

}  // namespace

void add_bias_rows(DType dtype, void* y, const void* b, int64_t m, int64_t h, cudaStream_t stream) {
  const int64_t n = m * h;
  if (n == 0) return;
  WEFT_CUDA_FLOAT_SWITCH(dtype, DT, "FullyConnected bias", {
    add_bias_rows_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
        static_cast<DT*>(y), static_cast<const DT*>(b), n, h);
  });
}

void bias_grad_rows(DType dtype, const void* dy, int64_t m, int64_t h, void* db, bool add,
                    cudaStream_t stream) {
  if (h == 0) return;
  const dim3 block(kColTile, kRowThreads);
  const auto grid = static_cast<unsigned>((h + kColTile - 1) / kColTile);
  WEFT_CUDA_FLOAT_SWITCH(dtype, DT, "bias gradient", {
    bias_grad_rows_kernel<DT>
        <<<grid, block, 0, stream>>>(static_cast<const DT*>(dy), m, h, static_cast<DT*>(db), add);
  });
}

void fused_act_inplace(DType dtype, int kind, float alpha, float beta, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n == 0 || kind == 0) return;
  WEFT_CUDA_FLOAT_SWITCH(dtype, DT, "_fused_fc_act", {
    fused_act_kernel<DT>
        <<<grid_for(n), kBlockSize, 0, stream>>>(static_cast<DT*>(y), n, kind, alpha, beta);
  });
}

}  // namespace weft::cuda
