// Binary elementwise ops: identical-shape (elemwise_add, _power, _equal, ...) and NumPy-broadcast
// (broadcast_add, ...) arithmetic and comparisons, with their backward ops (definitions; CPU
// kernels in ops/cpu/elemwise_binary.cc).
#include <string>
#include <utility>

#include "ops/defs/elemwise.h"

namespace weft::detail {
namespace {

// ---- shape inference --------------------------------------------------------------------------

bool broadcast_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known() || !in[1].rank_known()) return false;
  Shape o;
  if (!broadcast_shapes(in[0], in[1], &o)) {
    throw_shape_error(attrs, "operands could not be broadcast together with shapes " +
                                 in[0].to_string() + " and " + in[1].to_string());
  }
  assign_output_shape(attrs, out, 0, o);
  // Backward: an unknown operand dim is determined by a known output dim when the other operand
  // is 1 (or absent) there, or when the output dim is 1.
  const Shape& os = out[0];
  const int n = os.ndim();
  for (int k = 0; k < 2; ++k) {
    const Shape& other = in[1 - k];
    Shape s = in[k];
    for (int d = 0; d < s.ndim(); ++d) {
      const int od = d + (n - s.ndim());
      if (s[d] >= 0 || os[od] < 0) continue;
      const int oi = od - (n - other.ndim());
      const int64_t other_dim = oi < 0 ? 1 : other[oi];
      if (os[od] == 1 || other_dim == 1) s[d] = os[od];
    }
    assign_input_shape(attrs, in, k, s);
  }
  return in[0].known() && in[1].known() && out[0].known();
}

// (ograd, lhs, rhs) -> (lhs_grad, rhs_grad): gradients take their operand's shape.
bool broadcast_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                    std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_input_shape(attrs, in, 2, out[1]);
  if (in[1].rank_known() && in[2].rank_known()) {
    Shape o;
    if (broadcast_shapes(in[1], in[2], &o)) {
      Shape merged = in[0];
      if (merge_shape(&merged, o)) assign_input_shape(attrs, in, 0, merged);
    }
  }
  return all_known(in) && all_known(out);
}

std::vector<std::pair<int, int>> inplace_binary(const OpAttrs&) { return {{0, 0}, {1, 0}}; }

std::vector<GradEntry> no_grad2(GradBuilder&) { return {GradBuilder::none(), GradBuilder::none()}; }

// Registers a forward binary op; `backward` names its backward op (empty: no gradient).
Op& reg_binary(OpRegistry& r, const std::string& name, const std::string& desc, bool broadcast,
               const std::string& backward) {
  Op& op = r.define_op(name);
  op.describe(desc).set_input_names({"lhs", "rhs"});
  if (broadcast) {
    op.set_attr<FInferShape>(broadcast_infer_shape);
  } else {
    op.set_attr<FInferShape>(infer_same_shape).set_attr<FInplaceOption>(inplace_binary);
  }
  if (backward.empty()) {
    op.set_attr<FGradient>(no_grad2);
  } else {
    op.set_attr<FGradient>([backward](GradBuilder& b) {
      auto g = b.emit(backward, {b.out_grad(0), b.input(0), b.input(1)});
      return std::vector<GradEntry>{g.at(0), g.at(1)};
    });
  }
  return op;
}

void reg_binary_backward(OpRegistry& r, const std::string& name, const std::string& forward,
                         bool broadcast) {
  r.define_op(name)
      .describe("Gradient of " + forward + ": (ograd, lhs, rhs) -> (lhs_grad, rhs_grad)" +
                (broadcast ? ", summed over broadcast axes." : "."))
      .set_input_names({"ograd", "lhs", "rhs"})
      .set_output_names({"lhs_grad", "rhs_grad"})
      .set_attr<FInferShape>(broadcast ? FInferShape(broadcast_backward_infer_shape)
                                       : FInferShape(infer_same_shape));
}

// Returns the identical-shape op.
Op& reg_arith(OpRegistry& r, const std::string& base, const std::string& elem_name,
              const std::string& what) {
  // Identical shapes.
  Op& elem = reg_binary(r, elem_name, what + " of two arrays of identical shape.", false,
                        "_backward_" + base);
  // NumPy broadcasting.
  reg_binary(r, "broadcast_" + base, what + " with NumPy-style broadcasting.", true,
             "_backward_broadcast_" + base);
  reg_binary_backward(r, "_backward_broadcast_" + base, "broadcast_" + base, true);
  return elem;
}

void reg_compare(OpRegistry& r, const std::string& base, const std::string& what) {
  reg_binary(r, "_" + base, "1 where lhs " + what + " rhs, else 0 (input dtype); identical shapes.",
             false, "");
  reg_binary(r, "broadcast_" + base,
             "1 where lhs " + what + " rhs, else 0 (input dtype); broadcasting.", true, "");
}

}  // namespace

void register_elemwise_binary_ops(OpRegistry& r) {
  Op& add = reg_arith(r, "add", "elemwise_add", "Sum");
  Op& sub = reg_arith(r, "sub", "elemwise_sub", "Difference");
  reg_arith(r, "mul", "elemwise_mul", "Product");
  reg_arith(r, "div", "elemwise_div", "Quotient");
  reg_arith(r, "power", "_power", "Power lhs^rhs");
  reg_arith(r, "maximum", "_maximum", "Elementwise maximum");
  reg_arith(r, "minimum", "_minimum", "Elementwise minimum");

  // Identical-shape backward ops. add/sub need only the head gradient.
  r.define_op("_backward_add")
      .describe("Gradient of elemwise_add: ograd -> (ograd, ograd).")
      .set_input_names({"ograd"})
      .set_output_names({"lhs_grad", "rhs_grad"})
      .set_attr<FInferShape>(infer_same_shape);
  r.define_op("_backward_sub")
      .describe("Gradient of elemwise_sub: ograd -> (ograd, -ograd).")
      .set_input_names({"ograd"})
      .set_output_names({"lhs_grad", "rhs_grad"})
      .set_attr<FInferShape>(infer_same_shape);
  for (auto [op, bwd] :
       {std::pair<Op*, const char*>{&add, "_backward_add"}, {&sub, "_backward_sub"}}) {
    op->set_attr<FGradient>([bwd = std::string(bwd)](GradBuilder& b) {
      auto g = b.emit(bwd, {b.out_grad(0)});
      return std::vector<GradEntry>{g.at(0), g.at(1)};
    });
  }
  reg_binary_backward(r, "_backward_mul", "elemwise_mul", false);
  reg_binary_backward(r, "_backward_div", "elemwise_div", false);
  reg_binary_backward(r, "_backward_power", "_power", false);
  reg_binary_backward(r, "_backward_maximum", "_maximum", false);
  reg_binary_backward(r, "_backward_minimum", "_minimum", false);

  reg_compare(r, "equal", "==");
  reg_compare(r, "not_equal", "!=");
  reg_compare(r, "greater", ">");
  reg_compare(r, "greater_equal", ">=");
  reg_compare(r, "lesser", "<");
  reg_compare(r, "lesser_equal", "<=");

  for (const char* a : {"_Plus", "_plus", "_add"}) r.add_alias(a, "elemwise_add");
  for (const char* a : {"_Minus", "_minus", "_sub"}) r.add_alias(a, "elemwise_sub");
  for (const char* a : {"_Mul", "_mul"}) r.add_alias(a, "elemwise_mul");
  for (const char* a : {"_Div", "_div"}) r.add_alias(a, "elemwise_div");
  r.add_alias("_Power", "_power");
  r.add_alias("_Maximum", "_maximum");
  r.add_alias("_Minimum", "_minimum");
  r.add_alias("broadcast_plus", "broadcast_add");
  r.add_alias("broadcast_minus", "broadcast_sub");
}

}  // namespace weft::detail
