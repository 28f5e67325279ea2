// CUDA kernels of the array-with-scalar ops (_plus_scalar, _rminus_scalar, _power_scalar,
// _greater_scalar, ...) and their backward ops; semantics as ops/cpu/elemwise_scalar.cc.
#include <string>

#include "ops/cuda/elemwise_kernels.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/elemwise_params.h"

namespace weft::cuda {
namespace {

// The functors (PlusS, RDivSG, ...) are in ops/defs/elemwise_math.h, shared with the CPU
// kernels.

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
  r.kernels(name).set_attr(DeviceType::kCUDA, FCompute(scalar_compute<F>));
}

template <typename F, typename G>
void reg_scalar_with_backward(OpRegistry& r, const std::string& name) {
  reg_scalar<F>(r, name);
  r.kernels("_backward" + name).set_attr(DeviceType::kCUDA, FCompute(scalar_backward_compute<G>));
}

}  // namespace

void register_elemwise_scalar_kernels(OpRegistry& r) {
  reg_scalar<detail::PlusS>(r, "_plus_scalar");
  reg_scalar<detail::MinusS>(r, "_minus_scalar");
  reg_scalar<detail::RMinusS>(r, "_rminus_scalar");
  reg_scalar<detail::MulS>(r, "_mul_scalar");
  reg_scalar<detail::DivS>(r, "_div_scalar");
  reg_scalar_with_backward<detail::RDivS, detail::RDivSG>(r, "_rdiv_scalar");
  reg_scalar_with_backward<detail::PowS, detail::PowSG>(r, "_power_scalar");
  reg_scalar_with_backward<detail::RPowS, detail::RPowSG>(r, "_rpower_scalar");
  reg_scalar_with_backward<detail::MaxS, detail::MaxSG>(r, "_maximum_scalar");
  reg_scalar_with_backward<detail::MinS, detail::MinSG>(r, "_minimum_scalar");
  reg_scalar<detail::EqS>(r, "_equal_scalar");
  reg_scalar<detail::NeS>(r, "_not_equal_scalar");
  reg_scalar<detail::GtS>(r, "_greater_scalar");
  reg_scalar<detail::GeS>(r, "_greater_equal_scalar");
  reg_scalar<detail::LtS>(r, "_lesser_scalar");
  reg_scalar<detail::LeS>(r, "_lesser_equal_scalar");
}

}  // namespace weft::cuda
