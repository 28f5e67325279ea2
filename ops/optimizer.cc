// Optimizer update ops with MXNet's semantics: sgd_update, sgd_mom_update, adam_update and
// adamw_update. Each returns the updated weight and updates its optimizer state inputs (momentum,
// mean, var) in place (FMutateInputs). They are not differentiable and have no FGradient.
//
// Note [Optimizer updates in place]
// The weight itself is an input, not a mutated one: the op writes the new weight to its output,
// as MXNet does, and FInplaceOption {0 -> 0} lets a caller pass the weight as the output
// (`invoke(..., {.outputs = {weight}})`, Python `out=weight`) to update it without a copy. The
// kernels are element-wise and read weight[i] before writing out[i], so the alias is safe. The
// state inputs are written through their input views; invoke and the executor make those inputs
// write dependencies of the operation because of FMutateInputs.
//
// Arithmetic is in double whatever the element type; MXNet computes in the element type, which
// differs by a rounding or two.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/optimizer_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// ---- params ------------------------------------------------------------------------------------

// The fields every update op shares. P has the members lr, wd, rescale_grad and clip_gradient.

// MXNet's lazy_update applies to row_sparse gradients only; weft's gradients are dense.

// ---- inference ---------------------------------------------------------------------------------

// Every input and the output have the weight's shape. The message names the offending input
// rather than just the slot, since a wrong state array is the usual mistake.
bool update_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const std::vector<std::string> names = attrs.op->input_names(attrs);
  Shape ref = in[0];
  if (!merge_shape(&ref, out[0])) {
    throw_shape_error(attrs, "output has shape " + out[0].to_string() + " but weight has shape " +
                                 in[0].to_string() + "; the output must have the weight's shape");
  }
  for (size_t i = 1; i < in.size(); ++i) {
    Shape merged = ref;
    if (!merge_shape(&merged, in[i])) {
      const std::string weight = in[0].rank_known()
                                     ? "weight has shape " + in[0].to_string()
                                     : "the weight's shape is inferred as " + ref.to_string();
      throw_shape_error(attrs, "input '" + names[i] + "' has shape " + in[i].to_string() + " but " +
                                   weight + "; every input must have the weight's shape");
    }
    ref = merged;
  }
  for (size_t i = 0; i < in.size(); ++i) assign_input_shape(attrs, in, static_cast<int>(i), ref);
  assign_output_shape(attrs, out, 0, ref);
  return ref.known();
}

// One floating type for every input and the output.
bool update_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = out[0];
  for (size_t i = in.size(); i-- > 0;)
    if (in[i] != DType::kUnknown) t = in[i];  // the weight's type wins when known
  if (t == DType::kUnknown) return false;
  WEFT_CHECK(t == DType::kFloat32 || t == DType::kFloat64)
      << attrs.where() << ": weight must be float32 or float64, got " << dtype_name(t);
  for (size_t i = 0; i < in.size(); ++i) assign_input_type(attrs, in, static_cast<int>(i), t);
  assign_output_type(attrs, out, 0, t);
  return true;
}

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

Op& register_update(OpRegistry& r, const std::string& name, std::vector<std::string> inputs,
                    std::vector<int> mutated) {
  Op& op = r.register_op(name)
               .set_input_names(std::move(inputs))
               .set_output_names({"output"})
               .set_attr<FInferShape>(update_infer_shape)
               .set_attr<FInferType>(update_infer_type)
               .set_attr<FInplaceOption>([](const OpAttrs&) {
                 return std::vector<std::pair<int, int>>{{0, 0}};
               });
  if (!mutated.empty()) op.set_attr<FMutateInputs>([mutated](const OpAttrs&) { return mutated; });
  return op;
}

}  // namespace

void register_optimizer_ops(OpRegistry& r) {
  register_update(r, "sgd_update", {"weight", "grad"}, {})
      .describe(
          "SGD step. g = rescale_grad*grad, clipped to [-clip_gradient, clip_gradient] when "
          "clip_gradient >= 0; output = weight - lr*(g + wd*weight). Pass the weight as the "
          "output to update it in place.")
      .set_params<SgdParam>()
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(sgd_typed, SgdParam));

  register_update(r, "sgd_mom_update", {"weight", "grad", "mom"}, {2})
      .describe(
          "SGD step with momentum. g = rescale_grad*grad, clipped to [-clip_gradient, "
          "clip_gradient] when clip_gradient >= 0; mom = momentum*mom - lr*(g + wd*weight) "
          "(mom is updated in place); output = weight + mom.")
      .set_params<SgdMomParam>()
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(sgd_mom_typed, SgdMomParam));

  register_update(r, "adam_update", {"weight", "grad", "mean", "var"}, {2, 3})
      .describe(
          "Adam step (MXNet: no bias correction here; the optimizer folds it into lr). "
          "g = rescale_grad*grad + wd*weight, clipped to [-clip_gradient, clip_gradient] when "
          "clip_gradient >= 0; mean = beta1*mean + (1-beta1)*g; var = beta2*var + (1-beta2)*g^2 "
          "(both updated in place); output = weight - lr*mean/(sqrt(var) + epsilon).")
      .set_params<AdamParam>()
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(adam_typed, AdamParam));

  register_update(r, "adamw_update", {"weight", "grad", "mean", "var"}, {2, 3})
      .describe(
          "AdamW step with decoupled weight decay (MXNet's _contrib_adamw_update, rescale_grad "
          "a scalar parameter). g = rescale_grad*grad, clipped to [-clip_gradient, "
          "clip_gradient] when clip_gradient >= 0; mean = beta1*mean + (1-beta1)*g; "
          "var = beta2*var + (1-beta2)*g^2 (both updated in place); output = weight - "
          "eta*(lr*mean/(sqrt(var) + epsilon) + wd*weight). A rescale_grad of 0, inf or NaN "
          "skips the step: states unchanged, output = weight.")
      .set_params<AdamWParam>()
      .set_attr<FCompute>(DeviceType::kCPU, WEFT_UPDATE_KERNEL(adamw_typed, AdamWParam));
}

#undef WEFT_UPDATE_KERNEL

}  // namespace weft::detail
