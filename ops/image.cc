// The image operators of MXNet 1.9.1's mx.nd.image on HWC / NHWC images: _image_to_tensor,
// _image_normalize (CHW / NCHW), the fixed and random flips and _image_crop, with the gradients
// that are well defined. _image_resize is in ops/image_resize.cc.
#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/image_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// An image (H, W, C) or a batch of them (N, H, W, C); unknown dims stay -1.
struct ImageDims {
  int64_t n = 1, h = 0, w = 0, c = 0;
};

// Throws a ShapeError naming the op unless `s` is 3-d or 4-d (`layout` names the two forms).
void check_image_rank(const OpAttrs& attrs, const Shape& s, const char* layout) {
  if (s.ndim() != 3 && s.ndim() != 4) {
    throw_shape_error(
        attrs, std::string("expects ") + layout + ", got an array of shape " + s.to_string());
  }
}

ImageDims hwc_dims(const TensorView& v) {
  const bool batched = v.ndim == 4;
  return {batched ? v.shape[0] : 1, v.dim(-3), v.dim(-2), v.dim(-1)};
}

constexpr const char* kHwc = "an image (H, W, C) or a batch of images (N, H, W, C)";
constexpr const char* kChw = "a tensor (C, H, W) or a batch of them (N, C, H, W)";

// Writes `v` to `dst` under `req` (kWrite / kInplace overwrite, kAdd accumulates).
template <typename T, typename V>
inline void store(T& dst, V v, bool add) {
  dst = add ? static_cast<T>(dst + static_cast<T>(v)) : static_cast<T>(v);
}

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

// One image row (w pixels of c channels) into c planes of `plane` floats each; `convert` maps an
// input value to the output value.
template <typename T, typename F>
void to_tensor_row(const T* x, float* y, int64_t w, int64_t c, int64_t plane, bool add,
                   const F& convert) {
  if (c == 3 && !add) {
    float* y0 = y;
    float* y1 = y + plane;
    float* y2 = y + 2 * plane;
    for (int64_t i = 0; i < w; ++i) {
      y0[i] = convert(x[3 * i]);
      y1[i] = convert(x[3 * i + 1]);
      y2[i] = convert(x[3 * i + 2]);
    }
    return;
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    float* yc = y + ch * plane;
    for (int64_t i = 0; i < w; ++i) store(yc[i], convert(x[i * c + ch]), add);
  }
}

template <typename T>
void to_tensor_kernel(const OpContext& ctx, const TensorView& in, const TensorView& out, bool add) {
  const ImageDims d = hwc_dims(in);
  const T* x = in.ptr<T>();
  float* y = out.ptr<float>();
  const int64_t plane = d.h * d.w;
  // uint8 values go through a table of v / 255 (MXNet's division, exactly, without dividing per
  // pixel); other types are scaled by the reciprocal.
  std::array<float, 256> table{};
  if constexpr (std::is_same_v<T, uint8_t>) {
    for (int v = 0; v < 256; ++v) table[v] = static_cast<float>(v) / 255.0f;
  }
  const auto convert = [&table](T v) {
    if constexpr (std::is_same_v<T, uint8_t>) {
      return table[v];
    } else {
      return static_cast<float>(static_cast<float>(v) * (1.0f / 255.0f));
    }
  };
  parallel_for(d.n * d.h, std::max<int64_t>(1, 16384 / std::max<int64_t>(d.w * d.c, 1)),
               ctx.num_threads, [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t img = r / d.h, row = r % d.h;
                   to_tensor_row(x + r * d.w * d.c, y + img * d.c * plane + row * d.w, d.w, d.c,
                                 plane, add, convert);
                 }
               });
}

void to_tensor_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const bool add = req[0] == OpReq::kAdd;
  WEFT_ARITH_SWITCH(in[0].dtype(), T, attrs.where(), to_tensor_kernel<T>(ctx, in[0], out[0], add));
}

// ---- _image_normalize --------------------------------------------------------------------------

// The value for channel `c` of a per-channel tuple (rounded to float, as MXNet stores them).
double channel_value(const std::vector<double>& v, int64_t c) {
  return static_cast<float>(v.size() == 1 ? v[0] : v[static_cast<size_t>(c)]);
}

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

// y = (x - shift[c]) * scale[c] over (N, C, plane) data; `x` may equal `y` (in place).
template <typename T>
void scale_channels(const OpContext& ctx, const T* x, T* y, int64_t n, int64_t c, int64_t plane,
                    const std::vector<T>& shift, const std::vector<T>& scale, bool add) {
  const int64_t rows_per_plane = std::max<int64_t>(1, plane / 4096);
  const int64_t chunk = (plane + rows_per_plane - 1) / rows_per_plane;
  parallel_for(n * c * rows_per_plane, 1, ctx.num_threads, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t pc = t / rows_per_plane, part = t % rows_per_plane;
      const int64_t ch = pc % c;
      const int64_t begin = part * chunk, end = std::min(plane, begin + chunk);
      const T m = shift[ch], s = scale[ch];
      const T* xs = x + pc * plane;
      T* ys = y + pc * plane;
      if (add) {
        for (int64_t i = begin; i < end; ++i) ys[i] += (xs[i] - m) * s;
      } else {
        for (int64_t i = begin; i < end; ++i) ys[i] = (xs[i] - m) * s;
      }
    }
  });
}

// Forward: shift = mean, scale = 1 / std. Backward (`backward`): shift = 0, scale = 1 / std.
template <typename T>
void normalize_kernel(const OpAttrs& attrs, const OpContext& ctx, const TensorView& x,
                      const TensorView& y, bool add, bool backward) {
  const auto& p = attrs.params<ImageNormalizeParam>();
  const int64_t n = x.ndim == 4 ? x.shape[0] : 1, c = x.dim(-3);
  std::vector<T> shift(static_cast<size_t>(c)), scale(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    shift[ch] = backward ? T(0) : static_cast<T>(channel_value(p.mean, ch));
    scale[ch] = static_cast<T>(1.0 / channel_value(p.std, ch));
  }
  scale_channels<T>(ctx, x.ptr<T>(), y.ptr<T>(), n, c, x.dim(-2) * x.dim(-1), shift, scale, add);
}

void normalize_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  WEFT_FLOAT_SWITCH(out[0].dtype(), T, attrs.where(),
                    normalize_kernel<T>(attrs, ctx, in[0], out[0], req[0] == OpReq::kAdd, false));
}

// _backward_image_normalize: inputs (out_grad, data), output out_grad / std[c].
void normalize_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  WEFT_FLOAT_SWITCH(out[0].dtype(), T, attrs.where(),
                    normalize_kernel<T>(attrs, ctx, in[0], out[0], req[0] == OpReq::kAdd, true));
}

// ---- flips -------------------------------------------------------------------------------------

bool image_same_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const bool ok = infer_same_shape(attrs, in, out);
  if (in[0].rank_known()) check_image_rank(attrs, in[0], kHwc);
  return ok;
}

// Mirrors one row of w pixels of c channels (CN > 0: c == CN known at compile time).
template <typename T, int CN>
void mirror_row(const T* x, T* y, int64_t w, int64_t c, bool add) {
  const int64_t cc = CN > 0 ? CN : c;
  for (int64_t i = 0; i < w; ++i) {
    const T* src = x + (w - 1 - i) * cc;
    T* dst = y + i * cc;
    for (int64_t ch = 0; ch < cc; ++ch) store(dst[ch], src[ch], add);
  }
}

// Mirrors (N, H, W, C) images along W (`left_right`) or H into `y` (which must not alias `x`).
template <typename T>
void flip_kernel(const OpContext& ctx, const TensorView& in, const TensorView& out, bool left_right,
                 bool add) {
  const ImageDims d = hwc_dims(in);
  const T* x = in.ptr<T>();
  T* y = out.ptr<T>();
  const int64_t row = d.w * d.c;
  parallel_for(d.n * d.h, std::max<int64_t>(1, 16384 / std::max<int64_t>(row, 1)), ctx.num_threads,
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t img = r / d.h, h = r % d.h;
                   T* yr = y + r * row;
                   if (!left_right) {
                     const T* xr = x + (img * d.h + (d.h - 1 - h)) * row;
                     if (!add) {
                       std::memcpy(yr, xr, static_cast<size_t>(row) * sizeof(T));
                     } else {
                       for (int64_t i = 0; i < row; ++i) store(yr[i], xr[i], true);
                     }
                     continue;
                   }
                   const T* xr = x + r * row;
                   if (add) {
                     mirror_row<T, 0>(xr, yr, d.w, d.c, true);
                   } else if (d.c == 3) {
                     mirror_row<T, 3>(xr, yr, d.w, 3, false);
                   } else if (d.c == 1) {
                     mirror_row<T, 1>(xr, yr, d.w, 1, false);
                   } else {
                     mirror_row<T, 0>(xr, yr, d.w, d.c, false);
                   }
                 }
               });
}

void flip_or_copy(const OpAttrs& attrs, const OpContext& ctx, const TensorView& in,
                  const TensorView& out, OpReq req, bool flip, bool left_right) {
  if (req == OpReq::kNull || out.size() == 0) return;
  const bool add = req == OpReq::kAdd;
  if (!flip && !add) {
    if (out.raw() != in.raw()) std::memcpy(out.raw(), in.raw(), in.bytes());
    return;
  }
  WEFT_DTYPE_SWITCH(in.dtype(), T, attrs.where(), {
    if (flip) {
      flip_kernel<T>(ctx, in, out, left_right, add);
    } else {
      const T* x = in.ptr<T>();
      T* y = out.ptr<T>();
      for (int64_t i = 0; i < in.size(); ++i) store(y[i], x[i], true);
    }
  });
}

template <bool kLeftRight>
void flip_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  flip_or_copy(attrs, ctx, in[0], out[0], req[0], true, kLeftRight);
}

template <bool kLeftRight>
void random_flip_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_CHECK_AS(InternalError, ctx.random != nullptr)
      << attrs.where() << ": no random state (kRandom)";
  // One draw per call, also when the output is not written, so later draws do not depend on req.
  const bool flip = std::uniform_real_distribution<double>(0.0, 1.0)(ctx.random->engine) <
                    attrs.params<RandomFlipParam>().p;
  flip_or_copy(attrs, ctx, in[0], out[0], req[0], flip, kLeftRight);
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

// Copies the window of `image` into `window` (`to_window`) or the window back into `image`
// (the gradient); `add` accumulates into the destination.
void crop_copy(const OpAttrs& attrs, const OpContext& ctx, const TensorView& image,
               const TensorView& window, bool to_window, bool add) {
  const auto& p = attrs.params<ImageCropParam>();
  const ImageDims d = hwc_dims(image);
  const size_t es = dtype_size(image.dtype());
  const int64_t row = p.width * d.c;
  WEFT_DTYPE_SWITCH(image.dtype(), T, attrs.where(), {
    T* img = image.ptr<T>();
    T* win = window.ptr<T>();
    parallel_for(d.n * p.height, std::max<int64_t>(1, 16384 / std::max<int64_t>(row, 1)),
                 ctx.num_threads, [&](int64_t b, int64_t e) {
                   for (int64_t r = b; r < e; ++r) {
                     const int64_t n = r / p.height, h = r % p.height;
                     T* ip = img + ((n * d.h + p.y + h) * d.w + p.x) * d.c;
                     T* wp = win + r * row;
                     const T* src = to_window ? ip : wp;
                     T* dst = to_window ? wp : ip;
                     if (!add) {
                       std::memcpy(dst, src, static_cast<size_t>(row) * es);
                     } else {
                       for (int64_t i = 0; i < row; ++i) store(dst[i], src[i], true);
                     }
                   }
                 });
  });
}

void crop_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  crop_copy(attrs, ctx, in[0], out[0], true, req[0] == OpReq::kAdd);
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

void crop_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const bool add = req[0] == OpReq::kAdd;
  if (!add) std::memset(out[0].raw(), 0, out[0].bytes());
  crop_copy(attrs, ctx, out[0], in[0], false, add);
}

// Registers `name` with MXNet's numpy-extension alias `_npx_<name>`.
Op& image_op(OpRegistry& r, const std::string& name) {
  r.add_alias("_npx_" + name, name);
  return r.register_op(name);
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
      .set_attr<FInferType>(to_tensor_infer_type)
      .set_attr<FCompute>(DeviceType::kCPU, to_tensor_forward);

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
      .set_attr<FCompute>(DeviceType::kCPU, normalize_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_image_normalize", {b.out_grad(0), b.input(0)})[0]};
      });
  r.register_op("_backward_image_normalize")
      .describe("Gradient of _image_normalize: the output gradient divided by std[c].")
      .set_params<ImageNormalizeParam>()
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(normalize_infer_shape)
      .set_attr<FInferType>(float_infer_type)
      .set_attr<FCompute>(DeviceType::kCPU, normalize_backward);

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
        .set_attr<FCompute>(DeviceType::kCPU, lr ? flip_forward<true> : flip_forward<false>)
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
            })
        .set_attr<FCompute>(DeviceType::kCPU,
                            lr ? random_flip_forward<true> : random_flip_forward<false>);
  }

  image_op(r, "_image_crop")
      .describe(
          "Crops the window of `width` x `height` pixels at column x, row y from images (H, W, C) "
          "or batches (N, H, W, C) (mx.nd.image.crop); the window must lie inside the image. "
          "Any dtype and channel count (MXNet: 1 or 3 channels).")
      .set_params<ImageCropParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(crop_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, crop_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_image_crop", {b.out_grad(0), b.input(0)})[0]};
      });
  r.register_op("_backward_image_crop")
      .describe("Gradient of _image_crop: the output gradient inside the window, zero elsewhere.")
      .set_params<ImageCropParam>()
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(crop_backward_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, crop_backward);

  register_image_resize_op(r);
}

}  // namespace weft::detail
