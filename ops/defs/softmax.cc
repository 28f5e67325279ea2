// The definitions of the softmax family: softmax / log_softmax (axis, temperature, dtype, length
// masking) and SoftmaxActivation, with their backward ops: shapes, types, gradients. The CPU
// kernels are in ops/cpu/softmax.cc.
#include <optional>

#include "ops/defs/norm_common.h"
#include "ops/defs/softmax_params.h"

namespace weft::detail {
namespace {

// ---- softmax / log_softmax
// -----------------------------------------------------------------------

bool softmax_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  if (p.has_length()) {
    WEFT_CHECK_AS(ShapeError, in[0].ndim() >= 1)
        << attrs.where() << ": use_length needs data of rank >= 1";
    const int axis = normalize_axis(attrs, p.axis, in[0].ndim());
    Shape ls;
    for (int d = 0; d < in[0].ndim(); ++d)
      if (d != axis) ls.push_back(in[0][d]);
    if (!ls.rank_known()) ls = Shape(std::vector<int64_t>{});
    assign_input_shape(attrs, in, 1, ls);
    Shape dd = Shape::filled(in[0].ndim(), -1);
    for (int d = 0, k = 0; d < in[0].ndim(); ++d)
      if (d != axis) dd[d] = in[1][k++];
    assign_input_shape(attrs, in, 0, dd);
    assign_output_shape(attrs, out, 0, in[0]);
  } else if (in[0].ndim() > 0) {
    normalize_axis(attrs, p.axis, in[0].ndim());
  }
  return all_known(in) && all_known(out);
}

bool softmax_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (p.dtype) {
    assign_output_type(attrs, out, 0, *p.dtype);
  } else {
    if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[0]);
    assign_output_type(attrs, out, 0, in[0]);
  }
  norm::check_any_float_type(attrs, in[0], "softmax data");
  if (p.has_length() && in[1] == DType::kUnknown) in[1] = DType::kInt32;
  return in[0] != DType::kUnknown && out[0] != DType::kUnknown;
}

// Backward inputs: out_grad, data (for its type), output, [length].
bool softmax_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                  std::vector<Shape>& out) {
  Shape s;
  for (int i = 0; i < 3; ++i) merge_shape(&s, in[i]);
  merge_shape(&s, out[0]);
  if (!s.rank_known()) return false;
  for (int i = 0; i < 3; ++i) assign_input_shape(attrs, in, i, s);
  assign_output_shape(attrs, out, 0, s);
  if (attrs.params<SoftmaxParam>().has_length() && s.ndim() > 0) {
    const int axis = normalize_axis(attrs, attrs.params<SoftmaxParam>().axis, s.ndim());
    Shape ls;
    for (int d = 0; d < s.ndim(); ++d)
      if (d != axis) ls.push_back(s[d]);
    if (!ls.rank_known()) ls = Shape(std::vector<int64_t>{});
    assign_input_shape(attrs, in, 3, ls);
  }
  return all_known(in) && all_known(out);
}

bool softmax_backward_infer_type(const OpAttrs& attrs, std::vector<DType>& in,
                                 std::vector<DType>& out) {
  if (in[1] == DType::kUnknown) assign_input_type(attrs, in, 1, out[0]);
  assign_output_type(attrs, out, 0, in[1]);
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, in[2]);
  if (in[2] == DType::kUnknown) assign_input_type(attrs, in, 2, in[0]);
  return out[0] != DType::kUnknown;
}

void register_softmax_pair(OpRegistry& r, const std::string& name, bool log) {
  r.define_op(name)
      .describe(
          log ? "Log-softmax along `axis`: (x - max)/T - log(sum(exp((x - max)/T))). With "
                "use_length, "
                "positions at or past length (the second input, data's shape without the axis) are "
                "0."
              : "Softmax along `axis`: exp((x - max)/T) / sum(exp((x - max)/T)). With use_length, "
                "positions at or past length (the second input, data's shape without the axis) are "
                "0.")
      .set_params<SoftmaxParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return a.params<SoftmaxParam>().has_length() ? 2 : 1; })
      .set_attr<FListInputNames>([](const OpAttrs& a) {
        return a.params<SoftmaxParam>().has_length() ? std::vector<std::string>{"data", "length"}
                                                     : std::vector<std::string>{"data"};
      })
      .set_output_names({"output"})
      .set_attr<FInferShape>(softmax_infer_shape)
      .set_attr<FInferType>(softmax_infer_type)
      .set_attr<FGradient>([name](GradBuilder& b) {
        const bool has_len = b.attrs().params<SoftmaxParam>().has_length();
        std::vector<GradEntry> ins{b.out_grad(0), b.input(0), b.output(0)};
        if (has_len) ins.push_back(b.input(1));
        std::vector<GradEntry> g{b.emit_with_forward_attrs("_backward_" + name, ins).at(0)};
        if (has_len) g.push_back(GradBuilder::none());
        return g;
      });
  r.define_op("_backward_" + name)
      .describe("Gradient of " + name + " with respect to data.")
      .set_params<SoftmaxParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return a.params<SoftmaxParam>().has_length() ? 4 : 3; })
      .set_attr<FListInputNames>([](const OpAttrs& a) {
        std::vector<std::string> names{"out_grad", "data", "output"};
        if (a.params<SoftmaxParam>().has_length()) names.push_back("length");
        return names;
      })
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(softmax_backward_infer_shape)
      .set_attr<FInferType>(softmax_backward_infer_type);
}

// ---- SoftmaxActivation
// ---------------------------------------------------------------------------

bool softmax_act_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  const bool ok = infer_same_shape(attrs, in, out);
  const Shape& s = in[0];
  if (s.rank_known()) {
    if (attrs.params<SoftmaxActivationParam>().mode == SoftmaxActMode::kChannel) {
      WEFT_CHECK_AS(ShapeError, s.ndim() >= 3)
          << attrs.where() << ": mode=channel needs data of rank >= 3, got " << s.to_string();
    } else {
      WEFT_CHECK_AS(ShapeError, s.ndim() >= 1) << attrs.where() << ": data must have rank >= 1";
    }
  }
  return ok;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  register_softmax_pair(r, "softmax", false);
  register_softmax_pair(r, "log_softmax", true);

  r.define_op("SoftmaxActivation")
      .describe(
          "Softmax activation. mode=instance: softmax over the last axis; mode=channel: over axis "
          "1 "
          "of an (N, C, ...) tensor at each position (rank >= 3).")
      .set_params<SoftmaxActivationParam>()
      .set_input_names({"data"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(softmax_act_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_SoftmaxActivation", {b.out_grad(0), b.output(0)})
                .at(0)};
      });
  r.define_op("_backward_SoftmaxActivation")
      .describe("Gradient of SoftmaxActivation with respect to data.")
      .set_params<SoftmaxActivationParam>()
      .set_input_names({"out_grad", "output"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(softmax_act_infer_shape);
}

}  // namespace weft::detail
