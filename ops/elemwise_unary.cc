// Unary elementwise math ops (relu, sigmoid, tanh, exp, log, sqrt, square, abs, negative,
// reciprocal, sin, cos) and their backward ops.
#include <string>

#include "ops/elemwise_kernels.h"

namespace weft::detail {
namespace {

// Each functor has fwd(x) and grad(v): the derivative expressed in terms of the value the
// backward op receives (the forward input, or the output when kUsesOutput).
struct ReluF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  static T fwd(T x) {
    return x > T(0) ? x : T(0);
  }
  template <typename T>
  static T grad(T y) {
    return y > T(0) ? T(1) : T(0);
  }
};
struct SigmoidF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  static T fwd(T x) {
    return T(1) / (T(1) + std::exp(-x));
  }
  template <typename T>
  static T grad(T y) {
    return y * (T(1) - y);
  }
};
struct TanhF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  static T fwd(T x) {
    return std::tanh(x);
  }
  template <typename T>
  static T grad(T y) {
    return T(1) - y * y;
  }
};
struct ExpF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  static T fwd(T x) {
    return std::exp(x);
  }
  template <typename T>
  static T grad(T y) {
    return y;
  }
};
struct LogF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T fwd(T x) {
    return std::log(x);
  }
  template <typename T>
  static T grad(T x) {
    return T(1) / x;
  }
};
struct SqrtF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  static T fwd(T x) {
    return std::sqrt(x);
  }
  template <typename T>
  static T grad(T y) {
    return T(0.5) / y;
  }
};
struct SquareF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T fwd(T x) {
    return static_cast<T>(x * x);
  }
  template <typename T>
  static T grad(T x) {
    return static_cast<T>(T(2) * x);
  }
};
struct AbsF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T fwd(T x) {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else {
      return x < T(0) ? static_cast<T>(T(0) - x) : x;
    }
  }
  template <typename T>
  static T grad(T x) {
    if constexpr (std::is_unsigned_v<T>) {
      return x > T(0) ? T(1) : T(0);
    } else {
      return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    }
  }
};
struct ReciprocalF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T fwd(T x) {
    return T(1) / x;
  }
  template <typename T>
  static T grad(T x) {
    return T(-1) / (x * x);
  }
};
struct SinF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T fwd(T x) {
    return std::sin(x);
  }
  template <typename T>
  static T grad(T x) {
    return std::cos(x);
  }
};
struct CosF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  static T fwd(T x) {
    return std::cos(x);
  }
  template <typename T>
  static T grad(T x) {
    return -std::sin(x);
  }
};

template <typename F, bool kFloatOnly>
void unary_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  auto run = [&]<typename DT>() {
    map1<DT, DT>(out[0].size(), in[0].ptr<DT>(), out[0].ptr<DT>(), req[0], ctx.num_threads,
                 [](DT x) { return F::template fwd<DT>(x); });
  };
  if constexpr (kFloatOnly) {
    WEFT_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  } else {
    WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  }
}

// inputs (ograd, value) -> ograd * F::grad(value).
template <typename F, bool kFloatOnly>
void unary_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                            std::span<const TensorView> in, std::span<const OpReq> req,
                            std::span<const TensorView> out) {
  auto run = [&]<typename DT>() {
    map2<DT, DT>(out[0].size(), in[0].ptr<DT>(), in[1].ptr<DT>(), out[0].ptr<DT>(), req[0],
                 ctx.num_threads,
                 [](DT g, DT v) { return static_cast<DT>(g * F::template grad<DT>(v)); });
  };
  if constexpr (kFloatOnly) {
    WEFT_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  } else {
    WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  }
}

std::vector<std::pair<int, int>> inplace_first(const OpAttrs&) { return {{0, 0}}; }

template <typename F, bool kFloatOnly>
void reg_unary(OpRegistry& r, const std::string& name, const std::string& desc) {
  const std::string bwd = "_backward_" + name;
  r.register_op(name)
      .describe(desc)
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FGradient>([bwd](GradBuilder& b) {
        GradEntry v = F::kUsesOutput ? b.output(0) : b.input(0);
        return std::vector<GradEntry>{b.emit1(bwd, {b.out_grad(0), v})};
      });
  r.register_op(name).set_attr<FCompute>(DeviceType::kCPU, FCompute(unary_compute<F, kFloatOnly>));
  const std::string value_name = F::kUsesOutput ? "output" : "data";
  r.register_op(bwd)
      .describe("Gradient of " + name + ": ograd times the derivative, from the forward " +
                value_name + ".")
      .set_input_names({"ograd", value_name})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(unary_backward_compute<F, kFloatOnly>));
}

void negative_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(),
                    map1<DT, DT>(out[0].size(), in[0].ptr<DT>(), out[0].ptr<DT>(), req[0],
                                 ctx.num_threads, [](DT x) { return static_cast<DT>(DT(0) - x); }));
}

}  // namespace

void register_elemwise_unary_ops(OpRegistry& r) {
  reg_unary<ReluF, false>(r, "relu", "Rectified linear unit: max(x, 0).");
  reg_unary<SigmoidF, true>(r, "sigmoid", "Logistic sigmoid: 1 / (1 + exp(-x)).");
  reg_unary<TanhF, true>(r, "tanh", "Hyperbolic tangent.");
  reg_unary<ExpF, true>(r, "exp", "Exponential e^x.");
  reg_unary<LogF, true>(r, "log", "Natural logarithm.");
  reg_unary<SqrtF, true>(r, "sqrt", "Square root.");
  reg_unary<SquareF, false>(r, "square", "Square x^2.");
  reg_unary<AbsF, false>(r, "abs", "Absolute value.");
  reg_unary<ReciprocalF, true>(r, "reciprocal", "Reciprocal 1/x.");
  reg_unary<SinF, true>(r, "sin", "Sine (radians).");
  reg_unary<CosF, true>(r, "cos", "Cosine (radians).");

  r.register_op("negative")
      .describe("Numerical negative: -x.")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, negative_compute)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{b.emit1("negative", {b.out_grad(0)})};
      });
}

}  // namespace weft::detail
