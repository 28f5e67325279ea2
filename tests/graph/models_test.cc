// The bundled model builders: output shapes at several batch sizes, learned-parameter counts
// against the published figures, MXNet-style names, JSON round trips, and the unrolled LSTM
// computing what the fused RNN op computes.
#include "graph/models.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "ndarray/ndarray.h"

namespace weft::graph {
namespace {

using Names = std::vector<std::string>;

/// Values learned in training: every argument except the inputs the caller feeds.
int64_t learned_parameters(const Symbol& s, const InferInputs& inputs) {
  const InferredShapes shapes = s.infer_shape(inputs);
  const Names args = s.list_arguments();
  int64_t total = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (inputs.shapes.count(args[i])) continue;
    total += shapes.arg_shapes[i].size();
  }
  return total;
}

Shape output_shape(const Symbol& s, const InferInputs& inputs) {
  const InferredShapes shapes = s.infer_shape(inputs);
  EXPECT_TRUE(shapes.complete);
  EXPECT_EQ(shapes.out_shapes.size(), 1u);
  return shapes.out_shapes.at(0);
}

TEST(Models, ImageClassifiersGiveOneRowOfClassScoresPerImage) {
  for (const char* name : {"resnet18", "resnet50", "mobilenetv2"}) {
    const Symbol s = models::build(name);
    for (int64_t n : {1, 32}) {
      EXPECT_EQ(output_shape(s, models::default_inputs(name, n)), (Shape{n, 1000}))
          << name << " N=" << n;
    }
  }
  EXPECT_EQ(output_shape(models::resnet(18, 10), models::default_inputs("resnet18", 2)),
            (Shape{2, 10}));
  EXPECT_EQ(output_shape(models::mobilenet_v2(7, 0.5f), models::default_inputs("mobilenetv2", 3)),
            (Shape{3, 7}));
}

TEST(Models, ResNetParameterCountsMatchThePublishedModels) {
  // torchvision's resnet18 / resnet50 (v1, FC with bias; BatchNorm gamma and beta learned).
  EXPECT_EQ(learned_parameters(models::build("resnet18"), models::default_inputs("resnet18", 1)),
            11689512);
  EXPECT_EQ(learned_parameters(models::build("resnet50"), models::default_inputs("resnet50", 1)),
            25557032);
}

TEST(Models, MobileNetV2ParameterCountMatchesThePublishedModel) {
  // torchvision's mobilenet_v2 at width 1.0: 3,504,872.
  EXPECT_EQ(
      learned_parameters(models::build("mobilenetv2"), models::default_inputs("mobilenetv2", 1)),
      3504872);
  // Narrower widths are rounded to multiples of 8 and shrink the model.
  const Symbol half = models::mobilenet_v2(1000, 0.5f);
  const int64_t half_params = learned_parameters(half, models::default_inputs("mobilenetv2", 1));
  EXPECT_LT(half_params, 3504872);
  EXPECT_EQ(half.get_internals()["conv0_output"].attr("num_filter"),
            std::optional<std::string>("16"));  // 32·0.5
  EXPECT_EQ(half.get_internals()["conv_last_output"].attr("num_filter"),
            std::optional<std::string>("1280"));
}

TEST(Models, ResNetNamesAndAuxiliaryStatesFollowMXNetConventions) {
  const Symbol s = models::build("resnet50");
  const Names args = s.list_arguments();
  ASSERT_GE(args.size(), 6u);
  EXPECT_EQ((Names{args.begin(), args.begin() + 4}),
            (Names{"data", "conv0_weight", "bn0_gamma", "bn0_beta"}));
  EXPECT_EQ((Names{args.end() - 3, args.end()}),
            (Names{"fc1_weight", "fc1_bias", "softmax_label"}));
  EXPECT_EQ(s.list_outputs(), (Names{"softmax_output"}));
  // 53 BatchNorms (stem, 3 per bottleneck × 16, 4 projections), each with a moving mean and var.
  const Names aux = s.list_auxiliary_states();
  EXPECT_EQ(aux.size(), 106u);
  EXPECT_EQ(aux.front(), "bn0_moving_mean");
  EXPECT_EQ(aux.back(), "stage4_unit3_bn3_moving_var");
  EXPECT_EQ(models::build("resnet18").list_auxiliary_states().size(),
            40u);  // 1 + 2 × 8 + 3 BatchNorms
  // Projection shortcuts only where the shape changes: the first unit of each stage for
  // bottlenecks, stages 2-4 for basic blocks.
  auto has = [](const Names& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  EXPECT_TRUE(has(args, "stage1_unit1_sc_weight"));
  EXPECT_FALSE(has(args, "stage1_unit2_sc_weight"));
  const Names args18 = models::build("resnet18").list_arguments();
  EXPECT_FALSE(has(args18, "stage1_unit1_sc_weight"));
  EXPECT_TRUE(has(args18, "stage2_unit1_sc_weight"));
}

TEST(Models, MobileNetV2UsesDepthwiseConvolutionsAndResiduals) {
  const Graph g = models::build("mobilenetv2").to_graph();
  int depthwise = 0, adds = 0, clips = 0;
  for (const Node& n : g.nodes) {
    if (n.is_variable()) continue;
    if (n.op->name() == "Convolution" && n.name.ends_with("_dw")) {
      ++depthwise;
      EXPECT_EQ(n.attrs.at("num_group"), n.attrs.at("num_filter")) << n.name;
    }
    if (n.op->name() == "elemwise_add") ++adds;
    if (n.op->name() == "clip") {
      ++clips;
      EXPECT_EQ(n.attrs.at("a_min"), "0");
      EXPECT_EQ(n.attrs.at("a_max"), "6");
    }
  }
  EXPECT_EQ(depthwise, 17);  // one per inverted residual block
  EXPECT_EQ(adds, 10);       // blocks with stride 1 and unchanged width: 1 + 2 + 3 + 2 + 2
  EXPECT_EQ(clips, 1 + 16 * 2 + 1 +
                       1);  // stem, expand + depthwise (first block: depthwise only), last conv
}

TEST(Models, MlpShapesAndParameters) {
  const Symbol s = models::build("mlp");
  EXPECT_EQ(s.list_arguments(), (Names{"data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
                                       "fc3_weight", "fc3_bias", "softmax_label"}));
  EXPECT_EQ(output_shape(s, models::default_inputs("mlp", 16)), (Shape{16, 10}));
  EXPECT_EQ(learned_parameters(s, models::default_inputs("mlp", 1)),
            (784 * 128 + 128) + (128 * 64 + 64) + (64 * 10 + 10));
  const Symbol deep = models::mlp(3, {5, 6, 7});
  InferInputs in;
  in.shapes["data"] = Shape{2, 4};
  in.shapes["softmax_label"] = Shape{2};
  EXPECT_EQ(output_shape(deep, in), (Shape{2, 3}));
  EXPECT_EQ(learned_parameters(deep, in), (4 * 5 + 5) + (5 * 6 + 6) + (6 * 7 + 7) + (7 * 3 + 3));
  EXPECT_THROW(models::mlp(0), ValueError);
}

TEST(Models, LstmLanguageModelsPredictEveryPositionWithEqualParameterCounts) {
  constexpr int64_t V = 10000, E = 200, H = 200, T = 35, L = 2;
  // Embedding, per layer 4H × (input + H) weights and two 4H biases, then the classifier.
  const int64_t expected =
      V * E + (4 * H * (E + H) + 8 * H) + (L - 1) * (4 * H * (H + H) + 8 * H) + (V * H + V);
  for (const char* name : {"lstm_lm", "lstm_lm_fused"}) {
    const Symbol s = models::build(name);
    for (int64_t n : {1, 20}) {
      const InferInputs in = models::default_inputs(name, n);
      EXPECT_EQ(output_shape(s, in), (Shape{T * n, V})) << name;
      EXPECT_EQ(learned_parameters(s, in), expected) << name;
    }
  }
  const Names fused = models::build("lstm_lm_fused").list_arguments();
  EXPECT_EQ(fused, (Names{"data", "embed_weight", "lstm_parameters", "lstm_state",
                          "lstm_state_cell", "cls_weight", "cls_bias", "softmax_label"}));
  const Names unrolled = models::build("lstm_lm").list_arguments();
  EXPECT_EQ((Names{unrolled.begin(), unrolled.begin() + 8}),
            (Names{"data", "embed_weight", "l0_i2h_weight", "l0_i2h_bias", "l0_init_h",
                   "l0_h2h_weight", "l0_h2h_bias", "l0_init_c"}));
  EXPECT_EQ(unrolled.size(), 2u + 6u * L + 3u);
}

TEST(Models, BuildsAreDeterministicAndRoundTripThroughJson) {
  for (const std::string& name : models::model_names()) {
    const Symbol s = models::build(name);
    const std::string json = s.to_json();
    EXPECT_EQ(models::build(name).to_json(), json) << name;
    const Symbol back = Symbol::from_json(json);
    EXPECT_EQ(back.to_json(), json) << name;
    EXPECT_EQ(back.list_arguments(), s.list_arguments()) << name;
    EXPECT_EQ(back.list_auxiliary_states(), s.list_auxiliary_states()) << name;
    EXPECT_TRUE(back.infer_shape(models::default_inputs(name, 2)).complete) << name;
  }
}

TEST(Models, UnknownNamesAreRejected) {
  try {
    (void)models::build("resnet19");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet18"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)models::default_inputs("vgg", 1), ValueError);
  EXPECT_THROW((void)models::default_inputs("mlp", 0), ValueError);
  EXPECT_THROW((void)models::resnet(20), ValueError);
}

// ---- the unrolled LSTM against the fused RNN op ------------------------------------------------

/// Runs a graph node by node with the imperative op interface, returning the head values.
std::vector<NDArray> run(const Graph& g, const std::map<std::string, NDArray>& args) {
  std::vector<NDArray> entries(g.num_entries());
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    if (n.is_variable()) {
      entries[g.entry_id(nid, 0)] = args.at(n.name);
      continue;
    }
    std::vector<NDArray> inputs;
    for (const NodeEntry& e : n.inputs) inputs.push_back(entries[g.entry_id(e)]);
    const std::vector<NDArray> outs = invoke_all(n.op_attrs, inputs);
    for (size_t i = 0; i < outs.size(); ++i)
      entries[g.entry_id(nid, static_cast<uint32_t>(i))] = outs[i];
  }
  std::vector<NDArray> heads;
  for (const NodeEntry& e : g.heads) heads.push_back(entries[g.entry_id(e)]);
  return heads;
}

std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(Models, UnrolledLstmComputesWhatTheFusedRnnComputes) {
  constexpr int V = 11, E = 5, H = 4, T = 3, L = 2, N = 2;
  std::mt19937 rng(7);
  const Symbol unrolled = models::lstm_lm(V, E, H, T, L, /*fused=*/false);
  const Symbol fused = models::lstm_lm(V, E, H, T, L, /*fused=*/true);

  std::map<std::string, NDArray> shared;
  std::vector<float> tokens;
  for (int i = 0; i < N * T; ++i) tokens.push_back(static_cast<float>((i * 5 + 3) % V));
  shared["data"] = NDArray::from_vector<float>(Shape{N, T}, tokens);
  shared["softmax_label"] = NDArray::zeros(Shape{N, T});
  shared["embed_weight"] = NDArray::from_vector<float>(Shape{V, E}, random_values(V * E, rng));
  shared["cls_weight"] = NDArray::from_vector<float>(Shape{V, H}, random_values(V * H, rng));
  shared["cls_bias"] = NDArray::from_vector<float>(Shape{V}, random_values(V, rng));

  // Per layer weights, then the fused op's packing (OPS.md, RNN): every weight matrix
  // (i2h then h2h, layer by layer), then every bias vector in the same order.
  std::map<std::string, NDArray> a = shared, b = shared;
  std::vector<float> weights, biases;
  std::vector<float> h0 = random_values(L * N * H, rng), c0 = random_values(L * N * H, rng);
  for (int l = 0; l < L; ++l) {
    const int in = l == 0 ? E : H;
    const std::string p = "l" + std::to_string(l);
    const auto wi = random_values(4 * H * in, rng), wh = random_values(4 * H * H, rng);
    const auto bi = random_values(4 * H, rng), bh = random_values(4 * H, rng);
    a[p + "_i2h_weight"] = NDArray::from_vector<float>(Shape{4 * H, in}, wi);
    a[p + "_h2h_weight"] = NDArray::from_vector<float>(Shape{4 * H, H}, wh);
    a[p + "_i2h_bias"] = NDArray::from_vector<float>(Shape{4 * H}, bi);
    a[p + "_h2h_bias"] = NDArray::from_vector<float>(Shape{4 * H}, bh);
    weights.insert(weights.end(), wi.begin(), wi.end());
    weights.insert(weights.end(), wh.begin(), wh.end());
    biases.insert(biases.end(), bi.begin(), bi.end());
    biases.insert(biases.end(), bh.begin(), bh.end());
    a[p + "_init_h"] = NDArray::from_vector<float>(
        Shape{N, H}, std::vector<float>(h0.begin() + l * N * H, h0.begin() + (l + 1) * N * H));
    a[p + "_init_c"] = NDArray::from_vector<float>(
        Shape{N, H}, std::vector<float>(c0.begin() + l * N * H, c0.begin() + (l + 1) * N * H));
  }
  weights.insert(weights.end(), biases.begin(), biases.end());
  b["lstm_parameters"] =
      NDArray::from_vector<float>(Shape{static_cast<int64_t>(weights.size())}, weights);
  b["lstm_state"] = NDArray::from_vector<float>(Shape{L, N, H}, h0);
  b["lstm_state_cell"] = NDArray::from_vector<float>(Shape{L, N, H}, c0);

  const std::vector<double> ya = run(unrolled.to_graph(), a).at(0).to_doubles();
  const std::vector<double> yb = run(fused.to_graph(), b).at(0).to_doubles();
  ASSERT_EQ(ya.size(), static_cast<size_t>(T * N * V));
  ASSERT_EQ(yb.size(), ya.size());
  for (size_t i = 0; i < ya.size(); ++i) EXPECT_NEAR(ya[i], yb[i], 1e-5) << "element " << i;
  // The outputs are distributions over the vocabulary, one row per (time, batch) position.
  for (int r = 0; r < T * N; ++r) {
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += ya[r * V + v];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

}  // namespace
}  // namespace weft::graph
