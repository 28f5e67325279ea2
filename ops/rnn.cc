// The fused RNN operator (MXNet `RNN`: rnn_relu, rnn_tanh, lstm, gru; layers, directions,
// dropout between layers, sequence lengths) and its backward `_backward_RNN` (recompute + BPTT).
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/rnn_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"
#include "ops/rnn_cell.h"

#if WEFT_USE_ONEDNN
#include "ops/cpu/dnnl_util.h"
#endif

namespace weft::detail {
namespace {

using rnn::RnnMode;

void check_implemented(const OpAttrs& attrs) {
  WEFT_CHECK_AS(NotImplemented, !attrs.params<RnnParam>().projection_size.has_value())
      << attrs.where()
      << ": projection_size (LSTMP) is not implemented (MXNet supports it only with cuDNN)";
}

// ---- shape and type inference
// ---------------------------------------------------------------------

/// Sets `*v` from `x` when `*v` is unknown and `x` is known.
void take_dim(int64_t* v, int64_t x) {
  if (*v < 0 && x >= 0) *v = x;
}

bool infer_rnn_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  check_implemented(attrs);
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

// ---- kernels ------------------------------------------------------------------------------------

/// The sizes of an application from its input views.
rnn::RnnDims dims_of(const RnnParam& p, const Shape& data) {
  rnn::RnnDims d;
  d.mode = p.mode;
  d.T = data[0], d.N = data[1], d.I = data[2];
  d.H = p.state_size, d.L = p.num_layers, d.D = p.dirs();
  return d;
}

rnn::RnnOptions options_of(const RnnParam& p, int threads) {
  rnn::RnnOptions o;
  o.clip = p.lstm() && p.lstm_state_clip_min.has_value();
  o.clip_min = p.lstm_state_clip_min.value_or(0);
  o.clip_max = p.lstm_state_clip_max.value_or(0);
  o.clip_nan = p.lstm_state_clip_nan;
  o.threads = threads;
  return o;
}

/// Workspace bytes; laid out for 8-byte elements so it fits both float and double.
size_t workspace_bytes(const RnnParam& p, const Shape& data, bool backward) {
  rnn::Carver carver(nullptr);
  const rnn::RnnDims d = dims_of(p, data);
  rnn::layout_buffers<double>(carver, d, p.has_mask(), options_of(p, 1).clip, backward);
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

/// Reads sequence_length (any supported dtype) into `lens`, checking 0 <= len <= T.
void read_lengths(const OpAttrs& attrs, const TensorView& v, int64_t T,
                  std::vector<int64_t>& lens) {
  lens.resize(static_cast<size_t>(v.size()));
  WEFT_DTYPE_SWITCH(v.dtype(), LT, attrs.where() + " sequence_length", {
    const LT* src = v.ptr<LT>();
    for (size_t n = 0; n < lens.size(); ++n) lens[n] = static_cast<int64_t>(src[n]);
  });
  for (size_t n = 0; n < lens.size(); ++n) {
    WEFT_CHECK(lens[n] >= 0 && lens[n] <= T) << attrs.where() << ": sequence_length[" << n
                                             << "] = " << lens[n] << " is outside [0, " << T << "]";
  }
}

/// Points `a` at the forward inputs in `in` (laid out as forward_inputs(p)).
template <typename DT>
rnn::ForwardArgs<DT> forward_args(const RnnParam& p, std::span<const TensorView> in,
                                  const std::vector<int64_t>& lens) {
  const RnnInputs ix = forward_inputs(p);
  rnn::ForwardArgs<DT> a;
  a.data = in[ix.data].ptr<DT>();
  a.params = in[ix.params].ptr<DT>();
  a.hx = in[ix.state].ptr<DT>();
  if (ix.cell >= 0) a.cx = in[ix.cell].ptr<DT>();
  if (ix.lens >= 0) a.lens = lens.data();
  return a;
}

void check_req_write(const OpAttrs& attrs, std::span<const OpReq> req) {
  for (OpReq r : req) {
    WEFT_CHECK_AS(NotImplemented, r != OpReq::kAdd)
        << attrs.where() << ": req kAdd is not supported for outputs";
  }
}

template <typename DT>
void rnn_forward_typed(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const RnnInputs ix = forward_inputs(p);
  const rnn::RnnDims d = dims_of(p, in[ix.data].shape_of());
  std::vector<int64_t> lens;
  if (ix.lens >= 0) read_lengths(attrs, in[ix.lens], d.T, lens);
  rnn::ForwardArgs<DT> a = forward_args<DT>(p, in, lens);
  const int nvis = visible_outputs(p);
  if (p.has_mask()) {
    const TensorView& mask = out[nvis];
    DT* m = mask.ptr<DT>();
    const int64_t n = mask.size();
    if (ctx.is_train) {
      WEFT_CHECK_AS(InternalError, ctx.random != nullptr)
          << attrs.where() << ": no random state (kRandom)";
      std::uniform_real_distribution<double> u(0.0, 1.0);
      const DT keep = p.p < 1 ? static_cast<DT>(1.0 / (1.0 - p.p)) : DT(0);
      for (int64_t i = 0; i < n; ++i) m[i] = u(ctx.random->engine) < p.p ? DT(0) : keep;
      a.mask = m;
    } else {
      std::fill(m, m + n, DT(1));
    }
  }
  if (req[0] != OpReq::kNull) a.y = out[0].ptr<DT>();
  if (nvis > 1 && req[1] != OpReq::kNull) a.hy = out[1].ptr<DT>();
  if (nvis > 2 && req[2] != OpReq::kNull) a.cy = out[2].ptr<DT>();
  rnn::Carver carver(ctx.workspace);
  const rnn::RnnOptions opt = options_of(p, ctx.num_threads);
  rnn::RnnBuffers<DT> b = rnn::layout_buffers<DT>(carver, d, p.has_mask(), opt.clip, false);
  WEFT_CHECK_AS(InternalError, carver.used() <= ctx.workspace_bytes)
      << attrs.where() << ": workspace too small";
  rnn::forward(d, opt, a, b);
}

void rnn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  check_implemented(attrs);
  check_req_write(attrs, req);
#if WEFT_USE_ONEDNN
  dnnl_util::ScopedThreads threads(ctx.num_threads);
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    rnn_forward_typed<DT>(attrs, ctx, in, req, out));
}

/// Writes (kWrite/kInplace) or adds (kAdd) `n` values of `src` into `dst`.
template <typename DT>
void store_grad(OpReq req, const DT* src, const TensorView& dst) {
  if (req == OpReq::kNull) return;
  DT* y = dst.ptr<DT>();
  const int64_t n = dst.size();
  if (req == OpReq::kAdd) {
    for (int64_t i = 0; i < n; ++i) y[i] += src[i];
  } else {
    std::copy(src, src + n, y);
  }
}

template <typename DT>
void rnn_backward_typed(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const RnnBackwardInputs ix = backward_inputs(p);
  const rnn::RnnDims d = dims_of(p, in[ix.fwd.data].shape_of());
  std::vector<int64_t> lens;
  if (ix.fwd.lens >= 0) read_lengths(attrs, in[ix.fwd.lens], d.T, lens);
  rnn::ForwardArgs<DT> a = forward_args<DT>(p, in, lens);
  if (ix.mask >= 0) a.mask = in[ix.mask].ptr<DT>();
  rnn::BackwardArgs<DT> ga;
  ga.dy = in[ix.dy].ptr<DT>();
  if (ix.dhy >= 0) ga.dhy = in[ix.dhy].ptr<DT>();
  if (ix.dcy >= 0) ga.dcy = in[ix.dcy].ptr<DT>();
  rnn::Carver carver(ctx.workspace);
  const rnn::RnnOptions opt = options_of(p, ctx.num_threads);
  rnn::RnnBuffers<DT> b = rnn::layout_buffers<DT>(carver, d, p.has_mask(), opt.clip, true);
  WEFT_CHECK_AS(InternalError, carver.used() <= ctx.workspace_bytes)
      << attrs.where() << ": workspace too small";
  rnn::forward(d, opt, a, b);
  rnn::backward(d, opt, a, ga, b);
  store_grad(req[0], b.ddata, out[0]);
  store_grad(req[1], b.dparams, out[1]);
  store_grad(req[2], b.dhx, out[2]);
  if (p.lstm()) store_grad(req[3], b.dcx, out[3]);
}

void rnn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  check_implemented(attrs);
#if WEFT_USE_ONEDNN
  dnnl_util::ScopedThreads threads(ctx.num_threads);
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    rnn_backward_typed<DT>(attrs, ctx, in, req, out));
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
  r.register_op("RNN")
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
      .set_attr<FCompute>(DeviceType::kCPU, rnn_forward)
      .set_attr<FGradient>(rnn_gradient);

  r.register_op("_backward_RNN")
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
      .set_attr<FResourceRequest>(rnn_backward_resources)
      .set_attr<FCompute>(DeviceType::kCPU, rnn_backward);
}

}  // namespace weft::detail
