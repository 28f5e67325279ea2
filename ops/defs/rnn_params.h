// The fused RNN op's parameters and input/output positions, shared by its definition
// (ops/defs/rnn.cc), the CPU kernels (ops/cpu/rnn.cc) and the CUDA kernels (ops/cuda/rnn.cc), and
// the sizes and options the definition and the CPU kernels both derive from the parameters.
#pragma once

#include <cstdint>
#include <optional>

#include "base/shape.h"
#include "ops/defs/rnn_packing.h"
#include "ops/op.h"
#include "ops/params.h"

namespace weft::detail {

using rnn::RnnMode;

/// MXNet's RNNParam.
struct RnnParam {
  int64_t state_size = 0;
  int64_t num_layers = 0;
  bool bidirectional = false;
  RnnMode mode = RnnMode::kLstm;
  double p = 0;
  bool state_outputs = false;
  std::optional<int64_t> projection_size;
  std::optional<double> lstm_state_clip_min;
  std::optional<double> lstm_state_clip_max;
  bool lstm_state_clip_nan = false;
  bool use_sequence_length = false;

  static void declare(ParamSchema<RnnParam>& s) {
    s.field("state_size", &RnnParam::state_size).describe("Hidden size H of each layer.");
    s.field("num_layers", &RnnParam::num_layers).describe("Number of stacked layers L.");
    s.field("bidirectional", &RnnParam::bidirectional)
        .set_default(false)
        .describe("Also run each layer backwards.");
    s.enum_field("mode", &RnnParam::mode,
                 {{"rnn_relu", RnnMode::kRnnRelu},
                  {"rnn_tanh", RnnMode::kRnnTanh},
                  {"lstm", RnnMode::kLstm},
                  {"gru", RnnMode::kGru}})
        .describe("The recurrence.");
    s.field("p", &RnnParam::p)
        .set_default(0.0)
        .lower_bound(0)
        .upper_bound(1)
        .describe("Dropout probability between layers (training only).");
    s.field("state_outputs", &RnnParam::state_outputs)
        .set_default(false)
        .describe("Also output the final states.");
    s.field("projection_size", &RnnParam::projection_size)
        .set_default(std::nullopt)
        .describe("LSTMP projection size (not implemented on CPU).");
    s.field("lstm_state_clip_min", &RnnParam::lstm_state_clip_min)
        .set_default(std::nullopt)
        .describe("Lower bound of the LSTM cell state.");
    s.field("lstm_state_clip_max", &RnnParam::lstm_state_clip_max)
        .set_default(std::nullopt)
        .describe("Upper bound of the LSTM cell state.");
    s.field("lstm_state_clip_nan", &RnnParam::lstm_state_clip_nan)
        .set_default(false)
        .describe("Clip NaN cell states to the lower bound instead of propagating them.");
    s.field("use_sequence_length", &RnnParam::use_sequence_length)
        .set_default(false)
        .describe("Take a `sequence_length` input (N) giving each sequence's valid length.");
    s.check([](RnnParam& p) {
      WEFT_CHECK(p.state_size > 0) << "state_size must be positive, got " << p.state_size;
      WEFT_CHECK(p.num_layers > 0) << "num_layers must be positive, got " << p.num_layers;
      WEFT_CHECK(p.lstm_state_clip_min.has_value() == p.lstm_state_clip_max.has_value())
          << "lstm_state_clip_min and lstm_state_clip_max must be given together";
      if (p.lstm_state_clip_min) {
        WEFT_CHECK(*p.lstm_state_clip_min <= *p.lstm_state_clip_max)
            << "lstm_state_clip_min (" << *p.lstm_state_clip_min << ") > lstm_state_clip_max ("
            << *p.lstm_state_clip_max << ")";
      }
      if (p.projection_size) {
        WEFT_CHECK(*p.projection_size > 0)
            << "projection_size must be positive, got " << *p.projection_size;
      }
    });
  }

  bool lstm() const { return mode == RnnMode::kLstm; }
  int64_t dirs() const { return bidirectional ? 2 : 1; }
  /// Whether a dropout mask sits between layers (and is kept as a hidden output for backward).
  bool has_mask() const { return p > 0 && num_layers > 1; }
};

// Note [RNN dropout mask]
// Dropout between layers must drop the same units in the forward pass and in the backward's
// recomputation. The forward op therefore draws the mask (scaled by 1/(1−p), zeros where dropped)
// from kRandom and returns it as a hidden last output of shape (L−1, T, N, D·H), present only when
// p > 0 and L > 1; `_backward_RNN` reads it instead of drawing again. Outside training the mask is
// all ones.

/// Input positions of the forward op (and the first inputs of the backward op).
struct RnnInputs {
  int data = 0, params = 1, state = 2, cell = -1, lens = -1, count = 3;
};
inline RnnInputs forward_inputs(const RnnParam& p) {
  RnnInputs r;
  if (p.lstm()) r.cell = r.count++;
  if (p.use_sequence_length) r.lens = r.count++;
  return r;
}
/// Visible outputs: output, [state_output, [statecell_output]].
inline int visible_outputs(const RnnParam& p) {
  return 1 + (p.state_outputs ? (p.lstm() ? 2 : 1) : 0);
}
inline int total_outputs(const RnnParam& p) { return visible_outputs(p) + (p.has_mask() ? 1 : 0); }

/// Backward inputs: the forward inputs, [the dropout mask], d output, [d state_output,
/// [d statecell_output]].
struct RnnBackwardInputs {
  RnnInputs fwd;
  int mask = -1, dy = 0, dhy = -1, dcy = -1, count = 0;
};
inline RnnBackwardInputs backward_inputs(const RnnParam& p) {
  RnnBackwardInputs r;
  r.fwd = forward_inputs(p);
  r.count = r.fwd.count;
  if (p.has_mask()) r.mask = r.count++;
  r.dy = r.count++;
  if (p.state_outputs) {
    r.dhy = r.count++;
    if (p.lstm()) r.dcy = r.count++;
  }
  return r;
}

namespace rnn {

/// Throws NotImplemented when the op asks for a projection (LSTMP), which no kernel implements.
inline void check_implemented(const OpAttrs& attrs) {
  WEFT_CHECK_AS(NotImplemented, !attrs.params<RnnParam>().projection_size.has_value())
      << attrs.where()
      << ": projection_size (LSTMP) is not implemented (MXNet supports it only with cuDNN)";
}

/// The sizes of an application from its input views.
inline RnnDims dims_of(const RnnParam& p, const Shape& data) {
  RnnDims d;
  d.mode = p.mode;
  d.T = data[0], d.N = data[1], d.I = data[2];
  d.H = p.state_size, d.L = p.num_layers, d.D = p.dirs();
  return d;
}

inline RnnOptions options_of(const RnnParam& p, int threads) {
  RnnOptions o;
  o.clip = p.lstm() && p.lstm_state_clip_min.has_value();
  o.clip_min = p.lstm_state_clip_min.value_or(0);
  o.clip_max = p.lstm_state_clip_max.value_or(0);
  o.clip_nan = p.lstm_state_clip_nan;
  o.threads = threads;
  return o;
}

}  // namespace rnn

}  // namespace weft::detail
