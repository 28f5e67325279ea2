// Entry point of the normalisation group's definitions (BatchNorm, LayerNorm, LRN, softmax family,
// Activation, LeakyReLU, Dropout, CTC loss: each part in its own file) and the definitions of the
// loss heads: SoftmaxOutput (alias Softmax) and the Linear/Logistic/MAE regression outputs. The
// CPU kernels of the loss heads are in ops/cpu/nn_norm.cc.
#include "ops/builtin_ops.h"
#include "ops/defs/norm_common.h"
#include "ops/defs/norm_params.h"

namespace weft::detail {
namespace {

// ---- SoftmaxOutput
// -------------------------------------------------------------------------------

/// The label shape for data `d`: multi_output (d0, d2, ...); preserve_shape d[:-1]; else (d0,).
Shape softmax_output_label_shape(const SoftmaxOutputParam& p, const Shape& d) {
  Shape l(std::vector<int64_t>{});
  if (p.multi_output) {
    for (int i = 0; i < d.ndim(); ++i)
      if (i != 1) l.push_back(d[i]);
  } else if (p.preserve_shape) {
    for (int i = 0; i + 1 < d.ndim(); ++i) l.push_back(d[i]);
  } else {
    l.push_back(d[0]);
  }
  return l;
}

bool softmax_output_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                std::vector<Shape>& out) {
  const auto& p = attrs.params<SoftmaxOutputParam>();
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  const Shape& d = in[0];
  WEFT_CHECK_AS(ShapeError, d.ndim() >= (p.multi_output ? 2 : 1))
      << attrs.where() << ": data of rank " << d.ndim() << " is too small";
  // A label with the data's shape holds probabilities.
  Shape probe = in[1];
  if (probe.rank_known() && probe.ndim() == d.ndim() && probe.ndim() > 1 &&
      merge_shape(&probe, d)) {
    in[1] = probe;
  } else {
    assign_input_shape(attrs, in, 1, softmax_output_label_shape(p, d));
  }
  return all_known(in) && all_known(out);
}

bool loss_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[0]);
  assign_output_type(attrs, out, 0, in[0]);
  // float16/bfloat16 run on CUDA; the CPU kernels refuse them with NotImplemented.
  norm::check_any_float_type(attrs, in[0], "data");
  if (in[1] == DType::kUnknown) in[1] = in[0];
  return in[0] != DType::kUnknown;
}

bool loss_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                               std::vector<Shape>& out) {
  // in: [out_grad,] output, label; out: data gradient (the output's shape).
  const int oi = static_cast<int>(in.size()) - 2;
  Shape s;
  for (int i = 0; i <= oi; ++i) merge_shape(&s, in[i]);
  merge_shape(&s, out[0]);
  if (!s.rank_known()) return false;
  for (int i = 0; i <= oi; ++i) assign_input_shape(attrs, in, i, s);
  assign_output_shape(attrs, out, 0, s);
  return all_known(in) && all_known(out);
}

// ---- regression outputs
// --------------------------------------------------------------------------

bool regression_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  const Shape& d = in[0];
  if (!in[1].rank_known()) {
    // (N, 1) data takes an (N,) label by default.
    if (d.ndim() == 2 && d[1] == 1) {
      in[1] = Shape{d[0]};
    } else {
      in[1] = d;
    }
  } else if (!(d.ndim() == 2 && d[1] == 1 && in[1].ndim() == 1)) {
    assign_input_shape(attrs, in, 1, d);
  } else {
    assign_input_shape(attrs, in, 1, Shape{d[0]});
  }
  return all_known(in) && all_known(out);
}

void register_regression(OpRegistry& r, const std::string& name, const std::string& text) {
  r.define_op(name)
      .describe(text)
      .set_params<RegressionParam>()
      .set_input_names({"data", "label"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(regression_infer_shape)
      .set_attr<FInferType>(loss_infer_type)
      .set_attr<FInplaceOption>(norm::inplace_first)
      .set_attr<FGradient>([name](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_" + name, {b.output(0), b.input(1)}).at(0),
            GradBuilder::none()};
      });
  r.define_op("_backward_" + name)
      .describe("Gradient of " + name + " with respect to data (the head gradient is ignored).")
      .set_params<RegressionParam>()
      .set_input_names({"output", "label"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(loss_backward_infer_shape)
      .set_attr<FInferType>(loss_infer_type);
}

/// Registers SoftmaxOutput, its alias and the regression heads with their backward ops.
void register_loss_head_ops(OpRegistry& r) {
  r.define_op("SoftmaxOutput")
      .describe(
          "Softmax loss head. Forward: softmax over all non-batch elements jointly (default), the "
          "last "
          "axis (preserve_shape) or axis 1 at each position (multi_output); the label is ignored. "
          "Backward: (softmax - smoothed one_hot(label)) * grad_scale / normaliser, rows with "
          "ignore_label zeroed when use_ignore, times the head gradient only with out_grad. A "
          "label "
          "shaped like the data holds probabilities: gradient (softmax - label) * grad_scale.")
      .set_params<SoftmaxOutputParam>()
      .set_input_names({"data", "label"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(softmax_output_infer_shape)
      .set_attr<FInferType>(loss_infer_type)
      .set_attr<FInplaceOption>(norm::inplace_first)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_SoftmaxOutput",
                                      {b.out_grad(0), b.output(0), b.input(1)})
                .at(0),
            GradBuilder::none()};
      });
  r.add_alias("Softmax", "SoftmaxOutput");
  r.define_op("_backward_SoftmaxOutput")
      .describe("Gradient of SoftmaxOutput with respect to data.")
      .set_params<SoftmaxOutputParam>()
      .set_input_names({"out_grad", "output", "label"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(loss_backward_infer_shape)
      .set_attr<FInferType>(
          [](const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
            if (in[1] == DType::kUnknown) assign_input_type(attrs, in, 1, out[0]);
            assign_output_type(attrs, out, 0, in[1]);
            assign_input_type(attrs, in, 0, in[1]);
            if (in[2] == DType::kUnknown) in[2] = in[1];
            return in[1] != DType::kUnknown;
          });

  register_regression(r, "LinearRegressionOutput",
                      "Linear regression head: forward identity; gradient "
                      "(out - label) * grad_scale / num_output, with "
                      "num_output = label.size / label.shape[0].");
  register_regression(
      r, "LogisticRegressionOutput",
      "Logistic regression head: forward sigmoid; gradient (out - label) * grad_scale / "
      "num_output.");
  register_regression(r, "MAERegressionOutput",
                      "Mean-absolute-error head: forward identity; gradient "
                      "sign(out - label) * grad_scale / num_output.");
}

}  // namespace

void register_nn_norm_ops(OpRegistry& r) {
  register_batch_norm_ops(r);
  register_layer_norm_ops(r);
  register_softmax_ops(r);
  register_loss_head_ops(r);
  register_activation_ops(r);
  register_dropout_ops(r);
  register_ctc_loss_ops(r);
}

}  // namespace weft::detail
