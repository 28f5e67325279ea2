// Launchers shared by the CUDA elementwise kernels (elemwise*.cu, init_ops.cu): a req-aware map
// over one to three same-shape inputs (vectorised for float), the broadcast map and the reduction
// of a broadcast binary op's gradient over the broadcast axes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernel_util.h"
#include "ops/defs/elemwise.h"
#include "ops/defs/elemwise_math.h"

namespace weft::cuda {

void register_elemwise_binary_kernels(OpRegistry& r);  // elemwise_binary.cu
void register_elemwise_scalar_kernels(OpRegistry& r);  // elemwise_scalar.cu

/// Like WEFT_CUDA_ALL_SWITCH without bool: the types the CPU's arithmetic kernels accept, plus
/// the 16-bit floats.
#define WEFT_CUDA_ARITH_SWITCH(dtype, DT, what, ...)                      \
  switch (dtype) {                                                        \
    WEFT_CUDA_CASE_(kFloat32, float, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kFloat64, double, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kFloat16, __half, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kBFloat16, __nv_bfloat16, DT, __VA_ARGS__)            \
    WEFT_CUDA_CASE_(kUInt8, uint8_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kInt8, int8_t, DT, __VA_ARGS__)                       \
    WEFT_CUDA_CASE_(kInt32, int32_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kInt64, int64_t, DT, __VA_ARGS__)                     \
    default:                                                              \
      WEFT_THROW(NotImplemented) << what << ": no CUDA kernel for dtype " \
                                 << ::weft::dtype_name(dtype);            \
  }

template <typename T>
inline constexpr bool kIsFloat16 = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// Converts between any two element types (16-bit floats through float).
template <typename To, typename From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (kIsFloat16<From>) {
    return convert<To>(to_acc<From>(v));
  } else if constexpr (kIsFloat16<To>) {
    return from_acc<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

/// Writes `v` (a value of the computation type) to out[i], or adds it for kAdd.
template <bool kAdd, typename OT, typename C>
__device__ __forceinline__ void put(OT* out, int64_t i, C v) {
  if constexpr (kAdd) {
    out[i] = convert<OT>(to_acc<OT>(out[i]) + to_acc<OT>(convert<OT>(v)));
  } else {
    out[i] = convert<OT>(v);
  }
}

template <int N, typename T>
struct InPtrs {
  const T* p[N];
};

template <typename F, typename C>
__device__ __forceinline__ auto apply(const F& f, const C (&v)[1]) {
  return f(v[0]);
}
template <typename F, typename C>
__device__ __forceinline__ auto apply(const F& f, const C (&v)[2]) {
  return f(v[0], v[1]);
}
template <typename F, typename C>
__device__ __forceinline__ auto apply(const F& f, const C (&v)[3]) {
  return f(v[0], v[1], v[2]);
}

// out[i] (=|+=) f(in_0[i], ..., in_{N-1}[i]), f taking and returning acc_t<IT>. An output that
// aliases an input is safe: each element is read before it is written, by the same thread.
template <bool kAdd, int N, typename IT, typename OT, typename F>
__global__ void map_kernel(int64_t n, InPtrs<N, IT> in, OT* out, F f) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    acc_t<IT> v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = to_acc<IT>(in.p[k][i]);
    put<kAdd>(out, i, apply(f, v));
  }
}

// Float fast path: four elements per load through float4 (every pointer 16-byte aligned; the
// caller handles the tail of n % 4 elements with map_kernel).
template <bool kAdd, int N, typename F>
__global__ void map_kernel_vec4(int64_t n4, InPtrs<N, float> in, float* out, F f) {
  WEFT_CUDA_KERNEL_LOOP(j, n4) {
    float4 v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = reinterpret_cast<const float4*>(in.p[k])[j];
    float r[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float a[N];
#pragma unroll
      for (int k = 0; k < N; ++k) a[k] = reinterpret_cast<const float*>(&v[k])[e];
      r[e] = apply(f, a);
    }
    float4 o = make_float4(r[0], r[1], r[2], r[3]);
    float4* dst = reinterpret_cast<float4*>(out) + j;
    if constexpr (kAdd) {
      const float4 p = *dst;
      o.x += p.x;
      o.y += p.y;
      o.z += p.z;
      o.w += p.w;
    }
    *dst = o;
  }
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

/// Launches out (=|+=) f(in...) over n elements on the op's stream; nothing for kNull.
template <typename IT, typename OT, int N, typename F>
void launch_map(const OpContext& ctx, const char* name, int64_t n, InPtrs<N, IT> in, OT* out,
                OpReq req, F f) {
  if (req == OpReq::kNull || n == 0) return;
  const bool add = req == OpReq::kAdd;
  cudaStream_t s = stream_of(ctx);
  int64_t done = 0;
  if constexpr (std::is_same_v<IT, float> && std::is_same_v<OT, float>) {
    bool ok = aligned16(out);
    for (int k = 0; k < N; ++k) ok = ok && aligned16(in.p[k]);
    const int64_t n4 = n / 4;
    if (ok && n4 > 0) {
      if (add) {
        map_kernel_vec4<true, N><<<grid_for(n4), kBlockSize, 0, s>>>(n4, in, out, f);
      } else {
        map_kernel_vec4<false, N><<<grid_for(n4), kBlockSize, 0, s>>>(n4, in, out, f);
      }
      check_launch(name, ctx);
      done = n4 * 4;
    }
  }
  if (done == n) return;
  InPtrs<N, IT> rest = in;
  for (int k = 0; k < N; ++k) rest.p[k] += done;
  const int64_t m = n - done;
  if (add) {
    map_kernel<true, N><<<grid_for(m), kBlockSize, 0, s>>>(m, rest, out + done, f);
  } else {
    map_kernel<false, N><<<grid_for(m), kBlockSize, 0, s>>>(m, rest, out + done, f);
  }
  check_launch(name, ctx);
}

/// One input / two inputs / three inputs of one type, output of another.
template <typename IT, typename OT, typename F>
void map1(const OpContext& ctx, const char* name, int64_t n, const IT* a, OT* out, OpReq req, F f) {
  launch_map<IT, OT, 1>(ctx, name, n, InPtrs<1, IT>{{a}}, out, req, f);
}
template <typename IT, typename OT, typename F>
void map2(const OpContext& ctx, const char* name, int64_t n, const IT* a, const IT* b, OT* out,
          OpReq req, F f) {
  launch_map<IT, OT, 2>(ctx, name, n, InPtrs<2, IT>{{a, b}}, out, req, f);
}
template <typename IT, typename OT, typename F>
void map3(const OpContext& ctx, const char* name, int64_t n, const IT* a, const IT* b, const IT* c,
          OT* out, OpReq req, F f) {
  launch_map<IT, OT, 3>(ctx, name, n, InPtrs<3, IT>{{a, b, c}}, out, req, f);
}

// ---- broadcasting -------------------------------------------------------------------------------

/// The broadcast walk of ops/defs/elemwise.h (merged dims, per-operand strides, 0 on broadcast
/// dims) in a form passed to kernels by value.
struct BcastGeom {
  static constexpr int kMaxDims = 8;
  int ndim = 1;
  int64_t shape[kMaxDims] = {1};
  int64_t lstride[kMaxDims] = {0};
  int64_t rstride[kMaxDims] = {0};
};

/// The geometry of `o` against operands `a` and `b`; NotImplemented beyond kMaxDims merged dims.
inline BcastGeom make_bcast_geom(const TensorView& o, const TensorView& a, const TensorView& b,
                                 const char* name) {
  const detail::BroadcastPlan p =
      detail::make_broadcast_plan(o.shape, o.ndim, a.shape, a.ndim, b.shape, b.ndim);
  WEFT_CHECK_AS(NotImplemented, p.ndim <= BcastGeom::kMaxDims)
      << name << ": the CUDA kernel handles broadcasts of up to " << BcastGeom::kMaxDims
      << " alternating dims, got " << p.ndim;
  BcastGeom g;
  g.ndim = p.ndim;
  for (int d = 0; d < p.ndim; ++d) {
    g.shape[d] = p.shape[d];
    g.lstride[d] = p.lstride[d];
    g.rstride[d] = p.rstride[d];
  }
  return g;
}

template <bool kAdd, typename T, typename F>
__global__ void broadcast_kernel(int64_t n, BcastGeom g, const T* a, const T* b, T* out, F f) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    int64_t rem = i, lo = 0, ro = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      const int64_t c = rem % g.shape[d];
      rem /= g.shape[d];
      lo += c * g.lstride[d];
      ro += c * g.rstride[d];
    }
    put<kAdd>(out, i, f(to_acc<T>(a[lo]), to_acc<T>(b[ro])));
  }
}

/// out (=|+=) f(a, b) with NumPy broadcasting of a and b to out's shape.
template <typename T, typename F>
void launch_broadcast(const OpContext& ctx, const char* name, const TensorView& a,
                      const TensorView& b, const TensorView& out, OpReq req, F f) {
  const int64_t n = out.size();
  if (req == OpReq::kNull || n == 0) return;
  if (a.size() == n && b.size() == n) {
    map2<T, T>(ctx, name, n, static_cast<const T*>(a.raw()), static_cast<const T*>(b.raw()),
               static_cast<T*>(out.raw()), req, f);
    return;
  }
  const BcastGeom g = make_bcast_geom(out, a, b, name);
  cudaStream_t s = stream_of(ctx);
  const T* x = static_cast<const T*>(a.raw());
  const T* y = static_cast<const T*>(b.raw());
  T* o = static_cast<T*>(out.raw());
  if (req == OpReq::kAdd) {
    broadcast_kernel<true><<<grid_for(n), kBlockSize, 0, s>>>(n, g, x, y, o, f);
  } else {
    broadcast_kernel<false><<<grid_for(n), kBlockSize, 0, s>>>(n, g, x, y, o, f);
  }
  check_launch(name, ctx);
}

// Note [Broadcast gradient reduction]
// The gradient of an operand X of a broadcast binary op is, per element j of X, the sum over the
// big (output) positions that read X[j] of a per-position term. The merged big dims split into
// the ones X spans ("kept": X's stride there is non-zero; enumerating them row-major enumerates X
// itself, as X is compact) and the ones X is broadcast over ("reduced"). Each element j is summed
// by a group of threads -- one thread, a warp or a whole block, picked from the number of terms
// per element -- that splits the reduced positions between its lanes.

/// Kept and reduced dims of one operand: sizes, big-array strides and the other operand's strides.
struct ReduceGeom {
  static constexpr int kMaxDims = BcastGeom::kMaxDims;
  int nkeep = 0, nred = 0;
  int64_t keep_shape[kMaxDims], keep_big[kMaxDims], keep_other[kMaxDims];
  int64_t red_shape[kMaxDims], red_big[kMaxDims], red_other[kMaxDims];
  int64_t outputs = 1;  ///< elements of X
  int64_t terms = 1;    ///< big positions per element of X
};

/// The reduction geometry of the lhs (`lhs` true) or rhs operand of `g`.
inline ReduceGeom make_reduce_geom(const BcastGeom& g, bool lhs) {
  ReduceGeom r;
  int64_t big_stride[BcastGeom::kMaxDims];
  int64_t acc = 1;
  for (int d = g.ndim - 1; d >= 0; --d) {
    big_stride[d] = acc;
    acc *= g.shape[d];
  }
  for (int d = 0; d < g.ndim; ++d) {
    const int64_t mine = lhs ? g.lstride[d] : g.rstride[d];
    const int64_t other = lhs ? g.rstride[d] : g.lstride[d];
    if (mine != 0 || g.shape[d] == 1) {
      r.keep_shape[r.nkeep] = g.shape[d];
      r.keep_big[r.nkeep] = big_stride[d];
      r.keep_other[r.nkeep] = other;
      ++r.nkeep;
      r.outputs *= g.shape[d];
    } else {
      r.red_shape[r.nred] = g.shape[d];
      r.red_big[r.nred] = big_stride[d];
      r.red_other[r.nred] = other;
      ++r.nred;
      r.terms *= g.shape[d];
    }
  }
  return r;
}

/// The type a gradient sum is carried in: float for the 16-bit floats, int64 for the integers.
template <typename T>
using sum_t = std::conditional_t<std::is_integral_v<T>, int64_t, acc_t<T>>;

template <typename S>
__device__ __forceinline__ S warp_sum(S v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  return v;
}

// Per element j of X: out[j] (=|+=) sum over reduced positions of term(g, mine, other), where
// term is G::lhs(g, x, y) or G::rhs(g, x, y) by kLhs. kGroup threads per element (1, 32 or
// kBlockSize).
template <int kGroup, bool kLhs, bool kAdd, typename T, typename Term>
__global__ void reduce_grad_kernel(ReduceGeom geom, const T* g, const T* mine, const T* other,
                                   T* out, Term term) {
  using S = sum_t<T>;
  const int lane = kGroup == 1 ? 0 : static_cast<int>(threadIdx.x % kGroup);
  const int64_t group = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kGroup;
  const int64_t groups = static_cast<int64_t>(gridDim.x) * blockDim.x / kGroup;
  __shared__ S partial[kBlockSize / 32];
  // Every thread runs the same number of outer iterations (the bound is uniform over a group),
  // so the block-wide barriers below are reached by all threads of the block.
  for (int64_t base = 0; base < geom.outputs; base += groups) {
    const int64_t j = base + group;
    const bool active = j < geom.outputs;
    S sum = S(0);
    if (active) {
      int64_t rem = j, big0 = 0, oth0 = 0;
      for (int d = geom.nkeep - 1; d >= 0; --d) {
        const int64_t c = rem % geom.keep_shape[d];
        rem /= geom.keep_shape[d];
        big0 += c * geom.keep_big[d];
        oth0 += c * geom.keep_other[d];
      }
      const acc_t<T> m = to_acc<T>(mine[j]);
      for (int64_t t = lane; t < geom.terms; t += kGroup) {
        int64_t r = t, big = big0, oth = oth0;
        for (int d = geom.nred - 1; d >= 0; --d) {
          const int64_t c = r % geom.red_shape[d];
          r /= geom.red_shape[d];
          big += c * geom.red_big[d];
          oth += c * geom.red_other[d];
        }
        const acc_t<T> gv = to_acc<T>(g[big]), ov = to_acc<T>(other[oth]);
        sum += static_cast<S>(kLhs ? term(gv, m, ov) : term(gv, ov, m));
      }
    }
    if constexpr (kGroup >= 32) sum = warp_sum(sum);
    if constexpr (kGroup > 32) {
      const int warp = threadIdx.x / 32;
      if (threadIdx.x % 32 == 0) partial[warp] = sum;
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int w = 1; w < kGroup / 32; ++w) sum += partial[w];
      }
      __syncthreads();
    }
    if (active && lane == 0) {
      if constexpr (kAdd) {
        out[j] = convert<T>(to_acc<T>(out[j]) + to_acc<T>(convert<T>(sum)));
      } else {
        out[j] = convert<T>(sum);
      }
    }
  }
}

/// Launches the reduction of one operand's gradient (Note [Broadcast gradient reduction]).
template <bool kLhs, typename T, typename Term>
void launch_reduce_grad(const OpContext& ctx, const char* name, const ReduceGeom& geom, const T* g,
                        const T* mine, const T* other, T* out, OpReq req, Term term) {
  if (req == OpReq::kNull || geom.outputs == 0) return;
  cudaStream_t s = stream_of(ctx);
  const bool add = req == OpReq::kAdd;
  auto go = [&]<int kGroup>() {
    const unsigned blocks = grid_for(geom.outputs * kGroup);
    if (add) {
      reduce_grad_kernel<kGroup, kLhs, true>
          <<<blocks, kBlockSize, 0, s>>>(geom, g, mine, other, out, term);
    } else {
      reduce_grad_kernel<kGroup, kLhs, false>
          <<<blocks, kBlockSize, 0, s>>>(geom, g, mine, other, out, term);
    }
  };
  if (geom.terms < 32) {
    go.template operator()<1>();
  } else if (geom.terms < 4096 || geom.outputs >= 4096) {
    go.template operator()<32>();
  } else {
    go.template operator()<kBlockSize>();
  }
  check_launch(name, ctx);
}

// ---- fills and small helpers --------------------------------------------------------------------

/// A view's data as T (TensorView::ptr has no CUDA 16-bit types).
template <typename T>
T* dptr(const TensorView& v) {
  return static_cast<T*>(v.raw());
}

template <bool kAdd, typename T>
__global__ void fill_kernel(int64_t n, T* out, acc_t<T> v) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { put<kAdd>(out, i, v); }
}

/// out (=|+=) value; a zero write is a memset.
template <typename T>
void launch_fill(const OpContext& ctx, const char* name, const TensorView& out, double value,
                 OpReq req) {
  const int64_t n = out.size();
  if (req == OpReq::kNull || n == 0) return;
  if (value == 0 && req != OpReq::kAdd) {
    memset_on_stream(ctx, out.raw(), 0, out.bytes());
    return;
  }
  if (value == 0) return;  // adding zero
  acc_t<T> v;
  if constexpr (kIsFloat16<T>) {
    v = static_cast<float>(value);
  } else {
    v = static_cast<T>(value);
  }
  if (req == OpReq::kAdd) {
    fill_kernel<true><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(n, dptr<T>(out), v);
  } else {
    fill_kernel<false><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(n, dptr<T>(out), v);
  }
  check_launch(name, ctx);
}

/// dst = src (device to device, async) unless they are the same memory. A failure names the
/// runtime call (copy_on_stream), not `name`.
inline void copy_async(const OpContext& ctx, const char* /*name*/, const TensorView& src,
                       const TensorView& dst) {
  if (src.raw() == dst.raw() || dst.bytes() == 0) return;
  copy_on_stream(ctx, dst.raw(), src.raw(), dst.bytes());
}

struct IdentityF {
  template <typename C>
  __device__ C operator()(C x) const {
    return x;
  }
};

}  // namespace weft::cuda
