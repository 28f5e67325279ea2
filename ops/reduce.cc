// Reductions over axes: sum, mean, max, min (axis / keepdims / exclude, MXNet's shape rules),
// argmax and argmin, and the backward ops of the differentiable ones.
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/defs/reduce_params.h"
#include "ops/elemwise_kernels.h"

namespace weft::detail {
namespace {

// ---- parameters and shapes --------------------------------------------------------------------

/// Per input dim: whether it is reduced. Throws ValueError for an axis out of range or repeated.
std::vector<char> reduced_mask(const OpAttrs& attrs, const ReduceAxesParam& p, int ndim) {
  if (!p.axis || p.axis->ndim() <= 0) return std::vector<char>(static_cast<size_t>(ndim), 1);
  std::vector<char> listed(static_cast<size_t>(ndim), 0);
  for (int64_t a : *p.axis) {
    WEFT_CHECK(a >= -ndim && a < ndim) << attrs.where() << ": reduction axis " << a
                                       << " is out of range for a " << ndim << "-d input";
    const int d = static_cast<int>(a < 0 ? a + ndim : a);
    WEFT_CHECK(!listed[d]) << attrs.where()
                           << ": reduction axes have duplicates: " << p.axis->to_string();
    listed[d] = 1;
  }
  if (p.exclude) {
    for (auto& m : listed) m = !m;
  }
  return listed;
}

/// The output shape with every dim kept (reduced ones 1): the layout the kernels index with.
Shape keepdims_shape(const Shape& in, const std::vector<char>& mask) {
  Shape s = in;
  for (int d = 0; d < in.ndim(); ++d)
    if (mask[d]) s[d] = 1;
  return s;
}

/// MXNet's output shape: reduced dims dropped (or 1 with keepdims); (1,) when nothing is left.
Shape reduced_shape(const Shape& in, const std::vector<char>& mask, bool keepdims) {
  if (keepdims) return keepdims_shape(in, mask);
  Shape s = Shape::filled(0, 0);
  for (int d = 0; d < in.ndim(); ++d)
    if (!mask[d]) s.push_back(in[d]);
  if (s.ndim() == 0) s.push_back(1);
  return s;
}

bool reduce_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<ReduceAxesParam>();
  if (!in[0].rank_known()) {
    // With keepdims the input has the output's rank and its kept dims.
    if (p.keepdims && out[0].rank_known()) {
      const auto mask = reduced_mask(attrs, p, out[0].ndim());
      Shape s = out[0];
      for (int d = 0; d < s.ndim(); ++d)
        if (mask[d]) s[d] = -1;
      assign_input_shape(attrs, in, 0, s);
    }
    return false;
  }
  const auto mask = reduced_mask(attrs, p, in[0].ndim());
  assign_output_shape(attrs, out, 0, reduced_shape(in[0], mask, p.keepdims));
  // Backward: kept input dims come from the output.
  Shape s = in[0];
  int k = 0;
  for (int d = 0; d < s.ndim(); ++d) {
    if (mask[d]) {
      if (p.keepdims) ++k;
      continue;
    }
    if (s[d] < 0) s[d] = out[0][k];
    ++k;
  }
  assign_input_shape(attrs, in, 0, s);
  return in[0].known() && out[0].known();
}

// ---- reduction kernels ------------------------------------------------------------------------

struct SumR {
  template <typename T>
  static T init() {
    return T(0);
  }
  template <typename T>
  static T combine(T a, T b) {
    return static_cast<T>(a + b);
  }
};
struct MaxR {
  template <typename T>
  static T init() {
    if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  template <typename T>
  static T combine(T a, T b) {
    return b > a ? b : a;
  }
};
struct MinR {
  template <typename T>
  static T init() {
    if constexpr (std::is_floating_point_v<T>)
      return std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::max();
  }
  template <typename T>
  static T combine(T a, T b) {
    return b < a ? b : a;
  }
};

// Combines x[0..n) into acc with 8 independent lanes, so the loop vectorizes.
template <typename R, typename DT>
inline DT reduce_row(const DT* x, int64_t n, DT acc) {
  constexpr int kLanes = 8;
  int64_t i = 0;
  if (n >= 2 * kLanes) {
    DT lane[kLanes];
    for (int k = 0; k < kLanes; ++k) lane[k] = x[k];
    for (i = kLanes; i + kLanes <= n; i += kLanes)
      for (int k = 0; k < kLanes; ++k) lane[k] = R::combine(lane[k], x[i + k]);
    for (int k = 0; k < kLanes; ++k) acc = R::combine(acc, lane[k]);
  }
  for (; i < n; ++i) acc = R::combine(acc, x[i]);
  return acc;
}

// out (keepdims layout, `m` elements) = reduction of x over the masked dims.
template <typename R, typename DT>
void reduce_into(const TensorView& x, const Shape& keep, DT* out, int threads) {
  const int64_t m = keep.size();
  for (int64_t i = 0; i < m; ++i) out[i] = R::template init<DT>();
  if (x.size() == 0) return;
  const BroadcastPlan p =
      make_broadcast_plan(x.shape, x.ndim, keep.data(), keep.ndim(), keep.data(), keep.ndim());
  const DT* in = x.ptr<DT>();
  const int last = p.ndim - 1;
  const int64_t inner = p.inner();
  const bool inner_kept = p.lstride[last] != 0;
  auto row = [&](int64_t lo, int64_t xo, int64_t c0, int64_t c1) {
    if (inner_kept) {
      DT* o = out + lo;
      const DT* v = in + xo;
      for (int64_t i = c0; i < c1; ++i) o[i] = R::combine(o[i], v[i]);
    } else {
      out[lo] = reduce_row<R>(in + xo, inner, out[lo]);
    }
  };
  const int64_t rows = p.rows();
  const bool parallel = x.size() >= kElemwiseParallelMin && threads > 1;
  if (parallel && p.ndim >= 2 && p.lstride[0] != 0) {
    // The outermost dim is kept: slices along it write disjoint outputs.
    const int64_t per = rows / p.shape[0];
    parallel_for(p.shape[0],
                 std::max<int64_t>(1, kElemwiseGrain / std::max<int64_t>(1, per * inner)), threads,
                 [&](int64_t b, int64_t e) {
                   for_each_row(p, b * per, e * per,
                                [&](int64_t lo, int64_t, int64_t xo) { row(lo, xo, 0, inner); });
                 });
  } else if (parallel && inner_kept) {
    // The innermost dim is kept: column ranges write disjoint outputs.
    parallel_for(inner, std::max<int64_t>(1, kElemwiseGrain / std::max<int64_t>(1, rows)), threads,
                 [&](int64_t c0, int64_t c1) {
                   for_each_row(p, 0, rows,
                                [&](int64_t lo, int64_t, int64_t xo) { row(lo, xo, c0, c1); });
                 });
  } else {
    for_each_row(p, 0, rows, [&](int64_t lo, int64_t, int64_t xo) { row(lo, xo, 0, inner); });
  }
}

template <typename R, bool kMean>
void reduce_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<ReduceAxesParam>();
  const Shape ishape = in[0].shape_of();
  const Shape keep = keepdims_shape(ishape, reduced_mask(attrs, p, ishape.ndim()));
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    const int64_t m = out[0].size();
    const bool add = req[0] == OpReq::kAdd;
    DT* dst = out[0].ptr<DT>();
    if (add) {
      WEFT_CHECK_AS(InternalError, ctx.workspace != nullptr &&
                                       ctx.workspace_bytes >= static_cast<size_t>(m) * sizeof(DT))
          << attrs.where() << ": accumulate (kAdd) needs the requested workspace";
      dst = static_cast<DT*>(ctx.workspace);
    }
    reduce_into<R, DT>(in[0], keep, dst, ctx.num_threads);
    if constexpr (kMean) {
      const int64_t count = m > 0 ? in[0].size() / m : 1;
      if (count > 0) {
        for (int64_t i = 0; i < m; ++i) dst[i] = static_cast<DT>(dst[i] / static_cast<DT>(count));
      }
    }
    if (add) {
      DT* o = out[0].ptr<DT>();
      for (int64_t i = 0; i < m; ++i) o[i] += dst[i];
    }
  });
}

std::vector<ResourceRequest> reduce_workspace(const OpAttrs&, const std::vector<Shape>&,
                                              const std::vector<Shape>& out) {
  // Room for the result in any supported type, used when the output is accumulated (kAdd).
  return {{ResourceRequest::Kind::kWorkspace,
           static_cast<size_t>(std::max<int64_t>(out[0].size(), 1)) * 8}};
}

// ---- backward ---------------------------------------------------------------------------------

// (ograd, data[, out]) -> grad shaped like data. kind 0: sum, 1: mean, 2: max/min (ograd where
// data equals the reduced value: every tied position gets it, as MXNet).
template <int kKind>
void reduce_backward_compute(const OpAttrs& attrs, const OpContext&, std::span<const TensorView> in,
                             std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<ReduceAxesParam>();
  const Shape ishape = in[1].shape_of();
  const Shape keep = keepdims_shape(ishape, reduced_mask(attrs, p, ishape.ndim()));
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    const DT* g = in[0].ptr<DT>();
    const DT* x = in[1].ptr<DT>();
    const DT* y = kKind == 2 ? in[2].ptr<DT>() : nullptr;
    DT* o = out[0].ptr<DT>();
    const int64_t m = keep.size();
    const int64_t count = m > 0 ? ishape.size() / m : 1;
    const DT scale =
        kKind == 1 ? static_cast<DT>(DT(1) / static_cast<DT>(std::max<int64_t>(count, 1))) : DT(1);
    const bool add = req[0] == OpReq::kAdd;
    if (out[0].size() == 0) return;
    const BroadcastPlan plan = make_broadcast_plan(ishape.data(), ishape.ndim(), keep.data(),
                                                   keep.ndim(), keep.data(), keep.ndim());
    const int last = plan.ndim - 1;
    const int64_t inner = plan.inner();
    const int64_t ls = plan.lstride[last] != 0 ? 1 : 0;
    for_each_row(plan, 0, plan.rows(), [&](int64_t lo, int64_t, int64_t xo) {
      for (int64_t i = 0; i < inner; ++i) {
        DT v;
        if constexpr (kKind == 2) {
          v = x[xo + i] == y[lo + i * ls] ? g[lo + i * ls] : DT(0);
        } else if constexpr (kKind == 1) {
          if constexpr (std::is_floating_point_v<DT>) {
            v = g[lo + i * ls] * scale;
          } else {
            v = static_cast<DT>(g[lo + i * ls] / static_cast<DT>(std::max<int64_t>(count, 1)));
          }
        } else {
          v = g[lo + i * ls];
        }
        if (add) {
          o[xo + i] += v;
        } else {
          o[xo + i] = v;
        }
      }
    });
    (void)scale;
  });
}

bool reduce_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                 std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  if (in[1].rank_known()) {
    const auto& p = attrs.params<ReduceAxesParam>();
    const Shape r = reduced_shape(in[1], reduced_mask(attrs, p, in[1].ndim()), p.keepdims);
    for (size_t i = 0; i < in.size(); ++i) {
      if (i == 1) continue;
      assign_input_shape(attrs, in, static_cast<int>(i), r);
    }
  }
  return all_known(in) && all_known(out);
}

template <typename R, bool kMean, int kKind>
void reg_reduce(OpRegistry& r, const std::string& name, const std::string& desc) {
  const std::string bwd = "_backward_" + name;
  r.register_op(name)
      .describe(desc)
      .set_params<ReduceAxesParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(reduce_infer_shape)
      .set_attr<FResourceRequest>(reduce_workspace)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(reduce_compute<R, kMean>))
      .set_attr<FGradient>([bwd](GradBuilder& b) {
        std::vector<GradEntry> args{b.out_grad(0), b.input(0)};
        if (kKind == 2) args.push_back(b.output(0));
        return std::vector<GradEntry>{b.emit_with_forward_attrs(bwd, args).at(0)};
      });
  std::vector<std::string> names{"ograd", "data"};
  if (kKind == 2) names.push_back("output");
  r.register_op(bwd)
      .describe("Gradient of " + name + ": the head gradient broadcast back to the input's shape" +
                (kKind == 2 ? ", at the positions that equal the reduced value." : "."))
      .set_params<ReduceAxesParam>()
      .set_input_names(names)
      .set_attr<FInferShape>(reduce_backward_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(reduce_backward_compute<kKind>));
}

// ---- argmax / argmin --------------------------------------------------------------------------

bool arg_reduce_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known()) return false;
  const auto& p = attrs.params<ArgReduceParam>();
  const int nd = in[0].ndim();
  Shape o;
  if (!p.axis || nd == 1) {
    o = p.keepdims ? Shape::filled(nd, 1) : Shape{1};
  } else {
    WEFT_CHECK(*p.axis >= -nd && *p.axis < nd)
        << attrs.where() << ": axis " << *p.axis << " is out of range for a " << nd << "-d input";
    const int axis = normalize_axis(attrs, *p.axis, nd);
    o = Shape::filled(0, 0);
    for (int d = 0; d < nd; ++d) {
      if (d != axis) {
        o.push_back(in[0][d]);
      } else if (p.keepdims) {
        o.push_back(1);
      }
    }
  }
  assign_output_shape(attrs, out, 0, o);
  return in[0].known();
}

template <bool kMax>
void arg_reduce_compute(const OpAttrs& attrs, const OpContext&, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<ArgReduceParam>();
  const TensorView& x = in[0];
  int64_t outer = 1, n = x.size(), inner = 1;
  if (p.axis && x.ndim > 1) {
    const int axis = normalize_axis(attrs, *p.axis, x.ndim);
    for (int d = 0; d < axis; ++d) outer *= x.shape[d];
    n = x.shape[axis];
    for (int d = axis + 1; d < x.ndim; ++d) inner *= x.shape[d];
  }
  WEFT_CHECK(n > 0) << attrs.where() << ": cannot search an empty axis";
  WEFT_ARITH_SWITCH(x.dtype(), DT, attrs.where(), {
    const DT* v = x.ptr<DT>();
    DT* o = out[0].ptr<DT>();
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t j = 0; j < inner; ++j) {
        const DT* base = v + a * n * inner + j;
        DT best = base[0];
        int64_t arg = 0;
        for (int64_t k = 1; k < n; ++k) {
          const DT c = base[k * inner];
          if (kMax ? c > best : c < best) {
            best = c;
            arg = k;
          }
        }
        const DT r = static_cast<DT>(arg);
        if (req[0] == OpReq::kAdd) {
          o[a * inner + j] += r;
        } else {
          o[a * inner + j] = r;
        }
      }
    }
  });
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  reg_reduce<SumR, false, 0>(r, "sum", "Sum over the given axes (all by default).");
  reg_reduce<SumR, true, 1>(r, "mean", "Mean over the given axes (all by default).");
  reg_reduce<MaxR, false, 2>(r, "max", "Maximum over the given axes (all by default).");
  reg_reduce<MinR, false, 2>(r, "min", "Minimum over the given axes (all by default).");
  r.add_alias("sum_axis", "sum");
  r.add_alias("max_axis", "max");
  r.add_alias("min_axis", "min");

  auto no_grad = [](GradBuilder&) { return std::vector<GradEntry>{GradBuilder::none()}; };
  r.register_op("argmax")
      .describe(
          "Index of the maximum along an axis (of the flattened array when axis is None), in the "
          "input's dtype.")
      .set_params<ArgReduceParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(arg_reduce_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, arg_reduce_compute<true>)
      .set_attr<FGradient>(no_grad);
  r.register_op("argmin")
      .describe(
          "Index of the minimum along an axis (of the flattened array when axis is None), in the "
          "input's dtype.")
      .set_params<ArgReduceParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(arg_reduce_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, arg_reduce_compute<false>)
      .set_attr<FGradient>(no_grad);
}

}  // namespace weft::detail
