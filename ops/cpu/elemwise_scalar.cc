// CPU kernels of the array-with-scalar ops (_plus_scalar, _rminus_scalar, _power_scalar,
// _greater_scalar, ...) and their backward ops (definitions in ops/defs/elemwise_scalar.cc).
#include <string>

#include "ops/cpu/elemwise_kernels.h"
#include "ops/defs/elemwise_params.h"

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
// output per kUsesOutput (the definitions in ops/defs/elemwise_scalar.cc give the backward op
// that input).
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

template <typename F>
Op& reg_scalar_kernel(OpRegistry& r, const std::string& name) {
  return r.register_op(name).set_attr<FCompute>(DeviceType::kCPU, scalar_compute<F>);
}

template <typename G>
void reg_scalar_backward_kernel(OpRegistry& r, Op& forward) {
  r.register_op("_backward" + forward.name())
      .set_attr<FCompute>(DeviceType::kCPU, scalar_backward_compute<G>);
}

}  // namespace

void register_elemwise_scalar_kernels(OpRegistry& r) {
  reg_scalar_kernel<PlusS>(r, "_plus_scalar");
  reg_scalar_kernel<MinusS>(r, "_minus_scalar");
  reg_scalar_kernel<RMinusS>(r, "_rminus_scalar");
  reg_scalar_kernel<MulS>(r, "_mul_scalar");
  reg_scalar_kernel<DivS>(r, "_div_scalar");
  reg_scalar_backward_kernel<RDivSG>(r, reg_scalar_kernel<RDivS>(r, "_rdiv_scalar"));
  reg_scalar_backward_kernel<PowSG>(r, reg_scalar_kernel<PowS>(r, "_power_scalar"));
  reg_scalar_backward_kernel<RPowSG>(r, reg_scalar_kernel<RPowS>(r, "_rpower_scalar"));
  reg_scalar_backward_kernel<MaxSG>(r, reg_scalar_kernel<MaxS>(r, "_maximum_scalar"));
  reg_scalar_backward_kernel<MinSG>(r, reg_scalar_kernel<MinS>(r, "_minimum_scalar"));

  reg_scalar_kernel<EqS>(r, "_equal_scalar");
  reg_scalar_kernel<NeS>(r, "_not_equal_scalar");
  reg_scalar_kernel<GtS>(r, "_greater_scalar");
  reg_scalar_kernel<GeS>(r, "_greater_equal_scalar");
  reg_scalar_kernel<LtS>(r, "_lesser_scalar");
  reg_scalar_kernel<LeS>(r, "_lesser_equal_scalar");
}

}  // namespace weft::detail
