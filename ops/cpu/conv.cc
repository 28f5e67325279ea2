// CPU kernels of Convolution and _backward_Convolution (definitions in ops/defs/conv.cc): oneDNN
// primitives for float32, an im2col + GEMM reference path for other types and odd cases.
#include <atomic>
#include <string>

#include "ops/cpu/conv_kernels.h"
#include "ops/cpu/layout_ops.h"

namespace weft::detail {

size_t conv_ref_workspace_bytes(const ConvGeom& g) {
  return g.pointwise() ? 0
                       : align64(static_cast<size_t>(g.col_rows() * g.out_size()) * sizeof(double));
}

// ---- oneDNN path --------------------------------------------------------------------------------
#if WEFT_USE_ONEDNN
using dnnl::memory;
namespace {

memory::dims spatial_dims(const std::array<int64_t, 3>& a, int nsp, int64_t delta = 0) {
  memory::dims d;
  for (int i = 3 - nsp; i < 3; ++i) d.push_back(a[i] + delta);
  return d;
}

struct ConvDims {
  memory::dims src, wei, bias, dst, strides, dilates, pad_l, pad_r;
  std::string key;
};

ConvDims conv_dims(const ConvGeom& g) {
  ConvDims d;
  const auto sp_in = spatial_dims(g.in, g.nsp), sp_out = spatial_dims(g.out, g.nsp),
             sp_k = spatial_dims(g.k, g.nsp);
  d.src = {g.batch, g.in_c};
  d.src.insert(d.src.end(), sp_in.begin(), sp_in.end());
  d.dst = {g.batch, g.out_c};
  d.dst.insert(d.dst.end(), sp_out.begin(), sp_out.end());
  if (g.groups > 1) {
    d.wei = {g.groups, g.out_cg(), g.in_cg()};
  } else {
    d.wei = {g.out_c, g.in_cg()};
  }
  d.wei.insert(d.wei.end(), sp_k.begin(), sp_k.end());
  d.bias = {g.out_c};
  d.strides = spatial_dims(g.s, g.nsp);
  d.dilates = spatial_dims(g.d, g.nsp, -1);
  d.pad_l = spatial_dims(g.p, g.nsp);
  d.pad_r = d.pad_l;
  d.key = dims_key(d.src) + "|" + dims_key(d.wei) + "|" + dims_key(d.dst) + "|" +
          dims_key(d.strides) + "|" + dims_key(d.dilates) + "|" + dims_key(d.pad_l);
  return d;
}

memory::desc any_desc(const memory::dims& d) {
  return memory::desc(d, memory::data_type::f32, memory::format_tag::any);
}
memory::desc f32_plain(const memory::dims& d) { return dnnl_util::plain_desc(d, DType::kFloat32); }

/// A weight view with the primitive's weight dims (grouped weights get a leading group axis).
struct WeightView {
  Shape shape;
  TensorView view;
  WeightView(const TensorView& w, const memory::dims& dims) : shape(dims.begin(), dims.end()) {
    view = TensorView(w.raw(), w.device, DType::kFloat32, shape);
  }
};

struct ConvFwdPlan {
  dnnl::convolution_forward prim;
  DnnlReformat src, dst;
  memory::desc weights_want, bias_plain, scratch;
  memory::dims wei_dims;
  std::string key;
  size_t workspace_bytes() const { return src.bytes() + dst.bytes() + align64(scratch.get_size()); }
};

// The forward primitive descriptor; `src_layout` / `dst_layout` (when given) are the formats the
// data is in and the output must be written in (Note [Layout propagation]), otherwise the
// primitive picks its formats.
dnnl::convolution_forward::primitive_desc conv_fwd_pd(const ConvDims& d, bool bias,
                                                      const FusedPostOps& post,
                                                      const memory::desc* src_layout,
                                                      const memory::desc* dst_layout) {
  using namespace dnnl;
  const memory::desc src = src_layout ? *src_layout : any_desc(d.src);
  const memory::desc dst = dst_layout ? *dst_layout : any_desc(d.dst);
  auto desc =
      bias ? convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                       src, any_desc(d.wei), f32_plain(d.bias), dst, d.strides,
                                       d.dilates, d.pad_l, d.pad_r)
           : convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                       src, any_desc(d.wei), dst, d.strides, d.dilates, d.pad_l,
                                       d.pad_r);
  // The sum and the activation apply to the output as it is written: no second pass.
  return convolution_forward::primitive_desc(desc, fused_post_op_attr(post),
                                             dnnl_util::cpu_engine());
}

// The forward plan: the primitive for the given layouts (which then need no conversion), or for
// the formats it picks, converted from and to plain.
const ConvFwdPlan& conv_fwd_plan(const ConvGeom& g, bool bias, const FusedPostOps& post,
                                 const memory::desc* src_layout = nullptr,
                                 const memory::desc* dst_layout = nullptr) {
  const ConvDims d = conv_dims(g);
  std::string key = "Convolution.fwd|" + d.key + (bias ? "|b" : "|nb") + post.key();
  if (src_layout) key += "|x:" + dnnl_util::desc_key(*src_layout);
  if (dst_layout) key += "|y:" + dnnl_util::desc_key(*dst_layout);
  return dnnl_util::cached<ConvFwdPlan>(key, [&] {
    using namespace dnnl;
    ConvFwdPlan plan;
    plan.key = key;
    plan.wei_dims = d.wei;
    plan.bias_plain = f32_plain(d.bias);
    const auto pd = conv_fwd_pd(d, bias, post, src_layout, dst_layout);
    plan.prim = convolution_forward(pd);
    plan.src = make_reformat(src_layout ? *src_layout : f32_plain(d.src), pd.src_desc());
    plan.dst = make_reformat(dst_layout ? *dst_layout : f32_plain(d.dst), pd.dst_desc());
    plan.weights_want = pd.weights_desc();
    plan.scratch = pd.scratchpad_desc();
    return plan;
  });
}

}  // namespace

void dnnl_conv_forward(const ConvGeom& g, const OpContext& ctx, const TensorView& x,
                       const TensorView& w, int w_index, const TensorView* bias,
                       const TensorView& y, const FusedPostOps& post) {
  const ConvFwdPlan& plan =
      conv_fwd_plan(g, bias != nullptr, post, dnnl_util::desc_of(ctx.input_layout(0)),
                    dnnl_util::desc_of(ctx.output_layout(0)));
  dnnl_util::ScopedThreads threads(ctx.num_threads);
  WorkspaceCursor ws(ctx.workspace, ctx.workspace_bytes);
  WeightView wv(w, plan.wei_dims);
  const auto [sid, version] = dnnl_util::input_identity(ctx, w_index);
  auto weights = dnnl_util::cached_weight(plan.key, wv.view, plan.weights_want, sid, version);
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, dnnl_input(plan.src, x.raw(), ws));
  args.emplace(DNNL_ARG_WEIGHTS, *weights);
  if (bias)
    args.emplace(DNNL_ARG_BIAS, memory(plan.bias_plain, dnnl_util::cpu_engine(), bias->raw()));
  // A sum post-op reads the addend from the destination: convert it like an input.
  memory dst = post.sum ? dnnl_input(plan.dst, y.raw(), ws) : dnnl_output(plan.dst, y.raw(), ws);
  args.emplace(DNNL_ARG_DST, dst);
  if (post.act.kind == FusedAct::Kind::kPRelu) {
    // The slopes, plain, with the output's rank: (1, C, 1...) or all ones when shared.
    memory::dims dims(static_cast<size_t>(g.nsp + 2), 1);
    if (!post.prelu_shared) dims[1] = g.out_c;
    args.emplace(
        DNNL_ARG_ATTR_MULTIPLE_POST_OP(post.sum ? 1 : 0) | DNNL_ARG_WEIGHTS,
        memory(f32_plain(dims), dnnl_util::cpu_engine(), const_cast<float*>(post.prelu_slopes)));
  }
  dnnl_add_scratchpad(plan.scratch, ws, args);
  auto& stream = dnnl_util::thread_stream();
  plan.prim.execute(stream, args);
  dnnl_finish_output(plan.dst, dst, y.raw());
  stream.wait();
}

namespace {
struct ConvBwdPlan {
  dnnl::convolution_backward_data data_prim;
  dnnl::convolution_backward_weights weights_prim;
  DnnlReformat dy_data, dx, x_wt, dy_wt, dw;
  memory::desc w_data_want, bias_plain, data_scratch, wt_scratch;
  memory::dims wei_dims;
  std::string key;
  size_t workspace_bytes() const {
    return dy_data.bytes() + dx.bytes() + x_wt.bytes() + dy_wt.bytes() + dw.bytes() +
           align64(data_scratch.get_size()) + align64(wt_scratch.get_size());
  }
};

const ConvBwdPlan& conv_bwd_plan(const ConvGeom& g, bool bias) {
  const ConvDims d = conv_dims(g);
  const std::string key = "Convolution.bwd|" + d.key + (bias ? "|b" : "|nb");
  return dnnl_util::cached<ConvBwdPlan>(key, [&] {
    using namespace dnnl;
    ConvBwdPlan plan;
    plan.key = key;
    plan.wei_dims = d.wei;
    plan.bias_plain = f32_plain(d.bias);
    auto& eng = dnnl_util::cpu_engine();
    const auto algo = algorithm::convolution_direct;
    auto fwd_desc =
        bias ? convolution_forward::desc(prop_kind::forward_training, algo, any_desc(d.src),
                                         any_desc(d.wei), plan.bias_plain, any_desc(d.dst),
                                         d.strides, d.dilates, d.pad_l, d.pad_r)
             : convolution_forward::desc(prop_kind::forward_training, algo, any_desc(d.src),
                                         any_desc(d.wei), any_desc(d.dst), d.strides, d.dilates,
                                         d.pad_l, d.pad_r);
    convolution_forward::primitive_desc fwd_pd(fwd_desc, eng);
    convolution_backward_data::desc data_desc(algo, any_desc(d.src), any_desc(d.wei),
                                              any_desc(d.dst), d.strides, d.dilates, d.pad_l,
                                              d.pad_r);
    convolution_backward_data::primitive_desc data_pd(data_desc, user_scratchpad_attr(), eng,
                                                      fwd_pd);
    auto wt_desc = bias ? convolution_backward_weights::desc(algo, any_desc(d.src), any_desc(d.wei),
                                                             plan.bias_plain, any_desc(d.dst),
                                                             d.strides, d.dilates, d.pad_l, d.pad_r)
                        : convolution_backward_weights::desc(algo, any_desc(d.src), any_desc(d.wei),
                                                             any_desc(d.dst), d.strides, d.dilates,
                                                             d.pad_l, d.pad_r);
    convolution_backward_weights::primitive_desc wt_pd(wt_desc, user_scratchpad_attr(), eng,
                                                       fwd_pd);
    plan.data_prim = convolution_backward_data(data_pd);
    plan.weights_prim = convolution_backward_weights(wt_pd);
    plan.dy_data = make_reformat(f32_plain(d.dst), data_pd.diff_dst_desc());
    plan.dx = make_reformat(f32_plain(d.src), data_pd.diff_src_desc());
    plan.w_data_want = data_pd.weights_desc();
    plan.x_wt = make_reformat(f32_plain(d.src), wt_pd.src_desc());
    plan.dy_wt = make_reformat(f32_plain(d.dst), wt_pd.diff_dst_desc());
    plan.dw = make_reformat(f32_plain(d.wei), wt_pd.diff_weights_desc());
    plan.data_scratch = data_pd.scratchpad_desc();
    plan.wt_scratch = wt_pd.scratchpad_desc();
    return plan;
  });
}

}  // namespace

void dnnl_conv_backward_data(const ConvGeom& g, const OpContext& ctx, const TensorView& dy,
                             const TensorView& w, int w_index, const TensorView& dx) {
  const ConvBwdPlan& plan = conv_bwd_plan(g, false);
  dnnl_util::ScopedThreads threads(ctx.num_threads);
  WorkspaceCursor ws(ctx.workspace, ctx.workspace_bytes);
  WeightView wv(w, plan.wei_dims);
  const auto [sid, version] = dnnl_util::input_identity(ctx, w_index);
  auto weights =
      dnnl_util::cached_weight(plan.key + "|data", wv.view, plan.w_data_want, sid, version);
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_DIFF_DST, dnnl_input(plan.dy_data, dy.raw(), ws));
  args.emplace(DNNL_ARG_WEIGHTS, *weights);
  memory out = dnnl_output(plan.dx, dx.raw(), ws);
  args.emplace(DNNL_ARG_DIFF_SRC, out);
  dnnl_add_scratchpad(plan.data_scratch, ws, args);
  auto& stream = dnnl_util::thread_stream();
  plan.data_prim.execute(stream, args);
  dnnl_finish_output(plan.dx, out, dx.raw());
  stream.wait();
}

void dnnl_conv_backward_weights(const ConvGeom& g, const OpContext& ctx, const TensorView& x,
                                const TensorView& dy, const TensorView& dw, const TensorView* db) {
  const ConvBwdPlan& plan = conv_bwd_plan(g, db != nullptr);
  dnnl_util::ScopedThreads threads(ctx.num_threads);
  WorkspaceCursor ws(ctx.workspace, ctx.workspace_bytes);
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, dnnl_input(plan.x_wt, x.raw(), ws));
  args.emplace(DNNL_ARG_DIFF_DST, dnnl_input(plan.dy_wt, dy.raw(), ws));
  memory out = dnnl_output(plan.dw, dw.raw(), ws);
  args.emplace(DNNL_ARG_DIFF_WEIGHTS, out);
  if (db)
    args.emplace(DNNL_ARG_DIFF_BIAS, memory(plan.bias_plain, dnnl_util::cpu_engine(), db->raw()));
  dnnl_add_scratchpad(plan.wt_scratch, ws, args);
  auto& stream = dnnl_util::thread_stream();
  plan.weights_prim.execute(stream, args);
  dnnl_finish_output(plan.dw, out, dw.raw());
  stream.wait();
}

void dnnl_conv_layouts(const ConvGeom& g, bool bias, const FusedPostOps& post, LayoutRef* src,
                       LayoutRef* dst) {
  // The descriptor only (the kernels make their primitives for the formats chosen here), under
  // the thread count the cached plans are made for (Note [Primitive thread count]).
  dnnl_util::ScopedThreads threads(dnnl_util::max_kernel_threads());
  const auto pd = conv_fwd_pd(conv_dims(g), bias, post, nullptr, nullptr);
  *src = dnnl_util::make_layout(pd.src_desc());
  *dst = dnnl_util::make_layout(pd.dst_desc());
}

size_t dnnl_conv_layout_workspace(const ConvGeom& g, bool bias, const FusedPostOps& post,
                                  const MemoryLayout* src, const MemoryLayout* dst) {
  if (!dnnl_conv_supported(g)) return 0;
  // The plan dnnl_conv_forward runs (conversions of plain data only, and the scratchpad), made
  // for the thread counts the cache makes plans for (Note [Primitive thread count]).
  return conv_fwd_plan(g, bias, post, dnnl_util::desc_of(src), dnnl_util::desc_of(dst))
      .workspace_bytes();
}

size_t dnnl_conv_workspace(const ConvGeom& g, bool bias, bool backward, const FusedPostOps& post) {
  if (!dnnl_conv_supported(g)) return 0;
  return backward ? conv_bwd_plan(g, bias).workspace_bytes()
                  : conv_fwd_plan(g, bias, post).workspace_bytes();
}

bool dnnl_conv_dst_plain(const ConvGeom& g, bool bias, const FusedPostOps& post) {
  return dnnl_conv_supported(g) && !conv_fwd_plan(g, bias, post).dst.needed;
}

bool dnnl_conv_supported(const ConvGeom& g) {
  return g.batch > 0 && g.in_c > 0 && g.out_c > 0 && g.in_size() > 0 && g.out_size() > 0;
}

#endif  // WEFT_USE_ONEDNN

namespace {

// ---- kernels ------------------------------------------------------------------------------------

std::vector<ResourceRequest> conv_resources(const OpAttrs& attrs, const std::vector<Shape>& in,
                                            const std::vector<Shape>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const ConvGeom g = conv_geom(p, in[0], out[0]);
  size_t bytes = conv_ref_workspace_bytes(g);
#if WEFT_USE_ONEDNN
  bytes = std::max(bytes, dnnl_conv_workspace(g, !p.no_bias, false));
#endif
  return {{ResourceRequest::Kind::kWorkspace, bytes}};
}

#if WEFT_USE_ONEDNN
bool conv_channel_first(const ConvolutionParam& p) {
  using L = SpatialLayout;
  return !p.layout || *p.layout == L::kNCW || *p.layout == L::kNCHW || *p.layout == L::kNCDHW;
}

// Float32 convolutions on oneDNN read and write the formats their primitive prefers.
bool conv_infer_layout(const OpAttrs& attrs, const LayoutQuery& q, std::vector<LayoutRef>& in,
                       std::vector<LayoutRef>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  if (q.in_types[0] != DType::kFloat32 || !conv_channel_first(p)) return false;
  const ConvGeom g = conv_geom(p, q.in_shapes[0], q.out_shapes[0]);
  if (!dnnl_conv_supported(g)) return false;
  in.assign(in.size(), nullptr);
  dnnl_conv_layouts(g, !p.no_bias, FusedPostOps{}, &in[0], &out[0]);
  return true;
}

std::vector<ResourceRequest> conv_layout_resources(const OpAttrs& attrs, const LayoutQuery& q,
                                                   const std::vector<LayoutRef>& in,
                                                   const std::vector<LayoutRef>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const ConvGeom g = conv_geom(p, q.in_shapes[0], q.out_shapes[0]);
  return {{ResourceRequest::Kind::kWorkspace,
           dnnl_conv_layout_workspace(g, !p.no_bias, FusedPostOps{}, in[0].get(), out[0].get())}};
}
#endif

void conv_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<ConvolutionParam>();
  check_channel_first_layout(attrs, p.layout, p.kernel.ndim());
  const ConvGeom g = conv_geom(p, in[0].shape_of(), out[0].shape_of());
  const bool add = req[0] == OpReq::kAdd;
#if WEFT_USE_ONEDNN
  if (in[0].dtype() == DType::kFloat32 && !add && dnnl_conv_supported(g)) {
    dnnl_conv_forward(g, ctx, in[0], in[1], 1, p.no_bias ? nullptr : &in[2], out[0]);
    return;
  }
  WEFT_ICHECK(!has_layouts(ctx, in.size(), out.size()))
      << attrs.where() << ": no kernel for this call's layouts";
#endif
  WEFT_ICHECK(ctx.workspace_bytes >= conv_ref_workspace_bytes(g))
      << attrs.where() << ": workspace too small";
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    conv_forward_ref<DT>(g, in[0].ptr<DT>(), in[1].ptr<DT>(), p.no_bias ? nullptr : in[2].ptr<DT>(),
                         out[0].ptr<DT>(), add, static_cast<DT*>(ctx.workspace), ctx.num_threads);
  });
}

std::vector<ResourceRequest> conv_backward_resources(const OpAttrs& attrs,
                                                     const std::vector<Shape>& in,
                                                     const std::vector<Shape>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const ConvGeom g = conv_geom(p, in[1], in[0]);
  size_t bytes = conv_ref_workspace_bytes(g);
#if WEFT_USE_ONEDNN
  bytes = std::max(bytes, dnnl_conv_workspace(g, !p.no_bias, true));
#endif
  return {{ResourceRequest::Kind::kWorkspace, bytes}};
}

template <typename DT>
void conv_backward_ref_typed(const ConvGeom& g, const OpContext& ctx,
                             std::span<const TensorView> in, std::span<const OpReq> req,
                             std::span<const TensorView> out, bool do_data, bool do_weights,
                             bool bias) {
  DT* col = static_cast<DT*>(ctx.workspace);
  const DT* dy = in[0].ptr<DT>();
  if (do_data && writes(req[0])) {
    conv_backward_data_ref<DT>(g, dy, in[2].ptr<DT>(), out[0].ptr<DT>(), req[0] == OpReq::kAdd, col,
                               ctx.num_threads);
  }
  if (do_weights && writes(req[1])) {
    conv_backward_weight_ref<DT>(g, in[1].ptr<DT>(), dy, out[1].ptr<DT>(), req[1] == OpReq::kAdd,
                                 col, ctx.num_threads);
  }
  if (do_weights && bias && writes(req[2])) {
    bias_backward_ref<DT>(dy, g.batch, g.out_c, g.out_size(), out[2].ptr<DT>(),
                          req[2] == OpReq::kAdd, ctx.num_threads);
  }
}

void conv_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const bool bias = !p.no_bias;
  const ConvGeom g = conv_geom(p, in[1].shape_of(), in[0].shape_of());
  bool do_data = true, do_weights = true;
#if WEFT_USE_ONEDNN
  if (in[0].dtype() == DType::kFloat32 && dnnl_conv_supported(g)) {
    // oneDNN writes (never accumulates); the weight primitive produces weight and bias together.
    const bool data_dnnl = req[0] == OpReq::kWrite || req[0] == OpReq::kInplace;
    bool weights_dnnl = req[1] == OpReq::kWrite || req[1] == OpReq::kInplace;
    if (bias) weights_dnnl = weights_dnnl && (req[2] == OpReq::kWrite || req[2] == OpReq::kInplace);
    if (data_dnnl) dnnl_conv_backward_data(g, ctx, in[0], in[2], 2, out[0]);
    if (weights_dnnl)
      dnnl_conv_backward_weights(g, ctx, in[1], in[0], out[1], bias ? &out[2] : nullptr);
    do_data = !data_dnnl;
    do_weights = !weights_dnnl;
    if (!do_data && !do_weights) return;
  }
#endif
  WEFT_ICHECK(ctx.workspace_bytes >= conv_ref_workspace_bytes(g))
      << attrs.where() << ": workspace too small";
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    conv_backward_ref_typed<DT>(g, ctx, in, req, out, do_data, do_weights, bias));
}

}  // namespace

void register_convolution_kernels(OpRegistry& r) {
  // The workspace requests size the CPU kernels' scratch (im2col columns, oneDNN reorders and
  // scratchpads), so they are set here with the kernels.
  r.kernels("Convolution")
      .set_resource_request(DeviceType::kCPU, conv_resources)
      .set_attr<FCompute>(DeviceType::kCPU, conv_forward)
#if WEFT_USE_ONEDNN
      .set_attr<FInferLayout>(conv_infer_layout)
      .set_attr<FLayoutResourceRequest>(conv_layout_resources)
#endif
      ;
  r.kernels("_backward_Convolution")
      .set_resource_request(DeviceType::kCPU, conv_backward_resources)
      .set_attr<FCompute>(DeviceType::kCPU, conv_backward);
}

}  // namespace weft::detail
