// CPU kernels of Concat (also on oneDNN layouts), stack, SliceChannel, the legacy Crop and
// UpSampling (nearest as a strided copy, bilinear as a depthwise transposed convolution), and of
// their backward ops.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/cpu/layout_ops.h"
#include "ops/cpu/strided_copy.h"
#include "ops/defs/shape_ops_params.h"
#include "ops/defs/upsampling_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

void concat_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).concat_forward(attrs, in, req, out);
}
void concat_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).concat_backward(attrs, in, req, out);
}
void stack_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).stack_forward(attrs, in, req, out);
}
void stack_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).stack_backward(attrs, in, req, out);
}
void slice_channel_forward(const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  cpu_moves(ctx).slice_channel_forward(attrs, in, req, out);
}
void crop_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).crop_copy(attrs, in[0], out[0], req[0], false);
}
void crop_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).crop_copy(attrs, out[0], in[0], req[0], true);
}

// ---- UpSampling ----------------------------------------------------------------------------

// Nearest: out[n, c0 + c, y, x] (+)= in[n, c, y / fy, x / fx], as a broadcast of the input over
// the iteration space (N, C, H, fy, W, fx).
void nearest_layout(const TensorView& x, const TensorView& y, std::vector<int64_t>* iter,
                    std::vector<int64_t>* xs, std::vector<int64_t>* ys) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OC = y.shape[1], OH = y.shape[2], OW = y.shape[3];
  const int64_t fy = OH / H, fx = OW / W;
  *iter = {N, C, H, fy, W, fx};
  *xs = {C * H * W, H * W, W, 0, 1, 0};
  *ys = {OC * OH * OW, OH * OW, fy * OW, OW, fx, 1};
}

template <typename T>
void bilinear_forward(const OpContext& ctx, const UpSamplingParam& p, const TensorView& x,
                      const TensorView& w, const TensorView& y, bool add) {
  const int64_t planes = x.shape[0] * x.shape[1], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = y.shape[2], OW = y.shape[3], k = p.kernel(), s = p.scale, pad = p.pad();
  const T* xp = x.ptr<T>();
  const T* wp = w.ptr<T>();
  T* yp = y.ptr<T>();
  parallel_for(planes, 1, ctx.num_threads, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xi = xp + pl * H * W;
      const T* wk = wp + (pl % C) * k * k;
      T* yo = yp + pl * OH * OW;
      if (!add) std::fill(yo, yo + OH * OW, T(0));
      for (int64_t iy = 0; iy < H; ++iy) {
        for (int64_t ky = 0; ky < k; ++ky) {
          const int64_t oy = iy * s - pad + ky;
          if (oy < 0 || oy >= OH) continue;
          for (int64_t ix = 0; ix < W; ++ix) {
            const T v = xi[iy * W + ix];
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t ox = ix * s - pad + kx;
              if (ox >= 0 && ox < OW) yo[oy * OW + ox] += v * wk[ky * k + kx];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void bilinear_backward(const OpContext& ctx, const UpSamplingParam& p, const TensorView& og,
                       const TensorView& x, const TensorView& w, OpReq req_x, const TensorView& gx,
                       OpReq req_w, const TensorView& gw) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t OH = og.shape[2], OW = og.shape[3], k = p.kernel(), s = p.scale, pad = p.pad();
  const T* gp = og.ptr<T>();
  const T* xp = x.ptr<T>();
  const T* wp = w.ptr<T>();
  if (req_x != OpReq::kNull) {
    T* gxp = gx.ptr<T>();
    parallel_for(N * C, 1, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const T* go = gp + pl * OH * OW;
        const T* wk = wp + (pl % C) * k * k;
        for (int64_t iy = 0; iy < H; ++iy) {
          for (int64_t ix = 0; ix < W; ++ix) {
            T acc = 0;
            for (int64_t ky = 0; ky < k; ++ky) {
              const int64_t oy = iy * s - pad + ky;
              if (oy < 0 || oy >= OH) continue;
              for (int64_t kx = 0; kx < k; ++kx) {
                const int64_t ox = ix * s - pad + kx;
                if (ox >= 0 && ox < OW) acc += go[oy * OW + ox] * wk[ky * k + kx];
              }
            }
            T& dst = gxp[pl * H * W + iy * W + ix];
            dst = req_x == OpReq::kAdd ? dst + acc : acc;
          }
        }
      }
    });
  }
  if (req_w != OpReq::kNull) {
    T* gwp = gw.ptr<T>();
    parallel_for(C, 1, ctx.num_threads, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        for (int64_t ky = 0; ky < k; ++ky) {
          for (int64_t kx = 0; kx < k; ++kx) {
            T acc = 0;
            for (int64_t n = 0; n < N; ++n) {
              const T* go = gp + (n * C + c) * OH * OW;
              const T* xi = xp + (n * C + c) * H * W;
              for (int64_t iy = 0; iy < H; ++iy) {
                const int64_t oy = iy * s - pad + ky;
                if (oy < 0 || oy >= OH) continue;
                for (int64_t ix = 0; ix < W; ++ix) {
                  const int64_t ox = ix * s - pad + kx;
                  if (ox >= 0 && ox < OW) acc += go[oy * OW + ox] * xi[iy * W + ix];
                }
              }
            }
            T& dst = gwp[c * k * k + ky * k + kx];
            dst = req_w == OpReq::kAdd ? dst + acc : acc;
          }
        }
      }
    });
  }
}

void upsampling_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<UpSamplingParam>();
  const TensorView& y = out[0];
  const bool add = req[0] == OpReq::kAdd;
  if (p.sample_type == SampleType::kBilinear) {
    WEFT_FLOAT_SWITCH(y.dtype(), T, "UpSampling (bilinear)",
                      bilinear_forward<T>(ctx, p, in[0], in[1], y, add));
    return;
  }
  const bool sum = p.multi_input_mode == MultiInputMode::kSum;
  int64_t c0 = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<int64_t> iter, xs, ys;
    nearest_layout(in[i], y, &iter, &xs, &ys);
    const bool acc = add || (sum && i > 0);
    shape_ops_strided_copy(elem_ptr(y, c0 * y.shape[2] * y.shape[3]), ys.data(), in[i].raw(),
                           xs.data(), iter.data(), 6, y.dtype(), acc, ctx.num_threads);
    if (!sum) c0 += in[i].shape[1];
  }
}

void upsampling_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<UpSamplingParam>();
  const TensorView& og = in[0];
  if (p.sample_type == SampleType::kBilinear) {
    WEFT_FLOAT_SWITCH(
        og.dtype(), T, "UpSampling (bilinear) backward",
        bilinear_backward<T>(ctx, p, og, in[1], in[2], req[0], out[0], req[1], out[1]));
    return;
  }
  const bool sum = p.multi_input_mode == MultiInputMode::kSum;
  int64_t c0 = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const TensorView& gx = out[i];
    if (req[i] != OpReq::kNull) {
      std::vector<int64_t> iter, xs, ys;
      nearest_layout(gx, og, &iter, &xs, &ys);
      if (req[i] != OpReq::kAdd) shape_ops_zero(gx.raw(), gx.bytes(), ctx.num_threads);
      shape_ops_strided_copy(gx.raw(), xs.data(), elem_ptr(og, c0 * og.shape[2] * og.shape[3]),
                             ys.data(), iter.data(), 6, gx.dtype(), true, ctx.num_threads);
    }
    if (!sum) c0 += gx.shape[1];
  }
}

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_shape_concat_kernels(OpRegistry& r) {
  using namespace detail;  // the kernels above
  r.kernels("Concat")
      .set_attr<FCompute>(
          DeviceType::kCPU,
          [](const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
             std::span<const OpReq> req, std::span<const TensorView> out) {
            if (!has_layouts(ctx, in.size(), out.size()))
              return concat_forward(attrs, ctx, in, req, out);
            const int axis = normalize_axis(attrs, attrs.params<ConcatParam>().dim, out[0].ndim);
            concat_layout_forward(axis, ctx, in, req, out);
          })
      .set_attr<FInferLayout>([](const OpAttrs& attrs, const LayoutQuery& q,
                                 std::vector<LayoutRef>& in, std::vector<LayoutRef>& out) {
        const int nd = q.out_shapes[0].ndim();
        return concat_infer_layout(normalize_axis(attrs, attrs.params<ConcatParam>().dim, nd), q,
                                   in, out);
      });
  r.kernels("_backward_Concat").set_attr<FCompute>(DeviceType::kCPU, concat_backward);
  r.kernels("stack").set_attr<FCompute>(DeviceType::kCPU, stack_forward);
  r.kernels("_backward_stack").set_attr<FCompute>(DeviceType::kCPU, stack_backward);
  r.kernels("SliceChannel").set_attr<FCompute>(DeviceType::kCPU, slice_channel_forward);
  r.kernels("Crop").set_attr<FCompute>(DeviceType::kCPU, crop_forward);
  r.kernels("_backward_Crop").set_attr<FCompute>(DeviceType::kCPU, crop_backward);
  r.kernels("UpSampling").set_attr<FCompute>(DeviceType::kCPU, upsampling_forward);
  r.kernels("_backward_UpSampling").set_attr<FCompute>(DeviceType::kCPU, upsampling_backward);
}

}  // namespace weft::cpu
