// CUDA kernels of UpSampling and _backward_UpSampling (nearest with several inputs, concatenated
// or summed; bilinear as a depthwise transposed convolution with the weight input). Semantics:
// ops/cpu/shape_ops_concat.cc. Every kernel gathers (one thread per element it writes), so none
// needs atomics and the results do not depend on scheduling.
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/norm_util.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/upsampling_params.h"

namespace weft::cuda {
namespace {

using detail::MultiInputMode;
using detail::SampleType;
using detail::UpSamplingParam;

// out[n, c0 + c, oy, ox] (=|+=) in[n, c, oy / fy, ox / fx] over (N, C, OH, OW).
template <typename T>
__global__ void nearest_forward_kernel(const T* __restrict__ x, T* y, bool add, int64_t total,
                                       int64_t C, int64_t H, int64_t W, int64_t OC, int64_t OH,
                                       int64_t OW, int64_t c0, int64_t fy, int64_t fx) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    const int64_t ox = k % OW;
    const int64_t oy = (k / OW) % OH;
    const int64_t c = (k / (OW * OH)) % C;
    const int64_t n = k / (OW * OH * C);
    const T v = x[((n * C + c) * H + oy / fy) * W + ox / fx];
    T* dst = y + ((n * OC + c0 + c) * OH + oy) * OW + ox;
    *dst = add ? static_cast<T>(*dst + v) : v;
  }
}

// gx[n, c, iy, ix] (=|+=) sum of og[n, c0 + c, iy*fy + a, ix*fx + b] over a < fy, b < fx.
template <typename T>
__global__ void nearest_backward_kernel(const T* __restrict__ og, T* gx, bool add, int64_t total,
                                        int64_t C, int64_t H, int64_t W, int64_t OC, int64_t OH,
                                        int64_t OW, int64_t c0, int64_t fy, int64_t fx) {
  WEFT_CUDA_KERNEL_LOOP(k, total) {
    const int64_t ix = k % W;
    const int64_t iy = (k / W) % H;
    const int64_t c = (k / (W * H)) % C;
    const int64_t n = k / (W * H * C);
    const T* src = og + ((n * OC + c0 + c) * OH + iy * fy) * OW + ix * fx;
    T acc = add ? gx[k] : T(0);
    for (int64_t a = 0; a < fy; ++a)
      for (int64_t b = 0; b < fx; ++b) acc = static_cast<T>(acc + src[a * OW + b]);
    gx[k] = acc;
  }
}

// The input rows (or columns) iy whose kernel tap ky = o + pad - iy*s lands in [0, k).
__device__ __forceinline__ void tap_range(int64_t o, int64_t pad, int64_t s, int64_t k,
                                          int64_t n_in, int64_t* lo, int64_t* hi) {
  const int64_t top = o + pad;  // iy*s <= top, iy*s > top - k
  int64_t l = top - k + 1 <= 0 ? 0 : (top - k + 1 + s - 1) / s;
  int64_t h = top < 0 ? -1 : top / s;
  *lo = l;
  *hi = min(h, n_in - 1);
}

template <typename T>
__global__ void bilinear_forward_kernel(const T* __restrict__ x, const T* __restrict__ w, T* y,
                                        bool add, int64_t total, int64_t C, int64_t H, int64_t W,
                                        int64_t OH, int64_t OW, int64_t k, int64_t s, int64_t pad) {
  WEFT_CUDA_KERNEL_LOOP(e, total) {
    const int64_t ox = e % OW;
    const int64_t oy = (e / OW) % OH;
    const int64_t pl = e / (OW * OH);
    const T* xi = x + pl * H * W;
    const T* wk = w + (pl % C) * k * k;
    int64_t y0, y1, x0, x1;
    tap_range(oy, pad, s, k, H, &y0, &y1);
    tap_range(ox, pad, s, k, W, &x0, &x1);
    T acc = 0;
    for (int64_t iy = y0; iy <= y1; ++iy) {
      const int64_t ky = oy + pad - iy * s;
      for (int64_t ix = x0; ix <= x1; ++ix) acc += xi[iy * W + ix] * wk[ky * k + ox + pad - ix * s];
    }
    y[e] = add ? static_cast<T>(y[e] + acc) : acc;
  }
}

template <typename T>
__global__ void bilinear_backward_data_kernel(const T* __restrict__ og, const T* __restrict__ w,
                                              T* gx, bool add, int64_t total, int64_t C, int64_t H,
                                              int64_t W, int64_t OH, int64_t OW, int64_t k,
                                              int64_t s, int64_t pad) {
  WEFT_CUDA_KERNEL_LOOP(e, total) {
    const int64_t ix = e % W;
    const int64_t iy = (e / W) % H;
    const int64_t pl = e / (W * H);
    const T* go = og + pl * OH * OW;
    const T* wk = w + (pl % C) * k * k;
    T acc = 0;
    for (int64_t ky = 0; ky < k; ++ky) {
      const int64_t oy = iy * s - pad + ky;
      if (oy < 0 || oy >= OH) continue;
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t ox = ix * s - pad + kx;
        if (ox >= 0 && ox < OW) acc += go[oy * OW + ox] * wk[ky * k + kx];
      }
    }
    gx[e] = add ? static_cast<T>(gx[e] + acc) : acc;
  }
}

// One block per weight tap (c, ky, kx): the sum over n, iy, ix of og * x.
template <typename T>
__global__ void bilinear_backward_weight_kernel(const T* __restrict__ og, const T* __restrict__ x,
                                                T* gw, bool add, int64_t N, int64_t C, int64_t H,
                                                int64_t W, int64_t OH, int64_t OW, int64_t k,
                                                int64_t s, int64_t pad) {
  __shared__ T shm[32];
  const int64_t tap = blockIdx.x;
  const int64_t kx = tap % k, ky = (tap / k) % k, c = tap / (k * k);
  T acc = 0;
  const int64_t m = N * H * W;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t ix = j % W, iy = (j / W) % H, n = j / (W * H);
    const int64_t oy = iy * s - pad + ky, ox = ix * s - pad + kx;
    if (oy >= 0 && oy < OH && ox >= 0 && ox < OW)
      acc += og[((n * C + c) * OH + oy) * OW + ox] * x[((n * C + c) * H + iy) * W + ix];
  }
  acc = block_sum(acc, shm);
  if (threadIdx.x == 0) gw[tap] = add ? static_cast<T>(gw[tap] + acc) : acc;
}

void upsampling_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<UpSamplingParam>();
  const TensorView& y = out[0];
  const bool add = req[0] == OpReq::kAdd;
  cudaStream_t st = stream_of(ctx);
  const int64_t OC = y.shape[1], OH = y.shape[2], OW = y.shape[3];
  if (p.sample_type == SampleType::kBilinear) {
    const int64_t total = y.size();
    if (total == 0) return;
    WEFT_CUDA_F32_F64_SWITCH(y.dtype(), T, attrs.where(), {
      bilinear_forward_kernel<T><<<grid_for(total), kBlockSize, 0, st>>>(
          typed<const T>(in[0]), typed<const T>(in[1]), typed<T>(y), add, total, in[0].shape[1],
          in[0].shape[2], in[0].shape[3], OH, OW, p.kernel(), p.scale, p.pad());
      check_launch("bilinear_forward_kernel", ctx);
    });
    return;
  }
  const bool sum = p.multi_input_mode == MultiInputMode::kSum;
  int64_t c0 = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const TensorView& x = in[i];
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t total = N * C * OH * OW;
    if (total > 0) {
      WEFT_CUDA_ALL_SWITCH(y.dtype(), T, attrs.where(), {
        nearest_forward_kernel<T><<<grid_for(total), kBlockSize, 0, st>>>(
            typed<const T>(x), typed<T>(y), add || (sum && i > 0), total, C, H, W, OC, OH, OW, c0,
            OH / H, OW / W);
        check_launch("nearest_forward_kernel", ctx);
      });
    }
    if (!sum) c0 += C;
  }
}

// in: out_grad, inputs...; out: one gradient per input.
void upsampling_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<UpSamplingParam>();
  const TensorView& og = in[0];
  cudaStream_t st = stream_of(ctx);
  const int64_t OC = og.shape[1], OH = og.shape[2], OW = og.shape[3];
  if (p.sample_type == SampleType::kBilinear) {
    const TensorView& x = in[1];
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t k = p.kernel();
    WEFT_CUDA_F32_F64_SWITCH(og.dtype(), T, attrs.where(), {
      if (req[0] != OpReq::kNull && x.size() > 0) {
        bilinear_backward_data_kernel<T><<<grid_for(x.size()), kBlockSize, 0, st>>>(
            typed<const T>(og), typed<const T>(in[2]), typed<T>(out[0]), req[0] == OpReq::kAdd,
            x.size(), C, H, W, OH, OW, k, p.scale, p.pad());
        check_launch("bilinear_backward_data_kernel", ctx);
      }
      if (req[1] != OpReq::kNull && C * k * k > 0) {
        bilinear_backward_weight_kernel<T><<<static_cast<unsigned>(C * k * k), 256, 0, st>>>(
            typed<const T>(og), typed<const T>(x), typed<T>(out[1]), req[1] == OpReq::kAdd, N, C, H,
            W, OH, OW, k, p.scale, p.pad());
        check_launch("bilinear_backward_weight_kernel", ctx);
      }
    });
    return;
  }
  const bool sum = p.multi_input_mode == MultiInputMode::kSum;
  int64_t c0 = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const TensorView& gx = out[i];
    const int64_t C = gx.shape[1], H = gx.shape[2], W = gx.shape[3];
    const int64_t total = gx.size();
    if (req[i] != OpReq::kNull && total > 0) {
      WEFT_CUDA_ALL_SWITCH(gx.dtype(), T, attrs.where(), {
        nearest_backward_kernel<T><<<grid_for(total), kBlockSize, 0, st>>>(
            typed<const T>(og), typed<T>(gx), req[i] == OpReq::kAdd, total, C, H, W, OC, OH, OW, c0,
            OH / H, OW / W);
        check_launch("nearest_backward_kernel", ctx);
      });
    }
    if (!sum) c0 += C;
  }
}

}  // namespace

void register_misc_upsampling_kernels(OpRegistry& r) {
  r.kernels("UpSampling").set_attr(DeviceType::kCUDA, FCompute(upsampling_forward));
  r.kernels("_backward_UpSampling").set_attr(DeviceType::kCUDA, FCompute(upsampling_backward));
}

}  // namespace weft::cuda
