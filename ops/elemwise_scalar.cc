// Array-with-scalar ops (_plus_scalar, _rminus_scalar, _power_scalar, _greater_scalar, ...) and
// their backward ops.
#include <string>

#include "ops/defs/elemwise_params.h"
#include "ops/elemwise_kernels.h"

namespace weft::detail {
namespace {

// f(x, s) for "x op s"; the reversed ops swap the operands.
struct PlusS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x + s);
  }
};
struct MinusS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x - s);
  }
};
struct RMinusS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(s - x);
  }
};
struct MulS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x * s);
  }
};
struct DivS {
  template <typename T>
  T operator()(T x, T s) const {
    return safe_div(x, s);
  }
};
struct RDivS {
  template <typename T>
  T operator()(T x, T s) const {
    return safe_div(s, x);
  }
};
struct PowS {
  template <typename T>
  T operator()(T x, T s) const {
    return any_pow(x, s);
  }
};
struct RPowS {
  template <typename T>
  T operator()(T x, T s) const {
    return any_pow(s, x);
  }
};
struct MaxS {
  template <typename T>
  T operator()(T x, T s) const {
    return x > s ? x : s;
  }
};
struct MinS {
  template <typename T>
  T operator()(T x, T s) const {
    return x < s ? x : s;
  }
};
struct EqS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x == s);
  }
};
struct NeS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x != s);
  }
};
struct GtS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x > s);
  }
};
struct GeS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x >= s);
  }
};
struct LtS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x < s);
  }
};
struct LeS {
  template <typename T>
  T operator()(T x, T s) const {
    return static_cast<T>(x <= s);
  }
};

// Backward functors: derivative factor d(x op s)/dx from (v, s), v being the forward input or
// output per kUsesOutput.
struct RDivSG {  // d(s/x)/dx = -s/x^2
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T grad(T x, T s) {
    return -s / (x * x);
  }
};
struct PowSG {  // d(x^s)/dx = s x^(s-1)
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T grad(T x, T s) {
    return s * std::pow(x, s - T(1));
  }
};
struct RPowSG {  // d(s^x)/dx = s^x log(s) = y log(s)
  static constexpr bool kUsesOutput = true;
  template <typename T>
  static T grad(T y, T s) {
    return y * std::log(s);
  }
};
struct MaxSG {  // MXNet: ge
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T grad(T x, T s) {
    return x >= s ? T(1) : T(0);
  }
};
struct MinSG {  // MXNet: le
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T grad(T x, T s) {
    return x <= s ? T(1) : T(0);
  }
};

template <typename F>
void scalar_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const ScalarParam& p = attrs.params<ScalarParam>();
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    const int64_t n = out[0].size();
    const DT* x = in[0].ptr<DT>();
    DT* y = out[0].ptr<DT>();
    if constexpr (std::is_floating_point_v<DT>) {
      const DT s = static_cast<DT>(p.scalar);
      map1<DT, DT>(n, x, y, req[0], ctx.num_threads, [s](DT v) { return F{}(v, s); });
    } else if (p.is_int) {
      const DT s = static_cast<DT>(static_cast<int64_t>(p.scalar));
      map1<DT, DT>(n, x, y, req[0], ctx.num_threads, [s](DT v) { return F{}(v, s); });
    } else {
      const double s = p.scalar;
      map1<DT, DT>(n, x, y, req[0], ctx.num_threads,
                   [s](DT v) { return static_cast<DT>(F{}(static_cast<double>(v), s)); });
    }
  });
}

// inputs (ograd, value) -> ograd * G::grad(value, scalar).
template <typename G>
void scalar_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                             std::span<const TensorView> in, std::span<const OpReq> req,
                             std::span<const TensorView> out) {
  const ScalarParam& p = attrs.params<ScalarParam>();
  WEFT_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    const DT s = static_cast<DT>(p.scalar);
    map2<DT, DT>(out[0].size(), in[0].ptr<DT>(), in[1].ptr<DT>(), out[0].ptr<DT>(), req[0],
                 ctx.num_threads, [s](DT g, DT v) { return g * G::grad(v, s); });
  });
}

std::vector<std::pair<int, int>> inplace_first(const OpAttrs&) { return {{0, 0}}; }

template <typename F>
Op& reg_scalar(OpRegistry& r, const std::string& name, const std::string& desc) {
  return r.register_op(name)
      .describe(desc)
      .set_params<ScalarParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, scalar_compute<F>);
}

template <typename G>
void reg_scalar_backward(OpRegistry& r, Op& forward) {
  const std::string bwd = "_backward" + forward.name();
  forward.set_attr<FGradient>([bwd](GradBuilder& b) {
    GradEntry v = G::kUsesOutput ? b.output(0) : b.input(0);
    return std::vector<GradEntry>{b.emit_with_forward_attrs(bwd, {b.out_grad(0), v}).at(0)};
  });
  const std::string value_name = G::kUsesOutput ? "output" : "data";
  r.register_op(bwd)
      .describe("Gradient of " + forward.name() + ": ograd times the derivative.")
      .set_params<ScalarParam>()
      .set_input_names({"ograd", value_name})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, scalar_backward_compute<G>);
}

// Gradient: the same op applied to the head gradient (linear ops), with the forward's params.
void grad_by(Op& op, std::string grad_op, bool forward_attrs) {
  op.set_attr<FGradient>([grad_op, forward_attrs](GradBuilder& b) {
    GradEntry g = forward_attrs ? b.emit_with_forward_attrs(grad_op, {b.out_grad(0)}).at(0)
                                : b.emit1(grad_op, {b.out_grad(0)});
    return std::vector<GradEntry>{g};
  });
}

}  // namespace

void register_elemwise_scalar_ops(OpRegistry& r) {
  grad_by(reg_scalar<PlusS>(r, "_plus_scalar", "x + scalar."), "_copy", false);
  grad_by(reg_scalar<MinusS>(r, "_minus_scalar", "x - scalar."), "_copy", false);
  grad_by(reg_scalar<RMinusS>(r, "_rminus_scalar", "scalar - x."), "negative", false);
  grad_by(reg_scalar<MulS>(r, "_mul_scalar", "x * scalar."), "_mul_scalar", true);
  grad_by(reg_scalar<DivS>(r, "_div_scalar", "x / scalar."), "_div_scalar", true);
  reg_scalar_backward<RDivSG>(r, reg_scalar<RDivS>(r, "_rdiv_scalar", "scalar / x."));
  reg_scalar_backward<PowSG>(r, reg_scalar<PowS>(r, "_power_scalar", "x ^ scalar."));
  reg_scalar_backward<RPowSG>(r, reg_scalar<RPowS>(r, "_rpower_scalar", "scalar ^ x."));
  reg_scalar_backward<MaxSG>(r, reg_scalar<MaxS>(r, "_maximum_scalar", "max(x, scalar)."));
  reg_scalar_backward<MinSG>(r, reg_scalar<MinS>(r, "_minimum_scalar", "min(x, scalar)."));

  auto no_grad = [](GradBuilder&) { return std::vector<GradEntry>{GradBuilder::none()}; };
  reg_scalar<EqS>(r, "_equal_scalar", "1 where x == scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar<NeS>(r, "_not_equal_scalar", "1 where x != scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar<GtS>(r, "_greater_scalar", "1 where x > scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar<GeS>(r, "_greater_equal_scalar", "1 where x >= scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar<LtS>(r, "_lesser_scalar", "1 where x < scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar<LeS>(r, "_lesser_equal_scalar", "1 where x <= scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);

  r.add_alias("_PlusScalar", "_plus_scalar");
  r.add_alias("_MinusScalar", "_minus_scalar");
  r.add_alias("_RMinusScalar", "_rminus_scalar");
  r.add_alias("_MulScalar", "_mul_scalar");
  r.add_alias("_DivScalar", "_div_scalar");
  r.add_alias("_RDivScalar", "_rdiv_scalar");
  r.add_alias("_PowerScalar", "_power_scalar");
  r.add_alias("_RPowerScalar", "_rpower_scalar");
  r.add_alias("_MaximumScalar", "_maximum_scalar");
  r.add_alias("_MinimumScalar", "_minimum_scalar");
}

}  // namespace weft::detail
