// CPU kernels of FullyConnected (y = x·Wᵀ + b), _fused_fc_act and _backward_FullyConnected
// (definitions in ops/defs/fully_connected.cc): oneDNN inner-product primitives for float32, GEMM
// loops otherwise.
#include <string>

#include "ops/cpu/conv_kernels.h"
#include "ops/defs/fc_params.h"

namespace weft::detail {
namespace {

#if WEFT_USE_ONEDNN
using dnnl::memory;

struct FcFwdPlan {
  dnnl::inner_product_forward prim;
  memory::desc src, wei, bias, dst;
};

const FcFwdPlan& fc_fwd_plan(const FcDims& d, bool bias, const FusedAct& act) {
  const std::string key = "FullyConnected.fwd|" + std::to_string(d.m) + "," + std::to_string(d.k) +
                          "," + std::to_string(d.h) + (bias ? "|b" : "|nb") + act.key();
  return dnnl_util::cached<FcFwdPlan>(key, [&] {
    using namespace dnnl;
    FcFwdPlan plan;
    plan.src = dnnl_util::plain_desc({d.m, d.k}, DType::kFloat32);
    plan.wei = dnnl_util::plain_desc({d.h, d.k}, DType::kFloat32);
    plan.bias = dnnl_util::plain_desc({d.h}, DType::kFloat32);
    plan.dst = dnnl_util::plain_desc({d.m, d.h}, DType::kFloat32);
    auto desc = bias ? inner_product_forward::desc(prop_kind::forward_inference, plan.src, plan.wei,
                                                   plan.bias, plan.dst)
                     : inner_product_forward::desc(prop_kind::forward_inference, plan.src, plan.wei,
                                                   plan.dst);
    // The activation of _fused_fc_act applies as the output is written (a post-op).
    primitive_attr attr;
    if (!act.none()) attr.set_post_ops(fused_post_ops(FusedPostOps{false, act}));
    plan.prim = inner_product_forward(
        inner_product_forward::primitive_desc(desc, attr, dnnl_util::cpu_engine()));
    return plan;
  });
}

struct FcBwdPlan {
  dnnl::inner_product_backward_data data_prim;
  dnnl::inner_product_backward_weights weights_prim;
  memory::desc src, wei, bias, dst;
};

const FcBwdPlan& fc_bwd_plan(const FcDims& d, bool bias) {
  const std::string key = "FullyConnected.bwd|" + std::to_string(d.m) + "," + std::to_string(d.k) +
                          "," + std::to_string(d.h) + (bias ? "|b" : "|nb");
  return dnnl_util::cached<FcBwdPlan>(key, [&] {
    using namespace dnnl;
    FcBwdPlan plan;
    auto& eng = dnnl_util::cpu_engine();
    plan.src = dnnl_util::plain_desc({d.m, d.k}, DType::kFloat32);
    plan.wei = dnnl_util::plain_desc({d.h, d.k}, DType::kFloat32);
    plan.bias = dnnl_util::plain_desc({d.h}, DType::kFloat32);
    plan.dst = dnnl_util::plain_desc({d.m, d.h}, DType::kFloat32);
    auto fwd_desc = bias ? inner_product_forward::desc(prop_kind::forward_training, plan.src,
                                                       plan.wei, plan.bias, plan.dst)
                         : inner_product_forward::desc(prop_kind::forward_training, plan.src,
                                                       plan.wei, plan.dst);
    inner_product_forward::primitive_desc fwd_pd(fwd_desc, eng);
    inner_product_backward_data::desc data_desc(plan.src, plan.wei, plan.dst);
    plan.data_prim = inner_product_backward_data(
        inner_product_backward_data::primitive_desc(data_desc, eng, fwd_pd));
    auto wt_desc =
        bias ? inner_product_backward_weights::desc(plan.src, plan.wei, plan.bias, plan.dst)
             : inner_product_backward_weights::desc(plan.src, plan.wei, plan.dst);
    plan.weights_prim = inner_product_backward_weights(
        inner_product_backward_weights::primitive_desc(wt_desc, eng, fwd_pd));
    return plan;
  });
}
#endif

[[maybe_unused]] bool plain_write(OpReq r) { return r == OpReq::kWrite || r == OpReq::kInplace; }

// y = act(x·Wᵀ + b); `act` is none for FullyConnected itself.
void fc_forward_act(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out,
                    const FusedAct& act) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<FullyConnectedParam>();
  const FcDims d = fc_dims(p, in[0]);
  if (d.m == 0) return;
  const bool add = req[0] == OpReq::kAdd;
#if WEFT_USE_ONEDNN
  if (in[0].dtype() == DType::kFloat32 && !add && d.k > 0) {
    const FcFwdPlan& plan = fc_fwd_plan(d, !p.no_bias, act);
    dnnl_util::ScopedThreads threads(ctx.num_threads);
    auto& eng = dnnl_util::cpu_engine();
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(plan.src, eng, in[0].raw())},
                                         {DNNL_ARG_WEIGHTS, memory(plan.wei, eng, in[1].raw())},
                                         {DNNL_ARG_DST, memory(plan.dst, eng, out[0].raw())}};
    if (!p.no_bias) args.emplace(DNNL_ARG_BIAS, memory(plan.bias, eng, in[2].raw()));
    dnnl_util::execute(plan.prim, args);
    return;
  }
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    DT* y = out[0].ptr<DT>();
    gemm<DT>(false, true, d.m, d.h, d.k, DT(1), in[0].ptr<DT>(), d.k, in[1].ptr<DT>(), d.k,
             add ? DT(1) : DT(0), y, d.h, ctx.num_threads);
    if (!p.no_bias) {
      const DT* b = in[2].ptr<DT>();
      parallel_for(d.m, std::max<int64_t>(1, 4096 / d.h), ctx.num_threads,
                   [&](int64_t r0, int64_t r1) {
                     for (int64_t r = r0; r < r1; ++r)
                       for (int64_t j = 0; j < d.h; ++j) y[r * d.h + j] += b[j];
                   });
    }
  });
  if (!act.none()) {
    WEFT_CHECK_AS(NotImplemented, in[0].dtype() == DType::kFloat32 && !add)
        << attrs.where() << ": the fused activation is float32 only (and never accumulates)";
    fused_act_apply(act, out[0].ptr<float>(), out[0].size(), ctx.num_threads);
  }
}

void fc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  fc_forward_act(attrs, ctx, in, req, out, FusedAct{});
}

// _fused_fc_act: FullyConnected → activation, made by the executor's inference rewrite
// (graph/fuse.cc); the activation travels as hidden attributes (FusedAct).
void fused_fc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  fc_forward_act(attrs, ctx, in, req, out, fused_act_from_attrs(attrs));
}

void fc_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<FullyConnectedParam>();
  const bool bias = !p.no_bias;
  const FcDims d = fc_dims(p, in[1]);
  bool do_data = writes(req[0]), do_weights = writes(req[1]), do_bias = bias && writes(req[2]);
#if WEFT_USE_ONEDNN
  if (in[0].dtype() == DType::kFloat32 && d.m > 0 && d.k > 0) {
    const FcBwdPlan& plan = fc_bwd_plan(d, bias);
    dnnl_util::ScopedThreads threads(ctx.num_threads);
    auto& eng = dnnl_util::cpu_engine();
    if (do_data && plain_write(req[0])) {
      dnnl_util::execute(plan.data_prim,
                         {{DNNL_ARG_DIFF_DST, memory(plan.dst, eng, in[0].raw())},
                          {DNNL_ARG_WEIGHTS, memory(plan.wei, eng, in[2].raw())},
                          {DNNL_ARG_DIFF_SRC, memory(plan.src, eng, out[0].raw())}});
      do_data = false;
    }
    // The weight primitive writes weight and bias gradients together.
    if (do_weights && plain_write(req[1]) && (!bias || plain_write(req[2]))) {
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, memory(plan.src, eng, in[1].raw())},
          {DNNL_ARG_DIFF_DST, memory(plan.dst, eng, in[0].raw())},
          {DNNL_ARG_DIFF_WEIGHTS, memory(plan.wei, eng, out[1].raw())}};
      if (bias) args.emplace(DNNL_ARG_DIFF_BIAS, memory(plan.bias, eng, out[2].raw()));
      dnnl_util::execute(plan.weights_prim, args);
      do_weights = false;
      do_bias = false;
    }
  }
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const DT* dy = in[0].ptr<DT>();
    if (do_data) {
      gemm<DT>(false, false, d.m, d.k, d.h, DT(1), dy, d.h, in[2].ptr<DT>(), d.k,
               req[0] == OpReq::kAdd ? DT(1) : DT(0), out[0].ptr<DT>(), d.k, ctx.num_threads);
    }
    if (do_weights) {
      DT* dw = out[1].ptr<DT>();
      if (d.m == 0) {
        if (req[1] != OpReq::kAdd) std::fill(dw, dw + d.h * d.k, DT(0));
      } else {
        gemm<DT>(true, false, d.h, d.k, d.m, DT(1), dy, d.h, in[1].ptr<DT>(), d.k,
                 req[1] == OpReq::kAdd ? DT(1) : DT(0), dw, d.k, ctx.num_threads);
      }
    }
    if (do_bias)
      bias_backward_ref<DT>(dy, d.m, d.h, 1, out[2].ptr<DT>(), req[2] == OpReq::kAdd,
                            ctx.num_threads);
  });
}

}  // namespace

void register_fully_connected_kernels(OpRegistry& r) {
  r.kernels("FullyConnected").set_attr<FCompute>(DeviceType::kCPU, fc_forward);
  r.kernels("_fused_fc_act").set_attr<FCompute>(DeviceType::kCPU, fused_fc_forward);
  r.kernels("_backward_FullyConnected").set_attr<FCompute>(DeviceType::kCPU, fc_backward);
}

}  // namespace weft::detail
