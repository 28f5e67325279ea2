// CPU kernels of the image operators on HWC / NHWC images: _image_to_tensor, _image_normalize
// (CHW / NCHW) and its backward op, the fixed and random flips, _image_crop and its backward op,
// and register_image_kernels (which adds _image_resize's from ops/cpu/image_resize.cc).
#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/register.h"
#include "ops/defs/image_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// An image (H, W, C) or a batch of them (N, H, W, C); unknown dims stay -1.
struct ImageDims {
  int64_t n = 1, h = 0, w = 0, c = 0;
};

ImageDims hwc_dims(const TensorView& v) {
  const bool batched = v.ndim == 4;
  return {batched ? v.shape[0] : 1, v.dim(-3), v.dim(-2), v.dim(-1)};
}

// Writes `v` to `dst` under `req` (kWrite / kInplace overwrite, kAdd accumulates).
template <typename T, typename V>
inline void store(T& dst, V v, bool add) {
  dst = add ? static_cast<T>(dst + static_cast<T>(v)) : static_cast<T>(v);
}

// ---- _image_to_tensor --------------------------------------------------------------------------

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

void crop_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const bool add = req[0] == OpReq::kAdd;
  if (!add) std::memset(out[0].raw(), 0, out[0].bytes());
  crop_copy(attrs, ctx, out[0], in[0], false, add);
}

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_image_resize_kernels(OpRegistry& r);  // ops/cpu/image_resize.cc

void register_image_kernels(OpRegistry& r) {
  using namespace detail;  // the kernels above
  r.kernels("_image_to_tensor").set_attr<FCompute>(DeviceType::kCPU, to_tensor_forward);
  r.kernels("_image_normalize").set_attr<FCompute>(DeviceType::kCPU, normalize_forward);
  r.kernels("_backward_image_normalize").set_attr<FCompute>(DeviceType::kCPU, normalize_backward);
  for (bool lr : {true, false}) {
    const std::string axis = lr ? "left_right" : "top_bottom";
    r.kernels("_image_flip_" + axis)
        .set_attr<FCompute>(DeviceType::kCPU, lr ? flip_forward<true> : flip_forward<false>);
    r.kernels("_image_random_flip_" + axis)
        .set_attr<FCompute>(DeviceType::kCPU,
                            lr ? random_flip_forward<true> : random_flip_forward<false>);
  }
  r.kernels("_image_crop").set_attr<FCompute>(DeviceType::kCPU, crop_forward);
  r.kernels("_backward_image_crop").set_attr<FCompute>(DeviceType::kCPU, crop_backward);

  register_image_resize_kernels(r);
}

}  // namespace weft::cpu
