// Model builders: MLP, ResNet v1, MobileNetV2 and the LSTM language model, composed with the
// symbolic API.
#include "graph/models.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace weft::graph::models {
namespace {

using namespace weft::graph::sym;  // NOLINT: the builders read like MXNet's symbol examples

std::string str(int64_t v) { return std::to_string(v); }

// ---- ResNet ------------------------------------------------------------------------------------

constexpr double kResNetBnEps = 2e-5;

Symbol conv_bn(const Symbol& data, const std::string& name, const std::string& bn_name,
               int64_t num_filter, const Shape& kernel, const Shape& stride, const Shape& pad) {
  Symbol conv = Convolution(data, name, num_filter, kernel, stride, pad, /*no_bias=*/true);
  return BatchNorm(conv, bn_name, /*fix_gamma=*/false, kResNetBnEps);
}

/// Two 3×3 convolutions; `num_filter` outputs.
Symbol basic_unit(const Symbol& data, const std::string& name, int64_t num_filter, int64_t stride,
                  bool dim_match) {
  Symbol x =
      conv_bn(data, name + "_conv1", name + "_bn1", num_filter, {3, 3}, {stride, stride}, {1, 1});
  x = Activation(x, name + "_relu1", "relu");
  x = conv_bn(x, name + "_conv2", name + "_bn2", num_filter, {3, 3}, {1, 1}, {1, 1});
  Symbol shortcut = dim_match ? data
                              : conv_bn(data, name + "_sc", name + "_sc_bn", num_filter, {1, 1},
                                        {stride, stride}, {0, 0});
  return Activation(elemwise_add(x, shortcut, name + "_plus"), name + "_relu", "relu");
}

/// 1×1 (with the stride, as in the original v1) → 3×3 → 1×1 with 4× the width; `num_filter`
/// outputs.
Symbol bottleneck_unit(const Symbol& data, const std::string& name, int64_t num_filter,
                       int64_t stride, bool dim_match) {
  const int64_t mid = num_filter / 4;
  Symbol x = conv_bn(data, name + "_conv1", name + "_bn1", mid, {1, 1}, {stride, stride}, {0, 0});
  x = Activation(x, name + "_relu1", "relu");
  x = conv_bn(x, name + "_conv2", name + "_bn2", mid, {3, 3}, {1, 1}, {1, 1});
  x = Activation(x, name + "_relu2", "relu");
  x = conv_bn(x, name + "_conv3", name + "_bn3", num_filter, {1, 1}, {1, 1}, {0, 0});
  Symbol shortcut = dim_match ? data
                              : conv_bn(data, name + "_sc", name + "_sc_bn", num_filter, {1, 1},
                                        {stride, stride}, {0, 0});
  return Activation(elemwise_add(x, shortcut, name + "_plus"), name + "_relu", "relu");
}

// ---- MobileNetV2 -------------------------------------------------------------------------------

constexpr double kMobileNetBnEps = 1e-5;

/// The reference implementation's channel rounding: to the nearest multiple of `divisor`, at
/// least `divisor`, and never more than 10% below `v`.
int64_t make_divisible(double v, int64_t divisor = 8) {
  int64_t rounded =
      std::max<int64_t>(divisor, static_cast<int64_t>(v + divisor / 2.0) / divisor * divisor);
  if (static_cast<double>(rounded) < 0.9 * v) rounded += divisor;
  return rounded;
}

Symbol relu6(const Symbol& data, const std::string& name) { return clip(data, name, 0, 6); }

Symbol mobile_conv_bn(const Symbol& data, const std::string& name, int64_t num_filter,
                      int64_t kernel, int64_t stride, int64_t num_group) {
  const int64_t pad = (kernel - 1) / 2;
  Symbol conv = Convolution(data, name, num_filter, {kernel, kernel}, {stride, stride}, {pad, pad},
                            /*no_bias=*/true, num_group);
  return BatchNorm(conv, name + "_bn", /*fix_gamma=*/false, kMobileNetBnEps);
}

Symbol inverted_residual(const Symbol& data, const std::string& name, int64_t in_channels,
                         int64_t out_channels, int64_t stride, int64_t expand) {
  const int64_t hidden = in_channels * expand;
  Symbol x = data;
  if (expand != 1)
    x = relu6(mobile_conv_bn(x, name + "_expand", hidden, 1, 1, 1), name + "_expand_relu6");
  x = relu6(mobile_conv_bn(x, name + "_dw", hidden, 3, stride, /*num_group=*/hidden),
            name + "_dw_relu6");
  x = mobile_conv_bn(x, name + "_project", out_channels, 1, 1, 1);
  if (stride == 1 && in_channels == out_channels) x = elemwise_add(x, data, name + "_add");
  return x;
}

// ---- LSTM --------------------------------------------------------------------------------------

struct LstmLayer {
  Symbol i2h_weight, i2h_bias, h2h_weight, h2h_bias;
};

void check_positive(int64_t v, const char* what, const char* model) {
  WEFT_CHECK(v > 0) << model << ": " << what << " must be positive, got " << v;
}

/// The LSTM LM in the PTB "small" configuration that build() uses.
struct PtbSmall {
  static constexpr int kVocab = 10000, kEmbed = 200, kHidden = 200, kSeqLen = 35, kLayers = 2;
};

}  // namespace

Symbol mlp(int num_classes, std::vector<int> hidden) {
  check_positive(num_classes, "num_classes", "mlp");
  Symbol x = Variable("data");
  for (size_t i = 0; i < hidden.size(); ++i) {
    check_positive(hidden[i], "a hidden size", "mlp");
    x = FullyConnected(x, "fc" + str(i + 1), hidden[i]);
    x = Activation(x, "relu" + str(i + 1), "relu");
  }
  x = FullyConnected(x, "fc" + str(hidden.size() + 1), num_classes);
  return SoftmaxOutput(x, "softmax");
}

Symbol resnet(int depth, int num_classes) {
  check_positive(num_classes, "num_classes", "resnet");
  std::vector<int> units;
  bool bottleneck = false;
  switch (depth) {
    case 18:
      units = {2, 2, 2, 2};
      break;
    case 34:
      units = {3, 4, 6, 3};
      break;
    case 50:
      units = {3, 4, 6, 3}, bottleneck = true;
      break;
    case 101:
      units = {3, 4, 23, 3}, bottleneck = true;
      break;
    case 152:
      units = {3, 8, 36, 3}, bottleneck = true;
      break;
    default:
      WEFT_THROW(ValueError) << "resnet: depth " << depth << " is not one of 18, 34, 50, 101, 152";
  }
  const int64_t widths[4] = {64, 128, 256, 512};
  const int64_t expansion = bottleneck ? 4 : 1;

  Symbol x = Variable("data");
  x = conv_bn(x, "conv0", "bn0", 64, {7, 7}, {2, 2}, {3, 3});
  x = Activation(x, "relu0", "relu");
  x = Pooling(x, "pool0", {3, 3}, "max", {2, 2}, {1, 1});
  int64_t channels = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t out = widths[stage] * expansion;
    for (int unit = 0; unit < units[stage]; ++unit) {
      const int64_t stride = (unit == 0 && stage > 0) ? 2 : 1;
      const bool dim_match = stride == 1 && channels == out;
      const std::string name = "stage" + str(stage + 1) + "_unit" + str(unit + 1);
      x = bottleneck ? bottleneck_unit(x, name, out, stride, dim_match)
                     : basic_unit(x, name, out, stride, dim_match);
      channels = out;
    }
  }
  x = Pooling(x, "pool1", {7, 7}, "avg", {}, {}, /*global_pool=*/true);
  x = Flatten(x, "flatten0");
  x = FullyConnected(x, "fc1", num_classes);
  return SoftmaxOutput(x, "softmax");
}

Symbol mobilenet_v2(int num_classes, float multiplier) {
  check_positive(num_classes, "num_classes", "mobilenet_v2");
  WEFT_CHECK(multiplier > 0 && std::isfinite(multiplier))
      << "mobilenet_v2: multiplier must be positive, got " << multiplier;
  // (expansion t, channels c, repeats n, first stride s), Table 2 of the paper.
  struct Stage {
    int64_t t, c, n, s;
  };
  const Stage stages[] = {
      {1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2},  {6, 64, 4, 2},
      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1},
  };
  const double m = multiplier;
  int64_t channels = make_divisible(32 * m);
  const int64_t last_channels = make_divisible(1280 * std::max(1.0, m));

  Symbol x = Variable("data");
  x = relu6(mobile_conv_bn(x, "conv0", channels, 3, 2, 1), "conv0_relu6");
  int block = 0;
  for (const Stage& st : stages) {
    const int64_t out = make_divisible(static_cast<double>(st.c) * m);
    for (int64_t i = 0; i < st.n; ++i) {
      x = inverted_residual(x, "block" + str(block++), channels, out, i == 0 ? st.s : 1, st.t);
      channels = out;
    }
  }
  x = relu6(mobile_conv_bn(x, "conv_last", last_channels, 1, 1, 1), "conv_last_relu6");
  x = Pooling(x, "pool0", {7, 7}, "avg", {}, {}, /*global_pool=*/true);
  x = Flatten(x, "flatten0");
  x = Dropout(x, "dropout0", 0.2);
  x = FullyConnected(x, "fc", num_classes);
  return SoftmaxOutput(x, "softmax");
}

Symbol lstm_lm(int vocab, int embed, int hidden, int seq_len, int layers, bool fused) {
  check_positive(vocab, "vocab", "lstm_lm");
  check_positive(embed, "embed", "lstm_lm");
  check_positive(hidden, "hidden", "lstm_lm");
  check_positive(seq_len, "seq_len", "lstm_lm");
  check_positive(layers, "layers", "lstm_lm");

  Symbol data = Variable("data");
  Symbol label = Variable("softmax_label");
  Symbol cls_weight = Variable("cls_weight");
  Symbol cls_bias = Variable("cls_bias");
  Symbol emb = Embedding(data, "embed", vocab, embed, Variable("embed_weight"));  // (N, T, E)

  Symbol hidden_rows;  // (T·N, H), time-major
  if (fused) {
    Symbol tnc = transpose(emb, "embed_tnc", {1, 0, 2});
    Symbol rnn = RNN(tnc, "lstm", hidden, layers, "lstm");  // (T, N, H)
    hidden_rows = Reshape(rnn, "lstm_rows", {-1, hidden});
  } else {
    std::vector<LstmLayer> params;
    std::vector<Symbol> c, h;
    for (int l = 0; l < layers; ++l) {
      const std::string p = "l" + str(l);
      params.push_back({Variable(p + "_i2h_weight"), Variable(p + "_i2h_bias"),
                        Variable(p + "_h2h_weight"), Variable(p + "_h2h_bias")});
      c.push_back(Variable(p + "_init_c"));
      h.push_back(Variable(p + "_init_h"));
    }
    Symbol steps = SliceChannel(emb, "wordvec", seq_len, /*axis=*/1, /*squeeze_axis=*/true);
    std::vector<Symbol> outputs;
    for (int t = 0; t < seq_len; ++t) {
      Symbol x = steps[t];
      for (int l = 0; l < layers; ++l) {
        const std::string n = "t" + str(t) + "_l" + str(l);
        const LstmLayer& w = params[l];
        Symbol i2h =
            FullyConnected(x, n + "_i2h", 4 * hidden, false, true, w.i2h_weight, w.i2h_bias);
        Symbol h2h =
            FullyConnected(h[l], n + "_h2h", 4 * hidden, false, true, w.h2h_weight, w.h2h_bias);
        Symbol gates = SliceChannel(elemwise_add(i2h, h2h, n + "_gates"), n + "_slice", 4);
        // Gate order [i, f, g, o], the fused RNN op's.
        Symbol in_gate = Activation(gates[0], n + "_in_gate", "sigmoid");
        Symbol forget_gate = Activation(gates[1], n + "_forget_gate", "sigmoid");
        Symbol in_transform = Activation(gates[2], n + "_in_transform", "tanh");
        Symbol out_gate = Activation(gates[3], n + "_out_gate", "sigmoid");
        c[l] = elemwise_add(elemwise_mul(forget_gate, c[l], n + "_keep_c"),
                            elemwise_mul(in_gate, in_transform, n + "_write_c"), n + "_c");
        h[l] = elemwise_mul(out_gate, Activation(c[l], n + "_tanh_c", "tanh"), n + "_h");
        x = h[l];
      }
      outputs.push_back(x);
    }
    hidden_rows = Concat(outputs, "concat", /*dim=*/0);
  }
  Symbol pred = FullyConnected(hidden_rows, "pred", vocab, false, true, cls_weight, cls_bias);
  // Labels (N, T) in the same time-major row order as the predictions.
  Symbol label_rows = Reshape(transpose(label, "label_tn", {1, 0}), "label_rows", {-1});
  return SoftmaxOutput(pred, "softmax", label_rows);
}

InferInputs lstm_lm_inputs(int64_t batch, int hidden, int seq_len, int layers, bool fused) {
  check_positive(batch, "batch", "lstm_lm_inputs");
  InferInputs in;
  in.shapes["data"] = Shape{batch, seq_len};
  in.shapes["softmax_label"] = Shape{batch, seq_len};
  if (fused) {
    in.shapes["lstm_state"] = Shape{layers, batch, hidden};
    in.shapes["lstm_state_cell"] = Shape{layers, batch, hidden};
  } else {
    for (int l = 0; l < layers; ++l) {
      in.shapes["l" + str(l) + "_init_c"] = Shape{batch, hidden};
      in.shapes["l" + str(l) + "_init_h"] = Shape{batch, hidden};
    }
  }
  return in;
}

std::vector<std::string> model_names() {
  return {"mlp", "resnet18", "resnet50", "mobilenetv2", "lstm_lm", "lstm_lm_fused"};
}

namespace {
[[noreturn]] void unknown_model(std::string_view name) {
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  WEFT_THROW(ValueError) << "unknown model '" << name << "' (known: " << known << ")";
}
}  // namespace

Symbol build(std::string_view name) {
  NameScope scope;
  using P = PtbSmall;
  if (name == "mlp") return mlp();
  if (name == "resnet18") return resnet(18);
  if (name == "resnet50") return resnet(50);
  if (name == "mobilenetv2") return mobilenet_v2();
  if (name == "lstm_lm")
    return lstm_lm(P::kVocab, P::kEmbed, P::kHidden, P::kSeqLen, P::kLayers, false);
  if (name == "lstm_lm_fused")
    return lstm_lm(P::kVocab, P::kEmbed, P::kHidden, P::kSeqLen, P::kLayers, true);
  unknown_model(name);
}

InferInputs default_inputs(std::string_view name, int64_t batch) {
  WEFT_CHECK(batch >= 1) << "default_inputs('" << name << "'): batch must be at least 1, got "
                         << batch;
  using P = PtbSmall;
  if (name == "lstm_lm" || name == "lstm_lm_fused") {
    return lstm_lm_inputs(batch, P::kHidden, P::kSeqLen, P::kLayers, name == "lstm_lm_fused");
  }
  InferInputs in;
  if (name == "mlp") {
    in.shapes["data"] = Shape{batch, 784};
  } else if (name == "resnet18" || name == "resnet50" || name == "mobilenetv2") {
    in.shapes["data"] = Shape{batch, 3, 224, 224};
  } else {
    unknown_model(name);
  }
  in.shapes["softmax_label"] = Shape{batch};
  return in;
}

}  // namespace weft::graph::models
