// Device-side building blocks of the reduce, shape and indexing families: index maps over merged
// dims, the reduction operators, warp and block reductions. Included by their .cu files only.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "base/tensor_view.h"
#include "ops/cuda/device_util.cuh"

namespace weft::cuda {

/// Most dims an index map holds after merging (tile's (rep, dim) pairs double the rank).
constexpr int kMaxDims = 16;

/// Sizes and element strides of an index space, innermost last, passed to kernels by value.
struct DimMap {
  int n = 0;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
};

/// The offset of the `i`-th element (row-major over `m.size`) in strides `m.stride`.
__device__ __forceinline__ int64_t offset_of(const DimMap& m, int64_t i) {
  if (m.n == 1) return i * m.stride[0];
  int64_t off = 0;
  for (int k = m.n - 1; k > 0; --k) {
    const int64_t q = i / m.size[k];
    off += (i - q * m.size[k]) * m.stride[k];
    i = q;
  }
  return m.n > 0 ? off + i * m.stride[0] : 0;
}

struct SumOp {
  template <typename A>
  static __device__ __forceinline__ A init() {
    return A(0);
  }
  template <typename A>
  static __device__ __forceinline__ A combine(A a, A b) {
    return static_cast<A>(a + b);
  }
};
struct MaxOp {
  template <typename A>
  static __device__ __forceinline__ A init() {
    if constexpr (std::is_floating_point_v<A>)
      return -std::numeric_limits<A>::infinity();
    else
      return std::numeric_limits<A>::lowest();
  }
  template <typename A>
  static __device__ __forceinline__ A combine(A a, A b) {
    return b > a ? b : a;
  }
};
struct MinOp {
  template <typename A>
  static __device__ __forceinline__ A init() {
    if constexpr (std::is_floating_point_v<A>)
      return std::numeric_limits<A>::infinity();
    else
      return std::numeric_limits<A>::max();
  }
  template <typename A>
  static __device__ __forceinline__ A combine(A a, A b) {
    return b < a ? b : a;
  }
};

/// Reduces over the 32 lanes of a warp; lane 0 holds the result.
template <typename Op, typename A>
__device__ __forceinline__ A warp_reduce(A v) {
  for (int o = 16; o > 0; o >>= 1)
    v = Op::combine(v, static_cast<A>(__shfl_down_sync(0xffffffffu, v, o)));
  return v;
}

/// Reduces over the block (blockDim.x a multiple of 32, at most 1024, blockDim.y == 1); every
/// thread gets the result. Uses 33 slots of shared memory; safe to call repeatedly.
template <typename Op, typename A>
__device__ A block_reduce(A v) {
  __shared__ A partial[33];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce<Op>(v);
  __syncthreads();  // the previous call's readers of partial[32] are done
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x >> 5);
    A w = lane < warps ? partial[lane] : Op::template init<A>();
    w = warp_reduce<Op>(w);
    if (lane == 0) partial[32] = w;
  }
  __syncthreads();
  return partial[32];
}

/// A view's first element as T (TensorView::ptr knows no CUDA types).
template <typename T>
inline T* dptr(const TensorView& v) {
  return static_cast<T*>(v.raw());
}

/// Threads per block for a row reduction of `n` elements (one block per row).
inline int row_block(int64_t n) { return n >= 8192 ? 512 : n >= 1024 ? 256 : n >= 256 ? 128 : 32; }

}  // namespace weft::cuda
