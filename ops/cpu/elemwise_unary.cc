// CPU kernels of the unary elementwise math ops (relu, sigmoid, tanh, exp, log, sqrt, square, abs,
// negative, reciprocal, sin, cos) and their backward ops (definitions in
// ops/defs/elemwise_unary.cc).
#include <string>

#include "ops/cpu/elemwise_kernels.h"

namespace weft::detail {
namespace {

// The functors (ReluF, ...: fwd and grad) are in ops/defs/elemwise_math.h, shared with the CUDA
// kernels.

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
  r.kernels(name).set_attr<FCompute>(DeviceType::kCPU, FCompute(unary_compute<F, kFloatOnly>));
  r.kernels("_backward_" + name)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(unary_backward_compute<F, kFloatOnly>));
}

void negative_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(),
                    map1<DT, DT>(out[0].size(), in[0].ptr<DT>(), out[0].ptr<DT>(), req[0],
                                 ctx.num_threads, [](DT x) { return NegativeF::fwd(x); }));
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

  r.kernels("negative").set_attr<FCompute>(DeviceType::kCPU, negative_compute);
}

}  // namespace weft::detail
