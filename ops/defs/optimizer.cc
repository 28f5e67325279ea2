// Optimizer update ops with MXNet's semantics: sgd_update, sgd_mom_update, adam_update and
// adamw_update (definitions; CPU kernels in ops/cpu/optimizer.cc). Each returns the updated weight
// and updates its optimizer state inputs (momentum, mean, var) in place (FMutateInputs). They are
// not differentiable and have no FGradient.
//
// Note [Optimizer updates in place]
// The weight itself is an input, not a mutated one: the op writes the new weight to its output,
// as MXNet does, and FInplaceOption {0 -> 0} lets a caller pass the weight as the output
// (`invoke(..., {.outputs = {weight}})`, Python `out=weight`) to update it without a copy. The
// kernels are element-wise and read weight[i] before writing out[i], so the alias is safe. The
// state inputs are written through their input views; invoke and the executor make those inputs
// write dependencies of the operation because of FMutateInputs.
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

// One floating type for every input and the output (no multi-precision variants yet).
bool update_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = out[0];
  for (size_t i = in.size(); i-- > 0;)
    if (in[i] != DType::kUnknown) t = in[i];  // the weight's type wins when known
  if (t == DType::kUnknown) return false;
  // float16/bfloat16 weights and states run on CUDA (computed in float32 there); the CPU kernels
  // refuse them with NotImplemented.
  WEFT_CHECK(t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
             t == DType::kBFloat16)
      << attrs.where() << ": weight must be a floating type, got " << dtype_name(t);
  for (size_t i = 0; i < in.size(); ++i) assign_input_type(attrs, in, static_cast<int>(i), t);
  assign_output_type(attrs, out, 0, t);
  return true;
}

Op& register_update(OpRegistry& r, const std::string& name, std::vector<std::string> inputs,
                    std::vector<int> mutated) {
  Op& op = r.define_op(name)
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
      .set_params<SgdParam>();

  register_update(r, "sgd_mom_update", {"weight", "grad", "mom"}, {2})
      .describe(
          "SGD step with momentum. g = rescale_grad*grad, clipped to [-clip_gradient, "
          "clip_gradient] when clip_gradient >= 0; mom = momentum*mom - lr*(g + wd*weight) "
          "(mom is updated in place); output = weight + mom.")
      .set_params<SgdMomParam>();

  register_update(r, "adam_update", {"weight", "grad", "mean", "var"}, {2, 3})
      .describe(
          "Adam step (MXNet: no bias correction here; the optimizer folds it into lr). "
          "g = rescale_grad*grad + wd*weight, clipped to [-clip_gradient, clip_gradient] when "
          "clip_gradient >= 0; mean = beta1*mean + (1-beta1)*g; var = beta2*var + (1-beta2)*g^2 "
          "(both updated in place); output = weight - lr*mean/(sqrt(var) + epsilon).")
      .set_params<AdamParam>();

  register_update(r, "adamw_update", {"weight", "grad", "mean", "var"}, {2, 3})
      .describe(
          "AdamW step with decoupled weight decay (MXNet's _contrib_adamw_update, rescale_grad "
          "a scalar parameter). g = rescale_grad*grad, clipped to [-clip_gradient, "
          "clip_gradient] when clip_gradient >= 0; mean = beta1*mean + (1-beta1)*g; "
          "var = beta2*var + (1-beta2)*g^2 (both updated in place); output = weight - "
          "eta*(lr*mean/(sqrt(var) + epsilon) + wd*weight). A rescale_grad of 0, inf or NaN "
          "skips the step: states unchanged, output = weight.")
      .set_params<AdamWParam>();
}

}  // namespace weft::detail
