// Param struct of Deconvolution and its geometry, shared by the definitions (ops/defs/deconv.cc),
// the CPU kernels (ops/cpu/deconv.cc) and the CUDA ones (ops/cuda/conv.cc).
#pragma once

#include <optional>

#include "ops/defs/conv_common.h"

namespace weft::detail {

struct DeconvolutionParam {
  Shape kernel, stride, dilate, pad, adj, target_shape;
  int64_t num_filter = 0;
  int64_t num_group = 1;
  int64_t workspace = 512;
  bool no_bias = true;
  std::optional<CudnnTune> cudnn_tune;
  bool cudnn_off = false;
  std::optional<SpatialLayout> layout;

  /// Whether target_shape decides the output size (some entry non-zero).
  bool has_target() const {
    for (int i = 0; i < target_shape.ndim(); ++i)
      if (target_shape[i] != 0) return true;
    return false;
  }

  static void declare(ParamSchema<DeconvolutionParam>& s) {
    using P = DeconvolutionParam;
    const Shape empty(std::vector<int64_t>{});
    s.field("kernel", &P::kernel).describe("deconvolution kernel size: (w,), (h, w) or (d, h, w)");
    s.field("stride", &P::stride)
        .set_default(empty, "[]")
        .describe("stride per spatial dim (default 1)");
    s.field("dilate", &P::dilate)
        .set_default(empty, "[]")
        .describe("dilation per spatial dim (default 1)");
    s.field("pad", &P::pad)
        .set_default(empty, "[]")
        .describe("padding removed from the output (default 0)");
    s.field("adj", &P::adj)
        .set_default(empty, "[]")
        .describe("extra output size on one side (default 0)");
    s.field("target_shape", &P::target_shape)
        .set_default(empty, "[]")
        .describe("output spatial shape; when set, pad and adj are derived from it");
    s.field("num_filter", &P::num_filter).lower_bound(1).describe("number of output channels");
    s.field("num_group", &P::num_group).set_default(1).lower_bound(1).describe("number of groups");
    s.field("workspace", &P::workspace)
        .set_default(512)
        .lower_bound(0)
        .describe("workspace limit in MB (ignored)");
    s.field("no_bias", &P::no_bias).set_default(true).describe("whether to omit the bias input");
    s.optional_enum_field("cudnn_tune", &P::cudnn_tune, cudnn_tune_names())
        .set_default(std::nullopt)
        .describe("cuDNN algorithm selection (ignored on CPU)");
    s.field("cudnn_off", &P::cudnn_off)
        .set_default(false)
        .describe("turn off cuDNN (ignored on CPU)");
    s.optional_enum_field("layout", &P::layout, spatial_layout_names())
        .set_default(std::nullopt)
        .describe("data layout; None means NCW/NCHW/NCDHW by kernel rank");
    s.check([](P& p) {
      const int nsp = p.kernel.ndim();
      WEFT_CHECK(nsp >= 1 && nsp <= 3)
          << "kernel must have 1, 2 or 3 entries, got " << p.kernel.to_string();
      fill_spatial_tuple(p.stride, nsp, 1, "stride");
      fill_spatial_tuple(p.dilate, nsp, 1, "dilate");
      fill_spatial_tuple(p.pad, nsp, 0, "pad");
      fill_spatial_tuple(p.adj, nsp, 0, "adj");
      fill_spatial_tuple(p.target_shape, nsp, 0, "target_shape");
      for (int i = 0; i < nsp; ++i) {
        WEFT_CHECK(p.kernel[i] > 0) << "kernel " << p.kernel.to_string() << " must be positive";
        WEFT_CHECK(p.stride[i] > 0) << "stride " << p.stride.to_string() << " must be positive";
        WEFT_CHECK(p.dilate[i] > 0) << "dilate " << p.dilate.to_string() << " must be positive";
        WEFT_CHECK(p.pad[i] >= 0) << "pad " << p.pad.to_string() << " must be non-negative";
        WEFT_CHECK(p.target_shape[i] >= 0)
            << "target_shape " << p.target_shape.to_string() << " must be non-negative";
        WEFT_CHECK(p.adj[i] >= 0 && p.adj[i] < p.stride[i])
            << "adj " << p.adj.to_string() << " must be smaller than stride "
            << p.stride.to_string();
      }
      WEFT_CHECK(p.num_filter % p.num_group == 0)
          << "num_filter " << p.num_filter << " is not divisible by num_group " << p.num_group;
    });
  }
};

/// The geometry of the convolution a deconvolution transposes: its input is the deconvolution's
/// output (num_filter channels) and its output the deconvolution's input. `data` / `out` are the
/// deconvolution's data and output shapes.
ConvGeom deconv_geom(const OpAttrs& attrs, const Shape& data, const Shape& out);

}  // namespace weft::detail
