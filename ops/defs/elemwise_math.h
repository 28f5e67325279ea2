// The arithmetic of the elementwise ops, written once for both devices: the functors of the binary
// (elemwise_*, broadcast_*), scalar (_*_scalar) and unary math ops and their gradients. The CPU
// kernels (ops/cpu/elemwise_*.cc) and the CUDA kernels (ops/cuda/elemwise*.cu) differ only in how
// they loop (Note [Elementwise arithmetic for both devices]).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/defs/host_device.h"

namespace weft::detail {

// Note [Elementwise arithmetic for both devices]
// Each functor is a template over T, the computation type: the element type on the CPU, and on
// CUDA acc_t of it (float for the 16-bit floats). Its functions are WEFT_HOST_DEVICE, so the host
// compiler and nvcc's device pass compile the same text, and an op cannot compute one thing on
// the CPU and another on the GPU. The math functions go through elemwise_math, which calls the
// standard library on the host and CUDA's overloads on the device.

namespace elemwise_math {
// f(x) (f(a, b) for pow): std::f on the host, CUDA's overload of ::f on the device.
#ifdef __CUDA_ARCH__
#define WEFT_MATH_NS_
#else
#define WEFT_MATH_NS_ std
#endif
#define WEFT_MATH_FN_(f)             \
  template <typename T>              \
  WEFT_HOST_DEVICE inline T f(T x) { \
    return WEFT_MATH_NS_::f(x);      \
  }
WEFT_MATH_FN_(exp)
WEFT_MATH_FN_(log)
WEFT_MATH_FN_(tanh)
WEFT_MATH_FN_(sqrt)
WEFT_MATH_FN_(sin)
WEFT_MATH_FN_(cos)
#undef WEFT_MATH_FN_
template <typename T>
WEFT_HOST_DEVICE inline T pow(T a, T b) {
  return WEFT_MATH_NS_::pow(a, b);
}
#undef WEFT_MATH_NS_
}  // namespace elemwise_math

/// Division that does not trap: 0 for an integer zero divisor, no trap on INT_MIN / -1; plain for
/// floats.
template <typename T>
WEFT_HOST_DEVICE inline T safe_div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return T(0);
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return static_cast<T>(T(0) - a);
    }
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

/// pow for any arithmetic type. Integers are raised exactly, by squaring (a double pow may miss an
/// exact integer result by an ulp, which the truncation would turn into an off-by-one); a negative
/// exponent gives 0 but for a base of +-1.
template <typename T>
WEFT_HOST_DEVICE inline T any_pow(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (b < 0) {
        if (a == 1) return T(1);
        if (a == T(-1)) return (b % 2 == 0) ? T(1) : T(-1);
        return T(0);
      }
    }
    // Unsigned arithmetic: wraps like the two's complement product, without signed overflow.
    uint64_t result = 1, base = static_cast<uint64_t>(static_cast<int64_t>(a));
    for (uint64_t e = static_cast<uint64_t>(b); e != 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return static_cast<T>(static_cast<int64_t>(result));
  } else {
    return elemwise_math::pow(a, b);
  }
}

// ---- binary forward: f(a, b) -------------------------------------------------------------------

#define WEFT_BINARY_FUNCTOR(Name, expr)             \
  struct Name {                                     \
    template <typename T>                           \
    WEFT_HOST_DEVICE T operator()(T a, T b) const { \
      return static_cast<T>(expr);                  \
    }                                               \
  }
WEFT_BINARY_FUNCTOR(AddF, a + b);
WEFT_BINARY_FUNCTOR(SubF, a - b);
WEFT_BINARY_FUNCTOR(MulF, a* b);
WEFT_BINARY_FUNCTOR(DivF, safe_div(a, b));
WEFT_BINARY_FUNCTOR(PowF, any_pow(a, b));
WEFT_BINARY_FUNCTOR(MaxF, a > b ? a : b);
WEFT_BINARY_FUNCTOR(MinF, a < b ? a : b);
WEFT_BINARY_FUNCTOR(EqF, a == b);
WEFT_BINARY_FUNCTOR(NeF, a != b);
WEFT_BINARY_FUNCTOR(GtF, a > b);
WEFT_BINARY_FUNCTOR(GeF, a >= b);
WEFT_BINARY_FUNCTOR(LtF, a < b);
WEFT_BINARY_FUNCTOR(LeF, a <= b);
#undef WEFT_BINARY_FUNCTOR

// ---- binary backward: the lhs / rhs gradient from (head gradient g, lhs a, rhs b) -------------

struct AddG {
  template <typename T>
  WEFT_HOST_DEVICE static T lhs(T g, T, T) {
    return g;
  }
  template <typename T>
  WEFT_HOST_DEVICE static T rhs(T g, T, T) {
    return g;
  }
};
struct SubG {
  template <typename T>
  WEFT_HOST_DEVICE static T lhs(T g, T, T) {
    return g;
  }
  template <typename T>
  WEFT_HOST_DEVICE static T rhs(T g, T, T) {
    return static_cast<T>(T(0) - g);
  }
};
struct MulG {
  template <typename T>
  WEFT_HOST_DEVICE static T lhs(T g, T, T b) {
    return static_cast<T>(g * b);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T rhs(T g, T a, T) {
    return static_cast<T>(g * a);
  }
};
struct DivG {
  template <typename T>
  WEFT_HOST_DEVICE static T lhs(T g, T, T b) {
    return safe_div(g, b);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T rhs(T g, T a, T b) {
    return safe_div(static_cast<T>(T(0) - g * a), static_cast<T>(b * b));
  }
};
struct PowG {  // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a); integers through double
  template <typename T>
  WEFT_HOST_DEVICE static T lhs(T g, T a, T b) {
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    return static_cast<T>(C(g) * C(b) * elemwise_math::pow(C(a), C(b) - C(1)));
  }
  template <typename T>
  WEFT_HOST_DEVICE static T rhs(T g, T a, T b) {
    using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
    return static_cast<T>(C(g) * elemwise_math::pow(C(a), C(b)) * elemwise_math::log(C(a)));
  }
};
struct MaxG {  // ties go to lhs, as MXNet's ge/lt pair
  template <typename T>
  WEFT_HOST_DEVICE static T lhs(T g, T a, T b) {
    return a >= b ? g : T(0);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T rhs(T g, T a, T b) {
    return a < b ? g : T(0);
  }
};
struct MinG {
  template <typename T>
  WEFT_HOST_DEVICE static T lhs(T g, T a, T b) {
    return a <= b ? g : T(0);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T rhs(T g, T a, T b) {
    return a > b ? g : T(0);
  }
};

// ---- array with scalar: f(x, s) for "x op s" -------------------------------------------------

/// f(s, x): the reversed scalar ops (_rminus_scalar: s - x).
template <typename F>
struct Reversed {
  template <typename T>
  WEFT_HOST_DEVICE T operator()(T x, T s) const {
    return F{}(s, x);
  }
};
using PlusS = AddF;
using MinusS = SubF;
using RMinusS = Reversed<SubF>;
using MulS = MulF;
using DivS = DivF;
using RDivS = Reversed<DivF>;
using PowS = PowF;
using RPowS = Reversed<PowF>;
using MaxS = MaxF;
using MinS = MinF;
using EqS = EqF;
using NeS = NeF;
using GtS = GtF;
using GeS = GeF;
using LtS = LtF;
using LeS = LeF;

// Backward: the derivative factor d(x op s)/dx from (v, s), v being the forward input, or the
// output when kUsesOutput (the definitions in ops/defs/elemwise_scalar.cc give the backward op
// that input).
struct RDivSG {  // d(s/x)/dx = -s/x^2
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x, T s) {
    return -s / (x * x);
  }
};
struct PowSG {  // d(x^s)/dx = s x^(s-1)
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x, T s) {
    return s * elemwise_math::pow(x, s - T(1));
  }
};
struct RPowSG {  // d(s^x)/dx = s^x log(s) = y log(s)
  static constexpr bool kUsesOutput = true;
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T y, T s) {
    return y * elemwise_math::log(s);
  }
};
struct MaxSG {  // MXNet: ge
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x, T s) {
    return x >= s ? T(1) : T(0);
  }
};
struct MinSG {  // MXNet: le
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x, T s) {
    return x <= s ? T(1) : T(0);
  }
};

// ---- unary math: fwd(x), and grad(v) in terms of the value the backward op receives ----------
// (the forward input, or the output when kUsesOutput; ops/defs/elemwise_unary.cc gives the
// backward op that input).

struct ReluF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return x > T(0) ? x : T(0);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T y) {
    return y > T(0) ? T(1) : T(0);
  }
};
struct SigmoidF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return T(1) / (T(1) + elemwise_math::exp(-x));
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T y) {
    return y * (T(1) - y);
  }
};
struct TanhF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return elemwise_math::tanh(x);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T y) {
    return T(1) - y * y;
  }
};
struct ExpF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return elemwise_math::exp(x);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T y) {
    return y;
  }
};
struct LogF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return elemwise_math::log(x);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x) {
    return T(1) / x;
  }
};
struct SqrtF {
  static constexpr bool kUsesOutput = true;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return elemwise_math::sqrt(x);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T y) {
    return T(0.5) / y;
  }
};
struct SquareF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return static_cast<T>(x * x);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x) {
    return static_cast<T>(T(2) * x);
  }
};
struct AbsF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else {
      return x < T(0) ? static_cast<T>(T(0) - x) : x;
    }
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x) {
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
  WEFT_HOST_DEVICE static T fwd(T x) {
    return T(1) / x;
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x) {
    return T(-1) / (x * x);
  }
};
struct SinF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return elemwise_math::sin(x);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x) {
    return elemwise_math::cos(x);
  }
};
struct CosF {
  static constexpr bool kUsesOutput = false;
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return elemwise_math::cos(x);
  }
  template <typename T>
  WEFT_HOST_DEVICE static T grad(T x) {
    return -elemwise_math::sin(x);
  }
};
/// negative has no backward op of its own (its gradient is negative again).
struct NegativeF {
  template <typename T>
  WEFT_HOST_DEVICE static T fwd(T x) {
    return static_cast<T>(T(0) - x);
  }
};

}  // namespace weft::detail
