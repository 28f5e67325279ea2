// Binary elementwise ops: identical-shape (elemwise_add, _power, _equal, ...) and NumPy-broadcast
// (broadcast_add, ...) arithmetic and comparisons, with their backward ops.
#include <string>

#include "ops/elemwise_kernels.h"

namespace weft::detail {
namespace {

// ---- forward functors -------------------------------------------------------------------------

struct AddF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a + b);
  }
};
struct SubF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a - b);
  }
};
struct MulF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a * b);
  }
};
struct DivF {
  template <typename T>
  T operator()(T a, T b) const {
    return safe_div(a, b);
  }
};
struct PowF {
  template <typename T>
  T operator()(T a, T b) const {
    return any_pow(a, b);
  }
};
struct MaxF {
  template <typename T>
  T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct MinF {
  template <typename T>
  T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};
struct EqF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a == b);
  }
};
struct NeF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a != b);
  }
};
struct GtF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a > b);
  }
};
struct GeF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a >= b);
  }
};
struct LtF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a < b);
  }
};
struct LeF {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a <= b);
  }
};

// ---- backward functors: lhs/rhs gradient from (head gradient, lhs, rhs) ------------------------

struct AddG {
  template <typename T>
  static T lhs(T g, T, T) {
    return g;
  }
  template <typename T>
  static T rhs(T g, T, T) {
    return g;
  }
};
struct SubG {
  template <typename T>
  static T lhs(T g, T, T) {
    return g;
  }
  template <typename T>
  static T rhs(T g, T, T) {
    return static_cast<T>(T(0) - g);
  }
};
struct MulG {
  template <typename T>
  static T lhs(T g, T, T b) {
    return static_cast<T>(g * b);
  }
  template <typename T>
  static T rhs(T g, T a, T) {
    return static_cast<T>(g * a);
  }
};
struct DivG {
  template <typename T>
  static T lhs(T g, T, T b) {
    return safe_div(g, b);
  }
  template <typename T>
  static T rhs(T g, T a, T b) {
    return safe_div(static_cast<T>(T(0) - g * a), static_cast<T>(b * b));
  }
};
struct PowG {
  // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a). Integers go through double.
  template <typename T>
  static T lhs(T g, T a, T b) {
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    return static_cast<T>(C(g) * C(b) * std::pow(C(a), C(b) - C(1)));
  }
  template <typename T>
  static T rhs(T g, T a, T b) {
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    return static_cast<T>(C(g) * std::pow(C(a), C(b)) * std::log(C(a)));
  }
};
struct MaxG {  // ties go to lhs, as MXNet's ge/lt pair
  template <typename T>
  static T lhs(T g, T a, T b) {
    return a >= b ? g : T(0);
  }
  template <typename T>
  static T rhs(T g, T a, T b) {
    return a < b ? g : T(0);
  }
};
struct MinG {
  template <typename T>
  static T lhs(T g, T a, T b) {
    return a <= b ? g : T(0);
  }
  template <typename T>
  static T rhs(T g, T a, T b) {
    return a > b ? g : T(0);
  }
};

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

// ---- shape inference --------------------------------------------------------------------------

bool broadcast_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known() || !in[1].rank_known()) return false;
  Shape o;
  if (!broadcast_shapes(in[0], in[1], &o)) {
    throw_shape_error(attrs, "operands could not be broadcast together with shapes " +
                                 in[0].to_string() + " and " + in[1].to_string());
  }
  assign_output_shape(attrs, out, 0, o);
  // Backward: an unknown operand dim is determined by a known output dim when the other operand
  // is 1 (or absent) there, or when the output dim is 1.
  const Shape& os = out[0];
  const int n = os.ndim();
  for (int k = 0; k < 2; ++k) {
    const Shape& other = in[1 - k];
    Shape s = in[k];
    for (int d = 0; d < s.ndim(); ++d) {
      const int od = d + (n - s.ndim());
      if (s[d] >= 0 || os[od] < 0) continue;
      const int oi = od - (n - other.ndim());
      const int64_t other_dim = oi < 0 ? 1 : other[oi];
      if (os[od] == 1 || other_dim == 1) s[d] = os[od];
    }
    assign_input_shape(attrs, in, k, s);
  }
  return in[0].known() && in[1].known() && out[0].known();
}

// (ograd, lhs, rhs) -> (lhs_grad, rhs_grad): gradients take their operand's shape.
bool broadcast_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                    std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_input_shape(attrs, in, 2, out[1]);
  if (in[1].rank_known() && in[2].rank_known()) {
    Shape o;
    if (broadcast_shapes(in[1], in[2], &o)) {
      Shape merged = in[0];
      if (merge_shape(&merged, o)) assign_input_shape(attrs, in, 0, merged);
    }
  }
  return all_known(in) && all_known(out);
}

std::vector<std::pair<int, int>> inplace_binary(const OpAttrs&) { return {{0, 0}, {1, 0}}; }

std::vector<GradEntry> no_grad2(GradBuilder&) { return {GradBuilder::none(), GradBuilder::none()}; }

// Registers a forward binary op; `backward` names its backward op (empty: no gradient).
template <typename F>
Op& reg_binary(OpRegistry& r, const std::string& name, const std::string& desc, bool broadcast,
               const std::string& backward) {
  Op& op = r.register_op(name);
  op.describe(desc).set_input_names({"lhs", "rhs"});
  if (broadcast) {
    op.set_attr<FInferShape>(broadcast_infer_shape)
        .set_attr<FCompute>(DeviceType::kCPU, broadcast_compute<F>);
  } else {
    op.set_attr<FInferShape>(infer_same_shape)
        .set_attr<FInplaceOption>(inplace_binary)
        .set_attr<FCompute>(DeviceType::kCPU, binary_compute<F>);
  }
  if (backward.empty()) {
    op.set_attr<FGradient>(no_grad2);
  } else {
    op.set_attr<FGradient>([backward](GradBuilder& b) {
      auto g = b.emit(backward, {b.out_grad(0), b.input(0), b.input(1)});
      return std::vector<GradEntry>{g.at(0), g.at(1)};
    });
  }
  return op;
}

template <typename G>
void reg_binary_backward(OpRegistry& r, const std::string& name, const std::string& forward,
                         bool broadcast) {
  r.register_op(name)
      .describe("Gradient of " + forward + ": (ograd, lhs, rhs) -> (lhs_grad, rhs_grad)" +
                (broadcast ? ", summed over broadcast axes." : "."))
      .set_input_names({"ograd", "lhs", "rhs"})
      .set_output_names({"lhs_grad", "rhs_grad"})
      .set_attr<FInferShape>(broadcast ? FInferShape(broadcast_backward_infer_shape)
                                       : FInferShape(infer_same_shape))
      .set_attr<FCompute>(DeviceType::kCPU, binary_backward_compute<G>);
}

template <typename F, typename G>
void reg_arith(OpRegistry& r, const std::string& base, const std::string& elem_name,
               const std::string& what) {
  // Identical shapes.
  reg_binary<F>(r, elem_name, what + " of two arrays of identical shape.", false,
                "_backward_" + base);
  // NumPy broadcasting.
  reg_binary<F>(r, "broadcast_" + base, what + " with NumPy-style broadcasting.", true,
                "_backward_broadcast_" + base);
  reg_binary_backward<G>(r, "_backward_broadcast_" + base, "broadcast_" + base, true);
}

template <typename F>
void reg_compare(OpRegistry& r, const std::string& base, const std::string& what) {
  reg_binary<F>(r, "_" + base,
                "1 where lhs " + what + " rhs, else 0 (input dtype); identical shapes.", false, "");
  reg_binary<F>(r, "broadcast_" + base,
                "1 where lhs " + what + " rhs, else 0 (input dtype); broadcasting.", true, "");
}

}  // namespace

void register_elemwise_binary_ops(OpRegistry& r) {
  reg_arith<AddF, AddG>(r, "add", "elemwise_add", "Sum");
  reg_arith<SubF, SubG>(r, "sub", "elemwise_sub", "Difference");
  reg_arith<MulF, MulG>(r, "mul", "elemwise_mul", "Product");
  reg_arith<DivF, DivG>(r, "div", "elemwise_div", "Quotient");
  reg_arith<PowF, PowG>(r, "power", "_power", "Power lhs^rhs");
  reg_arith<MaxF, MaxG>(r, "maximum", "_maximum", "Elementwise maximum");
  reg_arith<MinF, MinG>(r, "minimum", "_minimum", "Elementwise minimum");

  // Identical-shape backward ops. add/sub need only the head gradient.
  r.register_op("_backward_add")
      .describe("Gradient of elemwise_add: ograd -> (ograd, ograd).")
      .set_input_names({"ograd"})
      .set_output_names({"lhs_grad", "rhs_grad"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FCompute>(DeviceType::kCPU, add_sub_backward_compute<false>);
  r.register_op("_backward_sub")
      .describe("Gradient of elemwise_sub: ograd -> (ograd, -ograd).")
      .set_input_names({"ograd"})
      .set_output_names({"lhs_grad", "rhs_grad"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FCompute>(DeviceType::kCPU, add_sub_backward_compute<true>);
  for (const char* name : {"elemwise_add", "elemwise_sub"}) {
    const std::string bwd = std::string(name) == "elemwise_add" ? "_backward_add" : "_backward_sub";
    r.register_op(name).set_attr<FGradient>([bwd](GradBuilder& b) {
      auto g = b.emit(bwd, {b.out_grad(0)});
      return std::vector<GradEntry>{g.at(0), g.at(1)};
    });
  }
  reg_binary_backward<MulG>(r, "_backward_mul", "elemwise_mul", false);
  reg_binary_backward<DivG>(r, "_backward_div", "elemwise_div", false);
  reg_binary_backward<PowG>(r, "_backward_power", "_power", false);
  reg_binary_backward<MaxG>(r, "_backward_maximum", "_maximum", false);
  reg_binary_backward<MinG>(r, "_backward_minimum", "_minimum", false);

  reg_compare<EqF>(r, "equal", "==");
  reg_compare<NeF>(r, "not_equal", "!=");
  reg_compare<GtF>(r, "greater", ">");
  reg_compare<GeF>(r, "greater_equal", ">=");
  reg_compare<LtF>(r, "lesser", "<");
  reg_compare<LeF>(r, "lesser_equal", "<=");

  for (const char* a : {"_Plus", "_plus", "_add"}) r.add_alias(a, "elemwise_add");
  for (const char* a : {"_Minus", "_minus", "_sub"}) r.add_alias(a, "elemwise_sub");
  for (const char* a : {"_Mul", "_mul"}) r.add_alias(a, "elemwise_mul");
  for (const char* a : {"_Div", "_div"}) r.add_alias(a, "elemwise_div");
  r.add_alias("_Power", "_power");
  r.add_alias("_Maximum", "_maximum");
  r.add_alias("_Minimum", "_minimum");
  r.add_alias("broadcast_plus", "broadcast_add");
  r.add_alias("broadcast_minus", "broadcast_sub");
}

}  // namespace weft::detail
