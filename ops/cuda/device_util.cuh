// Device-side helpers for weft's own CUDA kernels: element types, accumulation types, grid-stride
// loops and dtype dispatch. Included by ops/cuda/*.cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"
#include "base/error.h"

namespace weft::cuda {

/// The type arithmetic on T is carried out in: float for the 16-bit floats, T otherwise.
template <typename T>
struct AccType {
  using type = T;
};
template <>
struct AccType<__half> {
  using type = float;
};
template <>
struct AccType<__nv_bfloat16> {
  using type = float;
};
template <typename T>
using acc_t = typename AccType<T>::type;

/// Converts to and from the accumulation type.
template <typename T>
__device__ __forceinline__ acc_t<T> to_acc(T v) {
  return static_cast<acc_t<T>>(v);
}
template <>
__device__ __forceinline__ float to_acc<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_acc<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_acc(acc_t<T> v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half from_acc<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// The index of this thread in a 1-D grid and the grid's stride, 64-bit.
__device__ __forceinline__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

}  // namespace weft::cuda

/// Grid-stride loop over [0, n): `for` with `i` the element index.
#define WEFT_CUDA_KERNEL_LOOP(i, n)                                           \
  for (int64_t i = ::weft::cuda::global_index(); i < static_cast<int64_t>(n); \
       i += ::weft::cuda::grid_stride())

#define WEFT_CUDA_CASE_(enum_value, CppType, DT, ...) \
  case ::weft::DType::enum_value: {                   \
    using DT = CppType;                               \
    __VA_ARGS__;                                      \
    break;                                            \
  }

/// Binds `DT` to the CUDA type of a floating `dtype` (float32, float64, float16 as __half,
/// bfloat16 as __nv_bfloat16) and runs the body; throws NotImplemented naming `what` otherwise.
#define WEFT_CUDA_FLOAT_SWITCH(dtype, DT, what, ...)                      \
  switch (dtype) {                                                        \
    WEFT_CUDA_CASE_(kFloat32, float, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kFloat64, double, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kFloat16, __half, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kBFloat16, __nv_bfloat16, DT, __VA_ARGS__)            \
    default:                                                              \
      WEFT_THROW(NotImplemented) << what << ": no CUDA kernel for dtype " \
                                 << ::weft::dtype_name(dtype);            \
  }

/// Like WEFT_CUDA_FLOAT_SWITCH, plus the integer types and bool (bool as uint8_t-sized bool).
#define WEFT_CUDA_ALL_SWITCH(dtype, DT, what, ...)                        \
  switch (dtype) {                                                        \
    WEFT_CUDA_CASE_(kFloat32, float, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kFloat64, double, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kFloat16, __half, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kBFloat16, __nv_bfloat16, DT, __VA_ARGS__)            \
    WEFT_CUDA_CASE_(kUInt8, uint8_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kInt8, int8_t, DT, __VA_ARGS__)                       \
    WEFT_CUDA_CASE_(kInt32, int32_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kInt64, int64_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kBool, bool, DT, __VA_ARGS__)                         \
    default:                                                              \
      WEFT_THROW(NotImplemented) << what << ": no CUDA kernel for dtype " \
                                 << ::weft::dtype_name(dtype);            \
  }
