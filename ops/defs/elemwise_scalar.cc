// Array-with-scalar ops (_plus_scalar, _rminus_scalar, _power_scalar, _greater_scalar, ...) and
// their backward ops (definitions; CPU kernels in ops/cpu/elemwise_scalar.cc).
#include <string>

#include "ops/defs/elemwise.h"
#include "ops/defs/elemwise_params.h"

namespace weft::detail {
namespace {

std::vector<std::pair<int, int>> inplace_first(const OpAttrs&) { return {{0, 0}}; }

Op& reg_scalar(OpRegistry& r, const std::string& name, const std::string& desc) {
  return r.define_op(name)
      .describe(desc)
      .set_params<ScalarParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first);
}

// The backward op of `forward` receives (ograd, value): the value is the forward output when
// `uses_output` (the derivative is expressed in terms of it), else the forward input.
void reg_scalar_backward(OpRegistry& r, Op& forward, bool uses_output) {
  const std::string bwd = "_backward" + forward.name();
  forward.set_attr<FGradient>([bwd, uses_output](GradBuilder& b) {
    GradEntry v = uses_output ? b.output(0) : b.input(0);
    return std::vector<GradEntry>{b.emit_with_forward_attrs(bwd, {b.out_grad(0), v}).at(0)};
  });
  const std::string value_name = uses_output ? "output" : "data";
  r.define_op(bwd)
      .describe("Gradient of " + forward.name() + ": ograd times the derivative.")
      .set_params<ScalarParam>()
      .set_input_names({"ograd", value_name})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first);
}

// Gradient: the same op applied to the head gradient (linear ops), with the forward's params.
void grad_by(Op& op, std::string grad_op, bool forward_attrs) {
  op.set_attr<FGradient>([grad_op, forward_attrs](GradBuilder& b) {
    GradEntry g = forward_attrs ? b.emit_with_forward_attrs(grad_op, {b.out_grad(0)}).at(0)
                                : b.emit1(grad_op, {b.out_grad(0)});
    return std::vector<GradEntry>{g};
  });
}

}  // namespace

void register_elemwise_scalar_ops(OpRegistry& r) {
  grad_by(reg_scalar(r, "_plus_scalar", "x + scalar."), "_copy", false);
  grad_by(reg_scalar(r, "_minus_scalar", "x - scalar."), "_copy", false);
  grad_by(reg_scalar(r, "_rminus_scalar", "scalar - x."), "negative", false);
  grad_by(reg_scalar(r, "_mul_scalar", "x * scalar."), "_mul_scalar", true);
  grad_by(reg_scalar(r, "_div_scalar", "x / scalar."), "_div_scalar", true);
  reg_scalar_backward(r, reg_scalar(r, "_rdiv_scalar", "scalar / x."), false);
  reg_scalar_backward(r, reg_scalar(r, "_power_scalar", "x ^ scalar."), false);
  reg_scalar_backward(r, reg_scalar(r, "_rpower_scalar", "scalar ^ x."), true);
  reg_scalar_backward(r, reg_scalar(r, "_maximum_scalar", "max(x, scalar)."), false);
  reg_scalar_backward(r, reg_scalar(r, "_minimum_scalar", "min(x, scalar)."), false);

  auto no_grad = [](GradBuilder&) { return std::vector<GradEntry>{GradBuilder::none()}; };
  reg_scalar(r, "_equal_scalar", "1 where x == scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar(r, "_not_equal_scalar", "1 where x != scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar(r, "_greater_scalar", "1 where x > scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar(r, "_greater_equal_scalar", "1 where x >= scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar(r, "_lesser_scalar", "1 where x < scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);
  reg_scalar(r, "_lesser_equal_scalar", "1 where x <= scalar, else 0 (input dtype).")
      .set_attr<FGradient>(no_grad);

  r.add_alias("_PlusScalar", "_plus_scalar");
  r.add_alias("_MinusScalar", "_minus_scalar");
  r.add_alias("_RMinusScalar", "_rminus_scalar");
  r.add_alias("_MulScalar", "_mul_scalar");
  r.add_alias("_DivScalar", "_div_scalar");
  r.add_alias("_RDivScalar", "_rdiv_scalar");
  r.add_alias("_PowerScalar", "_power_scalar");
  r.add_alias("_RPowerScalar", "_rpower_scalar");
  r.add_alias("_MaximumScalar", "_maximum_scalar");
  r.add_alias("_MinimumScalar", "_minimum_scalar");
}

}  // namespace weft::detail
