// Tests of the fused RNN op: forward against a naive per-sequence, per-step reference, parameter
// packing and size inference, BPTT gradients against finite differences, dropout and lengths.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

double sigm(double x) { return 1.0 / (1.0 + std::exp(-x)); }

int64_t gates_of(const std::string& mode) { return mode == "lstm" ? 4 : mode == "gru" ? 3 : 1; }

/// GetRnnParamSize written out per layer: each layer has D·(W_i2h + W_h2h + b_i2h + b_h2h).
int64_t expected_param_size(const std::string& mode, int64_t L, int64_t D, int64_t I, int64_t H) {
  const int64_t gh = gates_of(mode) * H;
  int64_t total = 0;
  for (int64_t l = 0; l < L; ++l) {
    const int64_t in = l == 0 ? I : D * H;
    total += D * (gh * in + gh * H + 2 * gh);
  }
  return total;
}

struct Config {
  std::string mode = "lstm";
  int64_t T = 3, N = 2, I = 3, H = 2, L = 1, D = 1;
  bool state_outputs = true;
  std::vector<int64_t> lens;                      ///< empty: no sequence_length input
  std::optional<std::pair<double, double>> clip;  ///< LSTM cell clipping
  DType dtype = DType::kFloat64;
};

AttrMap attrs_of(const Config& c) {
  AttrMap a{{"mode", c.mode},
            {"state_size", std::to_string(c.H)},
            {"num_layers", std::to_string(c.L)},
            {"bidirectional", c.D == 2 ? "True" : "False"},
            {"state_outputs", c.state_outputs ? "True" : "False"}};
  if (!c.lens.empty()) a["use_sequence_length"] = "True";
  if (c.clip) {
    a["lstm_state_clip_min"] = std::to_string(c.clip->first);
    a["lstm_state_clip_max"] = std::to_string(c.clip->second);
  }
  return a;
}

/// data, parameters, state, [state_cell], [sequence_length (int32)].
std::vector<HostTensor> inputs_of(const Config& c, uint64_t seed = 1) {
  std::vector<HostTensor> in;
  in.push_back(HostTensor::random(Shape{c.T, c.N, c.I}, seed, -1, 1, c.dtype));
  in.push_back(HostTensor::random(Shape{expected_param_size(c.mode, c.L, c.D, c.I, c.H)}, seed + 1,
                                  -0.6, 0.6, c.dtype));
  in.push_back(HostTensor::random(Shape{c.L * c.D, c.N, c.H}, seed + 2, -0.5, 0.5, c.dtype));
  if (c.mode == "lstm")
    in.push_back(HostTensor::random(Shape{c.L * c.D, c.N, c.H}, seed + 3, -0.5, 0.5, c.dtype));
  if (!c.lens.empty()) {
    std::vector<double> v(c.lens.begin(), c.lens.end());
    in.push_back(HostTensor::of(Shape{c.N}, v, DType::kInt32));
  }
  return in;
}

struct Reference {
  HostTensor y, hy, cy;
};

/// A naive RNN: one sequence at a time, one step at a time, weights read off the flat vector in
/// the documented order. Reverse directions start at each sequence's last valid step.
Reference reference_rnn(const Config& c, const std::vector<HostTensor>& in) {
  const int64_t T = c.T, N = c.N, H = c.H, L = c.L, D = c.D, G = gates_of(c.mode);
  const std::vector<double>& w = in[1].data;
  struct Cell {
    int64_t in = 0;
    std::vector<double> wi, wh, bi, bh;
  };
  std::vector<Cell> cells(L * D);
  size_t pos = 0;
  auto slice = [&](int64_t n) {
    std::vector<double> s(w.begin() + pos, w.begin() + pos + n);
    pos += n;
    return s;
  };
  for (int64_t l = 0; l < L; ++l)
    for (int64_t d = 0; d < D; ++d) {
      Cell& cell = cells[l * D + d];
      cell.in = l == 0 ? c.I : D * H;
      cell.wi = slice(G * H * cell.in);
      cell.wh = slice(G * H * H);
    }
  for (int64_t k = 0; k < L * D; ++k) {
    cells[k].bi = slice(G * H);
    cells[k].bh = slice(G * H);
  }
  EXPECT_EQ(pos, w.size());
  const bool lstm = c.mode == "lstm";
  const HostTensor& hx = in[2];
  const HostTensor* cx = lstm ? &in[3] : nullptr;
  Reference r;
  r.hy = HostTensor::filled(Shape{L * D, N, H}, 0.0, c.dtype);
  r.cy = HostTensor::filled(Shape{L * D, N, H}, 0.0, c.dtype);
  std::vector<double> layer_in = in[0].data;
  int64_t width = c.I;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> out(T * N * D * H, 0.0);
    for (int64_t d = 0; d < D; ++d) {
      const Cell& cell = cells[l * D + d];
      for (int64_t n = 0; n < N; ++n) {
        const int64_t len = c.lens.empty() ? T : c.lens[n];
        std::vector<double> h(H), cs(H);
        for (int64_t j = 0; j < H; ++j) {
          h[j] = hx.at({l * D + d, n, j});
          if (cx) cs[j] = cx->at({l * D + d, n, j});
        }
        for (int64_t step = 0; step < len; ++step) {
          const int64_t t = d == 0 ? step : len - 1 - step;
          const double* xt = &layer_in[(t * N + n) * width];
          std::vector<double> gi(G * H), gh(G * H);
          for (int64_t q = 0; q < G * H; ++q) {
            gi[q] = cell.bi[q];
            for (int64_t j = 0; j < width; ++j) gi[q] += cell.wi[q * width + j] * xt[j];
            gh[q] = cell.bh[q];
            for (int64_t j = 0; j < H; ++j) gh[q] += cell.wh[q * H + j] * h[j];
          }
          std::vector<double> hn(H);
          for (int64_t j = 0; j < H; ++j) {
            if (c.mode == "rnn_relu") {
              hn[j] = std::max(0.0, gi[j] + gh[j]);
            } else if (c.mode == "rnn_tanh") {
              hn[j] = std::tanh(gi[j] + gh[j]);
            } else if (lstm) {
              const double i = sigm(gi[j] + gh[j]), f = sigm(gi[H + j] + gh[H + j]);
              const double g = std::tanh(gi[2 * H + j] + gh[2 * H + j]),
                           o = sigm(gi[3 * H + j] + gh[3 * H + j]);
              cs[j] = f * cs[j] + i * g;
              if (c.clip) cs[j] = std::min(std::max(cs[j], c.clip->first), c.clip->second);
              hn[j] = o * std::tanh(cs[j]);
            } else {  // gru
              const double rr = sigm(gi[j] + gh[j]), z = sigm(gi[H + j] + gh[H + j]);
              const double nn = std::tanh(gi[2 * H + j] + rr * gh[2 * H + j]);
              hn[j] = (1 - z) * nn + z * h[j];
            }
          }
          h = hn;
          for (int64_t j = 0; j < H; ++j) out[(t * N + n) * D * H + d * H + j] = h[j];
        }
        for (int64_t j = 0; j < H; ++j) {
          r.hy.at({l * D + d, n, j}) = h[j];
          r.cy.at({l * D + d, n, j}) = cs[j];
        }
      }
    }
    layer_in = out;
    width = D * H;
  }
  r.y = HostTensor::of(Shape{T, N, D * H}, layer_in, c.dtype);
  return r;
}

void expect_matches_reference(const Config& c, double rtol = 1e-9, double atol = 1e-10) {
  auto in = inputs_of(c);
  auto out = run_op("RNN", attrs_of(c), in);
  Reference ref = reference_rnn(c, in);
  ASSERT_EQ(out.size(), c.state_outputs ? (c.mode == "lstm" ? 3u : 2u) : 1u);
  EXPECT_TRUE(all_close(out[0], ref.y, rtol, atol)) << c.mode;
  if (c.state_outputs) {
    EXPECT_TRUE(all_close(out[1], ref.hy, rtol, atol)) << c.mode << " state_output";
    if (c.mode == "lstm") {
      EXPECT_TRUE(all_close(out[2], ref.cy, rtol, atol)) << c.mode << " statecell_output";
    }
  }
}

const char* const kModes[] = {"rnn_relu", "rnn_tanh", "lstm", "gru"};

// ---- forward ------------------------------------------------------------------------------------

TEST(RnnForward, SingleLayerLstmMatchesNaiveReference) {
  Config c;
  expect_matches_reference(c);
}

TEST(RnnForward, EveryModeTwoLayersBidirectionalMatchesNaiveReference) {
  for (const char* mode : kModes) {
    Config c;
    c.mode = mode;
    c.T = 4, c.N = 3, c.I = 5, c.H = 3, c.L = 2, c.D = 2;
    expect_matches_reference(c);
  }
}

TEST(RnnForward, ThreeLayersUnidirectionalWithoutStateOutputsMatchesReference) {
  for (const char* mode : kModes) {
    Config c;
    c.mode = mode;
    c.L = 3, c.state_outputs = false;
    expect_matches_reference(c);
  }
}

TEST(RnnForward, SequenceLengthZeroesPaddingAndTakesStatesAtLastValidStep) {
  for (const char* mode : kModes) {
    Config c;
    c.mode = mode;
    c.T = 5, c.N = 3, c.L = 2, c.D = 2;
    c.lens = {5, 2, 3};
    expect_matches_reference(c);
    auto out = run_op("RNN", attrs_of(c), inputs_of(c));
    for (int64_t t = 2; t < 5; ++t)
      for (int64_t j = 0; j < c.D * c.H; ++j)
        EXPECT_EQ(out[0].at({t, 1, j}), 0.0) << mode << " t=" << t;
  }
}

TEST(RnnForward, Float32UsesSgemmAndMatchesReference) {
  for (const char* mode : kModes) {
    Config c;
    c.mode = mode;
    c.T = 5, c.N = 4, c.I = 8, c.H = 16, c.L = 2, c.D = 2;
    c.dtype = DType::kFloat32;
    expect_matches_reference(c, 1e-4, 1e-5);
  }
}

TEST(RnnForward, MultipleThreadsGiveTheSameResult) {
  Config c;
  c.mode = "gru";
  c.T = 4, c.N = 8, c.I = 6, c.H = 32, c.L = 2, c.D = 2;
  auto in = inputs_of(c);
  RunOptions one, four;
  four.num_threads = 4;
  auto a = run_op("RNN", attrs_of(c), in, one);
  auto b = run_op("RNN", attrs_of(c), in, four);
  EXPECT_TRUE(all_close(b[0], a[0], 1e-12, 1e-12));
}

TEST(RnnForward, LstmStateClippingBoundsTheCellState) {
  Config c;
  c.T = 4, c.L = 2, c.D = 2;
  c.clip = std::make_pair(-0.05, 0.05);
  expect_matches_reference(c);
  auto out = run_op("RNN", attrs_of(c), inputs_of(c));
  for (double v : out[2].data) {
    EXPECT_GE(v, -0.05);
    EXPECT_LE(v, 0.05);
  }
}

TEST(RnnForward, DropoutIsIdentityOutsideTraining) {
  Config c;
  c.L = 2;
  auto in = inputs_of(c);
  AttrMap with_p = attrs_of(c);
  with_p["p"] = "0.5";
  auto a = run_op("RNN", attrs_of(c), in);
  auto b = run_op("RNN", with_p, in);
  EXPECT_TRUE(all_close(b[0], a[0], 0, 0));
}

TEST(RnnForward, DropoutInTrainingDropsUnitsBetweenLayersReproducibly) {
  Config c;
  c.T = 4, c.N = 3, c.H = 8, c.L = 2;
  auto in = inputs_of(c);
  AttrMap attrs = attrs_of(c);
  attrs["p"] = "0.5";
  RunOptions train;
  train.is_train = true;
  train.seed = 11;
  auto a = run_op("RNN", attrs, in, train);
  auto b = run_op("RNN", attrs, in, train);
  ASSERT_EQ(a.size(), 4u);  // output, state_output, statecell_output, hidden mask
  EXPECT_EQ(a[3].shape, (Shape{1, 4, 3, 8}));
  EXPECT_TRUE(all_close(a[0], b[0], 0, 0));
  int zeros = 0;
  for (double m : a[3].data) {
    EXPECT_TRUE(m == 0.0 || m == 2.0) << m;
    zeros += m == 0.0;
  }
  EXPECT_GT(zeros, 10);
  EXPECT_LT(zeros, 86);
  auto plain = run_op("RNN", attrs_of(c), in);
  EXPECT_FALSE(all_close(a[0], plain[0], 1e-6, 1e-9));
}

// ---- shapes, params and attributes
// ----------------------------------------------------------------

TEST(RnnShape, ParameterSizeFollowsGetRnnParamSize) {
  struct Case {
    std::string mode;
    int64_t L, D, I, H, expected;
  };
  // Hand-computed: LSTM I=10 H=20: 4·20·(10+20+2) = 2560; 2 layers bidirectional GRU I=4 H=3:
  // 2·9·(4+3+2) + 2·9·(6+3+2) = 162 + 198 = 360.
  const Case cases[] = {{"lstm", 1, 1, 10, 20, 2560},
                        {"gru", 2, 2, 4, 3, 360},
                        {"rnn_tanh", 3, 1, 7, 5, 5 * (7 + 5 + 2) + 2 * 5 * (5 + 5 + 2)},
                        {"rnn_relu", 2, 2, 1, 1, 2 * (1 + 1 + 2) + 2 * (2 + 1 + 2)},
                        {"lstm", 2, 2, 6, 4, expected_param_size("lstm", 2, 2, 6, 4)}};
  for (const auto& k : cases) {
    EXPECT_EQ(k.expected, expected_param_size(k.mode, k.L, k.D, k.I, k.H));
    AttrMap a{{"mode", k.mode},
              {"state_size", std::to_string(k.H)},
              {"num_layers", std::to_string(k.L)},
              {"bidirectional", k.D == 2 ? "True" : "False"}};
    std::vector<Shape> in(k.mode == "lstm" ? 4 : 3);
    in[0] = Shape{5, 2, k.I};
    auto [ins, outs] = infer_shapes("RNN", a, in);
    EXPECT_EQ(ins[1], (Shape{k.expected})) << k.mode;
    EXPECT_EQ(ins[2], (Shape{k.L * k.D, 2, k.H}));
    if (k.mode == "lstm") {
      EXPECT_EQ(ins[3], (Shape{k.L * k.D, 2, k.H}));
    }
    EXPECT_EQ(outs[0], (Shape{5, 2, k.D * k.H}));
  }
}

TEST(RnnShape, InputSizeInferredFromParametersAndOutput) {
  Config c;
  c.mode = "gru", c.L = 2, c.D = 2, c.I = 7, c.H = 3;
  std::vector<Shape> in(3);
  in[1] = Shape{expected_param_size("gru", 2, 2, 7, 3)};
  std::vector<Shape> out(2);
  out[0] = Shape{6, 4, 6};
  auto [ins, outs] = infer_shapes("RNN", attrs_of(c), in, out);
  EXPECT_EQ(ins[0], (Shape{6, 4, 7}));
  EXPECT_EQ(ins[2], (Shape{4, 4, 3}));
  EXPECT_EQ(outs[1], (Shape{4, 4, 3}));
}

TEST(RnnShape, BatchFromSequenceLengthAndUnknownRankIsNotAnError) {
  Config c;
  c.lens = {1, 2, 3};
  std::vector<Shape> in(5);
  in[4] = Shape{3};
  auto [ins, outs] = infer_shapes("RNN", attrs_of(c), in);
  EXPECT_EQ(ins[2], (Shape{1, 3, 2}));
  EXPECT_FALSE(ins[0].known());
  EXPECT_FALSE(outs[0].known());
}

TEST(RnnShape, MismatchedShapesThrowShapeError) {
  Config c;
  std::vector<Shape> in(4);
  in[0] = Shape{3, 2, 3};
  in[1] = Shape{expected_param_size("lstm", 1, 1, 3, 2) + 1};
  EXPECT_THROW(infer_shapes("RNN", attrs_of(c), in), ShapeError);
  in[1] = Shape{};
  in[2] = Shape{1, 5, 2};  // batch 5 vs 2
  EXPECT_THROW(infer_shapes("RNN", attrs_of(c), in), ShapeError);
  in[2] = Shape{};
  in[0] = Shape{3, 2};
  EXPECT_THROW(infer_shapes("RNN", attrs_of(c), in), ShapeError);
  std::vector<Shape> in2(4);
  in2[1] = Shape{7};  // no input size fits
  EXPECT_THROW(infer_shapes("RNN", attrs_of(c), in2), ShapeError);
}

TEST(RnnShape, OutputCountsFollowModeAndStateOutputs) {
  const Op& op = get_op("RNN");
  auto count = [&](AttrMap a) {
    OpAttrs at = op.make_attrs(a);
    return std::make_tuple(op.num_inputs(at), op.num_visible_outputs(at), op.num_outputs(at));
  };
  AttrMap base{{"state_size", "4"}, {"num_layers", "2"}};
  AttrMap a = base;
  a["mode"] = "lstm";
  EXPECT_EQ(count(a), std::make_tuple(4, 1, 1));
  a["state_outputs"] = "True";
  EXPECT_EQ(count(a), std::make_tuple(4, 3, 3));
  a["use_sequence_length"] = "True";
  a["p"] = "0.2";
  EXPECT_EQ(count(a), std::make_tuple(5, 3, 4));
  AttrMap g = base;
  g["mode"] = "gru";
  g["state_outputs"] = "1";
  EXPECT_EQ(count(g), std::make_tuple(3, 2, 2));
  OpAttrs at = op.make_attrs(a);
  EXPECT_EQ(op.input_names(at), (std::vector<std::string>{"data", "parameters", "state",
                                                          "state_cell", "sequence_length"}));
  EXPECT_EQ(op.output_names(at), (std::vector<std::string>{"output", "state_output",
                                                           "statecell_output", "dropout_mask"}));
}

TEST(RnnParams, InvalidAttributesThrowValueError) {
  const Op& op = get_op("RNN");
  AttrMap ok{{"mode", "lstm"}, {"state_size", "4"}, {"num_layers", "1"}};
  EXPECT_NO_THROW(op.make_attrs(ok));
  auto with = [&](const std::string& k, const std::string& v) {
    AttrMap a = ok;
    a[k] = v;
    return a;
  };
  EXPECT_THROW(op.make_attrs(with("mode", "rnn_sigmoid")), ValueError);
  EXPECT_THROW(op.make_attrs(with("p", "1.5")), ValueError);
  EXPECT_THROW(op.make_attrs(with("state_size", "0")), ValueError);
  EXPECT_THROW(op.make_attrs(with("num_layers", "0")), ValueError);
  EXPECT_THROW(op.make_attrs(with("lstm_state_clip_min", "-1")), ValueError);  // max missing
  AttrMap inverted = with("lstm_state_clip_min", "2");
  inverted["lstm_state_clip_max"] = "1";
  EXPECT_THROW(op.make_attrs(inverted), ValueError);
  EXPECT_THROW(op.make_attrs(with("not_a_param", "1")), ValueError);
  EXPECT_THROW(op.make_attrs(AttrMap{{"mode", "lstm"}, {"num_layers", "1"}}),
               ValueError);  // no state_size
}

TEST(RnnParams, ProjectionSizeIsNotImplemented) {
  Config c;
  AttrMap a = attrs_of(c);
  a["projection_size"] = "2";
  EXPECT_THROW(run_op("RNN", a, inputs_of(c)), NotImplemented);
}

TEST(RnnParams, SequenceLengthOutOfRangeThrowsValueError) {
  Config c;
  c.lens = {4, 1};  // T = 3
  EXPECT_THROW(run_op("RNN", attrs_of(c), inputs_of(c)), ValueError);
}

// ---- gradients ----------------------------------------------------------------------------------

GradCheckOptions tight() {
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-4;
  o.atol = 1e-7;
  return o;
}

TEST(RnnGradient, EveryModeTwoLayersBidirectionalMatchesFiniteDifferences) {
  for (const char* mode : kModes) {
    Config c;
    c.mode = mode;
    c.T = 3, c.N = 2, c.I = 2, c.H = 2, c.L = 2, c.D = 2;
    EXPECT_TRUE(check_gradient("RNN", attrs_of(c), inputs_of(c, 5), tight())) << mode;
  }
}

TEST(RnnGradient, OutputOnlyLossMatchesFiniteDifferences) {
  for (const char* mode : {"lstm", "gru"}) {
    Config c;
    c.mode = mode;
    c.state_outputs = false;
    EXPECT_TRUE(check_gradient("RNN", attrs_of(c), inputs_of(c, 9), tight())) << mode;
  }
}

TEST(RnnGradient, SequenceLengthGetsNoGradientAndPaddingIsSkipped) {
  for (const char* mode : kModes) {
    Config c;
    c.mode = mode;
    c.T = 4, c.N = 3, c.I = 2, c.H = 2, c.L = 1, c.D = 2;
    c.lens = {4, 1, 2};
    GradCheckOptions o = tight();
    o.no_grad_inputs = {c.mode == "lstm" ? 4 : 3};
    EXPECT_TRUE(check_gradient("RNN", attrs_of(c), inputs_of(c, 13), o)) << mode;
  }
}

TEST(RnnGradient, ClippedLstmMatchesFiniteDifferences) {
  Config c;
  c.T = 3, c.L = 2;
  c.clip = std::make_pair(-0.3, 0.3);
  EXPECT_TRUE(check_gradient("RNN", attrs_of(c), inputs_of(c, 17), tight()));
}

TEST(RnnGradient, DropoutInTrainingMatchesFiniteDifferencesWithTheSameMask) {
  Config c;
  c.mode = "rnn_tanh";
  c.T = 3, c.N = 2, c.H = 3, c.L = 3;
  AttrMap a = attrs_of(c);
  a["p"] = "0.4";
  GradCheckOptions o = tight();
  o.is_train = true;
  o.seed = 3;
  EXPECT_TRUE(check_gradient("RNN", a, inputs_of(c, 21), o));
}

TEST(RnnGradient, Float32MatchesFiniteDifferencesLoosely) {
  Config c;
  c.mode = "lstm";
  c.T = 2, c.N = 2, c.I = 2, c.H = 2, c.L = 1, c.D = 2;
  c.dtype = DType::kFloat32;
  GradCheckOptions o;
  o.eps = 1e-2;
  o.rtol = 5e-2;
  o.atol = 5e-3;
  EXPECT_TRUE(check_gradient("RNN", attrs_of(c), inputs_of(c, 23), o));
}

TEST(RnnGradient, BackwardAccumulatesWithKAdd) {
  Config c;
  c.mode = "gru";
  auto in = inputs_of(c);
  std::vector<HostTensor> heads{HostTensor::random(Shape{c.T, c.N, c.H}, 40, -1, 1, c.dtype),
                                HostTensor::random(Shape{1, c.N, c.H}, 41, -1, 1, c.dtype)};
  auto grads = op_gradient("RNN", attrs_of(c), in, heads);
  std::vector<HostTensor> bwd_in = in;
  bwd_in.insert(bwd_in.end(), heads.begin(), heads.end());
  RunOptions add;
  add.req.assign(3, OpReq::kAdd);
  for (int i = 0; i < 3; ++i)
    add.initial_outputs.push_back(HostTensor::filled(in[i].shape, 1.0, c.dtype));
  auto acc = run_op("_backward_RNN", attrs_of(c), bwd_in, add);
  for (int i = 0; i < 3; ++i) {
    HostTensor expected = grads[i];
    for (double& v : expected.data) v += 1.0;
    EXPECT_TRUE(all_close(acc[i], expected, 1e-12, 1e-12)) << "input " << i;
  }
}

}  // namespace
}  // namespace weft::testing
