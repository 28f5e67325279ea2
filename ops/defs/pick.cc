// pick (one element per position along an axis, chosen by an index array; the gather behind
// cross-entropy losses) with its backward op, and one_hot (definitions; CPU kernels in
// ops/cpu/pick.cc).
#include <optional>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/indexing_params.h"
#include "ops/defs/pick_shape.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// ---- pick --------------------------------------------------------------------------------------

// The output (= index) shape for `data`; unknown data dims stay unknown.
Shape pick_out_shape(const OpAttrs& attrs, const Shape& data) {
  const bool keepdims = attrs.params<PickParam>().keepdims;
  const int nd = data.ndim();
  const int axis = pick_axis(attrs, nd);
  if (axis < 0 || nd == 1) return keepdims ? Shape::filled(nd, 1) : Shape{1};
  std::vector<int64_t> o;
  for (int d = 0; d < nd; ++d) {
    if (d != axis) {
      o.push_back(data[d]);
    } else if (keepdims) {
      o.push_back(1);
    }
  }
  return Shape(o);
}

// Inputs (data, index), output (out). The index must have the output's shape (MXNet).
bool pick_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known()) {
    // With keepdims the data has the index's rank; the picked dim stays unknown.
    const auto& p = attrs.params<PickParam>();
    Shape o = in[1].rank_known() ? in[1] : out[0];
    if (p.keepdims && p.axis && o.rank_known() && o.ndim() > 1) {
      Shape d = o;
      d[pick_axis(attrs, o.ndim())] = -1;
      assign_input_shape(attrs, in, 0, d);
    }
    if (!in[0].rank_known()) return false;
  }
  Shape o = pick_out_shape(attrs, in[0]);
  Shape merged = o;
  if (!merge_shape(&merged, in[1])) {
    throw_shape_error(attrs, "index has shape " + in[1].to_string() + " but picking from data " +
                                 in[0].to_string() + " needs an index of shape " + o.to_string() +
                                 " (the data's shape without the axis, or with it as 1 when "
                                 "keepdims)");
  }
  assign_output_shape(attrs, out, 0, merged);
  assign_input_shape(attrs, in, 1, out[0]);
  // The output's dims are the data's, except along the axis.
  const int nd = in[0].ndim();
  const int axis = pick_axis(attrs, nd);
  if (axis >= 0 && nd > 1) {
    Shape d = in[0];
    const bool keepdims = attrs.params<PickParam>().keepdims;
    for (int k = 0, j = 0; k < nd; ++k) {
      if (k == axis) {
        j += keepdims ? 1 : 0;
        continue;
      }
      d[k] = out[0][j++];
    }
    assign_input_shape(attrs, in, 0, d);
  }
  // A size-0 axis (or empty flattened data) has nothing to pick for a non-empty index.
  if (in[0].known() && out[0].known() && out[0].size() > 0 && in[0].size() == 0)
    throw_shape_error(attrs, "cannot pick from the empty data " + in[0].to_string());
  return in[0].known() && in[1].known() && out[0].known();
}

// Output takes the data's type; the index keeps its own (any numeric type), float32 by default.
bool pick_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  assign_output_type(attrs, out, 0, in[0]);
  assign_input_type(attrs, in, 0, out[0]);
  if (in[1] == DType::kUnknown) in[1] = DType::kFloat32;
  return in[0] != DType::kUnknown;
}

// _backward_pick: inputs (out_grad, data, index), output the data gradient (zeros except the
// picked positions).
bool pick_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                               std::vector<Shape>& out) {
  assign_input_shape(attrs, in, 1, out[0]);
  std::vector<Shape> fin{in[1], in[2]}, fout{in[0]};
  const bool ok = pick_infer_shape(attrs, fin, fout);
  assign_input_shape(attrs, in, 1, fin[0]);
  assign_input_shape(attrs, in, 2, fin[1]);
  assign_input_shape(attrs, in, 0, fout[0]);
  assign_output_shape(attrs, out, 0, in[1]);
  return ok && out[0].known();
}

bool pick_backward_infer_type(const OpAttrs& attrs, std::vector<DType>& in,
                              std::vector<DType>& out) {
  DType t = in[0] != DType::kUnknown ? in[0] : in[1] != DType::kUnknown ? in[1] : out[0];
  assign_input_type(attrs, in, 0, t);
  assign_input_type(attrs, in, 1, t);
  assign_output_type(attrs, out, 0, t);
  if (in[2] == DType::kUnknown) in[2] = DType::kFloat32;
  return t != DType::kUnknown;
}

// ---- one_hot -----------------------------------------------------------------------------------

bool one_hot_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const int64_t depth = attrs.params<OneHotParam>().depth;
  if (!in[0].rank_known() && out[0].rank_known()) {
    if (out[0].ndim() < 1) throw_shape_error(attrs, "output must have at least 1 dimension");
    assign_input_shape(attrs, in, 0, Shape(out[0].begin(), out[0].end() - 1));
  }
  if (!in[0].rank_known()) return false;
  std::vector<int64_t> o = in[0].to_vector();
  o.push_back(depth);
  assign_output_shape(attrs, out, 0, Shape(o));
  assign_input_shape(attrs, in, 0, Shape(out[0].begin(), out[0].end() - 1));
  return in[0].known() && out[0].known();
}

// The output has the `dtype` param's type; the indices keep theirs, float32 by default.
bool one_hot_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  assign_output_type(attrs, out, 0, attrs.params<OneHotParam>().dtype);
  if (in[0] == DType::kUnknown) in[0] = DType::kFloat32;
  return true;
}

}  // namespace

void register_pick_ops(OpRegistry& r) {
  r.define_op("pick")
      .describe(
          "Picks one element per position along `axis`: out[..., k, ...] = data[..., index[..., "
          "k, ...], ...] with the index truncated toward zero and clipped to [0, n-1] "
          "(mode=clip) or taken modulo n (mode=wrap). The index has the output's shape: the "
          "data's without the axis, or with it as 1 when keepdims. axis=None picks from the "
          "flattened data (one element). The gradient scatters the output gradient into zeros "
          "of the data's shape; the index gets none.")
      .set_params<PickParam>()
      .set_input_names({"data", "index"})
      .set_attr<FInferShape>(pick_infer_shape)
      .set_attr<FInferType>(pick_infer_type)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_pick", {b.out_grad(0), b.input(0), b.input(1)})
                .at(0),
            GradBuilder::none()};
      });
  r.define_op("_backward_pick")
      .describe(
          "Gradient of pick with respect to its data: the output gradient scattered into "
          "zeros of the data's shape at the picked positions.")
      .set_params<PickParam>()
      .set_input_names({"out_grad", "data", "index"})
      .set_attr<FInferShape>(pick_backward_infer_shape)
      .set_attr<FInferType>(pick_backward_infer_type);

  r.define_op("one_hot")
      .describe(
          "One-hot encoding: output indices.shape + (depth,), filled with off_value except "
          "on_value at position index (truncated toward zero) of each row; an index outside "
          "[0, depth), negative ones included, gives a row of off_value. No gradient.")
      .set_params<OneHotParam>()
      .set_input_names({"indices"})
      .set_attr<FInferShape>(one_hot_infer_shape)
      .set_attr<FInferType>(one_hot_infer_type)
      .set_attr<FGradient>(
          [](GradBuilder&) { return std::vector<GradEntry>{GradBuilder::none()}; });
}

}  // namespace weft::detail
