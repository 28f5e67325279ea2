// FullyConnected (y = x·Wᵀ + b, flattening or on the last axis) and _backward_FullyConnected:
// oneDNN inner-product primitives for float32, GEMM loops otherwise.
#include <string>

#include "ops/conv_common.h"
#include "ops/defs/fc_params.h"

namespace weft::detail {
namespace {

int fc_num_inputs(const OpAttrs& a) { return a.params<FullyConnectedParam>().no_bias ? 2 : 3; }
std::vector<std::string> fc_input_names(const OpAttrs& a) {
  if (a.params<FullyConnectedParam>().no_bias) return {"data", "weight"};
  return {"data", "weight", "bias"};
}

bool fc_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<FullyConnectedParam>();
  const int64_t h = p.num_hidden;
  if (!p.no_bias) assign_input_shape(attrs, in, 2, Shape{h});
  Shape& data = in[0];
  // K from the weight when the data does not give it.
  int64_t k = in[1].rank_known() && in[1].ndim() == 2 ? in[1][1] : -1;
  if (!data.rank_known()) {
    if (!p.flatten && out[0].rank_known() && out[0].ndim() >= 1) {
      Shape d = out[0];
      d[d.ndim() - 1] = k;
      assign_input_shape(attrs, in, 0, d);
    }
    if (k >= 0)
      assign_input_shape(attrs, in, 1, Shape{h, k});
    else
      assign_input_shape(attrs, in, 1, Shape{h, -1});
    return false;
  }
  if (data.ndim() < 1)
    throw_shape_error(attrs, "data must have rank >= 1, got " + data.to_string());
  if (p.flatten) {
    bool known = true;
    for (int i = 1; i < data.ndim(); ++i) known = known && data[i] >= 0;
    if (known) k = data.prod(1, data.ndim());  // 1 for 1-d data
    // Backward: a single unknown trailing dim follows from K.
    if (!known && k >= 0 && data.ndim() == 2) {
      Shape d = data;
      d[1] = k;
      assign_input_shape(attrs, in, 0, d);
    }
    assign_input_shape(attrs, in, 1, Shape{h, k});
    assign_output_shape(attrs, out, 0, Shape{data[0], h});
    if (in[0][0] < 0 && out[0][0] >= 0) {
      Shape d = in[0];
      d[0] = out[0][0];
      assign_input_shape(attrs, in, 0, d);
    }
  } else {
    if (data.back() >= 0) k = data.back();
    Shape d = data;
    d[d.ndim() - 1] = k;
    assign_input_shape(attrs, in, 0, d);
    assign_input_shape(attrs, in, 1, Shape{h, k});
    Shape o = in[0];
    o[o.ndim() - 1] = h;
    assign_output_shape(attrs, out, 0, o);
    Shape back = out[0];
    back[back.ndim() - 1] = in[0].back();
    assign_input_shape(attrs, in, 0, back);
  }
  return all_known(in) && all_known(out);
}

// _backward_FullyConnected: inputs (out_grad, data, weight), outputs (d_data, d_weight[, d_bias]).
bool fc_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  const auto& p = attrs.params<FullyConnectedParam>();
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 2, out[1]);
  if (!p.no_bias) assign_output_shape(attrs, out, 2, Shape{p.num_hidden});
  return all_known(in) && all_known(out);
}

/// The GEMM sizes: M rows of data, K inputs, H outputs.
struct FcDims {
  int64_t m, k, h;
};
FcDims fc_dims(const FullyConnectedParam& p, const TensorView& data) {
  const Shape s = data.shape_of();
  if (p.flatten) return {s[0], s.prod(1, s.ndim()), p.num_hidden};
  return {s.prod(0, s.ndim() - 1), s[s.ndim() - 1], p.num_hidden};
}

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

void register_fully_connected_ops(OpRegistry& r) {
  r.register_op("FullyConnected")
      .describe(
          "Dense layer y = x·Wᵀ + b with weight (num_hidden, K) and bias (num_hidden,) unless "
          "no_bias. "
          "flatten=True views data as (N, K = prod(shape[1:])) and outputs (N, num_hidden); "
          "flatten=False "
          "applies to the last axis and outputs shape[:-1] + (num_hidden,).")
      .set_params<FullyConnectedParam>()
      .set_attr<FNumInputs>(fc_num_inputs)
      .set_attr<FListInputNames>(fc_input_names)
      .set_attr<FInferShape>(fc_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, fc_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        const bool bias = !b.attrs().params<FullyConnectedParam>().no_bias;
        auto g = b.emit_with_forward_attrs("_backward_FullyConnected",
                                           {b.out_grad(0), b.input(0), b.input(1)});
        std::vector<GradEntry> grads{g.at(0), g.at(1)};
        if (bias) grads.push_back(g.at(2));
        return grads;
      });

  r.register_op("_fused_fc_act")
      .describe(
          "FullyConnected followed by an activation applied as its output is written (a oneDNN "
          "post-op). Made by the executor's inference rewrite; inputs as FullyConnected; hidden "
          "attrs __act_type__ (relu, leaky, elu, sigmoid, tanh, softrelu, clip), __act_alpha__, "
          "__act_beta__.")
      .set_params<FullyConnectedParam>()
      .set_attr<FNumInputs>(fc_num_inputs)
      .set_attr<FListInputNames>(fc_input_names)
      .set_attr<FInferShape>(fc_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, fused_fc_forward);

  r.register_op("_backward_FullyConnected")
      .describe(
          "Gradient of FullyConnected: inputs (out_grad, data, weight); outputs (d_data, "
          "d_weight[, d_bias]).")
      .set_params<FullyConnectedParam>()
      .set_input_names({"out_grad", "data", "weight"})
      .set_attr<FNumOutputs>(fc_num_inputs)
      .set_attr<FListOutputNames>([](const OpAttrs& a) {
        std::vector<std::string> names{"data_grad", "weight_grad"};
        if (!a.params<FullyConnectedParam>().no_bias) names.push_back("bias_grad");
        return names;
      })
      .set_attr<FInferShape>(fc_backward_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, fc_backward);
}

}  // namespace weft::detail
