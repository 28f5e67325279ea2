// CUDA kernels of _image_crop, _backward_image_crop and _image_resize on HWC / NHWC images.
// Semantics: ops/cpu/image.cc (crop) and ops/cpu/image_resize.cc (resize, Note [OpenCV bilinear
// resize]).
//
// Note [CUDA image resize arithmetic]
// The GPU result must equal the CPU's bit for bit, so each output element recomputes the CPU's
// per-column and per-row coefficients itself, in the same types and order. nvcc would contract
// a * b + c into an FMA (one rounding instead of two), which the CPU kernels, built without FMA
// contraction for x86-64, do not do; every floating multiply-add here therefore goes through the
// __*_rn intrinsics, which are never contracted. uint8 images follow the CPU's fixed-point
// passes exactly (integer arithmetic, no rounding question).
#include <cmath>
#include <type_traits>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/norm_util.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/image_params.h"

namespace weft::cuda {

namespace {

using detail::ImageCropParam;

// ---- _image_crop / _backward_image_crop --------------------------------------------------------

// dst = v, or dst + v rounded to T (the CPU's store()).
template <typename T>
__device__ __forceinline__ void store(T& dst, T v, bool add) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
    dst = add ? from_acc<T>(to_acc(dst) + to_acc(v)) : v;
  } else {
    dst = add ? static_cast<T>(dst + v) : v;
  }
}

// One thread per window element k of (N, height, width, C): copies image -> window
// (`to_window`) or window -> image (the gradient, which touches each image element once).
template <typename T>
__global__ void crop_kernel(T* image, T* window, bool to_window, bool add, int64_t total, int64_t H,
                            int64_t W, int64_t C, int64_t y0, int64_t x0, int64_t height,
                            int64_t width) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    const int64_t c = k % C, w = (k / C) % width, h = (k / (C * width)) % height;
    const int64_t n = k / (C * width * height);
    const int64_t i = ((n * H + y0 + h) * W + x0 + w) * C + c;
    if (to_window) {
      store(window[k], image[i], add);
    } else {
      store(image[i], window[k], add);
    }
  }
}

void crop_copy(const OpAttrs& attrs, const OpContext& ctx, const TensorView& image,
               const TensorView& window, bool to_window, bool add) {
  const auto& p = attrs.params<ImageCropParam>();
  const int64_t total = window.size();
  if (total == 0) return;
  const int64_t H = image.dim(-3), W = image.dim(-2), C = image.dim(-1);
  WEFT_CUDA_ALL_SWITCH(image.dtype(), T, attrs.where(), {
    crop_kernel<T><<<grid_for(total), kBlockSize, 0, stream_of(ctx)>>>(
        typed<T>(image), typed<T>(window), to_window, add, total, H, W, C, p.y, p.x, p.height,
        p.width);
    check_launch("crop_kernel", ctx);
  });
}

void crop_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  crop_copy(attrs, ctx, in[0], out[0], true, req[0] == OpReq::kAdd);
}

// Inputs (out_grad, data); the output is zero outside the window.
void crop_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const bool add = req[0] == OpReq::kAdd;
  if (!add) {
    memset_on_stream(ctx, out[0].raw(), 0, out[0].bytes());
  }
  crop_copy(attrs, ctx, out[0], in[0], false, add);
}

// ---- _image_resize -----------------------------------------------------------------------------

constexpr int kCoefScale = 1 << 11;  // OpenCV's 11-bit fixed-point weights

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, uint8_t>, int32_t, T>;

// The two source indices and weights of output position d along an axis of `in` pixels
// (`scale` = in / out in double); `clamp_weights`: the column rule, else the row rule.
struct Tap {
  int64_t i0, i1;
  float w0, w1;
};
__device__ __forceinline__ Tap linear_tap(int64_t d, int64_t in, double scale, bool clamp_weights) {
  float f = __double2float_rn(__dadd_rn(__dmul_rn(static_cast<double>(d) + 0.5, scale), -0.5));
  int64_t s = static_cast<int64_t>(floorf(f));
  f = __fsub_rn(f, static_cast<float>(s));
  if (clamp_weights) {
    if (s < 0) f = 0.f, s = 0;
    if (s >= in - 1) f = 0.f, s = in - 1;
  }
  Tap t;
  t.i0 = s < 0 ? 0 : s > in - 1 ? in - 1 : s;
  t.i1 = s + 1 < 0 ? 0 : s + 1 > in - 1 ? in - 1 : s + 1;
  t.w0 = __fsub_rn(1.f, f);
  t.w1 = f;
  return t;
}

template <typename T>
__device__ __forceinline__ Acc<T> weight(float w) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return static_cast<int32_t>(rintf(w * static_cast<float>(kCoefScale)));  // exact: power of 2
  } else {
    return static_cast<T>(w);
  }
}

// a * x + b * y with two roundings, as the CPU computes it (Note [CUDA image resize arithmetic]).
__device__ __forceinline__ float mad2(float a, float x, float b, float y) {
  return __fadd_rn(__fmul_rn(a, x), __fmul_rn(b, y));
}
__device__ __forceinline__ double mad2(double a, double x, double b, double y) {
  return __dadd_rn(__dmul_rn(a, x), __dmul_rn(b, y));
}
__device__ __forceinline__ int32_t mad2(int32_t a, int32_t x, int32_t b, int32_t y) {
  return a * x + b * y;
}

template <typename T>
__global__ void resize_linear_kernel(const T* __restrict__ x, T* y, bool add, int64_t total,
                                     int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t C,
                                     double scale_y, double scale_x) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    const int64_t c = k % C, dx = (k / C) % ow, dy = (k / (C * ow)) % oh;
    const int64_t n = k / (C * ow * oh);
    const Tap tx = linear_tap(dx, iw, scale_x, true);
    const Tap ty = linear_tap(dy, ih, scale_y, false);
    const Acc<T> a0 = weight<T>(tx.w0), a1 = weight<T>(tx.w1);
    const Acc<T> b0 = weight<T>(ty.w0), b1 = weight<T>(ty.w1);
    const T* r0 = x + (n * ih + ty.i0) * iw * C + c;
    const T* r1 = x + (n * ih + ty.i1) * iw * C + c;
    // The horizontal pass of both source rows, then the vertical one.
    const Acc<T> h0 =
        mad2(static_cast<Acc<T>>(r0[tx.i0 * C]), a0, static_cast<Acc<T>>(r0[tx.i1 * C]), a1);
    const Acc<T> h1 =
        mad2(static_cast<Acc<T>>(r1[tx.i0 * C]), a0, static_cast<Acc<T>>(r1[tx.i1 * C]), a1);
    if constexpr (std::is_same_v<T, uint8_t>) {
      const int16_t c0 = static_cast<int16_t>(b0), c1 = static_cast<int16_t>(b1);
      const int16_t x0 = static_cast<int16_t>(h0 >> 4), x1 = static_cast<int16_t>(h1 >> 4);
      const int16_t v0 = static_cast<int16_t>((static_cast<int32_t>(x0) * c0) >> 16);
      const int16_t v1 = static_cast<int16_t>((static_cast<int32_t>(x1) * c1) >> 16);
      int16_t v = static_cast<int16_t>((v0 + v1 + 2) >> 2);
      if (add) v = static_cast<int16_t>(v + y[k]);
      y[k] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
    } else {
      const T v = mad2(h0, b0, h1, b1);
      y[k] = add ? y[k] + v : v;
    }
  }
}

// OpenCV's INTER_NEAREST: source index floor(d * scale), clamped.
__device__ __forceinline__ int64_t nearest_index(int64_t d, int64_t in, double scale) {
  const int64_t s = static_cast<int64_t>(floor(__dmul_rn(static_cast<double>(d), scale)));
  return s < in - 1 ? s : in - 1;
}

template <typename T>
__global__ void resize_nearest_kernel(const T* __restrict__ x, T* y, bool add, int64_t total,
                                      int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t C,
                                      double scale_y, double scale_x) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    const int64_t c = k % C, dx = (k / C) % ow, dy = (k / (C * ow)) % oh;
    const int64_t n = k / (C * ow * oh);
    const T v =
        x[((n * ih + nearest_index(dy, ih, scale_y)) * iw + nearest_index(dx, iw, scale_x)) * C +
          c];
    y[k] = add ? static_cast<T>(y[k] + v) : v;
  }
}

void resize_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t total = out[0].size();
  if (req[0] == OpReq::kNull || total == 0) return;
  const bool add = req[0] == OpReq::kAdd;
  cudaStream_t st = stream_of(ctx);
  if (!add && out[0].shape_of() == in[0].shape_of()) {  // OpenCV copies equal sizes
    if (out[0].raw() != in[0].raw()) {
      copy_on_stream(ctx, out[0].raw(), in[0].raw(), in[0].bytes());
    }
    return;
  }
  const bool nearest = attrs.params<detail::ImageResizeParam>().interp == 0;
  const int64_t ih = in[0].dim(-3), iw = in[0].dim(-2), C = in[0].dim(-1);
  const int64_t oh = out[0].dim(-3), ow = out[0].dim(-2);
  // The CPU's scale, 1 / (out / in), in double on the host.
  const double sy = 1.0 / (static_cast<double>(oh) / static_cast<double>(ih));
  const double sx = 1.0 / (static_cast<double>(ow) / static_cast<double>(iw));
  const auto launch = [&](auto tag) {
    using T = decltype(tag);
    if (nearest) {
      resize_nearest_kernel<T><<<grid_for(total), kBlockSize, 0, st>>>(
          typed<const T>(in[0]), typed<T>(out[0]), add, total, ih, iw, oh, ow, C, sy, sx);
      check_launch("resize_nearest_kernel", ctx);
    } else {
      resize_linear_kernel<T><<<grid_for(total), kBlockSize, 0, st>>>(
          typed<const T>(in[0]), typed<T>(out[0]), add, total, ih, iw, oh, ow, C, sy, sx);
      check_launch("resize_linear_kernel", ctx);
    }
  };
  switch (in[0].dtype()) {
    case DType::kUInt8:
      launch(uint8_t{});
      break;
    case DType::kFloat32:
      launch(float{});
      break;
    case DType::kFloat64:
      launch(double{});
      break;
    default:
      WEFT_THROW(NotImplemented) << attrs.where() << ": no CUDA kernel for dtype "
                                 << dtype_name(in[0].dtype());
  }
}

}  // namespace

void register_image_crop_resize_kernels(OpRegistry& r) {
  r.kernels("_image_crop").set_attr(DeviceType::kCUDA, FCompute(crop_forward));
  r.kernels("_backward_image_crop").set_attr(DeviceType::kCUDA, FCompute(crop_backward));
  r.kernels("_image_resize").set_attr(DeviceType::kCUDA, FCompute(resize_forward));
}

}  // namespace weft::cuda
