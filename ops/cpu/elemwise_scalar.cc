// CPU kernels of the array-with-scalar ops (_plus_scalar, _rminus_scalar, _power_scalar,
// _greater_scalar, ...) and their backward ops (definitions in ops/defs/elemwise_scalar.cc).
#include <string>

#include "ops/cpu/elemwise_kernels.h"
#include "ops/defs/elemwise_params.h"

namespace weft::detail {
namespace {

// The functors (PlusS, RDivSG, ...) are in ops/defs/elemwise_math.h, shared with the CUDA
// kernels.

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

// Returns `name`, for reg_scalar_backward_kernel.
template <typename F>
std::string reg_scalar_kernel(OpRegistry& r, const std::string& name) {
  r.kernels(name).set_attr<FCompute>(DeviceType::kCPU, scalar_compute<F>);
  return name;
}

template <typename G>
void reg_scalar_backward_kernel(OpRegistry& r, const std::string& forward) {
  r.kernels("_backward" + forward).set_attr<FCompute>(DeviceType::kCPU, scalar_backward_compute<G>);
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
