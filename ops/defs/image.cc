// The image operators of MXNet 1.9.1's mx.nd.image on HWC / NHWC images: _image_to_tensor,
// _image_normalize (CHW / NCHW), the fixed and random flips and _image_crop, with the gradients
// that are well defined: the definitions (the CPU kernels are in ops/cpu/image.cc).
// _image_resize is in ops/defs/image_resize.cc.
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/image_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// Throws a ShapeError naming the op unless `s` is 3-d or 4-d (`layout` names the two forms).
void check_image_rank(const OpAttrs& attrs, const Shape& s, const char* layout) {
  if (s.ndim() != 3 && s.ndim() != 4) {
    throw_shape_error(
        attrs, std::string("expects ") + layout + ", got an array of shape " + s.to_string());
  }
}

constexpr const char* kHwc = "an image (H, W, C) or a batch of images (N, H, W, C)";
constexpr const char* kChw = "a tensor (C, H, W) or a batch of them (N, C, H, W)";

// ---- _image_to_tensor --------------------------------------------------------------------------

bool to_tensor_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known() && out[0].rank_known()) {
    check_image_rank(attrs, out[0], kChw);
    const Shape& o = out[0];
    assign_input_shape(attrs, in, 0,
                       o.ndim() == 3 ? Shape{o[1], o[2], o[0]} : Shape{o[0], o[2], o[3], o[1]});
  }
  if (!in[0].rank_known()) return false;
  check_image_rank(attrs, in[0], kHwc);
  const Shape& s = in[0];
  assign_output_shape(attrs, out, 0,
                      s.ndim() == 3 ? Shape{s[2], s[0], s[1]} : Shape{s[0], s[3], s[1], s[2]});
  return in[0].known() && out[0].known();
}

bool to_tensor_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  assign_output_type(attrs, out, 0, DType::kFloat32);
  return in[0] != DType::kUnknown;
}

// ---- _image_normalize --------------------------------------------------------------------------

bool normalize_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const bool ok = infer_same_shape(attrs, in, out);
  if (!in[0].rank_known()) return false;
  check_image_rank(attrs, in[0], kChw);
  const int64_t c = in[0][in[0].ndim() - 3];
  const auto& p = attrs.params<ImageNormalizeParam>();
  for (const auto* v : {&p.mean, &p.std}) {
    const auto n = static_cast<int64_t>(v->size());
    if (c >= 0 && n > 1 && n != c) {
      throw_shape_error(attrs, std::string(v == &p.mean ? "mean" : "std") + " has " +
                                   std::to_string(n) + " values; data " + in[0].to_string() +
                                   " has " + std::to_string(c) +
                                   " channels (give 1 value or one per channel)");
    }
  }
  return ok;
}

bool float_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = DType::kUnknown;
  for (DType d : in) t = t == DType::kUnknown ? d : t;
  for (DType d : out) t = t == DType::kUnknown ? d : t;
  if (t == DType::kUnknown) return false;
  WEFT_CHECK_AS(NotImplemented, t == DType::kFloat32 || t == DType::kFloat64)
      << attrs.where() << ": dtype " << dtype_name(t)
      << " is not supported (float32 and float64 are; _image_to_tensor converts uint8 images)";
  for (size_t i = 0; i < in.size(); ++i) assign_input_type(attrs, in, static_cast<int>(i), t);
  for (size_t i = 0; i < out.size(); ++i) assign_output_type(attrs, out, static_cast<int>(i), t);
  return true;
}

// ---- flips -------------------------------------------------------------------------------------

bool image_same_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const bool ok = infer_same_shape(attrs, in, out);
  if (in[0].rank_known()) check_image_rank(attrs, in[0], kHwc);
  return ok;
}

// ---- _image_crop -------------------------------------------------------------------------------

// The cropped shape of an (N,) H, W, C input; throws when the window leaves the image.
Shape crop_shape(const OpAttrs& attrs, const Shape& s) {
  check_image_rank(attrs, s, kHwc);
  const auto& p = attrs.params<ImageCropParam>();
  const int nd = s.ndim();
  const int64_t h = s[nd - 3], w = s[nd - 2];
  if ((w >= 0 && p.x + p.width > w) || (h >= 0 && p.y + p.height > h)) {
    throw_shape_error(attrs, "the window x=" + std::to_string(p.x) + ", y=" + std::to_string(p.y) +
                                 ", width=" + std::to_string(p.width) +
                                 ", height=" + std::to_string(p.height) +
                                 " does not fit in the image " + s.to_string() +
                                 " (x + width <= W and y + height <= H are required)");
  }
  return nd == 3 ? Shape{p.height, p.width, s[2]} : Shape{s[0], p.height, p.width, s[3]};
}

bool crop_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, crop_shape(attrs, in[0]));
  return in[0].known() && out[0].known();
}

// _backward_image_crop: inputs (out_grad, data); output the data's gradient, zero outside the
// window.
bool crop_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                               std::vector<Shape>& out) {
  assign_input_shape(attrs, in, 1, out[0]);
  if (!in[1].rank_known()) return false;
  assign_input_shape(attrs, in, 0, crop_shape(attrs, in[1]));
  assign_output_shape(attrs, out, 0, in[1]);
  return in[0].known() && in[1].known() && out[0].known();
}

// Registers `name` with MXNet's numpy-extension alias `_npx_<name>`.
Op& image_op(OpRegistry& r, const std::string& name) {
  r.add_alias("_npx_" + name, name);
  return r.define_op(name);
}

}  // namespace

void register_image_ops(OpRegistry& r) {
  image_op(r, "_image_to_tensor")
      .describe(
          "Converts images (H, W, C) or batches (N, H, W, C) of any numeric type with values in "
          "[0, 255] into float32 tensors (C, H, W) / (N, C, H, W) divided by 255 "
          "(mx.nd.image.to_tensor). No gradient.")
      .set_input_names({"data"})
      .set_attr<FInferShape>(to_tensor_infer_shape)
      .set_attr<FInferType>(to_tensor_infer_type);

  image_op(r, "_image_normalize")
      .describe(
          "Normalises float tensors (C, H, W) or (N, C, H, W) per channel: (x - mean[c]) / "
          "std[c]; a single mean or std value applies to every channel "
          "(mx.nd.image.normalize). Any channel count (MXNet: 1 or 3); the defaults are 0 and 1 "
          "(MXNet's are four-value tuples, which its own check rejects for 1 or 3 channels).")
      .set_params<ImageNormalizeParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(normalize_infer_shape)
      .set_attr<FInferType>(float_infer_type)
      .set_attr<FInplaceOption>([](const OpAttrs&) {
        return std::vector<std::pair<int, int>>{{0, 0}};
      })
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_image_normalize", {b.out_grad(0), b.input(0)})[0]};
      });
  r.define_op("_backward_image_normalize")
      .describe("Gradient of _image_normalize: the output gradient divided by std[c].")
      .set_params<ImageNormalizeParam>()
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(normalize_infer_shape)
      .set_attr<FInferType>(float_infer_type);

  for (bool lr : {true, false}) {
    const std::string axis = lr ? "left_right" : "top_bottom";
    const std::string what = lr ? "left-right (along W)" : "top-bottom (along H)";
    const std::string name = "_image_flip_" + axis;
    image_op(r, name)
        .describe("Mirrors images (H, W, C) or batches (N, H, W, C) " + what +
                  ". Any dtype and channel count (MXNet 1.9.1: (H, W, C) with 1 or 3 channels, "
                  "and an odd width or height leaves its middle column or row unwritten). The "
                  "gradient is the mirrored output gradient (MXNet's is a plain copy).")
        .set_input_names({"data"})
        .set_attr<FInferShape>(image_same_shape)
        .set_attr<FGradient>([name](GradBuilder& b) {
          return std::vector<GradEntry>{b.emit1(name, {b.out_grad(0)})};
        });
    image_op(r, "_image_random_flip_" + axis)
        .describe("Mirrors images " + what + " with probability p, else copies them; draws " +
                  "from the device's random state. No gradient.")
        .set_params<RandomFlipParam>()
        .set_input_names({"data"})
        .set_attr<FInferShape>(image_same_shape)
        .set_attr<FResourceRequest>(
            [](const OpAttrs&, const std::vector<Shape>&, const std::vector<Shape>&) {
              return std::vector<ResourceRequest>{{ResourceRequest::Kind::kRandom, 0}};
            });
  }

  image_op(r, "_image_crop")
      .describe(
          "Crops the window of `width` x `height` pixels at column x, row y from images (H, W, C) "
          "or batches (N, H, W, C) (mx.nd.image.crop); the window must lie inside the image. "
          "Any dtype and channel count (MXNet: 1 or 3 channels).")
      .set_params<ImageCropParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(crop_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_image_crop", {b.out_grad(0), b.input(0)})[0]};
      });
  r.define_op("_backward_image_crop")
      .describe("Gradient of _image_crop: the output gradient inside the window, zero elsewhere.")
      .set_params<ImageCropParam>()
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(crop_backward_infer_shape);

  register_image_resize_op(r);
}

}  // namespace weft::detail