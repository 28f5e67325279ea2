// The definition of the connectionist temporal classification loss (_contrib_CTCLoss) and its
// backward op: inputs, shapes, types, workspace, gradient. The CPU kernels are in
// ops/cpu/ctc_loss.cc.
#include "ops/defs/ctc_params.h"
#include "ops/defs/norm_common.h"

namespace weft::detail {
namespace {

std::vector<std::string> ctc_input_names(const OpAttrs& a) {
  const auto& p = a.params<CTCLossParam>();
  std::vector<std::string> names{"data", "label"};
  if (p.use_data_lengths) names.push_back("data_lengths");
  if (p.use_label_lengths) names.push_back("label_lengths");
  return names;
}

bool ctc_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<CTCLossParam>();
  if (out[1].rank_known()) assign_input_shape(attrs, in, 0, out[1]);
  if (in[0].rank_known()) {
    WEFT_CHECK_AS(ShapeError, in[0].ndim() == 3)
        << attrs.where() << ": data must be (T, N, alphabet), got " << in[0].to_string();
  }
  if (in[1].rank_known()) {
    WEFT_CHECK_AS(ShapeError, in[1].ndim() == 2)
        << attrs.where() << ": label must be (N, L), got " << in[1].to_string();
  }
  // N is shared by data[1], label[0], the lengths and the loss.
  Shape n{-1};
  if (in[0].rank_known()) merge_shape(&n, Shape{in[0][1]});
  if (in[1].rank_known()) merge_shape(&n, Shape{in[1][0]});
  for (int i = 2; i < p.num_inputs(); ++i) {
    assign_input_shape(attrs, in, i, n);
    n = in[i];
  }
  assign_output_shape(attrs, out, 0, n);
  n = out[0];
  if (in[0].rank_known()) {
    assign_input_shape(attrs, in, 0, Shape{-1, n[0], -1});
    assign_output_shape(attrs, out, 1, in[0]);
  }
  if (in[1].rank_known()) assign_input_shape(attrs, in, 1, Shape{n[0], -1});
  for (int i = 2; i < p.num_inputs(); ++i) assign_input_shape(attrs, in, i, n);
  return all_known(in) && all_known(out);
}

bool ctc_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[0]);
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[1]);
  norm::check_float_type(attrs, in[0], "CTCLoss data");
  assign_output_type(attrs, out, 0, in[0]);
  assign_output_type(attrs, out, 1, in[0]);
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] == DType::kUnknown) in[i] = in[0];
  return in[0] != DType::kUnknown;
}

bool ctc_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                              std::vector<Shape>& out) {
  if (!in[1].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 1, out[0]);
  if (!in[1].rank_known()) return false;
  WEFT_CHECK_AS(ShapeError, in[1].ndim() == 3)
      << attrs.where() << ": grad must be (T, N, alphabet)";
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 0, Shape{in[1][1]});
  return all_known(in) && all_known(out);
}

}  // namespace

void register_ctc_loss_ops(OpRegistry& r) {
  r.define_op("_contrib_CTCLoss")
      .describe(
          "CTC loss of data (T, N, alphabet) of un-normalised activations (softmax taken over the "
          "alphabet) against label (N, L): loss (N,) = -log p(label | data). blank_label=first: "
          "channel "
          "0 is blank and label value 0 pads; last: the last channel is blank and -1 pads. "
          "Optional "
          "data_lengths / label_lengths (N,). A hidden second output holds d loss / d data, "
          "computed in "
          "the forward pass (zero for infeasible sequences, whose loss is inf).")
      .set_params<CTCLossParam>()
      .set_attr<FNumInputs>([](const OpAttrs& a) { return a.params<CTCLossParam>().num_inputs(); })
      .set_attr<FListInputNames>(ctc_input_names)
      .set_output_names({"loss", "grad"})
      .set_attr<FNumVisibleOutputs>([](const OpAttrs&) { return 1; })
      .set_attr<FInferShape>(ctc_infer_shape)
      .set_attr<FInferType>(ctc_infer_type)
      .set_attr<FResourceRequest>(
          [](const OpAttrs&, const std::vector<Shape>& in, const std::vector<Shape>&) {
            const size_t n = ctc_workspace_doubles(in[0][0], in[0][1], in[0][2], in[1][1]);
            return std::vector<ResourceRequest>{
                {ResourceRequest::Kind::kWorkspace, n * sizeof(double)}};
          })
      .set_attr<FGradient>([](GradBuilder& b) {
        std::vector<GradEntry> g{
            b.emit_with_forward_attrs("_backward_CTCLoss", {b.out_grad(0), b.output(1)}).at(0)};
        const int n = b.attrs().params<CTCLossParam>().num_inputs();
        for (int i = 1; i < n; ++i) g.push_back(GradBuilder::none());
        return g;
      });
  r.add_alias("CTCLoss", "_contrib_CTCLoss");
  r.add_alias("ctc_loss", "_contrib_CTCLoss");
  r.add_alias("_contrib_ctc_loss", "_contrib_CTCLoss");
  r.define_op("_backward_CTCLoss")
      .describe(
          "Gradient of CTCLoss: the hidden gradient scaled by the loss gradient of each sequence.")
      .set_params<CTCLossParam>()
      .set_input_names({"loss_grad", "grad"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(ctc_backward_infer_shape);
}

}  // namespace weft::detail
