// CPU kernels of the optimizer updates sgd_update, sgd_mom_update, adam_update and adamw_update
// (definitions and Note [Optimizer updates in place] in ops/defs/optimizer.cc).
//
// Arithmetic is in double whatever the element type; MXNet computes in the element type, which
// differs by a rounding or two.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/cpu/register.h"
#include "ops/defs/optimizer_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// ---- kernels -----------------------------------------------------------------------------------

constexpr int64_t kGrain = 16384;

inline double clip(double g, double bound) {
  return bound >= 0 ? std::min(std::max(g, -bound), bound) : g;
}

// Runs `step(i)` (which updates the states of element i and returns its new weight) over every
// element and stores the result per `req`. The store mode is a template argument so that the
// inner loop has no branch on it; kNull still runs `step` because the states must be updated.
template <typename DT, int kMode, typename Step>
void update_loop(const OpContext& ctx, int64_t n, DT* out, const Step& step) {
  parallel_for(n, kGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double w = step(i);
      if constexpr (kMode == 1) out[i] = static_cast<DT>(w);
      if constexpr (kMode == 2) out[i] = static_cast<DT>(out[i] + w);
    }
  });
}

template <typename DT, typename Step>
void run_update(const OpContext& ctx, OpReq req, const TensorView& out, const Step& step) {
  const int64_t n = out.size();
  DT* y = out.ptr<DT>();
  switch (req) {
    case OpReq::kNull:
      update_loop<DT, 0>(ctx, n, y, step);
      break;
    case OpReq::kAdd:
      update_loop<DT, 2>(ctx, n, y, step);
      break;
    default:
      update_loop<DT, 1>(ctx, n, y, step);
      break;
  }
}

// Inputs: weight, grad.
template <typename DT>
void sgd_typed(const SgdParam& p, const OpContext& ctx, std::span<const TensorView> in, OpReq req,
               const TensorView& out) {
  const DT* w = in[0].ptr<DT>();
  const DT* g = in[1].ptr<DT>();
  run_update<DT>(ctx, req, out, [&](int64_t i) {
    const double wi = w[i];
    const double gi = clip(p.rescale_grad * static_cast<double>(g[i]), p.clip_gradient);
    return wi - p.lr * (gi + p.wd * wi);
  });
}

// Inputs: weight, grad, mom (updated).
template <typename DT>
void sgd_mom_typed(const SgdMomParam& p, const OpContext& ctx, std::span<const TensorView> in,
                   OpReq req, const TensorView& out) {
  const DT* w = in[0].ptr<DT>();
  const DT* g = in[1].ptr<DT>();
  DT* mom = in[2].ptr<DT>();
  run_update<DT>(ctx, req, out, [&](int64_t i) {
    const double wi = w[i];
    const double gi = clip(p.rescale_grad * static_cast<double>(g[i]), p.clip_gradient);
    const DT m = static_cast<DT>(p.momentum * mom[i] - p.lr * (gi + p.wd * wi));
    mom[i] = m;
    return wi + static_cast<double>(m);
  });
}

// Inputs: weight, grad, mean, var (mean and var updated). MXNet adds the weight decay before
// clipping: g = clip(rescale_grad * grad + wd * weight).
template <typename DT>
void adam_typed(const AdamParam& p, const OpContext& ctx, std::span<const TensorView> in, OpReq req,
                const TensorView& out) {
  const DT* w = in[0].ptr<DT>();
  const DT* g = in[1].ptr<DT>();
  DT* mean = in[2].ptr<DT>();
  DT* var = in[3].ptr<DT>();
  run_update<DT>(ctx, req, out, [&](int64_t i) {
    const double wi = w[i];
    const double gi = clip(p.rescale_grad * static_cast<double>(g[i]) + p.wd * wi, p.clip_gradient);
    const DT m = static_cast<DT>(p.beta1 * mean[i] + (1 - p.beta1) * gi);
    const DT v = static_cast<DT>(p.beta2 * var[i] + (1 - p.beta2) * gi * gi);
    mean[i] = m;
    var[i] = v;
    return wi - p.lr * m / (std::sqrt(static_cast<double>(v)) + p.epsilon);
  });
}

// Inputs: weight, grad, mean, var (mean and var updated). Decoupled weight decay.
template <typename DT>
void adamw_typed(const AdamWParam& p, const OpContext& ctx, std::span<const TensorView> in,
                 OpReq req, const TensorView& out) {
  const DT* w = in[0].ptr<DT>();
  const DT* g = in[1].ptr<DT>();
  DT* mean = in[2].ptr<DT>();
  DT* var = in[3].ptr<DT>();
  if (!std::isfinite(p.rescale_grad) || p.rescale_grad == 0) {
    // MXNet skips the step (states untouched) when dynamic loss scaling has overflowed; the
    // output then holds the unchanged weight.
    run_update<DT>(ctx, req, out, [&](int64_t i) { return static_cast<double>(w[i]); });
    return;
  }
  run_update<DT>(ctx, req, out, [&](int64_t i) {
    const double wi = w[i];
    const double gi = clip(p.rescale_grad * static_cast<double>(g[i]), p.clip_gradient);
    const DT m = static_cast<DT>(p.beta1 * mean[i] + (1 - p.beta1) * gi);
    const DT v = static_cast<DT>(p.beta2 * var[i] + (1 - p.beta2) * gi * gi);
    mean[i] = m;
    var[i] = v;
    return wi - p.eta * (p.lr * m / (std::sqrt(static_cast<double>(v)) + p.epsilon) + p.wd * wi);
  });
}

#define WEFT_UPDATE_KERNEL(fn, Param)                                            \
  [](const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in, \
     std::span<const OpReq> req, std::span<const TensorView> out) {              \
    WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),                          \
                      fn<DT>(attrs.params<Param>(), ctx, in, req[0], out[0]));   \
  }

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_optimizer_kernels(OpRegistry& r) {
  using namespace detail;
  r.kernels("sgd_update")
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(sgd_typed, SgdParam));
  r.kernels("sgd_mom_update")
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(sgd_mom_typed, SgdMomParam));
  r.kernels("adam_update")
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(adam_typed, AdamParam));
  r.kernels("adamw_update")
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(adamw_typed, AdamWParam));
}

#undef WEFT_UPDATE_KERNEL

}  // namespace weft::cpu
