// Device helpers shared by the norm, rnn and misc CUDA families: block reductions, writes that
// honour OpReq, and the (outer, dim, inner) view of a tensor around one axis.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/tensor_view.h"
#include "ops/cuda/device_util.cuh"
#include "ops/op.h"

namespace weft::cuda {

/// OpReq as a kernel argument: 0 skip, 1 overwrite, 2 accumulate.
enum ReqCode : int { kReqNull = 0, kReqWrite = 1, kReqAdd = 2 };
inline int req_code(OpReq r) {
  return r == OpReq::kNull ? kReqNull : (r == OpReq::kAdd ? kReqAdd : kReqWrite);
}

/// Writes `v` to `*dst` as `req` says (accumulation rounds like the CPU's `T(*dst + T(v))`).
template <typename T, typename V>
__device__ __forceinline__ void store_req(T* dst, int req, V v) {
  if (req == kReqAdd) {
    *dst = from_acc<T>(to_acc(*dst) + to_acc(from_acc<T>(static_cast<acc_t<T>>(v))));
  } else if (req == kReqWrite) {
    *dst = from_acc<T>(static_cast<acc_t<T>>(v));
  }
}

/// Sum of `v` over the block; every thread gets the result. `shm` holds 32 values; blockDim.x is
/// a multiple of 32. Synchronises, so every thread of the block must call it.
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* shm) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shm may still be read by a previous call
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  A t = lane < warps ? shm[lane] : A(0);
  if (warp == 0) {
    for (int off = 16; off > 0; off >>= 1) t += __shfl_down_sync(0xffffffffu, t, off);
    if (lane == 0) shm[0] = t;
  }
  __syncthreads();
  return shm[0];
}

/// Maximum of `v` over the block, like block_sum.
template <typename A>
__device__ __forceinline__ A block_max(A v, A* shm) {
  for (int off = 16; off > 0; off >>= 1) v = max(v, __shfl_down_sync(0xffffffffu, v, off));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  if (warp == 0) {
    A t = lane < warps ? shm[lane] : shm[0];
    for (int off = 16; off > 0; off >>= 1) t = max(t, __shfl_down_sync(0xffffffffu, t, off));
    if (lane == 0) shm[0] = t;
  }
  __syncthreads();
  return shm[0];
}

/// A compact tensor viewed as (outer, dim, inner) around one axis.
struct Split3 {
  int64_t outer = 1, dim = 1, inner = 1;
};
inline Split3 split3(const int64_t* shape, int ndim, int axis) {
  Split3 s;
  for (int i = 0; i < axis; ++i) s.outer *= shape[i];
  s.dim = ndim > 0 ? shape[axis] : 1;
  for (int i = axis + 1; i < ndim; ++i) s.inner *= shape[i];
  return s;
}

template <typename T>
T* typed(const TensorView& v) {
  return static_cast<T*>(v.raw());
}

/// The type the norm, loss-head and optimizer kernels compute and reduce in: double for
/// float32/float64 data (as their CPU kernels do), float for float16/bfloat16 (each element is
/// loaded, converted to float, computed in float and rounded once when stored).
template <typename T>
struct WideAcc {
  using type = double;
};
template <>
struct WideAcc<__half> {
  using type = float;
};
template <>
struct WideAcc<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using wide_t = typename WideAcc<T>::type;

/// `v` in T's compute type (wide_t), and back, rounding to nearest.
template <typename T>
__device__ __forceinline__ wide_t<T> widen(T v) {
  return static_cast<wide_t<T>>(to_acc(v));
}
template <typename T>
__device__ __forceinline__ T narrow(wide_t<T> v) {
  return from_acc<T>(static_cast<acc_t<T>>(v));
}

/// float32/float64 dispatch (the CPU kernels of these ops take no other floating types).
#define WEFT_CUDA_F32_F64_SWITCH(dtype, DT, what, ...)                    \
  switch (dtype) {                                                        \
    WEFT_CUDA_CASE_(kFloat32, float, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kFloat64, double, DT, __VA_ARGS__)                    \
    default:                                                              \
      WEFT_THROW(NotImplemented) << what << ": no CUDA kernel for dtype " \
                                 << ::weft::dtype_name(dtype);            \
  }

}  // namespace weft::cuda
