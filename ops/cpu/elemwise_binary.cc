// CPU kernels of the binary elementwise ops: identical-shape (elemwise_add, _power, _equal, ...)
// and NumPy-broadcast (broadcast_add, ...) arithmetic and comparisons, with their backward ops
// (definitions in ops/defs/elemwise_binary.cc).
#include <string>

#include "ops/cpu/elemwise_kernels.h"

namespace weft::detail {
namespace {

// The functors (AddF, AddG, ...) are in ops/defs/elemwise_math.h, shared with the CUDA kernels.

// ---- kernels ----------------------------------------------------------------------------------

template <typename F>
void binary_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(),
                    map2<DT, DT>(out[0].size(), in[0].ptr<DT>(), in[1].ptr<DT>(), out[0].ptr<DT>(),
                                 req[0], ctx.num_threads, F{}));
}

// One row of a broadcast binary op: x/y advance by 1 when ls/rs, else stay on one element.
template <bool kAdd, typename DT, typename F>
inline void broadcast_row(const DT* x, const DT* y, DT* o, int64_t n, bool ls, bool rs, F f) {
  auto put = [o](int64_t i, DT v) {
    if constexpr (kAdd) {
      o[i] += v;
    } else {
      o[i] = v;
    }
  };
  if (ls && rs) {
    for (int64_t i = 0; i < n; ++i) put(i, f(x[i], y[i]));
  } else if (ls) {
    const DT yv = *y;
    for (int64_t i = 0; i < n; ++i) put(i, f(x[i], yv));
  } else if (rs) {
    const DT xv = *x;
    for (int64_t i = 0; i < n; ++i) put(i, f(xv, y[i]));
  } else {
    const DT v = f(*x, *y);
    for (int64_t i = 0; i < n; ++i) put(i, v);
  }
}

template <typename DT, typename F>
void broadcast_typed(const TensorView& a, const TensorView& b, const TensorView& o, OpReq req,
                     int threads) {
  const int64_t n = o.size();
  if (req == OpReq::kNull || n == 0) return;
  if (a.size() == n && b.size() == n) {
    map2<DT, DT>(n, a.ptr<DT>(), b.ptr<DT>(), o.ptr<DT>(), req, threads, F{});
    return;
  }
  const BroadcastPlan p = make_broadcast_plan(o.shape, o.ndim, a.shape, a.ndim, b.shape, b.ndim);
  const DT* x = a.ptr<DT>();
  const DT* y = b.ptr<DT>();
  DT* out = o.ptr<DT>();
  const int last = p.ndim - 1;
  const int64_t inner = p.inner();
  const bool ls = p.lstride[last] != 0, rs = p.rstride[last] != 0;
  const bool add = req == OpReq::kAdd;
  auto rows_body = [&](int64_t r0, int64_t r1) {
    for_each_row(p, r0, r1, [&](int64_t lo, int64_t ro, int64_t oo) {
      if (add) {
        broadcast_row<true>(x + lo, y + ro, out + oo, inner, ls, rs, F{});
      } else {
        broadcast_row<false>(x + lo, y + ro, out + oo, inner, ls, rs, F{});
      }
    });
  };
  if (n < kElemwiseParallelMin || threads <= 1) {
    rows_body(0, p.rows());
  } else {
    parallel_for(p.rows(), std::max<int64_t>(1, kElemwiseGrain / inner), threads, rows_body);
  }
}

template <typename F>
void broadcast_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(),
                    broadcast_typed<DT, F>(in[0], in[1], out[0], req[0], ctx.num_threads));
}

// Backward of a (possibly broadcast) binary op: inputs (ograd, lhs, rhs), outputs gradients
// shaped like lhs and rhs; broadcast axes are summed.
template <typename DT, typename G>
void binary_backward_typed(const TensorView& og, const TensorView& a, const TensorView& b,
                           const TensorView& ga, const TensorView& gb, OpReq ra, OpReq rb,
                           int threads) {
  const int64_t n = og.size();
  const DT* g = og.ptr<DT>();
  const DT* x = a.ptr<DT>();
  const DT* y = b.ptr<DT>();
  if (a.size() == n && b.size() == n) {
    map3<DT>(n, g, x, y, ga.ptr<DT>(), ra, threads,
             [](DT gv, DT xv, DT yv) { return G::lhs(gv, xv, yv); });
    map3<DT>(n, g, x, y, gb.ptr<DT>(), rb, threads,
             [](DT gv, DT xv, DT yv) { return G::rhs(gv, xv, yv); });
    return;
  }
  DT* gx = ga.ptr<DT>();
  DT* gy = gb.ptr<DT>();
  if (ra == OpReq::kWrite || ra == OpReq::kInplace) fill<DT>(ga.size(), gx, DT(0), OpReq::kWrite);
  if (rb == OpReq::kWrite || rb == OpReq::kInplace) fill<DT>(gb.size(), gy, DT(0), OpReq::kWrite);
  if (n == 0) return;
  const BroadcastPlan p = make_broadcast_plan(og.shape, og.ndim, a.shape, a.ndim, b.shape, b.ndim);
  const int last = p.ndim - 1;
  const int64_t inner = p.inner();
  const int64_t ls = p.lstride[last] != 0 ? 1 : 0, rs = p.rstride[last] != 0 ? 1 : 0;
  const bool want_a = ra != OpReq::kNull, want_b = rb != OpReq::kNull;
  for_each_row(p, 0, p.rows(), [&](int64_t lo, int64_t ro, int64_t oo) {
    if (want_a) {
      for (int64_t i = 0; i < inner; ++i)
        gx[lo + i * ls] += G::lhs(g[oo + i], x[lo + i * ls], y[ro + i * rs]);
    }
    if (want_b) {
      for (int64_t i = 0; i < inner; ++i)
        gy[ro + i * rs] += G::rhs(g[oo + i], x[lo + i * ls], y[ro + i * rs]);
    }
  });
}

template <typename G>
void binary_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                             std::span<const TensorView> in, std::span<const OpReq> req,
                             std::span<const TensorView> out) {
  WEFT_ARITH_SWITCH(in[0].dtype(), DT, attrs.where(),
                    binary_backward_typed<DT, G>(in[0], in[1], in[2], out[0], out[1], req[0],
                                                 req[1], ctx.num_threads));
}

// _backward_add / _backward_sub of identical-shape ops: inputs (ograd) -> (ograd, ±ograd).
template <bool kNegateRhs>
void add_sub_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                              std::span<const TensorView> in, std::span<const OpReq> req,
                              std::span<const TensorView> out) {
  WEFT_ARITH_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const int64_t n = in[0].size();
    const DT* g = in[0].ptr<DT>();
    map1<DT, DT>(n, g, out[0].ptr<DT>(), req[0], ctx.num_threads, [](DT v) { return v; });
    map1<DT, DT>(n, g, out[1].ptr<DT>(), req[1], ctx.num_threads, [](DT v) {
      if constexpr (kNegateRhs) {
        return static_cast<DT>(DT(0) - v);
      } else {
        return v;
      }
    });
  });
}

// Adds the kernel of a forward binary op.
template <typename F>
void reg_binary_kernel(OpRegistry& r, const std::string& name, bool broadcast) {
  OpKernels op = r.kernels(name);
  if (broadcast) {
    op.set_attr<FCompute>(DeviceType::kCPU, broadcast_compute<F>);
  } else {
    op.set_attr<FCompute>(DeviceType::kCPU, binary_compute<F>);
  }
}

template <typename G>
void reg_binary_backward_kernel(OpRegistry& r, const std::string& name) {
  r.kernels(name).set_attr<FCompute>(DeviceType::kCPU, binary_backward_compute<G>);
}

template <typename F, typename G>
void reg_arith_kernels(OpRegistry& r, const std::string& base, const std::string& elem_name) {
  reg_binary_kernel<F>(r, elem_name, false);
  reg_binary_kernel<F>(r, "broadcast_" + base, true);
  reg_binary_backward_kernel<G>(r, "_backward_broadcast_" + base);
}

template <typename F>
void reg_compare_kernels(OpRegistry& r, const std::string& base) {
  reg_binary_kernel<F>(r, "_" + base, false);
  reg_binary_kernel<F>(r, "broadcast_" + base, true);
}

}  // namespace

void register_elemwise_binary_kernels(OpRegistry& r) {
  reg_arith_kernels<AddF, AddG>(r, "add", "elemwise_add");
  reg_arith_kernels<SubF, SubG>(r, "sub", "elemwise_sub");
  reg_arith_kernels<MulF, MulG>(r, "mul", "elemwise_mul");
  reg_arith_kernels<DivF, DivG>(r, "div", "elemwise_div");
  reg_arith_kernels<PowF, PowG>(r, "power", "_power");
  reg_arith_kernels<MaxF, MaxG>(r, "maximum", "_maximum");
  reg_arith_kernels<MinF, MinG>(r, "minimum", "_minimum");

  r.kernels("_backward_add").set_attr<FCompute>(DeviceType::kCPU, add_sub_backward_compute<false>);
  r.kernels("_backward_sub").set_attr<FCompute>(DeviceType::kCPU, add_sub_backward_compute<true>);
  reg_binary_backward_kernel<MulG>(r, "_backward_mul");
  reg_binary_backward_kernel<DivG>(r, "_backward_div");
  reg_binary_backward_kernel<PowG>(r, "_backward_power");
  reg_binary_backward_kernel<MaxG>(r, "_backward_maximum");
  reg_binary_backward_kernel<MinG>(r, "_backward_minimum");

  reg_compare_kernels<EqF>(r, "equal");
  reg_compare_kernels<NeF>(r, "not_equal");
  reg_compare_kernels<GtF>(r, "greater");
  reg_compare_kernels<GeF>(r, "greater_equal");
  reg_compare_kernels<LtF>(r, "lesser");
  reg_compare_kernels<LeF>(r, "lesser_equal");
}

}  // namespace weft::detail
