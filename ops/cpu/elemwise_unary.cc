// CPU kernels of the unary elementwise math ops (relu, sigmoid, tanh, exp, log, sqrt, square, abs,
// negative, reciprocal, sin, cos) and their backward ops (definitions in
// ops/defs/elemwise_unary.cc).
#include <string>

#include "ops/cpu/elemwise_kernels.h"

namespace weft::detail {
namespace {

// Each functor has fwd(x) and grad(v): the derivative expressed in terms of the value the
// backward op receives (the forward input, or the output when kUsesOutput; the definitions in
// ops/defs/elemwise_unary.cc give the backward op that input).
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

template <typename F, bool kFloatOnly>
void reg_unary_kernels(OpRegistry& r, const std::string& name) {
  r.register_op(name).set_attr<FCompute>(DeviceType::kCPU, FCompute(unary_compute<F, kFloatOnly>));
  r.register_op("_backward_" + name)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(unary_backward_compute<F, kFloatOnly>));
}

void negative_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(),
                    map1<DT, DT>(out[0].size(), in[0].ptr<DT>(), out[0].ptr<DT>(), req[0],
                                 ctx.num_threads, [](DT x) { return static_cast<DT>(DT(0) - x); }));
}

}  // namespace

void register_elemwise_unary_kernels(OpRegistry& r) {
  reg_unary_kernels<ReluF, false>(r, "relu");
  reg_unary_kernels<SigmoidF, true>(r, "sigmoid");
  reg_unary_kernels<TanhF, true>(r, "tanh");
  reg_unary_kernels<ExpF, true>(r, "exp");
  reg_unary_kernels<LogF, true>(r, "log");
  reg_unary_kernels<SqrtF, true>(r, "sqrt");
  reg_unary_kernels<SquareF, false>(r, "square");
  reg_unary_kernels<AbsF, false>(r, "abs");
  reg_unary_kernels<ReciprocalF, true>(r, "reciprocal");
  reg_unary_kernels<SinF, true>(r, "sin");
  reg_unary_kernels<CosF, true>(r, "cos");

  r.register_op("negative").set_attr<FCompute>(DeviceType::kCPU, negative_compute);
}

}  // namespace weft::detail
