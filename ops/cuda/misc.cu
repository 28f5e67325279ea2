// CUDA kernels: the misc family (see ops/cuda/register.h). This file: the optimizer updates
// (sgd_update, sgd_mom_update, adam_update, adamw_update); misc_ctc.cu: _contrib_CTCLoss;
// misc_upsampling.cu: UpSampling. Semantics: ops/cpu/optimizer.cc.
//
// Note [CUDA optimizer updates]
// Each element is updated in double, like the CPU kernel, with the state (momentum, mean, var)
// rounded to the data type before it enters the weight, so both devices round at the same
// places. float16/bfloat16 weights, gradients and states (CUDA only; the CPU kernels refuse
// them) are updated in float32 (wide_t) the same way, rounded to the 16-bit type when stored. The
// states are written even when the output's request is kNull; the output may alias the weight (each
// thread reads w[i] before writing out[i]).
#include <cmath>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/norm_util.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/optimizer_params.h"

namespace weft::cuda {

void register_misc_ctc_kernels(OpRegistry& r);         // misc_ctc.cu
void register_misc_upsampling_kernels(OpRegistry& r);  // misc_upsampling.cu
void register_image_kernels(OpRegistry& r);            // image.cu

namespace {

template <typename W>
__device__ __forceinline__ W clip_grad(W g, W bound) {
  return bound >= 0 ? fmin(fmax(g, -bound), bound) : g;
}

// Scalars of every update, filled from the op's param struct.
struct UpdateArgs {
  double lr = 0, wd = 0, rescale_grad = 1, clip_gradient = -1;
  double momentum = 0, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, eta = 1;
};

enum UpdateKind : int { kSgd, kSgdMom, kAdam, kAdamW, kCopy };

// W = wide_t<DT>: double for float32/float64, float for float16/bfloat16.
template <typename DT, int kKind>
__global__ void update_kernel(const DT* w, const DT* __restrict__ g, DT* s1, DT* s2, DT* out,
                              int req, int64_t n, UpdateArgs args) {
  using W = wide_t<DT>;
  const W lr = static_cast<W>(args.lr), wd = static_cast<W>(args.wd);
  const W rescale = static_cast<W>(args.rescale_grad), clip = static_cast<W>(args.clip_gradient);
  const W momentum = static_cast<W>(args.momentum), beta1 = static_cast<W>(args.beta1);
  const W beta2 = static_cast<W>(args.beta2), epsilon = static_cast<W>(args.epsilon);
  const W eta = static_cast<W>(args.eta);
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    const W wi = widen(w[i]);
    W r;
    if constexpr (kKind == kSgd) {
      const W gi = clip_grad(rescale * widen(g[i]), clip);
      r = wi - lr * (gi + wd * wi);
    } else if constexpr (kKind == kSgdMom) {
      const W gi = clip_grad(rescale * widen(g[i]), clip);
      const DT m = narrow<DT>(momentum * widen(s1[i]) - lr * (gi + wd * wi));
      s1[i] = m;
      r = wi + widen(m);
    } else if constexpr (kKind == kAdam || kKind == kAdamW) {
      W gi;
      if constexpr (kKind == kAdam) {
        gi = clip_grad(rescale * widen(g[i]) + wd * wi, clip);
      } else {
        gi = clip_grad(rescale * widen(g[i]), clip);
      }
      const DT m = narrow<DT>(beta1 * widen(s1[i]) + (W(1) - beta1) * gi);
      const DT v = narrow<DT>(beta2 * widen(s2[i]) + (W(1) - beta2) * gi * gi);
      s1[i] = m;
      s2[i] = v;
      const W step = lr * widen(m) / (sqrt(widen(v)) + epsilon);
      if constexpr (kKind == kAdam) {
        r = wi - step;
      } else {
        r = wi - eta * (step + wd * wi);
      }
    } else {
      r = wi;
    }
    if (req == kReqAdd) {
      out[i] = narrow<DT>(widen(out[i]) + r);
    } else if (req == kReqWrite) {
      out[i] = narrow<DT>(r);
    }
  }
}

template <int kKind>
void launch_update(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   OpReq req, const TensorView& out, const UpdateArgs& a) {
  const int64_t n = out.size();
  if (n == 0) return;
  for (size_t i = 1; i < in.size(); ++i) {
    WEFT_CHECK(in[i].dtype() == in[0].dtype())
        << attrs.where() << ": input " << i << " has dtype " << dtype_name(in[i].dtype())
        << " but the weight has " << dtype_name(in[0].dtype());
  }
  WEFT_CHECK(out.dtype() == in[0].dtype())
      << attrs.where() << ": output has dtype " << dtype_name(out.dtype()) << " but the weight has "
      << dtype_name(in[0].dtype());
  WEFT_CUDA_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    DT* s1 = in.size() > 2 ? typed<DT>(in[2]) : nullptr;
    DT* s2 = in.size() > 3 ? typed<DT>(in[3]) : nullptr;
    update_kernel<DT, kKind><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(
        typed<const DT>(in[0]), typed<const DT>(in[1]), s1, s2, typed<DT>(out), req_code(req), n,
        a);
    check_launch("update_kernel", ctx);
  });
}

template <typename P>
UpdateArgs scaling_of(const P& p) {
  UpdateArgs a;
  a.lr = p.lr;
  a.wd = p.wd;
  a.rescale_grad = p.rescale_grad;
  a.clip_gradient = p.clip_gradient;
  return a;
}

void sgd_update(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  launch_update<kSgd>(attrs, ctx, in, req[0], out[0], scaling_of(attrs.params<detail::SgdParam>()));
}

void sgd_mom_update(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::SgdMomParam>();
  UpdateArgs a = scaling_of(p);
  a.momentum = p.momentum;
  launch_update<kSgdMom>(attrs, ctx, in, req[0], out[0], a);
}

void adam_update(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::AdamParam>();
  UpdateArgs a = scaling_of(p);
  a.beta1 = p.beta1;
  a.beta2 = p.beta2;
  a.epsilon = p.epsilon;
  launch_update<kAdam>(attrs, ctx, in, req[0], out[0], a);
}

void adamw_update(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::AdamWParam>();
  UpdateArgs a = scaling_of(p);
  a.beta1 = p.beta1;
  a.beta2 = p.beta2;
  a.epsilon = p.epsilon;
  a.eta = p.eta;
  // A non-finite or zero rescale_grad skips the step (the CPU kernel's overflow guard).
  if (!std::isfinite(p.rescale_grad) || p.rescale_grad == 0) {
    launch_update<kCopy>(attrs, ctx, in, req[0], out[0], a);
    return;
  }
  launch_update<kAdamW>(attrs, ctx, in, req[0], out[0], a);
}

}  // namespace

void register_misc_kernels(OpRegistry& r) {
  r.kernels("sgd_update").set_attr(DeviceType::kCUDA, FCompute(sgd_update));
  r.kernels("sgd_mom_update").set_attr(DeviceType::kCUDA, FCompute(sgd_mom_update));
  r.kernels("adam_update").set_attr(DeviceType::kCUDA, FCompute(adam_update));
  r.kernels("adamw_update").set_attr(DeviceType::kCUDA, FCompute(adamw_update));
  register_misc_ctc_kernels(r);
  register_misc_upsampling_kernels(r);
  register_image_kernels(r);
  register_image_crop_resize_kernels(r);
}

}  // namespace weft::cuda
