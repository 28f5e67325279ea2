// CUDA kernels: the reduce family (see ops/cuda/register.h): sum, mean, max, min and their
// backward ops, argmax, argmin; softmax and friends are in softmax.cu.
#include <algorithm>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/reduce_common.cuh"
#include "ops/cuda/register.h"
#include "ops/cuda/shape_kernels.h"
#include "ops/defs/reduce_params.h"

namespace weft::cuda {

void register_softmax_kernels(OpRegistry& r);

namespace {

using detail::ArgReduceParam;
using detail::ReduceAxesParam;

/// The CPU's reduction dtypes plus the 16-bit floats (accumulated in float).
#define WEFT_CUDA_REDUCE_SWITCH(dtype, DT, what, ...)                     \
  switch (dtype) {                                                        \
    WEFT_CUDA_CASE_(kFloat32, float, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kFloat64, double, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kFloat16, __half, DT, __VA_ARGS__)                    \
    WEFT_CUDA_CASE_(kBFloat16, __nv_bfloat16, DT, __VA_ARGS__)            \
    WEFT_CUDA_CASE_(kInt32, int32_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kInt64, int64_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kUInt8, uint8_t, DT, __VA_ARGS__)                     \
    WEFT_CUDA_CASE_(kInt8, int8_t, DT, __VA_ARGS__)                       \
    default:                                                              \
      WEFT_THROW(NotImplemented) << what << ": no CUDA kernel for dtype " \
                                 << ::weft::dtype_name(dtype);            \
  }

// ---- the reduction core ---------------------------------------------------------------------

/// How a reduced value is finished: divided by `count` (mean) and written or added.
struct Finish {
  bool mean = false;
  bool add = false;
  int64_t count = 1;
};

template <typename TO>
__device__ __forceinline__ void finish_store(TO* y, acc_t<TO> v, const Finish& f) {
  using A = acc_t<TO>;
  if (f.mean && f.count > 0) v = static_cast<A>(v / static_cast<A>(f.count));
  if (f.add) v = static_cast<A>(to_acc(*y) + v);
  *y = from_acc<TO>(v);
}

// Note [Reduction kernels]
// The input is viewed as kept dims (M outputs) times reduced dims (R elements each), both merged
// as far as the layout allows. When the innermost dim is reduced, a block reduces one output row
// (its threads stride over the row, then warp shuffles and shared memory combine them). When the
// innermost dim is kept, threadIdx.x walks consecutive outputs (coalesced reads) and threadIdx.y
// splits the reduced elements, combined through shared memory. With few outputs and long rows
// each row is cut into S chunks reduced into scratch (in the accumulation type) by S blocks, then
// the chunks are reduced by a second launch.

template <typename Op, typename TI, typename TO>
__global__ void reduce_rows_kernel(const TI* __restrict__ x, TO* __restrict__ y, DimMap kept,
                                   DimMap red, int64_t M, int64_t R, int64_t S, int64_t chunk,
                                   Finish f) {
  using A = acc_t<TO>;
  for (int64_t row = blockIdx.x; row < M * S; row += gridDim.x) {
    const int64_t o = row / S, s = row - o * S;
    const TI* base = x + offset_of(kept, o);
    const int64_t r1 = min(R, (s + 1) * chunk);
    A acc = Op::template init<A>();
    if (red.n == 1 && red.stride[0] == 1) {
      for (int64_t r = s * chunk + threadIdx.x; r < r1; r += blockDim.x)
        acc = Op::combine(acc, static_cast<A>(to_acc(base[r])));
    } else {
      for (int64_t r = s * chunk + threadIdx.x; r < r1; r += blockDim.x)
        acc = Op::combine(acc, static_cast<A>(to_acc(base[offset_of(red, r)])));
    }
    acc = block_reduce<Op>(acc);
    if (threadIdx.x == 0) finish_store(y + row, acc, f);
  }
}

constexpr int kColX = 32, kColY = 16;

// Block (kColX, kColY), grid (.., S): block column s of the grid reduces chunk s of each output
// into y[s * M + o].
template <typename Op, typename TI, typename TO>
__global__ void reduce_cols_kernel(const TI* __restrict__ x, TO* __restrict__ y, DimMap kept,
                                   DimMap red, int64_t M, int64_t R, int64_t chunk, Finish f) {
  using A = acc_t<TO>;
  __shared__ A part[kColY][kColX + 1];
  const int64_t s = blockIdx.y;
  const int64_t r1 = min(R, (s + 1) * chunk);
  for (int64_t o0 = static_cast<int64_t>(blockIdx.x) * kColX; o0 < M;
       o0 += static_cast<int64_t>(gridDim.x) * kColX) {
    const int64_t o = o0 + threadIdx.x;
    A acc = Op::template init<A>();
    if (o < M) {
      const TI* base = x + offset_of(kept, o);
      for (int64_t r = s * chunk + threadIdx.y; r < r1; r += kColY)
        acc = Op::combine(acc, static_cast<A>(to_acc(base[offset_of(red, r)])));
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < M) {
      for (int k = 1; k < kColY; ++k) acc = Op::combine(acc, part[k][threadIdx.x]);
      finish_store(y + s * M + o, acc, f);
    }
    __syncthreads();
  }
}

DimMap dim_map(const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  WEFT_CHECK_AS(NotImplemented, size.size() <= static_cast<size_t>(kMaxDims))
      << "CUDA reduction over more than " << kMaxDims << " separate dim groups";
  DimMap m;
  m.n = static_cast<int>(size.size());
  for (int k = 0; k < m.n; ++k) {
    m.size[k] = size[k];
    m.stride[k] = stride[k];
  }
  return m;
}

template <typename Op, typename T>
void reduce_launch(const OpContext& ctx, const T* x, const DimMap& kept, const DimMap& red,
                   int64_t M, int64_t R, bool inner, T* y, Finish f) {
  using A = acc_t<T>;
  cudaStream_t st = stream_of(ctx);
  // Few outputs with long rows: split each row into S chunks (Note [Reduction kernels]).
  int64_t S = 1;
  if (M < 1024 && R >= 32768)
    S = std::min<int64_t>((R + 16383) / 16384, std::max<int64_t>(1, 4096 / M));
  const int64_t chunk = (R + S - 1) / S;
  const Finish plain;
  if (S == 1) {
    if (inner) {
      reduce_rows_kernel<Op, T, T><<<grid_for(M, 1), row_block(R), 0, st>>>(
          x, y, kept, red, M, R, 1, std::max<int64_t>(R, 1), f);
    } else {
      dim3 grid(grid_for(M, kColX), 1);
      reduce_cols_kernel<Op, T, T>
          <<<grid, dim3(kColX, kColY), 0, st>>>(x, y, kept, red, M, R, std::max<int64_t>(R, 1), f);
    }
    check_launch("reduce", ctx);
    return;
  }
  Scratch scratch(ctx, static_cast<size_t>(M * S) * sizeof(A));
  A* part = scratch.as<A>();
  if (inner) {
    // part is (M, S): reduce its rows.
    reduce_rows_kernel<Op, T, A><<<grid_for(M * S, 1), row_block(chunk), 0, st>>>(
        x, part, kept, red, M, R, S, chunk, plain);
    check_launch("reduce (chunks)", ctx);
    const DimMap k2 = dim_map({M}, {S}), r2 = dim_map({S}, {1});
    reduce_rows_kernel<Op, A, T>
        <<<grid_for(M, 1), row_block(S), 0, st>>>(part, y, k2, r2, M, S, 1, S, f);
  } else {
    // part is (S, M): reduce its columns.
    dim3 grid(grid_for(M, kColX), static_cast<unsigned>(S));
    reduce_cols_kernel<Op, T, A>
        <<<grid, dim3(kColX, kColY), 0, st>>>(x, part, kept, red, M, R, chunk, plain);
    check_launch("reduce (chunks)", ctx);
    const DimMap k2 = dim_map({M}, {1}), r2 = dim_map({S}, {M});
    reduce_cols_kernel<Op, A, T>
        <<<dim3(grid_for(M, kColX), 1), dim3(kColX, kColY), 0, st>>>(part, y, k2, r2, M, S, S, f);
  }
  check_launch("reduce", ctx);
}

}  // namespace

void reduce_axes(const OpContext& ctx, const void* x, const std::vector<int64_t>& shape,
                 const std::vector<char>& mask, DType dtype, ReduceKind kind, OpReq req, void* out,
                 const char* what) {
  if (req == OpReq::kNull) return;
  int64_t M = 1, R = 1;
  for (size_t d = 0; d < shape.size(); ++d) (mask[d] ? R : M) *= shape[d];
  if (M == 0) return;
  // Merge runs of kept / reduced dims; size-1 dims vanish.
  std::vector<int64_t> ksize, kstride, rsize, rstride;
  int64_t stride = 1;
  int last = -1;  // 0 kept, 1 reduced: the group the previous (inner) dim joined
  bool innermost_reduced = true;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const int64_t n = shape[d];
    if (n != 1) {
      const int g = mask[d] ? 1 : 0;
      if (last < 0) innermost_reduced = g == 1;
      auto& sz = g ? rsize : ksize;
      auto& st = g ? rstride : kstride;
      if (last == g) {
        sz.front() *= n;
      } else {
        sz.insert(sz.begin(), n);
        st.insert(st.begin(), stride);
      }
      last = g;
    }
    stride *= n;
  }
  if (ksize.empty()) {
    ksize.push_back(1);
    kstride.push_back(0);
  }
  if (rsize.empty()) {
    rsize.push_back(1);
    rstride.push_back(0);
  }
  const DimMap kept = dim_map(ksize, kstride), red = dim_map(rsize, rstride);
  Finish f;
  f.add = req == OpReq::kAdd;
  f.mean = kind == ReduceKind::kMean;
  f.count = R;
  WEFT_CUDA_REDUCE_SWITCH(dtype, DT, what, {
    const DT* xp = static_cast<const DT*>(x);
    DT* yp = static_cast<DT*>(out);
    switch (kind) {
      case ReduceKind::kSum:
      case ReduceKind::kMean:
        reduce_launch<SumOp>(ctx, xp, kept, red, M, R, innermost_reduced, yp, f);
        break;
      case ReduceKind::kMax:
        reduce_launch<MaxOp>(ctx, xp, kept, red, M, R, innermost_reduced, yp, f);
        break;
      case ReduceKind::kMin:
        reduce_launch<MinOp>(ctx, xp, kept, red, M, R, innermost_reduced, yp, f);
        break;
    }
  });
}

namespace {

// ---- sum / mean / max / min -----------------------------------------------------------------

/// Per input dim: whether it is reduced (the CPU kernel validated the axes at shape inference).
std::vector<char> reduced_mask(const ReduceAxesParam& p, int ndim) {
  if (!p.axis || p.axis->ndim() <= 0) return std::vector<char>(static_cast<size_t>(ndim), 1);
  std::vector<char> m(static_cast<size_t>(ndim), 0);
  for (int64_t a : *p.axis) m[static_cast<size_t>(a < 0 ? a + ndim : a)] = 1;
  if (p.exclude)
    for (auto& v : m) v = !v;
  return m;
}

template <ReduceKind kKind>
void reduce_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<ReduceAxesParam>();
  reduce_axes(ctx, in[0].raw(), in[0].shape_of().to_vector(), reduced_mask(p, in[0].ndim),
              in[0].dtype(), kKind, req[0], out[0].raw(), attrs.where().c_str());
}

// (ograd, data[, output]) -> grad like data; kKind as on the CPU: 0 sum, 1 mean, 2 max/min.
template <int kKind, typename T>
__global__ void reduce_backward_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                       const T* __restrict__ y, T* dx, DimMap map, int64_t n,
                                       int64_t count, bool add) {
  using A = acc_t<T>;
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    const int64_t k = offset_of(map, i);
    A v = to_acc(g[k]);
    if constexpr (kKind == 1) {
      if constexpr (std::is_floating_point_v<A>)
        v = v * (A(1) / static_cast<A>(count > 0 ? count : 1));
      else
        v = static_cast<A>(v / static_cast<A>(count > 0 ? count : 1));
    } else if constexpr (kKind == 2) {
      if (!(to_acc(x[i]) == to_acc(y[k]))) v = A(0);
    }
    if (add) v = static_cast<A>(to_acc(dx[i]) + v);
    dx[i] = from_acc<T>(v);
  }
}

template <int kKind>
void reduce_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const int64_t n = out[0].size();
  if (n == 0) return;
  const TensorView& x = in[1];
  const auto mask = reduced_mask(attrs.params<ReduceAxesParam>(), x.ndim);
  // The input's dims with the reduced ones at stride 0 in the (keepdims) gradient.
  std::vector<int64_t> size, stride;
  int64_t s = 1, m = 1;
  for (int d = x.ndim - 1; d >= 0; --d) {
    if (x.shape[d] != 1) {
      size.insert(size.begin(), x.shape[d]);
      stride.insert(stride.begin(), mask[d] ? 0 : s);
    }
    if (!mask[d]) {
      s *= x.shape[d];
    }
  }
  m = s;
  if (size.empty()) {
    size.push_back(1);
    stride.push_back(0);
  }
  const DimMap map = dim_map(size, stride);
  const int64_t count = m > 0 ? n / m : 1;
  const bool add = req[0] == OpReq::kAdd;
  WEFT_CUDA_REDUCE_SWITCH(out[0].dtype(), DT, attrs.where(), {
    const DT* y = kKind == 2 ? dptr<DT>(in[2]) : nullptr;
    reduce_backward_kernel<kKind, DT><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(
        dptr<DT>(in[0]), dptr<DT>(x), y, dptr<DT>(out[0]), map, n, count, add);
    check_launch("reduce backward", ctx);
  });
}

// ---- argmax / argmin ------------------------------------------------------------------------

template <bool kMax, typename A>
__device__ __forceinline__ bool better(A c, int64_t ci, A best, int64_t bi) {
  // The first position of the extreme, like the CPU's strict comparison.
  return kMax ? (c > best || (c == best && ci < bi)) : (c < best || (c == best && ci < bi));
}

// One block per (outer) row when inner == 1.
template <bool kMax, typename T>
__global__ void arg_rows_kernel(const T* __restrict__ x, T* y, int64_t outer, int64_t n, bool add) {
  using A = acc_t<T>;
  __shared__ A sv[32];
  __shared__ int64_t si[32];
  for (int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T* row = x + o * n;
    A best = to_acc(row[0]);
    int64_t bi = 0;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const A c = to_acc(row[k]);
      if (better<kMax>(c, k, best, bi)) {
        best = c;
        bi = k;
      }
    }
    for (int off = 16; off > 0; off >>= 1) {
      const A c = static_cast<A>(__shfl_down_sync(0xffffffffu, best, off));
      const int64_t ci = __shfl_down_sync(0xffffffffu, bi, off);
      if (better<kMax>(c, ci, best, bi)) {
        best = c;
        bi = ci;
      }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) {
      sv[warp] = best;
      si[warp] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) {
        if (better<kMax>(sv[w], si[w], best, bi)) {
          best = sv[w];
          bi = si[w];
        }
      }
      A r = static_cast<A>(bi);
      if (add) r = static_cast<A>(to_acc(y[o]) + r);
      y[o] = from_acc<T>(r);
    }
  }
}

// One thread per (outer, inner) position when inner > 1.
template <bool kMax, typename T>
__global__ void arg_cols_kernel(const T* __restrict__ x, T* y, int64_t outer, int64_t n,
                                int64_t inner, bool add) {
  using A = acc_t<T>;
  WEFT_CUDA_KERNEL_LOOP(i, outer * inner) {
    const int64_t o = i / inner, j = i - o * inner;
    const T* base = x + o * n * inner + j;
    A best = to_acc(base[0]);
    int64_t bi = 0;
    for (int64_t k = 1; k < n; ++k) {
      const A c = to_acc(base[k * inner]);
      if (kMax ? c > best : c < best) {
        best = c;
        bi = k;
      }
    }
    A r = static_cast<A>(bi);
    if (add) r = static_cast<A>(to_acc(y[i]) + r);
    y[i] = from_acc<T>(r);
  }
}

template <bool kMax>
void arg_reduce(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<ArgReduceParam>();
  const TensorView& x = in[0];
  int64_t outer = 1, n = x.size(), inner = 1;
  if (p.axis && x.ndim > 1) {
    const int axis = static_cast<int>(*p.axis < 0 ? *p.axis + x.ndim : *p.axis);
    for (int d = 0; d < axis; ++d) outer *= x.shape[d];
    n = x.shape[axis];
    for (int d = axis + 1; d < x.ndim; ++d) inner *= x.shape[d];
  }
  WEFT_CHECK(n > 0) << attrs.where() << ": cannot search an empty axis";
  if (outer * inner == 0) return;
  const bool add = req[0] == OpReq::kAdd;
  WEFT_CUDA_REDUCE_SWITCH(x.dtype(), DT, attrs.where(), {
    if (inner == 1) {
      arg_rows_kernel<kMax, DT><<<grid_for(outer, 1), row_block(n), 0, stream_of(ctx)>>>(
          dptr<DT>(x), dptr<DT>(out[0]), outer, n, add);
    } else {
      arg_cols_kernel<kMax, DT><<<grid_for(outer * inner), kBlockSize, 0, stream_of(ctx)>>>(
          dptr<DT>(x), dptr<DT>(out[0]), outer, n, inner, add);
    }
    check_launch(kMax ? "argmax" : "argmin", ctx);
  });
}

}  // namespace

void register_reduce_kernels(OpRegistry& r) {
  auto reg = [&r](const char* name, FCompute f) {
    r.kernels(name).set_attr(DeviceType::kCUDA, std::move(f));
  };
  reg("sum", reduce_forward<ReduceKind::kSum>);
  reg("mean", reduce_forward<ReduceKind::kMean>);
  reg("max", reduce_forward<ReduceKind::kMax>);
  reg("min", reduce_forward<ReduceKind::kMin>);
  reg("_backward_sum", reduce_backward<0>);
  reg("_backward_mean", reduce_backward<1>);
  reg("_backward_max", reduce_backward<2>);
  reg("_backward_min", reduce_backward<2>);
  reg("argmax", arg_reduce<true>);
  reg("argmin", arg_reduce<false>);
  register_softmax_kernels(r);
}

}  // namespace weft::cuda
