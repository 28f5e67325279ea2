// _image_resize: MXNet 1.9.1's mx.nd.image.resize on HWC / NHWC images, which calls OpenCV's
// cv::resize: the definition (the CPU kernel, Note [OpenCV bilinear resize], is in
// ops/cpu/image_resize.cc).
#include <string>
#include <utility>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/image_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// The output (height, width) for an input of h x w (-1: unknown). MXNet's integer rule: with
// keep_ratio the short edge becomes size and the other is scaled and truncated.
std::pair<int64_t, int64_t> resized_hw(const ImageResizeParam& p, int64_t h, int64_t w) {
  if (p.size.ndim() == 2) return {p.size[1], p.size[0]};
  const int64_t s = p.size[0];
  if (!p.keep_ratio) return {s, s};
  if (h < 0 || w < 0) return {-1, -1};
  if (h > w) return {h * s / w, s};
  return {s, w * s / h};
}

bool resize_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known()) return false;
  const Shape& s = in[0];
  const int nd = s.ndim();
  if (nd != 3 && nd != 4) {
    throw_shape_error(attrs,
                      "expects an image (H, W, C) or a batch of images (N, H, W, C), got "
                      "an array of shape " +
                          s.to_string());
  }
  const auto& p = attrs.params<ImageResizeParam>();
  WEFT_CHECK_AS(NotImplemented, p.interp <= 1)
      << attrs.where() << ": interp=" << p.interp
      << " is not implemented (0 nearest and 1 bilinear are)";
  const int64_t h = s[nd - 3], w = s[nd - 2];
  if (h == 0 || w == 0) throw_shape_error(attrs, "cannot resize the empty image " + s.to_string());
  const auto [oh, ow] = resized_hw(p, h, w);
  assign_output_shape(attrs, out, 0, nd == 3 ? Shape{oh, ow, s[2]} : Shape{s[0], oh, ow, s[3]});
  return in[0].known() && out[0].known();
}

bool resize_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  const DType t = in[0] != DType::kUnknown ? in[0] : out[0];
  if (t == DType::kUnknown) return false;
  WEFT_CHECK_AS(NotImplemented, t == DType::kUInt8 || t == DType::kFloat32 || t == DType::kFloat64)
      << attrs.where() << ": dtype " << dtype_name(t)
      << " is not supported (uint8, float32 and float64 are, as in OpenCV)";
  assign_input_type(attrs, in, 0, t);
  assign_output_type(attrs, out, 0, t);
  return true;
}

}  // namespace

void register_image_resize_op(OpRegistry& r) {
  r.add_alias("_npx__image_resize", "_image_resize");
  r.define_op("_image_resize")
      .describe(
          "Resizes images (H, W, C) or batches (N, H, W, C) of uint8, float32 or float64 to "
          "size = (width, height), or to (size, size), or with keep_ratio to a short edge of "
          "size (mx.nd.image.resize, computed like OpenCV's cv::resize: interp=1 bilinear with "
          "half-pixel centres, uint8 in OpenCV's 11-bit fixed point; interp=0 nearest). "
          "No gradient.")
      .set_params<ImageResizeParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(resize_infer_shape)
      .set_attr<FInferType>(resize_infer_type);
}

}  // namespace weft::detail