// CPU kernels of the reductions over axes: sum, mean, max, min, argmax and argmin, and the backward
// ops of the differentiable ones (definitions in ops/defs/reduce.cc).
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "ops/cpu/elemwise_kernels.h"
#include "ops/cpu/register.h"
#include "ops/defs/reduce_params.h"
#include "ops/defs/reduce_shape.h"

namespace weft::detail {
namespace {

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

template <typename R, bool kMean, int kKind>
void reg_reduce_kernels(OpRegistry& r, const std::string& name) {
  r.kernels(name).set_attr<FCompute>(DeviceType::kCPU, FCompute(reduce_compute<R, kMean>));
  r.kernels("_backward_" + name)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(reduce_backward_compute<kKind>));
}

// ---- argmax / argmin --------------------------------------------------------------------------

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

}  // namespace weft::detail

namespace weft::cpu {

void register_reduce_kernels(OpRegistry& r) {
  using namespace detail;
  reg_reduce_kernels<SumR, false, 0>(r, "sum");
  reg_reduce_kernels<SumR, true, 1>(r, "mean");
  reg_reduce_kernels<MaxR, false, 2>(r, "max");
  reg_reduce_kernels<MinR, false, 2>(r, "min");
  r.kernels("argmax").set_attr<FCompute>(DeviceType::kCPU, arg_reduce_compute<true>);
  r.kernels("argmin").set_attr<FCompute>(DeviceType::kCPU, arg_reduce_compute<false>);
}

}  // namespace weft::cpu
