// CUDA kernels of FullyConnected, _fused_fc_act and their backward op: cuBLAS GEMMs (blas.cc,
// Note [cuBLAS precision]) with the CPU kernel's operand choices (ops/cpu/fully_connected.cc).
#include "ops/cuda/blas_kernels.h"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/register.h"
#include "ops/defs/conv_common.h"
#include "ops/defs/fc_params.h"

namespace weft::cuda {
namespace {

using detail::fc_dims;
using detail::FcDims;
using detail::FullyConnectedParam;
using detail::FusedAct;

bool writes(OpReq r) { return r != OpReq::kNull; }
bool adds(OpReq r) { return r == OpReq::kAdd; }

void fc_forward_act(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out,
                    const FusedAct& act) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<FullyConnectedParam>();
  const FcDims d = fc_dims(p, in[0]);
  if (d.m == 0) return;
  const DType dt = in[0].dtype();
  const std::string where = attrs.where();
  gemm(ctx, dt, where.c_str(), false, true, d.m, d.h, d.k, in[0].raw(), d.k, in[1].raw(), d.k,
       adds(req[0]), out[0].raw(), d.h);
  if (!p.no_bias) {
    add_bias_rows(dt, out[0].raw(), in[2].raw(), d.m, d.h, stream_of(ctx));
    check_launch("FullyConnected bias", ctx);
  }
  if (!act.none()) {
    WEFT_CHECK_AS(NotImplemented, act.kind != FusedAct::Kind::kPRelu && !adds(req[0]))
        << where << ": the fused activation on CUDA is not prelu and never accumulates";
    fused_act_inplace(dt, static_cast<int>(act.kind), act.alpha, act.beta, out[0].raw(), d.m * d.h,
                      stream_of(ctx));
    check_launch("_fused_fc_act activation", ctx);
  }
}

void fc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  fc_forward_act(attrs, ctx, in, req, out, FusedAct{});
}

void fused_fc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  fc_forward_act(attrs, ctx, in, req, out, detail::fused_act_from_attrs(attrs));
}

// in: out_grad, data, weight; out: d_data, d_weight[, d_bias].
void fc_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<FullyConnectedParam>();
  const FcDims d = fc_dims(p, in[1]);
  const DType dt = in[0].dtype();
  const std::string where = attrs.where();
  if (writes(req[0]))
    gemm(ctx, dt, where.c_str(), false, false, d.m, d.k, d.h, in[0].raw(), d.h, in[2].raw(), d.k,
         adds(req[0]), out[0].raw(), d.k);
  if (writes(req[1]))
    gemm(ctx, dt, where.c_str(), true, false, d.h, d.k, d.m, in[0].raw(), d.h, in[1].raw(), d.k,
         adds(req[1]), out[1].raw(), d.k);
  if (!p.no_bias && writes(req[2])) {
    bias_grad_rows(dt, in[0].raw(), d.m, d.h, out[2].raw(), adds(req[2]), stream_of(ctx));
    check_launch("FullyConnected bias gradient", ctx);
  }
}

}  // namespace

void register_fully_connected_kernels(OpRegistry& r) {
  r.kernels("FullyConnected").set_attr<FCompute>(DeviceType::kCUDA, fc_forward);
  r.kernels("_fused_fc_act").set_attr<FCompute>(DeviceType::kCUDA, fused_fc_forward);
  r.kernels("_backward_FullyConnected").set_attr<FCompute>(DeviceType::kCUDA, fc_backward);
}

}  // namespace weft::cuda
