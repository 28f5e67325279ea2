// CPU kernels of Deconvolution and _backward_Deconvolution (definitions in ops/defs/deconv.cc),
// computed as the transposed convolution's data gradient: oneDNN convolution primitives for
// float32, col2im of Wᵀ·x (GEMM loops) otherwise.
#include "ops/cpu/conv_kernels.h"
#include "ops/defs/deconv_params.h"

namespace weft::detail {
namespace {

size_t ref_workspace_bytes(const ConvGeom& g) {
  return g.pointwise() ? 0
                       : align64(static_cast<size_t>(g.col_rows() * g.out_size()) * sizeof(double));
}

// The float32 kernels run oneDNN convolution primitives with the roles swapped: the forward is
// the convolution's data gradient, the data gradient a convolution forward, the weight gradient
// the convolution's weight gradient with data and output gradient exchanged.

std::vector<ResourceRequest> deconv_resources(const OpAttrs& attrs, const std::vector<Shape>& in,
                                              const std::vector<Shape>& out) {
  const ConvGeom g = deconv_geom(attrs, in[0], out[0]);
  size_t bytes = ref_workspace_bytes(g);
#if WEFT_USE_ONEDNN
  bytes = std::max(bytes, dnnl_conv_workspace(g, false, true));
#endif
  return {{ResourceRequest::Kind::kWorkspace, bytes}};
}

std::vector<ResourceRequest> deconv_backward_resources(const OpAttrs& attrs,
                                                       const std::vector<Shape>& in,
                                                       const std::vector<Shape>& out) {
  const ConvGeom g = deconv_geom(attrs, in[1], in[0]);
  size_t bytes = ref_workspace_bytes(g);
#if WEFT_USE_ONEDNN
  bytes =
      std::max({bytes, dnnl_conv_workspace(g, false, false), dnnl_conv_workspace(g, false, true)});
#endif
  return {{ResourceRequest::Kind::kWorkspace, bytes}};
}

template <typename DT>
void add_channel_bias(const ConvGeom& g, const DT* b, DT* y, int threads) {
  const int64_t size = g.in_size();
  parallel_for(g.batch * g.in_c, 1, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const DT bv = b[r % g.in_c];
      DT* row = y + r * size;
      for (int64_t j = 0; j < size; ++j) row[j] += bv;
    }
  });
}

void deconv_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<DeconvolutionParam>();
  check_channel_first_layout(attrs, p.layout, p.kernel.ndim());
  const ConvGeom g = deconv_geom(attrs, in[0].shape_of(), out[0].shape_of());
  const bool add = req[0] == OpReq::kAdd;
#if WEFT_USE_ONEDNN
  if (in[0].dtype() == DType::kFloat32 && !add && dnnl_conv_supported(g)) {
    dnnl_conv_backward_data(g, ctx, in[0], in[1], 1, out[0]);
    if (!p.no_bias)
      add_channel_bias<float>(g, in[2].ptr<float>(), out[0].ptr<float>(), ctx.num_threads);
    return;
  }
#endif
  WEFT_ICHECK(ctx.workspace_bytes >= ref_workspace_bytes(g))
      << attrs.where() << ": workspace too small";
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    DT* y = out[0].ptr<DT>();
    conv_backward_data_ref<DT>(g, in[0].ptr<DT>(), in[1].ptr<DT>(), y, add,
                               static_cast<DT*>(ctx.workspace), ctx.num_threads);
    if (!p.no_bias) add_channel_bias<DT>(g, in[2].ptr<DT>(), y, ctx.num_threads);
  });
}

void deconv_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DeconvolutionParam>();
  const ConvGeom g = deconv_geom(attrs, in[1].shape_of(), in[0].shape_of());
  bool do_data = writes(req[0]), do_weights = writes(req[1]);
#if WEFT_USE_ONEDNN
  if (in[0].dtype() == DType::kFloat32 && dnnl_conv_supported(g)) {
    if (req[0] == OpReq::kWrite || req[0] == OpReq::kInplace) {
      dnnl_conv_forward(g, ctx, in[0], in[2], 2, nullptr, out[0]);
      do_data = false;
    }
    if (req[1] == OpReq::kWrite || req[1] == OpReq::kInplace) {
      dnnl_conv_backward_weights(g, ctx, in[0], in[1], out[1], nullptr);
      do_weights = false;
    }
  }
#endif
  WEFT_ICHECK(ctx.workspace_bytes >= ref_workspace_bytes(g))
      << attrs.where() << ": workspace too small";
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    DT* col = static_cast<DT*>(ctx.workspace);
    const DT* dy = in[0].ptr<DT>();
    if (do_data) {
      conv_forward_ref<DT>(g, dy, in[2].ptr<DT>(), nullptr, out[0].ptr<DT>(), req[0] == OpReq::kAdd,
                           col, ctx.num_threads);
    }
    if (do_weights) {
      conv_backward_weight_ref<DT>(g, dy, in[1].ptr<DT>(), out[1].ptr<DT>(), req[1] == OpReq::kAdd,
                                   col, ctx.num_threads);
    }
    if (!p.no_bias && writes(req[2])) {
      bias_backward_ref<DT>(dy, g.batch, g.in_c, g.in_size(), out[2].ptr<DT>(),
                            req[2] == OpReq::kAdd, ctx.num_threads);
    }
  });
}

}  // namespace

void register_deconvolution_kernels(OpRegistry& r) {
  // The workspace requests size the CPU kernels' scratch (im2col columns, oneDNN scratchpads).
  r.kernels("Deconvolution")
      .set_resource_request(DeviceType::kCPU, deconv_resources)
      .set_attr<FCompute>(DeviceType::kCPU, deconv_forward);
  r.kernels("_backward_Deconvolution")
      .set_resource_request(DeviceType::kCPU, deconv_backward_resources)
      .set_attr<FCompute>(DeviceType::kCPU, deconv_backward);
}

}  // namespace weft::detail
