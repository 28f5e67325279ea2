// Reductions over axes: sum, mean, max, min (axis / keepdims / exclude, MXNet's shape rules),
// argmax and argmin, and the backward ops of the differentiable ones (definitions; CPU kernels in
// ops/cpu/reduce.cc).
#include <algorithm>
#include <optional>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/defs/reduce_params.h"
#include "ops/defs/reduce_shape.h"

namespace weft::detail {
namespace {

// ---- parameters and shapes --------------------------------------------------------------------

bool reduce_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<ReduceAxesParam>();
  if (!in[0].rank_known()) {
    // With keepdims the input has the output's rank and its kept dims.
    if (p.keepdims && out[0].rank_known()) {
      const auto mask = reduced_mask(attrs, p, out[0].ndim());
      Shape s = out[0];
      for (int d = 0; d < s.ndim(); ++d)
        if (mask[d]) s[d] = -1;
      assign_input_shape(attrs, in, 0, s);
    }
    return false;
  }
  const auto mask = reduced_mask(attrs, p, in[0].ndim());
  assign_output_shape(attrs, out, 0, reduced_shape(in[0], mask, p.keepdims));
  // Backward: kept input dims come from the output.
  Shape s = in[0];
  int k = 0;
  for (int d = 0; d < s.ndim(); ++d) {
    if (mask[d]) {
      if (p.keepdims) ++k;
      continue;
    }
    if (s[d] < 0) s[d] = out[0][k];
    ++k;
  }
  assign_input_shape(attrs, in, 0, s);
  return in[0].known() && out[0].known();
}

std::vector<ResourceRequest> reduce_workspace(const OpAttrs&, const std::vector<Shape>&,
                                              const std::vector<Shape>& out) {
  // Room for the result in any supported type, used when the output is accumulated (kAdd).
  return {{ResourceRequest::Kind::kWorkspace,
           static_cast<size_t>(std::max<int64_t>(out[0].size(), 1)) * 8}};
}

// ---- backward ---------------------------------------------------------------------------------

bool reduce_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                 std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  if (in[1].rank_known()) {
    const auto& p = attrs.params<ReduceAxesParam>();
    const Shape r = reduced_shape(in[1], reduced_mask(attrs, p, in[1].ndim()), p.keepdims);
    for (size_t i = 0; i < in.size(); ++i) {
      if (i == 1) continue;
      assign_input_shape(attrs, in, static_cast<int>(i), r);
    }
  }
  return all_known(in) && all_known(out);
}

// The backward op takes (ograd, data), and also the forward output when `takes_output` (max/min:
// the gradient goes to the positions that equal the reduced value).
void reg_reduce(OpRegistry& r, const std::string& name, const std::string& desc,
                bool takes_output) {
  const std::string bwd = "_backward_" + name;
  r.define_op(name)
      .describe(desc)
      .set_params<ReduceAxesParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(reduce_infer_shape)
      .set_attr<FResourceRequest>(reduce_workspace)
      .set_attr<FGradient>([bwd, takes_output](GradBuilder& b) {
        std::vector<GradEntry> args{b.out_grad(0), b.input(0)};
        if (takes_output) args.push_back(b.output(0));
        return std::vector<GradEntry>{b.emit_with_forward_attrs(bwd, args).at(0)};
      });
  std::vector<std::string> names{"ograd", "data"};
  if (takes_output) names.push_back("output");
  r.define_op(bwd)
      .describe("Gradient of " + name + ": the head gradient broadcast back to the input's shape" +
                (takes_output ? ", at the positions that equal the reduced value." : "."))
      .set_params<ReduceAxesParam>()
      .set_input_names(names)
      .set_attr<FInferShape>(reduce_backward_infer_shape);
}

// ---- argmax / argmin --------------------------------------------------------------------------

bool arg_reduce_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known()) return false;
  const auto& p = attrs.params<ArgReduceParam>();
  const int nd = in[0].ndim();
  Shape o;
  if (!p.axis || nd == 1) {
    o = p.keepdims ? Shape::filled(nd, 1) : Shape{1};
  } else {
    WEFT_CHECK(*p.axis >= -nd && *p.axis < nd)
        << attrs.where() << ": axis " << *p.axis << " is out of range for a " << nd << "-d input";
    const int axis = normalize_axis(attrs, *p.axis, nd);
    o = Shape::filled(0, 0);
    for (int d = 0; d < nd; ++d) {
      if (d != axis) {
        o.push_back(in[0][d]);
      } else if (p.keepdims) {
        o.push_back(1);
      }
    }
  }
  assign_output_shape(attrs, out, 0, o);
  return in[0].known();
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  reg_reduce(r, "sum", "Sum over the given axes (all by default).", false);
  reg_reduce(r, "mean", "Mean over the given axes (all by default).", false);
  reg_reduce(r, "max", "Maximum over the given axes (all by default).", true);
  reg_reduce(r, "min", "Minimum over the given axes (all by default).", true);
  r.add_alias("sum_axis", "sum");
  r.add_alias("max_axis", "max");
  r.add_alias("min_axis", "min");

  auto no_grad = [](GradBuilder&) { return std::vector<GradEntry>{GradBuilder::none()}; };
  r.define_op("argmax")
      .describe(
          "Index of the maximum along an axis (of the flattened array when axis is None), in the "
          "input's dtype.")
      .set_params<ArgReduceParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(arg_reduce_infer_shape)
      .set_attr<FGradient>(no_grad);
  r.define_op("argmin")
      .describe(
          "Index of the minimum along an axis (of the flattened array when axis is None), in the "
          "input's dtype.")
      .set_params<ArgReduceParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(arg_reduce_infer_shape)
      .set_attr<FGradient>(no_grad);
}

}  // namespace weft::detail
