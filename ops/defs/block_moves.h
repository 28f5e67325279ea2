// The shape and indexing ops that move blocks of elements (transpose, Concat, stack, SliceChannel,
// the legacy Crop, slice, slice_axis, broadcast_to, tile), written once for both devices over a
// device's strided copy: the CPU's (ops/cpu/shape_ops_concat.cc, indexing_ops.cc) and the CUDA one
// (ops/cuda/shape.cu, indexing_ops.cu). Also the stride helpers those kernels share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/tensor_view.h"
#include "ops/defs/indexing_params.h"
#include "ops/defs/shape_ops_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

/// Row-major strides of a compact tensor of `shape`, in elements.
inline std::vector<int64_t> compact_strides(const int64_t* shape, int ndim) {
  std::vector<int64_t> s(static_cast<size_t>(std::max(ndim, 0)), 1);
  for (int k = ndim - 2; k >= 0; --k) s[k] = s[k + 1] * shape[k + 1];
  return s;
}
inline std::vector<int64_t> compact_strides(const TensorView& v) {
  return compact_strides(v.shape, v.ndim);
}

/// The address of element `offset` (in elements) of the compact tensor `v`.
inline char* elem_ptr(const TensorView& v, int64_t offset) {
  return static_cast<char*>(v.raw()) + offset * static_cast<int64_t>(dtype_size(v.dtype()));
}

/// Strides of `small` (broadcast to big's shape, same rank) as seen from big: 0 on broadcast dims.
inline std::vector<int64_t> broadcast_strides(const TensorView& small, const TensorView& big) {
  std::vector<int64_t> s = compact_strides(small);
  for (int i = 0; i < small.ndim; ++i)
    if (small.shape[i] != big.shape[i]) s[i] = 0;
  return s;
}

/// tile of `x` into `y` as a broadcast: iteration dims (rep_k, in_k) per output axis k, with the
/// strides of y and of x (0 over the rep dims) for each.
inline void tile_layout(const TensorView& x, const TensorView& y, const Shape& reps,
                        std::vector<int64_t>* iter, std::vector<int64_t>* y_strides,
                        std::vector<int64_t>* x_strides) {
  std::vector<int64_t> ip, rp;
  tile_padded(reps, x.shape_of(), &ip, &rp);
  const std::vector<int64_t> ys = compact_strides(y),
                             xs = compact_strides(ip.data(), static_cast<int>(ip.size()));
  for (size_t k = 0; k < ip.size(); ++k) {
    iter->insert(iter->end(), {rp[k], ip[k]});
    y_strides->insert(y_strides->end(), {ip[k] * ys[k], ys[k]});
    x_strides->insert(x_strides->end(), {0, xs[k]});
  }
}

/// The block moves over a device's copy. `Copier` provides
///   void copy(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
///             const int64_t* shape, int ndim, DType dtype, bool add) const;
///   void zero(void* dst, size_t bytes) const;
/// with strides in elements; `add` accumulates into dst. Call from the kernel's thread.
template <typename Copier>
class BlockMoves {
 public:
  explicit BlockMoves(Copier copier) : copier_(std::move(copier)) {}

  /// Copies between a compact block `part` of shape (outer, rows*inner) and rows
  /// [row0, row0+rows) of `whole`, shape (outer, whole_rows*inner). to_whole: part -> whole; else
  /// whole -> part.
  void block_copy(const TensorView& whole, int64_t whole_rows, const TensorView& part, int64_t row0,
                  int64_t rows, int64_t outer, int64_t inner, OpReq req, bool to_whole) const {
    if (req == OpReq::kNull || outer * rows * inner == 0) return;
    const int64_t shape[2] = {outer, rows * inner};
    const int64_t ws[2] = {whole_rows * inner, 1}, ps[2] = {rows * inner, 1};
    char* w = elem_ptr(whole, row0 * inner);
    const bool add = req == OpReq::kAdd;
    if (to_whole) {
      copier_.copy(w, ws, part.raw(), ps, shape, 2, whole.dtype(), add);
    } else {
      copier_.copy(part.raw(), ps, w, ws, shape, 2, whole.dtype(), add);
    }
  }

  /// y = x with its axes permuted by TransposeParam's axes (reversed when empty).
  void transpose_forward(const OpAttrs& attrs, const TensorView& x, const TensorView& y,
                         OpReq req) const {
    if (req == OpReq::kNull) return;
    const std::vector<int> perm =
        transpose_perm(attrs, attrs.params<TransposeParam>().axes, x.ndim);
    const std::vector<int64_t> xs = compact_strides(x), ys = compact_strides(y);
    std::vector<int64_t> src(static_cast<size_t>(x.ndim));
    for (int i = 0; i < x.ndim; ++i) src[i] = xs[perm[i]];
    copier_.copy(y.raw(), ys.data(), x.raw(), src.data(), y.shape, y.ndim, y.dtype(),
                 req == OpReq::kAdd);
  }

  void concat_forward(const OpAttrs& attrs, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) const {
    const TensorView& y = out[0];
    const int axis = normalize_axis(attrs, attrs.params<ConcatParam>().dim, y.ndim);
    const int64_t outer = y.shape_of().prod(0, axis), inner = y.shape_of().prod(axis + 1, y.ndim);
    int64_t row = 0;
    for (const auto& x : in) {
      block_copy(y, y.shape[axis], x, row, x.shape[axis], outer, inner, req[0], true);
      row += x.shape[axis];
    }
  }

  /// Inputs (out_grad); one output per forward input.
  void concat_backward(const OpAttrs& attrs, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) const {
    const TensorView& og = in[0];
    const int axis = normalize_axis(attrs, attrs.params<ConcatParam>().dim, og.ndim);
    const int64_t outer = og.shape_of().prod(0, axis);
    const int64_t inner = og.shape_of().prod(axis + 1, og.ndim);
    int64_t row = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      block_copy(og, og.shape[axis], out[i], row, out[i].shape[axis], outer, inner, req[i], false);
      row += out[i].shape[axis];
    }
  }

  void stack_forward(const OpAttrs& attrs, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) const {
    const TensorView& x0 = in[0];
    const int axis = stack_axis(attrs, x0.ndim);
    const int64_t outer = x0.shape_of().prod(0, axis), inner = x0.shape_of().prod(axis, x0.ndim);
    const auto n = static_cast<int64_t>(in.size());
    for (int64_t i = 0; i < n; ++i) block_copy(out[0], n, in[i], i, 1, outer, inner, req[0], true);
  }

  void stack_backward(const OpAttrs& attrs, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) const {
    const TensorView& x0 = out[0];
    const int axis = stack_axis(attrs, x0.ndim);
    const int64_t outer = x0.shape_of().prod(0, axis), inner = x0.shape_of().prod(axis, x0.ndim);
    const auto n = static_cast<int64_t>(out.size());
    for (int64_t i = 0; i < n; ++i) block_copy(in[0], n, out[i], i, 1, outer, inner, req[i], false);
  }

  void slice_channel_forward(const OpAttrs& attrs, std::span<const TensorView> in,
                             std::span<const OpReq> req, std::span<const TensorView> out) const {
    const auto& p = attrs.params<SliceChannelParam>();
    const TensorView& x = in[0];
    const int axis = normalize_axis(attrs, p.axis, x.ndim);
    const int64_t n = p.num_outputs, part = x.shape[axis] / n;
    const int64_t outer = x.shape_of().prod(0, axis), inner = x.shape_of().prod(axis + 1, x.ndim);
    for (int64_t i = 0; i < n; ++i)
      block_copy(x, x.shape[axis], out[i], i * part, part, outer, inner, req[i], false);
  }

  /// Copies between the crop window of `data` (N, C, H, W) and the compact `part` (N, C, h, w).
  /// to_data: part -> data, zero outside the window unless `req` adds (Crop's gradient).
  void crop_copy(const OpAttrs& attrs, const TensorView& data, const TensorView& part, OpReq req,
                 bool to_data) const {
    if (req == OpReq::kNull) return;
    const int64_t H = data.shape[2], W = data.shape[3], h = part.shape[2], w = part.shape[3];
    const auto [y0, x0] = crop_start(attrs, H, W, h, w);
    const int64_t shape[3] = {data.shape[0] * data.shape[1], h, w};
    const int64_t ds[3] = {H * W, W, 1}, ps[3] = {h * w, w, 1};
    char* window = elem_ptr(data, y0 * W + x0);
    const bool add = req == OpReq::kAdd;
    if (to_data) {
      if (!add) copier_.zero(data.raw(), data.bytes());
      copier_.copy(window, ds, part.raw(), ps, shape, 3, data.dtype(), add);
    } else {
      copier_.copy(part.raw(), ps, window, ds, shape, 3, data.dtype(), add);
    }
  }

  /// Copies between the slice `r` of `data` and the compact `part`: forward gathers into part;
  /// backward (to_data) writes part into the slice, zeroing the rest first unless accumulating.
  void slice_copy(const SliceRange& r, const TensorView& data, const TensorView& part, OpReq req,
                  bool to_data) const {
    if (req == OpReq::kNull) return;
    const std::vector<int64_t> ds = compact_strides(data), ps = compact_strides(part);
    std::vector<int64_t> strided(static_cast<size_t>(data.ndim));
    int64_t base = 0;
    for (int i = 0; i < data.ndim; ++i) {
      strided[i] = ds[i] * r.step[i];
      base += r.begin[i] * ds[i];
    }
    const bool add = req == OpReq::kAdd;
    if (to_data) {
      if (!add) copier_.zero(data.raw(), data.bytes());
      if (part.size() == 0) return;
      copier_.copy(elem_ptr(data, base), strided.data(), part.raw(), ps.data(), part.shape,
                   part.ndim, data.dtype(), add);
    } else {
      if (part.size() == 0) return;
      copier_.copy(part.raw(), ps.data(), elem_ptr(data, base), strided.data(), part.shape,
                   part.ndim, data.dtype(), add);
    }
  }

  void broadcast_to_forward(const TensorView& x, const TensorView& y, OpReq req) const {
    if (req == OpReq::kNull) return;
    const std::vector<int64_t> src = broadcast_strides(x, y), dst = compact_strides(y);
    copier_.copy(y.raw(), dst.data(), x.raw(), src.data(), y.shape, y.ndim, y.dtype(),
                 req == OpReq::kAdd);
  }

  void tile_forward(const OpAttrs& attrs, const TensorView& x, const TensorView& y,
                    OpReq req) const {
    if (req == OpReq::kNull) return;
    std::vector<int64_t> iter, ys, xs;
    tile_layout(x, y, attrs.params<TileParam>().reps, &iter, &ys, &xs);
    copier_.copy(y.raw(), ys.data(), x.raw(), xs.data(), iter.data(), static_cast<int>(iter.size()),
                 y.dtype(), req == OpReq::kAdd);
  }

 private:
  Copier copier_;
};

}  // namespace weft::detail
