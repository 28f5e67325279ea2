// The fused RNN operator (MXNet `RNN`: rnn_relu, rnn_tanh, lstm, gru; layers, directions,
// dropout between layers, sequence lengths) and its backward `_backward_RNN` (recompute + BPTT):
// the definitions (the CPU kernels are in ops/cpu/rnn.cc).
#include <optional>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/rnn_packing.h"
#include "ops/defs/rnn_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {
namespace {

using rnn::RnnMode;

// ---- shape and type inference
// ---------------------------------------------------------------------

/// Sets `*v` from `x` when `*v` is unknown and `x` is known.
void take_dim(int64_t* v, int64_t x) {
  if (*v < 0 && x >= 0) *v = x;
}

bool infer_rnn_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  rnn::check_implemented(attrs);
  const auto& p = attrs.params<RnnParam>();
  const RnnInputs ix = forward_inputs(p);
  const int64_t H = p.state_size, L = p.num_layers, D = p.dirs();
  auto rank3 = [&](const Shape& s, const char* what) {
    if (s.rank_known() && s.ndim() != 3) {
      throw_shape_error(attrs, std::string(what) + " must be 3-D, got " + s.to_string());
    }
    return s.rank_known();
  };
  int64_t T = -1, N = -1, I = -1;
  if (rank3(in[ix.data], "data (T, N, I)")) {
    T = in[ix.data][0], N = in[ix.data][1], I = in[ix.data][2];
  }
  if (rank3(out[0], "output (T, N, D*H)")) take_dim(&T, out[0][0]), take_dim(&N, out[0][1]);
  if (rank3(in[ix.state], "state (L*D, N, H)")) take_dim(&N, in[ix.state][1]);
  if (ix.cell >= 0 && rank3(in[ix.cell], "state_cell (L*D, N, H)")) take_dim(&N, in[ix.cell][1]);
  for (int o = 1; o < visible_outputs(p); ++o)
    if (rank3(out[o], "state output (L*D, N, H)")) take_dim(&N, out[o][1]);
  if (ix.lens >= 0 && in[ix.lens].rank_known()) {
    if (in[ix.lens].ndim() != 1)
      throw_shape_error(attrs, "sequence_length must be 1-D, got " + in[ix.lens].to_string());
    take_dim(&N, in[ix.lens][0]);
  }
  // The input size from the parameter count: P = (I + H + 2)·G·H·D + (L − 1)·(D·H + H + 2)·G·H·D.
  const Shape& ps = in[ix.params];
  if (ps.rank_known() && ps.ndim() != 1)
    throw_shape_error(attrs, "parameters must be 1-D, got " + ps.to_string());
  if (I < 0 && ps.known()) {
    const int64_t ghd = rnn::num_gates(p.mode) * H * D;
    const int64_t rest = ps[0] - (L - 1) * (D * H + H + 2) * ghd;
    if (rest > 0 && rest % ghd == 0 && rest / ghd - H - 2 > 0) {
      I = rest / ghd - H - 2;
    } else {
      throw_shape_error(attrs, "parameters has " + std::to_string(ps[0]) +
                                   " values, which fits no input size for this configuration");
    }
  }
  assign_input_shape(attrs, in, ix.data, Shape{T, N, I});
  if (I >= 0) assign_input_shape(attrs, in, ix.params, Shape{rnn::param_size(p.mode, L, D, I, H)});
  const Shape state{L * D, N, H};
  assign_input_shape(attrs, in, ix.state, state);
  if (ix.cell >= 0) assign_input_shape(attrs, in, ix.cell, state);
  if (ix.lens >= 0) assign_input_shape(attrs, in, ix.lens, Shape{N});
  assign_output_shape(attrs, out, 0, Shape{T, N, D * H});
  for (int o = 1; o < visible_outputs(p); ++o) assign_output_shape(attrs, out, o, state);
  if (p.has_mask()) assign_output_shape(attrs, out, visible_outputs(p), Shape{L - 1, T, N, D * H});
  return all_known(in) && all_known(out);
}

/// One float type for everything except sequence_length, which may be any type (default: the
/// data type). `lens` is its input index or -1.
bool infer_rnn_type_impl(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out,
                         int lens) {
  DType t = DType::kUnknown;
  for (int i = 0; i < static_cast<int>(in.size()); ++i)
    if (i != lens && in[i] != DType::kUnknown) t = in[i];
  for (DType d : out)
    if (d != DType::kUnknown) t = d;
  if (t == DType::kUnknown) return false;
  for (int i = 0; i < static_cast<int>(in.size()); ++i)
    if (i != lens) assign_input_type(attrs, in, i, t);
  for (int i = 0; i < static_cast<int>(out.size()); ++i) assign_output_type(attrs, out, i, t);
  if (lens >= 0 && in[lens] == DType::kUnknown) in[lens] = t;
  return true;
}

bool infer_rnn_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  return infer_rnn_type_impl(attrs, in, out, forward_inputs(attrs.params<RnnParam>()).lens);
}

bool infer_rnn_backward_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                              std::vector<Shape>& out) {
  // The gradients have the shapes of data, parameters, state[, state_cell].
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    if (in[i].rank_known()) assign_output_shape(attrs, out, i, in[i]);
    if (out[i].rank_known()) assign_input_shape(attrs, in, i, out[i]);
  }
  return all_known(in) && all_known(out);
}

bool infer_rnn_backward_type(const OpAttrs& attrs, std::vector<DType>& in,
                             std::vector<DType>& out) {
  return infer_rnn_type_impl(attrs, in, out, forward_inputs(attrs.params<RnnParam>()).lens);
}

// ---- workspace and gradient ---------------------------------------------------------------------

/// Workspace bytes; laid out for 8-byte elements so it fits both float and double.
size_t workspace_bytes(const RnnParam& p, const Shape& data, bool backward) {
  rnn::Carver carver(nullptr);
  const rnn::RnnDims d = rnn::dims_of(p, data);
  rnn::layout_buffers<double>(carver, d, p.has_mask(), rnn::options_of(p, 1).clip, backward);
  return carver.used() + 64;
}

std::vector<ResourceRequest> rnn_resources(const OpAttrs& attrs, const std::vector<Shape>& in,
                                           const std::vector<Shape>&) {
  const auto& p = attrs.params<RnnParam>();
  std::vector<ResourceRequest> r{
      {ResourceRequest::Kind::kWorkspace, workspace_bytes(p, in[0], false)}};
  if (p.has_mask()) r.push_back({ResourceRequest::Kind::kRandom, 0});
  return r;
}

std::vector<ResourceRequest> rnn_backward_resources(const OpAttrs& attrs,
                                                    const std::vector<Shape>& in,
                                                    const std::vector<Shape>&) {
  return {
      {ResourceRequest::Kind::kWorkspace, workspace_bytes(attrs.params<RnnParam>(), in[0], true)}};
}

std::vector<GradEntry> rnn_gradient(GradBuilder& b) {
  const auto& p = b.attrs().params<RnnParam>();
  const RnnInputs fx = forward_inputs(p);
  std::vector<GradEntry> inputs;
  for (int i = 0; i < fx.count; ++i) inputs.push_back(b.input(i));
  if (p.has_mask()) inputs.push_back(b.output(visible_outputs(p)));
  for (int o = 0; o < visible_outputs(p); ++o) inputs.push_back(b.out_grad(o));
  std::vector<GradEntry> grads = b.emit_with_forward_attrs("_backward_RNN", std::move(inputs));
  std::vector<GradEntry> result(grads.begin(), grads.end());
  if (fx.lens >= 0) result.push_back(GradBuilder::none());  // sequence_length
  return result;
}

std::vector<std::string> rnn_input_names(const OpAttrs& attrs) {
  const auto& p = attrs.params<RnnParam>();
  std::vector<std::string> names{"data", "parameters", "state"};
  if (p.lstm()) names.push_back("state_cell");
  if (p.use_sequence_length) names.push_back("sequence_length");
  return names;
}

std::vector<std::string> rnn_output_names(const OpAttrs& attrs) {
  const auto& p = attrs.params<RnnParam>();
  std::vector<std::string> names{"output"};
  if (p.state_outputs) {
    names.push_back("state_output");
    if (p.lstm()) names.push_back("statecell_output");
  }
  if (p.has_mask()) names.push_back("dropout_mask");
  return names;
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  r.define_op("RNN")
      .describe(
          "Fused multi-layer recurrent network over a (T, N, I) sequence: rnn_relu, rnn_tanh, lstm "
          "(gates i, f, g, o) or gru (gates r, z, n), optionally bidirectional, with dropout "
          "between "
          "layers in training and optional per-sequence lengths. `parameters` packs all weights "
          "(per layer and direction W_i2h, W_h2h) and then all biases (b_i2h, b_h2h).")
      .set_params<RnnParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return forward_inputs(a.params<RnnParam>()).count; })
      .set_attr<FNumOutputs>([](const OpAttrs& a) { return total_outputs(a.params<RnnParam>()); })
      .set_attr<FNumVisibleOutputs>(
          [](const OpAttrs& a) { return visible_outputs(a.params<RnnParam>()); })
      .set_attr<FListInputNames>(rnn_input_names)
      .set_attr<FListOutputNames>(rnn_output_names)
      .set_attr<FInferShape>(infer_rnn_shape)
      .set_attr<FInferType>(infer_rnn_type)
      .set_attr<FResourceRequest>(rnn_resources)
      .set_attr<FGradient>(rnn_gradient);

  r.define_op("_backward_RNN")
      .describe(
          "Gradient of RNN: recomputes the forward pass and backpropagates through time. Inputs: "
          "the "
          "forward inputs, [the dropout mask], then the gradients of the visible outputs. Outputs: "
          "gradients of data, parameters, state[, state_cell].")
      .set_params<RnnParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return backward_inputs(a.params<RnnParam>()).count; })
      .set_attr<FNumOutputs>([](const OpAttrs& a) { return a.params<RnnParam>().lstm() ? 4 : 3; })
      .set_attr<FInferShape>(infer_rnn_backward_shape)
      .set_attr<FInferType>(infer_rnn_backward_type)
      .set_attr<FResourceRequest>(rnn_backward_resources);
}

}  // namespace weft::detail