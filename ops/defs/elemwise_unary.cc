// Unary elementwise math ops (relu, sigmoid, tanh, exp, log, sqrt, square, abs, negative,
// reciprocal, sin, cos) and their backward ops (definitions; CPU kernels in
// ops/cpu/elemwise_unary.cc).
#include <string>

#include "ops/defs/elemwise.h"

namespace weft::detail {
namespace {

std::vector<std::pair<int, int>> inplace_first(const OpAttrs&) { return {{0, 0}}; }

// The backward op of `name` receives (ograd, value): the value is the forward output when
// `uses_output` (the derivative is expressed in terms of it), else the forward input.
void reg_unary(OpRegistry& r, const std::string& name, const std::string& desc, bool uses_output) {
  const std::string bwd = "_backward_" + name;
  r.define_op(name)
      .describe(desc)
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FGradient>([bwd, uses_output](GradBuilder& b) {
        GradEntry v = uses_output ? b.output(0) : b.input(0);
        return std::vector<GradEntry>{b.emit1(bwd, {b.out_grad(0), v})};
      });
  const std::string value_name = uses_output ? "output" : "data";
  r.define_op(bwd)
      .describe("Gradient of " + name + ": ograd times the derivative, from the forward " +
                value_name + ".")
      .set_input_names({"ograd", value_name})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first);
}

}  // namespace

void register_elemwise_unary_ops(OpRegistry& r) {
  reg_unary(r, "relu", "Rectified linear unit: max(x, 0).", true);
  reg_unary(r, "sigmoid", "Logistic sigmoid: 1 / (1 + exp(-x)).", true);
  reg_unary(r, "tanh", "Hyperbolic tangent.", true);
  reg_unary(r, "exp", "Exponential e^x.", true);
  reg_unary(r, "log", "Natural logarithm.", false);
  reg_unary(r, "sqrt", "Square root.", true);
  reg_unary(r, "square", "Square x^2.", false);
  reg_unary(r, "abs", "Absolute value.", false);
  reg_unary(r, "reciprocal", "Reciprocal 1/x.", false);
  reg_unary(r, "sin", "Sine (radians).", false);
  reg_unary(r, "cos", "Cosine (radians).", false);

  r.define_op("negative")
      .describe("Numerical negative: -x.")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{b.emit1("negative", {b.out_grad(0)})};
      });
}

}  // namespace weft::detail
