// CUDA kernels: the indexing family (see ops/cuda/register.h): slice, slice_axis, broadcast_to,
// tile, Embedding, pick, one_hot and their backward ops.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/reduce_common.cuh"
#include "ops/cuda/register.h"
#include "ops/cuda/shape_kernels.h"
#include "ops/defs/indexing_params.h"

namespace weft::cuda {

namespace {

using detail::BroadcastToParam;
using detail::OneHotParam;
using detail::PickMode;
using detail::PickParam;
using detail::SliceParam;
using detail::SliceRange;
using detail::TileParam;

using detail::compact_strides;

// ---- slice / slice_axis ---------------------------------------------------------------------

void slice_copy(const OpContext& ctx, const SliceRange& r, const TensorView& data,
                const TensorView& part, OpReq req, bool to_data) {
  cuda_moves(ctx).slice_copy(r, data, part, req, to_data);
}

void slice_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, detail::slice_range(attrs, attrs.params<SliceParam>(), in[0].shape_of()), in[0],
             out[0], req[0], false);
}
void slice_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, detail::slice_range(attrs, attrs.params<SliceParam>(), in[1].shape_of()), out[0],
             in[0], req[0], true);
}
void slice_axis_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, detail::slice_axis_range(attrs, in[0].shape_of()), in[0], out[0], req[0], false);
}
void slice_axis_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, detail::slice_axis_range(attrs, in[1].shape_of()), out[0], in[0], req[0], true);
}

// ---- broadcast_to / tile --------------------------------------------------------------------

void broadcast_to_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                          std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).broadcast_to_forward(in[0], out[0], req[0]);
}

// The gradient sums the output gradient over the broadcast dims.
void broadcast_to_backward(const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  const TensorView& og = in[0];
  std::vector<char> mask(static_cast<size_t>(og.ndim));
  for (int i = 0; i < og.ndim; ++i) mask[i] = out[0].shape[i] != og.shape[i];
  reduce_axes(ctx, og.raw(), og.shape_of().to_vector(), mask, og.dtype(), ReduceKind::kSum, req[0],
              out[0].raw(), attrs.where().c_str());
}

// The output as (rep_k, in_k) per axis k: the input broadcast over the rep dims.
void tile_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).tile_forward(attrs, in[0], out[0], req[0]);
}

// The output gradient viewed as (rep_k, in_k) per axis, summed over the rep dims.
void tile_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  std::vector<int64_t> ip, rp, shape;
  detail::tile_padded(attrs.params<TileParam>().reps, out[0].shape_of(), &ip, &rp);
  std::vector<char> mask;
  for (size_t k = 0; k < ip.size(); ++k) {
    shape.insert(shape.end(), {rp[k], ip[k]});
    mask.insert(mask.end(), {1, 0});
  }
  reduce_axes(ctx, in[0].raw(), shape, mask, in[0].dtype(), ReduceKind::kSum, req[0], out[0].raw(),
              attrs.where().c_str());
}

// ---- indices ----------------------------------------------------------------------------------

enum class IndexRule { kEmbedding, kClip, kWrap, kTruncate };

// Note [Index conversion]
// Indices arrive in any numeric dtype (float indices are usual). One pass turns them into int64
// positions with the CPU's rules (Embedding: truncate, NaN -> 0, clip to [0, dim-1]; pick: clip
// or wrap; one_hot: truncate, out-of-range floats -> -1), so the gather and scatter kernels need
// no index-type templates.
template <typename I>
__global__ void index_kernel(const I* __restrict__ idx, int64_t* pos, int64_t n, int64_t dim,
                             IndexRule rule) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    int64_t j;
    if (rule == IndexRule::kEmbedding) {
      const double v = static_cast<double>(to_acc(idx[i]));
      j = v != v ? 0 : v >= static_cast<double>(dim) ? dim - 1 : static_cast<int64_t>(v);
      j = min(max(j, int64_t{0}), dim - 1);
    } else {
      if constexpr (std::is_integral_v<I>) {
        j = static_cast<int64_t>(idx[i]);
      } else {
        const double d = static_cast<double>(to_acc(idx[i]));
        j = !(fabs(d) < 4.6e18) ? (rule == IndexRule::kTruncate ? -1 : 0) : static_cast<int64_t>(d);
      }
      if (rule == IndexRule::kClip) {
        j = min(max(j, int64_t{0}), dim - 1);
      } else if (rule == IndexRule::kWrap) {
        j %= dim;
        if (j < 0) j += dim;
      }
    }
    pos[i] = j;
  }
}

/// The positions of `idx` under `rule`, in scratch memory.
struct Positions {
  Positions(const OpContext& ctx, const TensorView& idx, int64_t dim, IndexRule rule)
      : scratch(ctx, static_cast<size_t>(idx.size()) * sizeof(int64_t)) {
    if (idx.size() == 0) return;
    ptr = scratch.as<int64_t>();
    WEFT_CUDA_ALL_SWITCH(idx.dtype(), I, "indices", {
      index_kernel<I><<<grid_for(idx.size()), kBlockSize, 0, stream_of(ctx)>>>(
          static_cast<const I*>(idx.raw()), ptr, idx.size(), dim, rule);
    });
    check_launch("index conversion", ctx);
  }
  Scratch scratch;
  int64_t* ptr = nullptr;
};

template <typename T>
__device__ __forceinline__ void put(T* dst, T v, bool add) {
  *dst = add ? from_acc<T>(static_cast<acc_t<T>>(to_acc(*dst) + to_acc(v))) : v;
}

// ---- Embedding --------------------------------------------------------------------------------

template <typename T>
__global__ void embedding_kernel(const int64_t* __restrict__ pos, const T* __restrict__ w, T* y,
                                 int64_t n, int64_t cols, bool add) {
  WEFT_CUDA_KERNEL_LOOP(k, n * cols) {
    const int64_t i = k / cols, c = k - i * cols;
    put(y + k, w[pos[i] * cols + c], add);
  }
}

void embedding_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const TensorView &data = in[0], &weight = in[1], &y = out[0];
  const int64_t n = data.size(), rows = weight.shape[0], cols = weight.shape[1];
  if (n * cols == 0) return;
  const Positions pos(ctx, data, rows, IndexRule::kEmbedding);
  WEFT_CUDA_ALL_SWITCH(y.dtype(), T, "Embedding", {
    embedding_kernel<T><<<grid_for(n * cols), kBlockSize, 0, stream_of(ctx)>>>(
        pos.ptr, dptr<T>(weight), dptr<T>(y), n, cols, req[0] == OpReq::kAdd);
  });
  check_launch("Embedding", ctx);
}

// Repeated indices add into the same weight row: atomics (sort-free scatter-add).
template <typename T>
__global__ void embedding_grad_kernel(const int64_t* __restrict__ pos, const T* __restrict__ og,
                                      T* gw, int64_t n, int64_t cols) {
  WEFT_CUDA_KERNEL_LOOP(k, n * cols) {
    const int64_t i = k / cols, c = k - i * cols;
    atomicAdd(gw + pos[i] * cols + c, og[k]);
  }
}

void embedding_backward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const TensorView &og = in[0], &data = in[1], &gw = out[0];
  if (req[0] != OpReq::kAdd) zero_fill(ctx, gw.raw(), gw.bytes());
  const int64_t n = data.size(), rows = gw.shape[0], cols = gw.shape[1];
  if (n * cols == 0) return;
  const Positions pos(ctx, data, rows, IndexRule::kEmbedding);
  WEFT_CUDA_FLOAT_SWITCH(gw.dtype(), T, "Embedding backward", {
    embedding_grad_kernel<T><<<grid_for(n * cols), kBlockSize, 0, stream_of(ctx)>>>(
        pos.ptr, dptr<T>(og), dptr<T>(gw), n, cols);
  });
  check_launch("Embedding backward", ctx);
}

// ---- pick -------------------------------------------------------------------------------------

struct PickSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};

PickSplit pick_split(const OpAttrs& attrs, const TensorView& data) {
  PickSplit s;
  const auto& p = attrs.params<PickParam>();
  if (!p.axis) {
    s.dim = data.size();
    return s;
  }
  const int axis = static_cast<int>(*p.axis < 0 ? *p.axis + data.ndim : *p.axis);
  for (int d = 0; d < axis; ++d) s.outer *= data.shape[d];
  s.dim = data.shape[axis];
  for (int d = axis + 1; d < data.ndim; ++d) s.inner *= data.shape[d];
  return s;
}

IndexRule pick_rule(const OpAttrs& attrs) {
  return attrs.params<PickParam>().mode == PickMode::kClip ? IndexRule::kClip : IndexRule::kWrap;
}

// k = o * inner + i runs over the index; each picks x[(o * dim + pos[k]) * inner + i].
template <typename T>
__global__ void pick_kernel(const int64_t* __restrict__ pos, const T* __restrict__ x, T* y,
                            PickSplit s, bool add) {
  WEFT_CUDA_KERNEL_LOOP(k, s.outer * s.inner) {
    const int64_t o = k / s.inner, i = k - o * s.inner;
    put(y + k, x[(o * s.dim + pos[k]) * s.inner + i], add);
  }
}

// Distinct k reach distinct positions (one per (o, i)), so the scatter needs no atomics.
template <typename T>
__global__ void pick_grad_kernel(const int64_t* __restrict__ pos, const T* __restrict__ og, T* gx,
                                 PickSplit s) {
  WEFT_CUDA_KERNEL_LOOP(k, s.outer * s.inner) {
    const int64_t o = k / s.inner, i = k - o * s.inner;
    put(gx + (o * s.dim + pos[k]) * s.inner + i, og[k], true);
  }
}

void pick_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const PickSplit s = pick_split(attrs, in[0]);
  const Positions pos(ctx, in[1], s.dim, pick_rule(attrs));
  WEFT_CUDA_ALL_SWITCH(out[0].dtype(), T, attrs.where(), {
    pick_kernel<T><<<grid_for(s.outer * s.inner), kBlockSize, 0, stream_of(ctx)>>>(
        pos.ptr, dptr<T>(in[0]), dptr<T>(out[0]), s, req[0] == OpReq::kAdd);
  });
  check_launch("pick", ctx);
}

// in: out_grad, data, index.
void pick_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  if (req[0] != OpReq::kAdd) zero_fill(ctx, out[0].raw(), out[0].bytes());
  if (in[0].size() == 0) return;
  const PickSplit s = pick_split(attrs, in[1]);
  const Positions pos(ctx, in[2], s.dim, pick_rule(attrs));
  WEFT_CUDA_FLOAT_SWITCH(out[0].dtype(), T, attrs.where(), {
    pick_grad_kernel<T><<<grid_for(s.outer * s.inner), kBlockSize, 0, stream_of(ctx)>>>(
        pos.ptr, dptr<T>(in[0]), dptr<T>(out[0]), s);
  });
  check_launch("pick backward", ctx);
}

// ---- one_hot ----------------------------------------------------------------------------------

template <typename T>
__global__ void one_hot_kernel(const int64_t* __restrict__ pos, T* y, int64_t n, int64_t depth,
                               T on, T off, bool add) {
  WEFT_CUDA_KERNEL_LOOP(k, n * depth) {
    const int64_t i = k / depth, c = k - i * depth;
    put(y + k, c == pos[i] ? on : off, add);
  }
}

void one_hot_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const auto& p = attrs.params<OneHotParam>();
  const int64_t n = in[0].size();
  const Positions pos(ctx, in[0], p.depth, IndexRule::kTruncate);
  WEFT_CUDA_ALL_SWITCH(out[0].dtype(), T, attrs.where(), {
    const T on = static_cast<T>(static_cast<acc_t<T>>(p.on_value));
    const T off = static_cast<T>(static_cast<acc_t<T>>(p.off_value));
    one_hot_kernel<T><<<grid_for(n * p.depth), kBlockSize, 0, stream_of(ctx)>>>(
        pos.ptr, dptr<T>(out[0]), n, p.depth, on, off, req[0] == OpReq::kAdd);
  });
  check_launch("one_hot", ctx);
}

}  // namespace

void register_indexing_kernels(OpRegistry& r) {
  auto reg = [&r](const char* name, FCompute f) {
    r.kernels(name).set_attr(DeviceType::kCUDA, std::move(f));
  };
  reg("slice", slice_forward);
  reg("_backward_slice", slice_backward);
  reg("slice_axis", slice_axis_forward);
  reg("_backward_slice_axis", slice_axis_backward);
  reg("broadcast_to", broadcast_to_forward);
  reg("_backward_broadcast_to", broadcast_to_backward);
  reg("tile", tile_forward);
  reg("_backward_tile", tile_backward);
  reg("Embedding", embedding_forward);
  reg("_backward_Embedding", embedding_backward);
  reg("pick", pick_forward);
  reg("_backward_pick", pick_backward);
  reg("one_hot", one_hot_forward);
}

}  // namespace weft::cuda
