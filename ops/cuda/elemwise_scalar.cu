// CUDA kernels of the array-with-scalar ops (_plus_scalar, _rminus_scalar, _power_scalar,
// _greater_scalar, ...) and their backward ops; semantics as ops/cpu/elemwise_scalar.cc.
#include <string>

#include "ops/cuda/elemwise_kernels.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/elemwise_params.h"

namespace weft::cuda {
namespace {

// f(x, s) for "x op s"; the reversed ops swap the operands.
#define WEFT_SCALAR_FUNCTOR(Name, expr)       \
  struct Name {                               \
    template <typename C>                     \
    __device__ C operator()(C x, C s) const { \
      return static_cast<C>(expr);            \
    }                                         \
  }

WEFT_SCALAR_FUNCTOR(PlusS, x + s);
WEFT_SCALAR_FUNCTOR(MinusS, x - s);
WEFT_SCALAR_FUNCTOR(RMinusS, s - x);
WEFT_SCALAR_FUNCTOR(MulS, x* s);
WEFT_SCALAR_FUNCTOR(DivS, safe_div(x, s));
WEFT_SCALAR_FUNCTOR(RDivS, safe_div(s, x));
WEFT_SCALAR_FUNCTOR(PowS, any_pow(x, s));
WEFT_SCALAR_FUNCTOR(RPowS, any_pow(s, x));
WEFT_SCALAR_FUNCTOR(MaxS, x > s ? x : s);
WEFT_SCALAR_FUNCTOR(MinS, x < s ? x : s);
WEFT_SCALAR_FUNCTOR(EqS, x == s);
WEFT_SCALAR_FUNCTOR(NeS, x != s);
WEFT_SCALAR_FUNCTOR(GtS, x > s);
WEFT_SCALAR_FUNCTOR(GeS, x >= s);
WEFT_SCALAR_FUNCTOR(LtS, x < s);
WEFT_SCALAR_FUNCTOR(LeS, x <= s);
#undef WEFT_SCALAR_FUNCTOR

/// f(x, s) with s in the computation type.
template <typename F, typename C>
struct BindScalar {
  C s;
  __device__ C operator()(C x) const { return F{}(x, s); }
};
/// f(x, s) computed in double (integer inputs with is_int false).
template <typename F>
struct BindDouble {
  double s;
  template <typename C>
  __device__ C operator()(C x) const {
    return static_cast<C>(F{}(static_cast<double>(x), s));
  }
};

// Backward: derivative factor d(x op s)/dx from (v, s), v being the forward input or output (as
// the CPU op registered it).
struct RDivSG {  // -s/x^2
  template <typename C>
  __device__ static C grad(C x, C s) {
    return -s / (x * x);
  }
};
struct PowSG {  // s x^(s-1)
  template <typename C>
  __device__ static C grad(C x, C s) {
    return s * pow(x, s - C(1));
  }
};
struct RPowSG {  // y log(s), from the output y
  template <typename C>
  __device__ static C grad(C y, C s) {
    return y * log(s);
  }
};
struct MaxSG {
  template <typename C>
  __device__ static C grad(C x, C s) {
    return x >= s ? C(1) : C(0);
  }
};
struct MinSG {
  template <typename C>
  __device__ static C grad(C x, C s) {
    return x <= s ? C(1) : C(0);
  }
};

template <typename G, typename C>
struct ScalarGrad {
  C s;
  __device__ C operator()(C g, C v) const { return g * G::grad(v, s); }
};

template <typename F>
void scalar_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::ScalarParam>();
  const char* name = attrs.op->name().c_str();
  WEFT_CUDA_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    using C = acc_t<DT>;
    const int64_t n = out[0].size();
    const DT* x = dptr<const DT>(in[0]);
    DT* y = dptr<DT>(out[0]);
    if constexpr (!std::is_integral_v<DT>) {
      const C s =
          kIsFloat16<DT> ? static_cast<C>(static_cast<float>(p.scalar)) : static_cast<C>(p.scalar);
      map1<DT, DT>(ctx, name, n, x, y, req[0], BindScalar<F, C>{s});
    } else if (p.is_int) {
      const C s = static_cast<C>(static_cast<int64_t>(p.scalar));
      map1<DT, DT>(ctx, name, n, x, y, req[0], BindScalar<F, C>{s});
    } else {
      map1<DT, DT>(ctx, name, n, x, y, req[0], BindDouble<F>{p.scalar});
    }
  });
}

// inputs (ograd, value) -> ograd * G::grad(value, scalar).
template <typename G>
void scalar_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                             std::span<const TensorView> in, std::span<const OpReq> req,
                             std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::ScalarParam>();
  WEFT_CUDA_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    using C = acc_t<DT>;
    map2<DT, DT>(ctx, attrs.op->name().c_str(), out[0].size(), dptr<const DT>(in[0]),
                 dptr<const DT>(in[1]), dptr<DT>(out[0]), req[0],
                 ScalarGrad<G, C>{static_cast<C>(p.scalar)});
  });
}

template <typename F>
void reg_scalar(OpRegistry& r, const std::string& name) {
  r.register_op(name).set_attr(DeviceType::kCUDA, FCompute(scalar_compute<F>), "cuda");
}

template <typename F, typename G>
void reg_scalar_with_backward(OpRegistry& r, const std::string& name) {
  reg_scalar<F>(r, name);
  r.register_op("_backward" + name)
      .set_attr(DeviceType::kCUDA, FCompute(scalar_backward_compute<G>), "cuda");
}

}  // namespace

void register_elemwise_scalar_kernels(OpRegistry& r) {
  reg_scalar<PlusS>(r, "_plus_scalar");
  reg_scalar<MinusS>(r, "_minus_scalar");
  reg_scalar<RMinusS>(r, "_rminus_scalar");
  reg_scalar<MulS>(r, "_mul_scalar");
  reg_scalar<DivS>(r, "_div_scalar");
  reg_scalar_with_backward<RDivS, RDivSG>(r, "_rdiv_scalar");
  reg_scalar_with_backward<PowS, PowSG>(r, "_power_scalar");
  reg_scalar_with_backward<RPowS, RPowSG>(r, "_rpower_scalar");
  reg_scalar_with_backward<MaxS, MaxSG>(r, "_maximum_scalar");
  reg_scalar_with_backward<MinS, MinSG>(r, "_minimum_scalar");
  reg_scalar<EqS>(r, "_equal_scalar");
  reg_scalar<NeS>(r, "_not_equal_scalar");
  reg_scalar<GtS>(r, "_greater_scalar");
  reg_scalar<GeS>(r, "_greater_equal_scalar");
  reg_scalar<LtS>(r, "_lesser_scalar");
  reg_scalar<LeS>(r, "_lesser_equal_scalar");
}

}  // namespace weft::cuda
