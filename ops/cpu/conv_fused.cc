// CPU kernel of _fused_conv_bn_act (definition in ops/defs/conv_fused.cc), and the post-op helpers
// the fused ops' CPU kernels share (FusedPostOps). oneDNN convolution with post-ops for float32,
// the im2col reference otherwise.
#include <cmath>
#include <cstring>
#include <string>

#include "ops/cpu/conv_kernels.h"
#include "ops/cpu/elemwise_kernels.h"
#include "ops/cpu/layout_ops.h"
#include "ops/defs/conv_fused_state.h"

namespace weft::detail {

// ---- post-ops -----------------------------------------------------------------------------------

void fused_act_apply(const FusedAct& act, float* y, int64_t n, int threads) {
  if (act.none()) return;
  const float al = act.alpha, be = act.beta;
  parallel_for(n, 4096, threads, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float v = y[i];
      switch (act.kind) {
        case FusedAct::Kind::kNone:
        case FusedAct::Kind::kPRelu:  // needs its slopes: prelu_apply
          break;
        case FusedAct::Kind::kRelu:
          y[i] = v > 0.0f ? v : 0.0f;
          break;
        case FusedAct::Kind::kLeaky:
          y[i] = v > 0.0f ? v : al * v;
          break;
        case FusedAct::Kind::kElu:
          y[i] = v > 0.0f ? v : al * std::expm1(v);
          break;
        case FusedAct::Kind::kSigmoid:
          y[i] = 1.0f / (1.0f + std::exp(-v));
          break;
        case FusedAct::Kind::kTanh:
          y[i] = std::tanh(v);
          break;
        case FusedAct::Kind::kSoftRelu:
          y[i] = v > 20.0f ? v : std::log1p(std::exp(v));
          break;
        case FusedAct::Kind::kClip:
          y[i] = std::min(std::max(v, al), be);
          break;
      }
    }
  });
}

#if WEFT_USE_ONEDNN
dnnl::post_ops fused_post_ops(const FusedPostOps& post) {
  using dnnl::algorithm;
  dnnl::post_ops ops;
  if (post.sum) ops.append_sum(1.0f);
  const float al = post.act.alpha, be = post.act.beta;
  switch (post.act.kind) {
    case FusedAct::Kind::kNone:
      break;
    case FusedAct::Kind::kRelu:
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      break;
    case FusedAct::Kind::kLeaky:
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, al, 0.0f);
      break;
    case FusedAct::Kind::kElu:
      ops.append_eltwise(1.0f, algorithm::eltwise_elu, al, 0.0f);
      break;
    case FusedAct::Kind::kSigmoid:
      ops.append_eltwise(1.0f, algorithm::eltwise_logistic, 0.0f, 0.0f);
      break;
    case FusedAct::Kind::kTanh:
      ops.append_eltwise(1.0f, algorithm::eltwise_tanh, 0.0f, 0.0f);
      break;
    case FusedAct::Kind::kSoftRelu:
      ops.append_eltwise(1.0f, algorithm::eltwise_soft_relu, 0.0f, 0.0f);
      break;
    case FusedAct::Kind::kClip:
      ops.append_eltwise(1.0f, algorithm::eltwise_clip, al, be);
      break;
    case FusedAct::Kind::kPRelu:
      ops.append_prelu(post.prelu_shared ? 0 : 1 << 1);  // per channel: dim 1 of the output
      break;
  }
  return ops;
}

dnnl::primitive_attr fused_post_op_attr(const FusedPostOps& post) {
  dnnl::primitive_attr attr = user_scratchpad_attr();
  if (post.sum || !post.act.none()) attr.set_post_ops(fused_post_ops(post));
  return attr;
}
#endif

namespace {

// ---- _fused_conv_bn_act (its inputs and hidden attributes: ops/defs/conv_fused.cc) --------------

// The convolution's own output shape (differs from the op's output only with a broadcast sum).
Shape conv_output_shape(const ConvolutionParam& p, const Shape& data) {
  Shape o = data;
  o[1] = p.num_filter;
  for (int i = 0; i < p.kernel.ndim(); ++i) {
    const int64_t dk = p.dilate[i] * (p.kernel[i] - 1) + 1;
    o[2 + i] = (data[2 + i] + 2 * p.pad[i] - dk) / p.stride[i] + 1;
  }
  return o;
}

std::vector<ResourceRequest> fused_resources(const OpAttrs& attrs, const std::vector<Shape>& in,
                                             const std::vector<Shape>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const FusedInputs f = fused_inputs(attrs);
  const Shape cshape = f.broadcast ? conv_output_shape(p, in[0]) : out[0];
  const ConvGeom g = conv_geom(p, in[0], cshape);
  size_t bytes = conv_ref_workspace_bytes(g);
#if WEFT_USE_ONEDNN
  FusedPostOps post;
  post.sum = f.sum;
  post.act = fused_act_from_attrs(attrs);
  if (f.prelu) post.act = FusedAct{};  // a pass of its own (run_conv)
  bytes = std::max(bytes, dnnl_conv_workspace(g, f.bn || !p.no_bias, false, post));
  if (f.sum) bytes = std::max(bytes, dnnl_conv_workspace(g, f.bn || !p.no_bias, false));
#endif
  // A broadcast sum first computes the convolution into the workspace; so may a plain one (Note
  // [Sum post-op and plain outputs]).
  if (f.sum) bytes += align64(static_cast<size_t>(cshape.size()) * sizeof(float));
  return {{ResourceRequest::Kind::kWorkspace, bytes}};
}

// Refolds the BatchNorm into the state's weight and bias when any parameter input changed (or its
// identity is unknown).
void fold_batch_norm(FusedConvState& s, const OpContext& ctx, std::span<const TensorView> in) {
  const bool has_bias = !s.p.no_bias;
  const int bn0 = s.io.bn0();
  bool stale = s.seen.empty();
  std::vector<std::pair<uint64_t, uint64_t>> now;
  for (int i = 1; i < bn0 + 4; ++i) {
    now.push_back(
        ctx.input_storage_ids && ctx.input_versions
            ? std::pair<uint64_t, uint64_t>{ctx.input_storage_ids[i], ctx.input_versions[i]}
            : std::pair<uint64_t, uint64_t>{0, 0});
    stale = stale || now.back().first == 0;
  }
  stale = stale || now != s.seen;
  if (!stale) return;
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

// y = prelu(y) with the slopes of `post` along dim 1 of y, one (n, c) plane at a time.
void prelu_apply(const FusedPostOps& post, const TensorView& y, int threads) {
  const Shape s = y.shape_of();
  const int64_t channels = s[1], inner = s.size() / (s[0] * s[1]);
  float* p = y.ptr<float>();
  parallel_for(s[0] * channels, std::max<int64_t>(1, 8192 / std::max<int64_t>(inner, 1)), threads,
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const float slope = post.prelu_slopes[post.prelu_shared ? 0 : r % channels];
                   float* q = p + r * inner;
                   for (int64_t i = 0; i < inner; ++i) q[i] = q[i] > 0.0f ? q[i] : slope * q[i];
                 }
               });
}

// y = post(conv(x)): the oneDNN primitive with post-ops, or the reference loops.
void run_conv(const FusedConvState& s, const ConvGeom& g, const OpContext& ctx, const TensorView& x,
              const TensorView& w, const TensorView* bias, const TensorView& y,
              const FusedPostOps& post) {
  // oneDNN 2.6 runs a convolution with a prelu post-op on its reference kernel (tens of times
  // slower): prelu is a pass of its own over the output.
  const bool prelu = post.act.kind == FusedAct::Kind::kPRelu;
#if WEFT_USE_ONEDNN
  if (dnnl_conv_supported(g)) {
    dnnl_conv_forward(g, ctx, x, w, 1, bias, y, prelu ? FusedPostOps{post.sum, FusedAct{}} : post);
    if (prelu) prelu_apply(post, y, ctx.num_threads);
    return;
  }
  WEFT_ICHECK(!ctx.input_layout(0) && !ctx.output_layout(0))
      << "_fused_conv_bn_act: no kernel for this call's layouts";
#endif
  conv_forward_ref<float>(g, x.ptr<float>(), w.ptr<float>(), bias ? bias->ptr<float>() : nullptr,
                          y.ptr<float>(), post.sum, static_cast<float*>(ctx.workspace),
                          ctx.num_threads);
  fused_act_apply(post.act, y.ptr<float>(), y.size(), ctx.num_threads);
  if (prelu) prelu_apply(post, y, ctx.num_threads);
}

#if WEFT_USE_ONEDNN
// Note [Sum post-op and plain outputs]
// oneDNN's sum post-op adds into the primitive's own destination. When that destination is a
// blocked copy in the workspace (the primitive chose a blocked format and the output is plain),
// the addend would first be reordered into it: one more pass and one more primitive call, which
// measured slower than adding afterwards. There the convolution runs without post-ops and one
// pass adds the addend (and applies the activation). The convolution writes into the workspace
// when the output holds the addend in place.
bool sum_as_pass(const FusedConvState& s, const OpContext& ctx, std::span<const TensorView> in,
                 const TensorView& y, const TensorView& w, const TensorView* bias) {
  // An output in the primitive's own format (Note [Layout propagation]) takes the sum post-op.
  if (ctx.output_layout(0)) return false;
  const ConvGeom g = conv_geom(s.p, in[0].shape_of(), y.shape_of());
  FusedPostOps post{true, s.act};
  if (s.io.prelu) post.act = FusedAct{};
  if (!dnnl_conv_supported(g) || dnnl_conv_dst_plain(g, bias != nullptr, post)) return false;
  const TensorView& a = in[s.io.addend()];
  const int64_t n = y.size();
  OpContext c = ctx;
  TensorView t = y;
  if (a.raw() == y.raw()) {
    const size_t bytes = align64(static_cast<size_t>(n) * sizeof(float));
    WEFT_ICHECK(ctx.workspace_bytes >= bytes) << "_fused_conv_bn_act: workspace too small";
    t = TensorView(ctx.workspace, y.device, DType::kFloat32, y.shape_of());
    c.workspace = static_cast<char*>(ctx.workspace) + bytes;
    c.workspace_bytes = ctx.workspace_bytes - bytes;
  }
  dnnl_conv_forward(g, c, in[0], w, 1, bias, t, FusedPostOps{});
  const float* tp = t.ptr<float>();
  const float* ap = a.ptr<float>();
  float* yp = y.ptr<float>();
  parallel_for(n, 16384, ctx.num_threads, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) yp[i] = tp[i] + ap[i];
    if (s.act.kind == FusedAct::Kind::kRelu) {
      for (int64_t i = i0; i < i1; ++i) yp[i] = yp[i] > 0.0f ? yp[i] : 0.0f;
    }
  });
  if (s.act.kind != FusedAct::Kind::kRelu) fused_act_apply(s.act, yp, n, ctx.num_threads);
  if (s.io.prelu) {
    prelu_apply(
        FusedPostOps{false, s.act, in[s.io.slopes()].size() == 1, in[s.io.slopes()].ptr<float>()},
        y, ctx.num_threads);
  }
  return true;
}
#endif

void fused_forward(OpState& state, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  auto& s = static_cast<FusedConvState&>(state);
  if (req[0] == OpReq::kNull) return;
  OpContext c = ctx;
  TensorView wv = in[1];
  std::optional<TensorView> bv;
  if (!s.p.no_bias) bv = in[2];
  // The folded weight's identity for oneDNN's blocked-weight cache: the state's id and version.
  uint64_t ids[2] = {0, s.id};
  uint64_t versions[2] = {0, s.version};
  if (s.io.bn) {
    fold_batch_norm(s, ctx, in);
    versions[1] = s.version;
    wv = TensorView(s.w.data(), in[1].device, DType::kFloat32, s.w_shape);
    bv = TensorView(s.b.data(), in[1].device, DType::kFloat32, s.b_shape);
    c.input_storage_ids = ids;
    c.input_versions = versions;
  }
  const TensorView* bias = bv ? &*bv : nullptr;
  const TensorView& y = out[0];
#if WEFT_USE_ONEDNN
  if (s.io.sum && !s.io.broadcast && sum_as_pass(s, c, in, y, wv, bias)) return;
#endif
  // A broadcast_add whose shapes all agree at run time is a plain sum.
  if (!s.io.broadcast || (in[s.io.addend()].shape_of() == y.shape_of() &&
                          conv_output_shape(s.p, in[0].shape_of()) == y.shape_of())) {
    FusedPostOps post{s.io.sum, s.act};
    if (s.io.prelu) {
      post.prelu_slopes = in[s.io.slopes()].ptr<float>();
      post.prelu_shared = in[s.io.slopes()].size() == 1;
    }
    if (post.sum) {
      const TensorView& a = in[s.io.addend()];
      // The sum post-op adds to what the output holds: the addend (unless it is there in place).
      // Both are in the output's layout (Note [Layout propagation]): a copy of its bytes.
      const MemoryLayout* l = ctx.output_layout(0);
      const size_t bytes = l ? l->bytes() : static_cast<size_t>(y.size()) * 4;
      if (a.raw() != y.raw()) std::memcpy(y.raw(), a.raw(), bytes);
    }
    run_conv(s, conv_geom(s.p, in[0].shape_of(), y.shape_of()), c, in[0], wv, bias, y, post);
    return;
  }
  // Broadcast sum: the convolution into the workspace, then y = act(conv + addend) broadcast.
  const TensorView& a = in[s.io.addend()];
  const Shape cshape = conv_output_shape(s.p, in[0].shape_of());
  const size_t tmp_bytes = align64(static_cast<size_t>(cshape.size()) * sizeof(float));
  WEFT_ICHECK(ctx.workspace_bytes >= tmp_bytes) << "_fused_conv_bn_act: workspace too small";
  float* tmp = static_cast<float*>(ctx.workspace);
  c.workspace = static_cast<char*>(ctx.workspace) + tmp_bytes;
  c.workspace_bytes = ctx.workspace_bytes - tmp_bytes;
  const TensorView t(tmp, in[0].device, DType::kFloat32, cshape);
  run_conv(s, conv_geom(s.p, in[0].shape_of(), cshape), c, in[0], wv, bias, t, FusedPostOps{});
  const Shape ys = y.shape_of(), as = a.shape_of();
  const BroadcastPlan bp =
      make_broadcast_plan(ys.data(), ys.ndim(), cshape.data(), cshape.ndim(), as.data(), as.ndim());
  const float* ap = a.ptr<float>();
  float* yp = y.ptr<float>();
  const int64_t inner = bp.inner();
  const int64_t ls = bp.lstride[bp.ndim - 1], rs = bp.rstride[bp.ndim - 1];
  for_each_row(bp, 0, bp.rows(), [&](int64_t lo, int64_t ro, int64_t yo) {
    for (int64_t i = 0; i < inner; ++i) yp[yo + i] = tmp[lo + i * ls] + ap[ro + i * rs];
  });
  fused_act_apply(s.act, yp, y.size(), ctx.num_threads);
  if (s.io.prelu) {
    FusedPostOps post{false, s.act, in[s.io.slopes()].size() == 1, in[s.io.slopes()].ptr<float>()};
    prelu_apply(post, y, ctx.num_threads);
  }
}

#if WEFT_USE_ONEDNN
// The convolution's preferred formats for the data and the output; the addend of a sum is read in
// the output's format. Plain for a sum that broadcasts and for prelu (its pass works on plain
// data).
bool fused_infer_layout(const OpAttrs& attrs, const LayoutQuery& q, std::vector<LayoutRef>& in,
                        std::vector<LayoutRef>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const FusedInputs f = fused_inputs(attrs);
  if (f.prelu || q.in_types[0] != DType::kFloat32) return false;
  if (p.layout && *p.layout != SpatialLayout::kNCW && *p.layout != SpatialLayout::kNCHW &&
      *p.layout != SpatialLayout::kNCDHW)
    return false;
  if (f.broadcast && (q.in_shapes[f.addend()] != q.out_shapes[0] ||
                      conv_output_shape(p, q.in_shapes[0]) != q.out_shapes[0]))
    return false;
  const ConvGeom g = conv_geom(p, q.in_shapes[0], q.out_shapes[0]);
  if (!dnnl_conv_supported(g)) return false;
  in.assign(in.size(), nullptr);
  dnnl_conv_layouts(g, f.bn || !p.no_bias, FusedPostOps{f.sum, fused_act_from_attrs(attrs)}, &in[0],
                    &out[0]);
  if (f.sum) in[f.addend()] = out[0];
  return true;
}

// The workspace on layouts: the primitive's scratchpad (and conversions of plain data) only.
std::vector<ResourceRequest> fused_layout_resources(const OpAttrs& attrs, const LayoutQuery& q,
                                                    const std::vector<LayoutRef>& in,
                                                    const std::vector<LayoutRef>& out) {
  if (!out[0]) return fused_resources(attrs, q.in_shapes, q.out_shapes);
  const auto& p = attrs.params<ConvolutionParam>();
  const FusedInputs f = fused_inputs(attrs);
  const ConvGeom g = conv_geom(p, q.in_shapes[0], q.out_shapes[0]);
  const FusedPostOps post{f.sum, fused_act_from_attrs(attrs)};
  return {{ResourceRequest::Kind::kWorkspace,
           dnnl_conv_layout_workspace(g, f.bn || !p.no_bias, post, in[0].get(), out[0].get())}};
}
#endif

}  // namespace

void register_fused_conv_kernels(OpRegistry& r) {
  // The workspace request sizes the CPU kernel's scratch (Note [Sum post-op and plain outputs]).
  r.kernels("_fused_conv_bn_act")
      .set_resource_request(DeviceType::kCPU, fused_resources)
      .set_attr<FStatefulCompute>(DeviceType::kCPU, fused_forward)
#if WEFT_USE_ONEDNN
      .set_attr<FInferLayout>(fused_infer_layout)
      .set_attr<FLayoutResourceRequest>(fused_layout_resources)
#endif
      ;
}

}  // namespace weft::detail
