// Device-neutral parts of the convolution / pooling / dense ops, shared by their definitions
// (ops/defs/) and the CPU and CUDA kernels: the layout and cuDNN-hint enums, convolution
// geometry, Convolution's params and shape rules, and the fused activation's description.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

// ---- registration entry points (one per file) ---------------------------------------------------
void register_convolution_ops(OpRegistry& r);      // ops/defs/conv.cc
void register_fused_conv_ops(OpRegistry& r);       // ops/defs/conv_fused.cc
void register_deconvolution_ops(OpRegistry& r);    // ops/defs/deconv.cc
void register_pooling_ops(OpRegistry& r);          // ops/defs/pooling.cc
void register_fully_connected_ops(OpRegistry& r);  // ops/defs/fully_connected.cc
void register_dot_ops(OpRegistry& r);              // ops/defs/dot.cc

/// Data layouts of the spatial ops (MXNet's mshadow layout flags, by name).
enum class SpatialLayout { kNCW, kNWC, kNCHW, kNHWC, kNCDHW, kNDHWC };

/// The enum spellings accepted by `layout` attributes.
inline std::vector<std::pair<std::string, SpatialLayout>> spatial_layout_names() {
  return {{"NCW", SpatialLayout::kNCW},     {"NWC", SpatialLayout::kNWC},
          {"NCHW", SpatialLayout::kNCHW},   {"NHWC", SpatialLayout::kNHWC},
          {"NCDHW", SpatialLayout::kNCDHW}, {"NDHWC", SpatialLayout::kNDHWC}};
}

/// cuDNN algorithm-selection hints (accepted, ignored on CPU).
enum class CudnnTune { kOff, kLimitedWorkspace, kFastest };
inline std::vector<std::pair<std::string, CudnnTune>> cudnn_tune_names() {
  return {{"off", CudnnTune::kOff},
          {"limited_workspace", CudnnTune::kLimitedWorkspace},
          {"fastest", CudnnTune::kFastest}};
}

/// Checks that `layout` (when given) is the channel-first layout of an `nsp`-d spatial op; a
/// channel-last layout is NotImplemented on CPU, a layout of the wrong rank a ValueError.
void check_channel_first_layout(const OpAttrs& attrs, const std::optional<SpatialLayout>& layout,
                                int nsp);

/// Fills an empty tuple with `value` per spatial dim and checks the length of a non-empty one.
void fill_spatial_tuple(Shape& t, int nsp, int64_t value, const char* name);

/// Convolution geometry in conv terms, always with three spatial dims (1-D and 2-D get leading
/// dims of size 1 and trivial kernel/stride/pad/dilation). `in`/`out` are the spatial sizes of the
/// convolution's input and output; the caller sets them (a deconvolution passes its own output as
/// `in`, so `out` need not equal the usual formula).
struct ConvGeom {
  int nsp = 2;
  int64_t batch = 0, in_c = 0, out_c = 0, groups = 1;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, d{1, 1, 1}, p{0, 0, 0};

  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
  int64_t in_cg() const { return in_c / groups; }
  int64_t out_cg() const { return out_c / groups; }
  /// Rows of the im2col matrix of one group: in_cg * k_size.
  int64_t col_rows() const { return in_cg() * k_size(); }
  /// True for a 1x1 kernel with stride 1 and no padding: im2col is the identity.
  bool pointwise() const;
  /// Sets kernel/stride/dilate/pad from nsp-long tuples (right-aligned into the 3 slots).
  void set_window(const Shape& kernel, const Shape& stride, const Shape& dilate, const Shape& pad);
  /// Sets in/out spatial sizes from the trailing nsp dims of two shapes.
  void set_spatial(const Shape& in_shape, const Shape& out_shape);
};

// ---- Convolution's parameters and helpers (ops/defs/conv.cc), shared with the fused op ----------

/// Attributes of Convolution (MXNet's names and defaults); also the convolution part of the fused
/// convolution ops.
struct ConvolutionParam {
  Shape kernel, stride, dilate, pad;
  int64_t num_filter = 0;
  int64_t num_group = 1;
  int64_t workspace = 1024;
  bool no_bias = false;
  std::optional<CudnnTune> cudnn_tune;
  bool cudnn_off = false;
  std::optional<SpatialLayout> layout;

  static void declare(ParamSchema<ConvolutionParam>& s) {
    using P = ConvolutionParam;
    const Shape empty(std::vector<int64_t>{});
    s.field("kernel", &P::kernel).describe("convolution kernel size: (w,), (h, w) or (d, h, w)");
    s.field("stride", &P::stride)
        .set_default(empty, "[]")
        .describe("stride per spatial dim (default 1)");
    s.field("dilate", &P::dilate)
        .set_default(empty, "[]")
        .describe("dilation per spatial dim (default 1)");
    s.field("pad", &P::pad)
        .set_default(empty, "[]")
        .describe("zero padding per spatial dim (default 0)");
    s.field("num_filter", &P::num_filter).lower_bound(1).describe("number of output channels");
    s.field("num_group", &P::num_group).set_default(1).lower_bound(1).describe("number of groups");
    s.field("workspace", &P::workspace)
        .set_default(1024)
        .lower_bound(0)
        .describe("workspace limit in MB (ignored)");
    s.field("no_bias", &P::no_bias).set_default(false).describe("whether to omit the bias input");
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
      for (int i = 0; i < nsp; ++i) {
        WEFT_CHECK(p.kernel[i] > 0) << "kernel " << p.kernel.to_string() << " must be positive";
        WEFT_CHECK(p.stride[i] > 0) << "stride " << p.stride.to_string() << " must be positive";
        WEFT_CHECK(p.dilate[i] > 0) << "dilate " << p.dilate.to_string() << " must be positive";
        WEFT_CHECK(p.pad[i] >= 0) << "pad " << p.pad.to_string() << " must be non-negative";
      }
      WEFT_CHECK(p.num_filter % p.num_group == 0)
          << "num_filter " << p.num_filter << " is not divisible by num_group " << p.num_group;
    });
  }
};

/// Number of inputs of a convolution: data, weight and, unless no_bias, bias.
int conv_num_inputs(const OpAttrs& a);
/// Input names of a convolution (data, weight[, bias]).
std::vector<std::string> conv_input_names(const OpAttrs& a);
/// Shape inference of Convolution (both directions where exact).
bool conv_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out);
/// The geometry of a convolution with parameters `p`, input shape `data` and output shape `out`.
ConvGeom conv_geom(const ConvolutionParam& p, const Shape& data, const Shape& out);

// ---- the fused ops' activation (ops/defs/conv_fused.cc) -----------------------------------------

/// An element-wise activation applied by a fused op as its output is written: a oneDNN eltwise
/// post-op, or fused_act_apply on the reference paths. Parsed from the hidden attributes the
/// inference rewrite (graph/fuse.cc) sets: `__act_type__` (none, relu, leaky, elu, sigmoid, tanh,
/// softrelu, clip, prelu) and `__act_alpha__` / `__act_beta__` (leaky/elu slope; clip's a_min,
/// a_max). prelu (a learned slope per channel, or one shared) takes its slopes as an input and is
/// a oneDNN prelu post-op; fused_act_apply does not handle it.
struct FusedAct {
  enum class Kind { kNone, kRelu, kLeaky, kElu, kSigmoid, kTanh, kSoftRelu, kClip, kPRelu };
  Kind kind = Kind::kNone;
  float alpha = 0.0f, beta = 0.0f;
  bool none() const { return kind == Kind::kNone; }
  /// A key fragment naming the activation and its constants (for primitive caches).
  std::string key() const;
};
/// The activation named by `attrs`' hidden attributes (none when absent); ValueError naming the op
/// for an unknown type.
FusedAct fused_act_from_attrs(const OpAttrs& attrs);

/// Rounds up to a multiple of 64 bytes (workspace slices stay cache-line aligned).
inline size_t align64(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace weft::detail
