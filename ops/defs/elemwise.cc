// Elementwise ops that are not arithmetic families: add_n, zeros_like/ones_like, _copy, clip,
// where, Cast, BlockGrad and MakeLoss (definitions; CPU kernels in ops/cpu/elemwise.cc); also the
// entry point of the elementwise group.
#include "ops/defs/elemwise.h"

#include "ops/builtin_ops.h"
#include "ops/defs/elemwise_params.h"

namespace weft::detail {
namespace {

using InplaceList = std::vector<std::pair<int, int>>;

InplaceList inplace_first(const OpAttrs&) { return {{0, 0}}; }
std::vector<bool> inplace_identity(const OpAttrs&) { return {true}; }

// ---- where ------------------------------------------------------------------------------------

bool where_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  Shape s;
  if (!merge_shape(&s, in[1]) || !merge_shape(&s, in[2]) || !merge_shape(&s, out[0])) {
    throw_shape_error(attrs, "x, y and the output must have one shape, got x " + in[1].to_string() +
                                 ", y " + in[2].to_string() + ", output " + out[0].to_string());
  }
  assign_input_shape(attrs, in, 1, s);
  assign_input_shape(attrs, in, 2, s);
  assign_output_shape(attrs, out, 0, s);
  if (!in[0].rank_known() || !s.rank_known()) return false;
  if (in[0].ndim() == 1 && s.ndim() != 1) {
    if (in[0][0] >= 0 && s[0] >= 0 && in[0][0] != s[0]) {
      throw_shape_error(attrs, "a 1-D condition must have x.shape[0] = " + std::to_string(s[0]) +
                                   " elements, got " + in[0].to_string());
    }
    if (in[0][0] < 0 && s[0] >= 0) assign_input_shape(attrs, in, 0, Shape{s[0]});
    return in[0].known() && s.known();
  }
  if (in[0].ndim() != s.ndim()) {
    throw_shape_error(attrs, "condition must have the shape of x " + s.to_string() +
                                 " or be 1-D of length x.shape[0], got " + in[0].to_string());
  }
  assign_input_shape(attrs, in, 0, s);
  Shape merged = in[0];
  assign_input_shape(attrs, in, 1, merged);
  assign_input_shape(attrs, in, 2, merged);
  assign_output_shape(attrs, out, 0, merged);
  return in[0].known();
}

bool where_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = in[1];
  if (t == DType::kUnknown) t = in[2];
  if (t == DType::kUnknown) t = out[0];
  assign_input_type(attrs, in, 1, t);
  assign_input_type(attrs, in, 2, t);
  assign_output_type(attrs, out, 0, t);
  return in[0] != DType::kUnknown && t != DType::kUnknown;
}

bool infer_first_two_like(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  // Backward ops (ograd, data) -> grad: all three share one shape.
  return infer_same_shape(attrs, in, out);
}

}  // namespace

void register_elemwise_ops(OpRegistry& r) {
  register_elemwise_binary_ops(r);
  register_elemwise_unary_ops(r);
  register_elemwise_scalar_ops(r);
  register_layout_ops(r);

  r.define_op("add_n")
      .describe("Sums num_args arrays of one shape elementwise.")
      .set_params<AddNParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return static_cast<int>(a.params<AddNParam>().num_args); })
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FGradient>([](GradBuilder& b) {
        const int n = static_cast<int>(b.attrs().params<AddNParam>().num_args);
        std::vector<GradEntry> g;
        for (int i = 0; i < n; ++i) g.push_back(b.emit1("_copy", {b.out_grad(0)}));
        return g;
      });
  r.add_alias("ElementWiseSum", "add_n");

  r.define_op("_copy")
      .describe("Returns a copy of the input (identity).")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity)
      .set_attr<FGradient>(
          [](GradBuilder& b) { return std::vector<GradEntry>{b.emit1("_copy", {b.out_grad(0)})}; });
  r.add_alias("identity", "_copy");

  auto no_grad = [](GradBuilder& b) {
    return std::vector<GradEntry>(static_cast<size_t>(b.attrs().op->num_inputs(b.attrs())),
                                  GradBuilder::none());
  };
  r.define_op("zeros_like")
      .describe("An array of zeros with the input's shape and type.")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FGradient>(no_grad);
  r.define_op("ones_like")
      .describe("An array of ones with the input's shape and type.")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FGradient>(no_grad);

  r.define_op("BlockGrad")
      .describe("Identity in the forward pass; stops the gradient (the input gets none).")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity)
      .set_attr<FGradient>(no_grad);
  r.add_alias("stop_gradient", "BlockGrad");

  r.define_op("MakeLoss")
      .describe(
          "Identity in the forward pass; marks its input as a loss: the gradient is grad_scale "
          "(divided by the batch size or valid count per normalization), whatever the head "
          "gradient.")
      .set_params<MakeLossParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_MakeLoss", {b.output(0)})};
      });
  r.define_op("_backward_MakeLoss")
      .describe("Gradient of MakeLoss: grad_scale / normalization, shaped like the forward output.")
      .set_params<MakeLossParam>()
      .set_input_names({"output"})
      .set_attr<FInferShape>(infer_same_shape);

  r.define_op("clip")
      .describe("Clips values to [a_min, a_max].")
      .set_params<ClipParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_clip", {b.out_grad(0), b.input(0)})};
      });
  r.add_alias("Clip", "clip");
  r.define_op("_backward_clip")
      .describe("Gradient of clip: the head gradient where a_min <= data <= a_max, else 0.")
      .set_params<ClipParam>()
      .set_input_names({"ograd", "data"})
      .set_attr<FInferShape>(infer_first_two_like);

  r.define_op("where")
      .describe(
          "Picks x where condition is non-zero, else y. condition has x's shape, or is 1-D of "
          "length "
          "x.shape[0] and selects whole rows.")
      .set_input_names({"condition", "x", "y"})
      .set_attr<FInferShape>(where_infer_shape)
      .set_attr<FInferType>(where_infer_type)
      .set_attr<FGradient>([](GradBuilder& b) {
        auto g = b.emit("_backward_where", {b.out_grad(0), b.input(0)});
        return std::vector<GradEntry>{GradBuilder::none(), g.at(0), g.at(1)};
      });
  r.define_op("_backward_where")
      .describe("Gradient of where: (ograd where condition, ograd where not condition).")
      .set_input_names({"ograd", "condition"})
      .set_output_names({"x_grad", "y_grad"})
      .set_attr<FInferShape>(
          [](const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
            Shape s = in[0];
            if (!merge_shape(&s, out[0]) || !merge_shape(&s, out[1]))
              throw_shape_error(
                  attrs, "gradients must have the head gradient's shape " + in[0].to_string());
            assign_input_shape(attrs, in, 0, s);
            assign_output_shape(attrs, out, 0, s);
            assign_output_shape(attrs, out, 1, s);
            return s.known() && in[1].known();
          })
      .set_attr<FInferType>([](const OpAttrs& attrs, std::vector<DType>& in,
                               std::vector<DType>& out) {
        DType t = in[0] != DType::kUnknown ? in[0] : (out[0] != DType::kUnknown ? out[0] : out[1]);
        assign_input_type(attrs, in, 0, t);
        assign_output_type(attrs, out, 0, t);
        assign_output_type(attrs, out, 1, t);
        return t != DType::kUnknown && in[1] != DType::kUnknown;
      });

  r.define_op("Cast")
      .describe("Converts the input to another element type.")
      .set_params<CastParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInferType>(
          [](const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
            assign_output_type(attrs, out, 0, attrs.params<CastParam>().dtype);
            return in[0] != DType::kUnknown;
          })
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{b.emit1("_backward_Cast", {b.out_grad(0), b.input(0)})};
      });
  r.add_alias("cast", "Cast");
  r.define_op("_backward_Cast")
      .describe("Gradient of Cast: the head gradient converted back to the input's type.")
      .set_input_names({"ograd", "data"})
      .set_attr<FInferShape>(infer_first_two_like)
      .set_attr<FInferType>(
          [](const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
            assign_output_type(attrs, out, 0, in[1]);
            assign_input_type(attrs, in, 1, out[0]);
            return in[0] != DType::kUnknown && in[1] != DType::kUnknown;
          });
}

}  // namespace weft::detail
