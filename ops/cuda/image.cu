// CUDA kernels of the image ops: _image_to_tensor, _image_normalize (and its backward op), the
// flips and the random flips. Semantics: ops/cpu/image.cc. The random flips draw their coin on the
// host from the device's random state, exactly as the CPU kernel does, so a seed gives the same
// decision on both devices.
#include <random>
#include <type_traits>
#include <vector>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/norm_util.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/image_params.h"

namespace weft::cuda {

void register_image_kernels(OpRegistry& r);

namespace {

using detail::ImageNormalizeParam;
using detail::RandomFlipParam;

struct Hwc {
  int64_t n, h, w, c;
};
Hwc hwc_of(const TensorView& v) {
  const bool batched = v.ndim == 4;
  return {batched ? v.shape[0] : 1, v.dim(-3), v.dim(-2), v.dim(-1)};
}

// y (N, C, H, W) float32 from x (N, H, W, C) / 255.
template <typename T>
__global__ void to_tensor_kernel(const T* __restrict__ x, float* y, bool add, int64_t total,
                                 int64_t H, int64_t W, int64_t C) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    const int64_t w = k % W, h = (k / W) % H, c = (k / (W * H)) % C, n = k / (W * H * C);
    const float v = static_cast<float>(to_acc(x[((n * H + h) * W + w) * C + c]));
    // uint8 through the CPU's table of v / 255, other types as v * (1 / 255).
    const float r = std::is_same_v<T, uint8_t> ? v / 255.0f : v * (1.0f / 255.0f);
    y[k] = add ? y[k] + r : r;
  }
}

void to_tensor_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t total = out[0].size();
  if (req[0] == OpReq::kNull || total == 0) return;
  const Hwc d = hwc_of(in[0]);
  WEFT_CUDA_ALL_SWITCH(in[0].dtype(), T, attrs.where(), {
    to_tensor_kernel<T><<<grid_for(total), kBlockSize, 0, stream_of(ctx)>>>(
        typed<const T>(in[0]), typed<float>(out[0]), req[0] == OpReq::kAdd, total, d.h, d.w, d.c);
    check_launch("to_tensor_kernel", ctx);
  });
}

template <typename T>
__global__ void scale_channels_kernel(const T* x, T* y, bool add, int64_t total, int64_t C,
                                      int64_t plane, const T* __restrict__ shift,
                                      const T* __restrict__ scale) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    const int64_t c = (k / plane) % C;
    const T v = (x[k] - shift[c]) * scale[c];
    y[k] = add ? y[k] + v : v;
  }
}

double channel_value(const std::vector<double>& v, int64_t c) {
  return static_cast<float>(v.size() == 1 ? v[0] : v[static_cast<size_t>(c)]);
}

template <typename T>
void normalize_typed(const OpAttrs& attrs, const OpContext& ctx, const TensorView& x,
                     const TensorView& y, bool add, bool backward) {
  const auto& p = attrs.params<ImageNormalizeParam>();
  const int64_t c = x.dim(-3), total = x.size();
  std::vector<T> consts(static_cast<size_t>(2 * c));
  for (int64_t ch = 0; ch < c; ++ch) {
    consts[ch] = backward ? T(0) : static_cast<T>(channel_value(p.mean, ch));
    consts[c + ch] = static_cast<T>(1.0 / channel_value(p.std, ch));
  }
  Scratch dev(ctx, consts.size() * sizeof(T));
  cudaStream_t st = stream_of(ctx);
  // From pageable memory the copy is staged before the call returns, so `consts` may go.
  copy_from_host(ctx, dev.get(), consts.data(), consts.size() * sizeof(T));
  scale_channels_kernel<T>
      <<<grid_for(total), kBlockSize, 0, st>>>(typed<const T>(x), typed<T>(y), add, total, c,
                                               x.dim(-2) * x.dim(-1), dev.as<T>(), dev.as<T>() + c);
  check_launch("scale_channels_kernel", ctx);
}

template <bool kBackward>
void normalize(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
               std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  WEFT_CUDA_F32_F64_SWITCH(
      out[0].dtype(), T, attrs.where(),
      normalize_typed<T>(attrs, ctx, in[0], out[0], req[0] == OpReq::kAdd, kBackward));
}

// Mirrors (N, H, W, C) along W (left_right) or H; `flip` false copies.
template <typename T>
__global__ void flip_kernel(const T* __restrict__ x, T* y, bool add, bool flip, bool left_right,
                            int64_t total, int64_t H, int64_t W, int64_t C) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    int64_t src = k;
    if (flip) {
      const int64_t c = k % C, w = (k / C) % W, h = (k / (C * W)) % H, n = k / (C * W * H);
      src = left_right ? ((n * H + h) * W + (W - 1 - w)) * C + c
                       : ((n * H + (H - 1 - h)) * W + w) * C + c;
    }
    y[k] = add ? static_cast<T>(y[k] + x[src]) : x[src];
  }
}

void flip_or_copy(const OpAttrs& attrs, const OpContext& ctx, const TensorView& in,
                  const TensorView& out, OpReq req, bool flip, bool left_right) {
  const int64_t total = out.size();
  if (req == OpReq::kNull || total == 0) return;
  const bool add = req == OpReq::kAdd;
  cudaStream_t st = stream_of(ctx);
  if (!flip && !add) {
    if (out.raw() != in.raw()) {
      copy_on_stream(ctx, out.raw(), in.raw(), in.bytes());
    }
    return;
  }
  const Hwc d = hwc_of(in);
  WEFT_CUDA_ALL_SWITCH(in.dtype(), T, attrs.where(), {
    flip_kernel<T><<<grid_for(total), kBlockSize, 0, st>>>(typed<const T>(in), typed<T>(out), add,
                                                           flip, left_right, total, d.h, d.w, d.c);
    check_launch("flip_kernel", ctx);
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
  const bool flip = std::uniform_real_distribution<double>(0.0, 1.0)(ctx.random->engine) <
                    attrs.params<RandomFlipParam>().p;
  flip_or_copy(attrs, ctx, in[0], out[0], req[0], flip, kLeftRight);
}

}  // namespace

void register_image_kernels(OpRegistry& r) {
  r.kernels("_image_to_tensor").set_attr(DeviceType::kCUDA, FCompute(to_tensor_forward));
  r.kernels("_image_normalize").set_attr(DeviceType::kCUDA, FCompute(normalize<false>));
  r.kernels("_backward_image_normalize").set_attr(DeviceType::kCUDA, FCompute(normalize<true>));
  r.kernels("_image_flip_left_right").set_attr(DeviceType::kCUDA, FCompute(flip_forward<true>));
  r.kernels("_image_flip_top_bottom").set_attr(DeviceType::kCUDA, FCompute(flip_forward<false>));
  r.kernels("_image_random_flip_left_right")
      .set_attr(DeviceType::kCUDA, FCompute(random_flip_forward<true>));
  r.kernels("_image_random_flip_top_bottom")
      .set_attr(DeviceType::kCUDA, FCompute(random_flip_forward<false>));
}

}  // namespace weft::cuda
