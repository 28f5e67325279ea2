// _fused_conv_bn_act: the convolution ops made by the executor's inference rewrite
// (graph/fuse.cc). oneDNN convolution with post-ops for float32, the im2col reference otherwise.
#include <atomic>
#include <cmath>
#include <string>

#include "ops/conv_common.h"

namespace weft::detail {
namespace {

// ---- _fused_conv_bn_act: Convolution → BatchNorm (inference) → optional ReLU in one kernel ----
// Made only by the graph executor's inference rewrite (graph/fuse.cc). Inputs: data, weight,
// [bias], gamma, beta, moving_mean, moving_var. Conv params as Convolution; the BatchNorm and
// activation settings travel as hidden attributes (`__bn_eps__`, `__bn_fix_gamma__`,
// `__act_type__`). The BatchNorm is folded into the weights and bias: w' = w * s, b' = beta +
// (b - mean) * s with s = gamma / sqrt(var + eps). The folded copies are kept in the op state and
// recomputed only when one of their inputs changes (storage id and version, OpContext).

std::atomic<uint64_t> g_fused_weight_ids{uint64_t{1} << 62};  // disjoint from storage ids

struct FusedConvState final : OpState {
  ConvolutionParam p;
  float eps = 1e-3f;
  bool fix_gamma = true;
  bool relu = false;
  std::vector<float> w, b;
  Shape w_shape, b_shape;
  std::vector<std::pair<uint64_t, uint64_t>> seen;  // identity of the inputs folded last
  uint64_t id = g_fused_weight_ids.fetch_add(1);
  uint64_t version = 0;
};

int fused_num_inputs(const OpAttrs& a) { return conv_num_inputs(a) + 4; }
std::vector<std::string> fused_input_names(const OpAttrs& a) {
  std::vector<std::string> n = conv_input_names(a);
  for (const char* s : {"gamma", "beta", "moving_mean", "moving_var"}) n.push_back(s);
  return n;
}

bool fused_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const int nconv = conv_num_inputs(attrs);
  std::vector<Shape> conv_in(in.begin(), in.begin() + nconv);
  conv_infer_shape(attrs, conv_in, out);
  std::copy(conv_in.begin(), conv_in.end(), in.begin());
  const Shape c{attrs.params<ConvolutionParam>().num_filter};
  for (int i = nconv; i < nconv + 4; ++i) assign_input_shape(attrs, in, i, c);
  return all_known(in) && all_known(out);
}

std::string hidden(const OpAttrs& a, const char* key, const char* fallback) {
  auto it = a.dict.find(key);
  return it == a.dict.end() ? fallback : it->second;
}

std::vector<ResourceRequest> fused_resources(const OpAttrs& attrs, const std::vector<Shape>& in,
                                             const std::vector<Shape>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const ConvGeom g = conv_geom(p, in[0], out[0]);
  size_t bytes = conv_ref_workspace_bytes(g);
#if WEFT_USE_ONEDNN
  bytes = std::max(
      bytes, dnnl_conv_workspace(g, true, false, hidden(attrs, "__act_type__", "none") == "relu"));
#endif
  return {{ResourceRequest::Kind::kWorkspace, bytes}};
}

std::shared_ptr<OpState> fused_create_state(const OpAttrs& attrs, Device,
                                            const std::vector<Shape>& in,
                                            const std::vector<DType>& types) {
  WEFT_CHECK_AS(NotImplemented, types[0] == DType::kFloat32)
      << attrs.where() << ": the fused convolution is float32 only, got " << dtype_name(types[0]);
  auto s = std::make_shared<FusedConvState>();
  s->p = attrs.params<ConvolutionParam>();
  check_channel_first_layout(attrs, s->p.layout, s->p.kernel.ndim());
  s->eps = static_cast<float>(parse_float(hidden(attrs, "__bn_eps__", "0.001")));
  s->fix_gamma = parse_bool(hidden(attrs, "__bn_fix_gamma__", "True"));
  const std::string act = hidden(attrs, "__act_type__", "none");
  WEFT_CHECK(act == "relu" || act == "none")
      << attrs.where() << ": __act_type__ must be relu or none, got " << act;
  s->relu = act == "relu";
  s->w_shape = in[1];
  s->b_shape = Shape{attrs.params<ConvolutionParam>().num_filter};
  s->w.resize(static_cast<size_t>(in[1].size()));
  s->b.resize(static_cast<size_t>(s->b_shape[0]));
  return s;
}

void fused_forward(OpState& state, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  auto& s = static_cast<FusedConvState&>(state);
  if (req[0] == OpReq::kNull) return;
  const int nin = static_cast<int>(in.size());
  const bool has_bias = nin == 7;
  const int bn0 = has_bias ? 3 : 2;
  // Refold when any parameter input changed (or its identity is unknown).
  bool stale = s.seen.empty();
  std::vector<std::pair<uint64_t, uint64_t>> now;
  for (int i = 1; i < nin; ++i) {
    now.push_back(
        ctx.input_storage_ids && ctx.input_versions
            ? std::pair<uint64_t, uint64_t>{ctx.input_storage_ids[i], ctx.input_versions[i]}
            : std::pair<uint64_t, uint64_t>{0, 0});
    stale = stale || now.back().first == 0;
  }
  stale = stale || now != s.seen;
  if (stale) {
    const float* w = in[1].ptr<float>();
    const float* bias = has_bias ? in[2].ptr<float>() : nullptr;
    const float* gamma = in[bn0].ptr<float>();
    const float* beta = in[bn0 + 1].ptr<float>();
    const float* mean = in[bn0 + 2].ptr<float>();
    const float* var = in[bn0 + 3].ptr<float>();
    const int64_t oc = s.w_shape[0];
    const int64_t per = in[1].size() / oc;
    for (int64_t c = 0; c < oc; ++c) {
      const float scale = (s.fix_gamma ? 1.0f : gamma[c]) / std::sqrt(var[c] + s.eps);
      for (int64_t k = 0; k < per; ++k) s.w[c * per + k] = w[c * per + k] * scale;
      s.b[c] = beta[c] + ((bias ? bias[c] : 0.0f) - mean[c]) * scale;
    }
    s.seen = std::move(now);
    ++s.version;
  }
  const TensorView wv(s.w.data(), in[1].device, DType::kFloat32, s.w_shape);
  const TensorView bv(s.b.data(), in[1].device, DType::kFloat32, s.b_shape);
  // The folded weight's identity for oneDNN's blocked-weight cache: the state's id and version.
  uint64_t ids[2] = {0, s.id};
  uint64_t versions[2] = {0, s.version};
  OpContext c = ctx;
  c.input_storage_ids = ids;
  c.input_versions = versions;
  const ConvGeom g = conv_geom(s.p, in[0].shape_of(), out[0].shape_of());
#if WEFT_USE_ONEDNN
  if (dnnl_conv_supported(g)) {
    dnnl_conv_forward(g, c, in[0], wv, 1, &bv, out[0], s.relu);
    return;
  }
#endif
  conv_forward_ref<float>(g, in[0].ptr<float>(), s.w.data(), s.b.data(), out[0].ptr<float>(), false,
                          static_cast<float*>(ctx.workspace), ctx.num_threads);
  if (s.relu) {
    float* y = out[0].ptr<float>();
    for (int64_t i = 0, n = out[0].size(); i < n; ++i) y[i] = std::max(y[i], 0.0f);
  }
}

}  // namespace

void register_fused_conv_ops(OpRegistry& r) {
  r.register_op("_fused_conv_bn_act")
      .describe(
          "Convolution followed by inference BatchNorm (folded into weight and bias) and an "
          "optional ReLU post-op. Made by the executor's inference rewrite; inputs data, weight, "
          "[bias], gamma, beta, moving_mean, moving_var; hidden attrs __bn_eps__, "
          "__bn_fix_gamma__, __act_type__ (relu or none).")
      .set_params<ConvolutionParam>()
      .set_attr<FNumInputs>(fused_num_inputs)
      .set_attr<FListInputNames>(fused_input_names)
      .set_attr<FInferShape>(fused_infer_shape)
      .set_attr<FResourceRequest>(fused_resources)
      .set_attr<FCreateOpState>(fused_create_state)
      .set_attr<FStatefulCompute>(DeviceType::kCPU, fused_forward);
}

}  // namespace weft::detail
