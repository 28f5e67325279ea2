// CPU kernels of pick (one element per position along an axis, chosen by an index array) with its
// backward op, and one_hot (definitions in ops/defs/pick.cc). MXNet semantics: indices are read as
// numbers of any type and truncated toward zero.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/register.h"
#include "ops/cpu/strided_copy.h"
#include "ops/defs/indexing_params.h"
#include "ops/defs/pick_shape.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// An index value truncated toward zero; NaN and values beyond +-2^62 are mapped to `bad` so that
// the float-to-integer conversion is always defined.
template <typename I>
int64_t truncate_index(I v, int64_t bad) {
  if constexpr (std::is_integral_v<I>) {
    return static_cast<int64_t>(v);
  } else {
    const double d = static_cast<double>(v);
    if (!(std::fabs(d) < 4.6e18)) return bad;
    return static_cast<int64_t>(d);
  }
}

// ---- pick --------------------------------------------------------------------------------------

// Data viewed as (outer, dim, inner); index and output as (outer, inner).
struct PickSplit {
  int64_t outer = 1, dim = 1, inner = 1;
};

PickSplit pick_split(const OpAttrs& attrs, const TensorView& data) {
  PickSplit s;
  const int axis = pick_axis(attrs, data.ndim);
  if (axis < 0) {
    s.dim = data.size();
    return s;
  }
  for (int d = 0; d < axis; ++d) s.outer *= data.shape[d];
  s.dim = data.shape[axis];
  for (int d = axis + 1; d < data.ndim; ++d) s.inner *= data.shape[d];
  return s;
}

// The position along the axis for each (outer, inner) entry, in [0, dim).
std::vector<int64_t> pick_positions(const TensorView& index, int64_t dim, PickMode mode) {
  std::vector<int64_t> pos(static_cast<size_t>(index.size()));
  WEFT_DTYPE_SWITCH(index.dtype(), I, "pick index", {
    const I* idx = index.ptr<I>();
    for (size_t k = 0; k < pos.size(); ++k) {
      int64_t j = truncate_index(idx[k], 0);
      if (mode == PickMode::kClip) {
        j = std::min(std::max<int64_t>(j, 0), dim - 1);
      } else {
        j %= dim;
        if (j < 0) j += dim;
      }
      pos[k] = j;
    }
  });
  return pos;
}

// Runs body(o) for each outer row, in parallel.
template <typename F>
void for_outer(const OpContext& ctx, const PickSplit& s, const F& body) {
  parallel_for(s.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(s.inner, 1)),
               ctx.num_threads, [&](int64_t b, int64_t e) {
                 for (int64_t o = b; o < e; ++o) body(o);
               });
}

template <typename T>
void pick_gather(const OpContext& ctx, const PickSplit& s, const std::vector<int64_t>& pos,
                 const T* x, OpReq req, T* y) {
  const bool add = req == OpReq::kAdd;
  for_outer(ctx, s, [&](int64_t o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t k = o * s.inner + i;
      const T v = x[(o * s.dim + pos[k]) * s.inner + i];
      y[k] = add ? static_cast<T>(y[k] + v) : v;
    }
  });
}

void pick_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const PickSplit s = pick_split(attrs, in[0]);
  const auto pos = pick_positions(in[1], s.dim, attrs.params<PickParam>().mode);
  WEFT_DTYPE_SWITCH(out[0].dtype(), T, attrs.where(),
                    pick_gather<T>(ctx, s, pos, in[0].ptr<T>(), req[0], out[0].ptr<T>()));
}

// _backward_pick: inputs (out_grad, data, index), output the data gradient: zeros except the
// picked positions, which receive the output gradient. Each (outer, inner) entry owns its own
// column of the data, so no two entries write one element.
template <typename T>
void pick_scatter(const OpContext& ctx, const PickSplit& s, const std::vector<int64_t>& pos,
                  const T* og, T* gx) {
  for_outer(ctx, s, [&](int64_t o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t k = o * s.inner + i;
      T& dst = gx[(o * s.dim + pos[k]) * s.inner + i];
      dst = static_cast<T>(dst + og[k]);
    }
  });
}

void pick_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  if (req[0] != OpReq::kAdd) shape_ops_zero(out[0].raw(), out[0].bytes(), ctx.num_threads);
  if (in[0].size() == 0) return;
  const PickSplit s = pick_split(attrs, in[1]);
  const auto pos = pick_positions(in[2], s.dim, attrs.params<PickParam>().mode);
  WEFT_FLOAT_SWITCH(out[0].dtype(), T, attrs.where(),
                    pick_scatter<T>(ctx, s, pos, in[0].ptr<T>(), out[0].ptr<T>()));
}

// ---- one_hot -----------------------------------------------------------------------------------

template <typename T>
void one_hot_fill(const OneHotParam& p, const OpContext& ctx, const TensorView& indices, OpReq req,
                  T* y) {
  const int64_t n = indices.size(), depth = p.depth;
  const T on = static_cast<T>(p.on_value), off = static_cast<T>(p.off_value);
  const bool add = req == OpReq::kAdd;
  WEFT_DTYPE_SWITCH(indices.dtype(), I, "one_hot indices", {
    const I* idx = indices.ptr<I>();
    parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(depth, 1)), ctx.num_threads,
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = b; i < e; ++i) {
                     // Out of range (negative included): the whole row stays off (MXNet).
                     const int64_t j = truncate_index(idx[i], -1);
                     T* row = y + i * depth;
                     for (int64_t c = 0; c < depth; ++c) {
                       const T v = c == j ? on : off;
                       row[c] = add ? static_cast<T>(row[c] + v) : v;
                     }
                   }
                 });
  });
}

void one_hot_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const auto& p = attrs.params<OneHotParam>();
  WEFT_DTYPE_SWITCH(out[0].dtype(), T, attrs.where(),
                    one_hot_fill<T>(p, ctx, in[0], req[0], out[0].ptr<T>()));
}

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_pick_kernels(OpRegistry& r) {
  using namespace detail;
  r.kernels("pick").set_attr<FCompute>(DeviceType::kCPU, pick_forward);
  r.kernels("_backward_pick").set_attr<FCompute>(DeviceType::kCPU, pick_backward);
  r.kernels("one_hot").set_attr<FCompute>(DeviceType::kCPU, one_hot_forward);
}

}  // namespace weft::cpu
