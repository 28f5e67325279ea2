// CPU kernels of slice, slice_axis, broadcast_to, tile (strided copies) and Embedding (row
// lookup with clipped indices), and of their backward ops.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/cpu/strided_copy.h"
#include "ops/defs/indexing_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// ---- helpers -------------------------------------------------------------------------------

bool accumulates(OpReq r) { return r == OpReq::kAdd; }

// ---- slice ---------------------------------------------------------------------------------

void slice_copy(const OpContext& ctx, const SliceRange& r, const TensorView& data,
                const TensorView& part, OpReq req, bool to_data) {
  cpu_moves(ctx).slice_copy(r, data, part, req, to_data);
}

void slice_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, slice_range(attrs, attrs.params<SliceParam>(), in[0].shape_of()), in[0], out[0],
             req[0], false);
}
void slice_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, slice_range(attrs, attrs.params<SliceParam>(), in[1].shape_of()), out[0], in[0],
             req[0], true);
}

// ---- slice_axis ----------------------------------------------------------------------------

void slice_axis_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, slice_axis_range(attrs, in[0].shape_of()), in[0], out[0], req[0], false);
}
void slice_axis_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  slice_copy(ctx, slice_axis_range(attrs, in[1].shape_of()), out[0], in[0], req[0], true);
}

// ---- broadcast_to --------------------------------------------------------------------------

void broadcast_to_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                          std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).broadcast_to_forward(in[0], out[0], req[0]);
}

// Sums `grad` (big) into `dst` (small) over the broadcast dims.
void broadcast_reduce(const OpContext& ctx, const TensorView& grad, OpReq req,
                      const TensorView& dst, const std::vector<int64_t>& dst_strides,
                      const std::vector<int64_t>& iter_shape,
                      const std::vector<int64_t>& grad_strides) {
  if (req == OpReq::kNull) return;
  if (!accumulates(req)) shape_ops_zero(dst.raw(), dst.bytes(), ctx.num_threads);
  shape_ops_strided_copy(dst.raw(), dst_strides.data(), grad.raw(), grad_strides.data(),
                         iter_shape.data(), static_cast<int>(iter_shape.size()), dst.dtype(), true,
                         ctx.num_threads);
}

void broadcast_to_backward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                           std::span<const OpReq> req, std::span<const TensorView> out) {
  const TensorView& og = in[0];
  broadcast_reduce(ctx, og, req[0], out[0], broadcast_strides(out[0], og),
                   og.shape_of().to_vector(), compact_strides(og));
}

// ---- tile ----------------------------------------------------------------------------------

void tile_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).tile_forward(attrs, in[0], out[0], req[0]);
}

void tile_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  std::vector<int64_t> iter, ys, xs;
  tile_layout(out[0], in[0], attrs.params<TileParam>().reps, &iter, &ys, &xs);
  broadcast_reduce(ctx, in[0], req[0], out[0], xs, iter, ys);
}

// ---- Embedding ---------------------------------------------------------------------------

// Row index for entry i, truncated toward zero and clipped to [0, rows - 1].
template <typename I>
int64_t clipped_index(const I* idx, int64_t i, int64_t rows) {
  const double v = static_cast<double>(idx[i]);
  int64_t j = v != v ? 0 : v >= static_cast<double>(rows) ? rows - 1 : static_cast<int64_t>(v);
  return std::min(std::max<int64_t>(j, 0), rows - 1);
}

template <typename I, typename T>
void embedding_add_rows(const OpContext& ctx, const I* idx, int64_t n, const T* weight,
                        int64_t rows, int64_t cols, T* out) {
  parallel_for(n, std::max<int64_t>(1, 4096 / cols), ctx.num_threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const T* src = weight + clipped_index(idx, i, rows) * cols;
      T* dst = out + i * cols;
      for (int64_t c = 0; c < cols; ++c) dst[c] = static_cast<T>(dst[c] + src[c]);
    }
  });
}

void embedding_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const TensorView& data = in[0];
  const TensorView& weight = in[1];
  const TensorView& y = out[0];
  const int64_t n = data.size(), rows = weight.shape[0], cols = weight.shape[1];
  if (req[0] == OpReq::kAdd) {
    WEFT_DTYPE_SWITCH(
        data.dtype(), I, "Embedding indices",
        WEFT_DTYPE_SWITCH(y.dtype(), T, "Embedding (req=add)",
                          embedding_add_rows<I, T>(ctx, data.ptr<I>(), n, weight.ptr<T>(), rows,
                                                   cols, y.ptr<T>())));
    return;
  }
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(y.dtype());
  const char* w = static_cast<const char*>(weight.raw());
  char* o = static_cast<char*>(y.raw());
  WEFT_DTYPE_SWITCH(data.dtype(), I, "Embedding indices", {
    const I* idx = data.ptr<I>();
    parallel_for(n, std::max<int64_t>(1, 4096 / cols), ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        std::memcpy(o + i * row_bytes, w + clipped_index(idx, i, rows) * row_bytes, row_bytes);
    });
  });
}

// _backward_Embedding: (out_grad, data) -> weight gradient (input_dim, output_dim). Each thread
// owns a range of columns, so repeated indices never race.
template <typename I, typename T>
void embedding_grad(const OpContext& ctx, const I* idx, int64_t n, const T* og, int64_t rows,
                    int64_t cols, T* gw) {
  parallel_for(cols, 16, ctx.num_threads, [&](int64_t cb, int64_t ce) {
    for (int64_t i = 0; i < n; ++i) {
      T* dst = gw + clipped_index(idx, i, rows) * cols;
      const T* src = og + i * cols;
      for (int64_t c = cb; c < ce; ++c) dst[c] += src[c];
    }
  });
}

void embedding_backward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const TensorView& og = in[0];
  const TensorView& data = in[1];
  const TensorView& gw = out[0];
  if (req[0] != OpReq::kAdd) shape_ops_zero(gw.raw(), gw.bytes(), ctx.num_threads);
  WEFT_DTYPE_SWITCH(
      data.dtype(), I, "Embedding indices",
      WEFT_FLOAT_SWITCH(gw.dtype(), T, "Embedding backward",
                        embedding_grad<I, T>(ctx, data.ptr<I>(), data.size(), og.ptr<T>(),
                                             gw.shape[0], gw.shape[1], gw.ptr<T>())));
}

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_indexing_kernels(OpRegistry& r) {
  using namespace detail;  // the kernels above
  const auto set = [&r](const char* name, FCompute f) {
    r.kernels(name).set_attr<FCompute>(DeviceType::kCPU, std::move(f));
  };
  set("slice", slice_forward);
  set("_backward_slice", slice_backward);
  set("slice_axis", slice_axis_forward);
  set("_backward_slice_axis", slice_axis_backward);
  set("broadcast_to", broadcast_to_forward);
  set("_backward_broadcast_to", broadcast_to_backward);
  set("tile", tile_forward);
  set("_backward_tile", tile_backward);
  set("Embedding", embedding_forward);
  set("_backward_Embedding", embedding_backward);
}

}  // namespace weft::cpu
