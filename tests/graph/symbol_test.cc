// The symbolic API: composition with automatic variables and names, listing in MXNet's order,
// multi-output access, groups, the IR and JSON round trips, and shape inference.
#include "graph/symbol.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "graph/json.h"
#include "tests/graph/models_dir.h"

namespace weft::graph {
namespace {

using Names = std::vector<std::string>;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Names node_names(const Graph& g) {
  Names out;
  for (const Node& n : g.nodes) out.push_back(n.name);
  return out;
}

TEST(Symbol, ComposeCreatesMissingInputsAsVariables) {
  Symbol data = Symbol::variable("data");
  Symbol fc = sym::FullyConnected(data, "fc1", 10);
  EXPECT_EQ(fc.list_arguments(), (Names{"data", "fc1_weight", "fc1_bias"}));
  EXPECT_EQ(fc.list_outputs(), (Names{"fc1_output"}));
  EXPECT_EQ(fc.name(), "fc1");
  EXPECT_EQ(fc.op_name(), "FullyConnected");
  EXPECT_EQ(fc.attr("num_hidden"), std::optional<std::string>("10"));
  EXPECT_FALSE(fc.attr("no_bias").has_value());

  Symbol nobias = sym::FullyConnected(data, "fc2", 10, /*no_bias=*/true);
  EXPECT_EQ(nobias.list_arguments(), (Names{"data", "fc2_weight"}));
  EXPECT_EQ(nobias.attr("no_bias"), std::optional<std::string>("True"));

  // An empty symbol in the middle is created too; a given one is used as is.
  Symbol w = Symbol::variable("shared_w");
  Symbol fc3 = Symbol::op("FullyConnected", {data, w}, {{"num_hidden", "4"}}, "fc3");
  EXPECT_EQ(fc3.list_arguments(), (Names{"data", "shared_w", "fc3_bias"}));
  Symbol fc4 = Symbol::op("FullyConnected", {data, Symbol(), w}, {{"num_hidden", "4"}}, "fc4");
  EXPECT_EQ(fc4.list_arguments(), (Names{"data", "fc4_weight", "shared_w"}));
}

TEST(Symbol, CreatedVariablesCarryNoOpParams) {
  Symbol conv = sym::Convolution(Symbol::variable("data"), "conv", 8, {3, 3});
  const Graph g = conv.to_graph();
  const int64_t w = g.find_variable("conv_weight");
  ASSERT_GE(w, 0);
  EXPECT_TRUE(g.nodes[w].attrs.empty());
  EXPECT_EQ(g.nodes.back().attrs.at("kernel"), "(3, 3)");
  EXPECT_EQ(g.nodes.back().attrs.at("num_filter"), "8");
  EXPECT_EQ(g.nodes.back().attrs.count("stride"), 0u);  // not given, not written
}

TEST(Symbol, BatchNormStatisticsAreAuxiliaryStates) {
  Symbol data = Symbol::variable("data");
  Symbol conv = sym::Convolution(data, "conv0", 16, {3, 3}, {1, 1}, {1, 1}, /*no_bias=*/true);
  Symbol bn = sym::BatchNorm(conv, "bn0", /*fix_gamma=*/false, 2e-5);
  Symbol relu = sym::Activation(bn, "relu0", "relu");
  EXPECT_EQ(relu.list_arguments(), (Names{"data", "conv0_weight", "bn0_gamma", "bn0_beta"}));
  EXPECT_EQ(relu.list_auxiliary_states(), (Names{"bn0_moving_mean", "bn0_moving_var"}));
  EXPECT_EQ(relu.list_inputs(), (Names{"data", "conv0_weight", "bn0_gamma", "bn0_beta",
                                       "bn0_moving_mean", "bn0_moving_var"}));
  // BatchNorm's mean and var outputs are hidden: one visible output.
  EXPECT_EQ(bn.num_outputs(), 1u);
  EXPECT_EQ(bn.attr("eps"), std::optional<std::string>("2e-05"));
  EXPECT_EQ(bn.attr("fix_gamma"), std::optional<std::string>("False"));
}

TEST(Symbol, AutomaticNamesCountPerOpWithinAScope) {
  NameScope scope;
  Symbol data = Symbol::variable("data");
  Symbol a = Symbol::op("Convolution", {data}, {{"kernel", "(1, 1)"}, {"num_filter", "4"}});
  Symbol b = Symbol::op("Convolution", {a}, {{"kernel", "(1, 1)"}, {"num_filter", "4"}});
  Symbol c = Symbol::op("FullyConnected", {b}, {{"num_hidden", "3"}});
  EXPECT_EQ(a.name(), "convolution0");
  EXPECT_EQ(b.name(), "convolution1");
  EXPECT_EQ(c.name(), "fullyconnected0");
  EXPECT_EQ(c.list_arguments(),
            (Names{"data", "convolution0_weight", "convolution0_bias", "convolution1_weight",
                   "convolution1_bias", "fullyconnected0_weight", "fullyconnected0_bias"}));
  {
    NameScope inner("net_");
    Symbol d = Symbol::op("Activation", {c}, {{"act_type", "relu"}});
    Symbol e = sym::FullyConnected(d, "out", 2);
    EXPECT_EQ(d.name(), "net_activation0");
    EXPECT_EQ(e.name(), "net_out");
    EXPECT_EQ(e.list_arguments().back(), "net_out_bias");
  }
  // The outer scope's counters continue after the inner one ends.
  Symbol f = Symbol::op("Convolution", {c}, {{"kernel", "(1, 1)"}, {"num_filter", "4"}});
  EXPECT_EQ(f.name(), "convolution2");
  // An alias counts under the name it was called by and writes the op's own name.
  Symbol g = Symbol::op("_Plus", {data, data});
  EXPECT_EQ(g.name(), "_plus0");
  EXPECT_EQ(g.op_name(), "elemwise_add");
}

TEST(Symbol, ArgumentsFollowDepthFirstPostOrder) {
  Symbol a = Symbol::variable("a");
  Symbol b = Symbol::variable("b");
  Symbol fa = sym::FullyConnected(a, "fa", 4);
  Symbol fb = sym::FullyConnected(b, "fb", 4);
  Symbol sum = sym::elemwise_add(fa, fb, "sum");
  Symbol both = sym::elemwise_mul(sum, fa, "both");  // fa reached twice, listed once
  EXPECT_EQ(both.list_arguments(),
            (Names{"a", "fa_weight", "fa_bias", "b", "fb_weight", "fb_bias"}));
  const Graph g = both.to_graph();
  EXPECT_EQ(node_names(g), (Names{"a", "fa_weight", "fa_bias", "fa", "b", "fb_weight", "fb_bias",
                                  "fb", "sum", "both"}));
  EXPECT_EQ(g.heads.size(), 1u);
  EXPECT_EQ(g.heads[0].node, 9u);
}

TEST(Symbol, MultiOutputOpsAreIndexed) {
  Symbol data = Symbol::variable("data");
  Symbol parts = sym::SliceChannel(data, "split", 3);
  ASSERT_EQ(parts.num_outputs(), 3u);
  EXPECT_EQ(parts.list_outputs(), (Names{"split_output0", "split_output1", "split_output2"}));
  Symbol second = parts[1];
  EXPECT_EQ(second.num_outputs(), 1u);
  EXPECT_EQ(second.outputs()[0].index, 1u);
  EXPECT_EQ(parts["split_output2"].outputs()[0].index, 2u);
  EXPECT_TRUE(contains(error_of([&] { (void)parts[3]; }), "has 3 outputs"));
  EXPECT_TRUE(contains(error_of([&] { (void)parts["nope"]; }), "split_output0"));

  Symbol sum = sym::elemwise_add(parts[0], parts[2], "sum");
  const Graph g = sum.to_graph();
  EXPECT_EQ(g.nodes.back().inputs[0].index, 0u);
  EXPECT_EQ(g.nodes.back().inputs[1].index, 2u);
  // A multi-output symbol cannot be an op input.
  const std::string err = error_of([&] { (void)sym::Activation(parts, "act", "relu"); });
  EXPECT_TRUE(contains(err, "has 3 outputs")) << err;
  EXPECT_TRUE(contains(err, "node 'act'")) << err;
  EXPECT_TRUE(contains(error_of([&] { (void)parts.name(); }), "single-output"));
}

TEST(Symbol, GroupKeepsEveryHead) {
  Symbol data = Symbol::variable("data");
  Symbol fc1 = sym::FullyConnected(data, "fc1", 4);
  Symbol fc2 = sym::FullyConnected(fc1, "fc2", 2);
  Symbol split = sym::SliceChannel(data, "split", 2);
  Symbol group = Symbol::group({fc2, fc1, split});
  EXPECT_EQ(group.num_outputs(), 4u);
  EXPECT_EQ(group.list_outputs(),
            (Names{"fc2_output", "fc1_output", "split_output0", "split_output1"}));
  EXPECT_EQ(group.list_arguments(),
            (Names{"data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"}));
  const Graph g = group.to_graph();
  ASSERT_EQ(g.heads.size(), 4u);
  EXPECT_EQ(g.nodes[g.heads[0].node].name, "fc2");
  EXPECT_EQ(g.nodes[g.heads[1].node].name, "fc1");
  EXPECT_EQ(g.nodes[g.heads[3].node].name, "split");
  EXPECT_EQ(g.heads[3].index, 1u);
  // Grouping a variable lists it as an output by its own name.
  EXPECT_EQ(Symbol::group({data, fc1}).list_outputs(), (Names{"data", "fc1_output"}));
}

TEST(Symbol, InternalsExposeEveryNodeOutput) {
  Symbol data = Symbol::variable("data");
  Symbol fc1 = sym::FullyConnected(data, "fc1", 4, /*no_bias=*/true);
  Symbol act = sym::Activation(fc1, "relu1", "relu");
  Symbol internals = act.get_internals();
  EXPECT_EQ(internals.list_outputs(), (Names{"data", "fc1_weight", "fc1_output", "relu1_output"}));
  Symbol feature = internals["fc1_output"];
  EXPECT_EQ(feature.name(), "fc1");
  EXPECT_EQ(feature.list_arguments(), (Names{"data", "fc1_weight"}));
}

TEST(Symbol, VariablesDeclareShapeAndType) {
  Symbol x = Symbol::variable("x", Shape{2, 3}, DType::kFloat16);
  EXPECT_TRUE(x.is_variable());
  EXPECT_EQ(x.op_name(), "null");
  EXPECT_EQ(x.attr("__shape__"), std::optional<std::string>("(2, 3)"));
  EXPECT_EQ(x.attr("__dtype__"),
            std::optional<std::string>(std::to_string(static_cast<int>(DType::kFloat16))));
  Symbol y = Symbol::variable("y", Shape{-1, 5});
  EXPECT_EQ(y.attr("__shape__"), std::optional<std::string>("(0, 5)"));
  EXPECT_FALSE(y.attr("__dtype__").has_value());
  Symbol z = Symbol::variable("z", AttrMap{{"__lr_mult__", "0.1"}});
  EXPECT_EQ(z.list_attr().at("__lr_mult__"), "0.1");
  EXPECT_THROW(Symbol::variable(""), ValueError);
}

TEST(Symbol, VariadicOpsCountTheirInputs) {
  Symbol a = Symbol::variable("a"), b = Symbol::variable("b"), c = Symbol::variable("c");
  Symbol cat = Symbol::op("Concat", {a, b, c}, {{"dim", "0"}}, "cat");
  EXPECT_EQ(cat.attr("num_args"), std::optional<std::string>("3"));
  EXPECT_EQ(cat.to_graph().nodes.back().inputs.size(), 3u);
  Symbol sum = Symbol::op("add_n", {a, b}, {}, "sum");
  EXPECT_EQ(sum.attr("num_args"), std::optional<std::string>("2"));
  EXPECT_EQ(sym::Concat({a, b}, "cat2", 0).list_arguments(), (Names{"a", "b"}));
}

TEST(Symbol, CompositionErrorsNameTheOpAndNode) {
  Symbol data = Symbol::variable("data");
  std::string err = error_of([&] { (void)Symbol::op("Convolutoin", {data}, {}, "c"); });
  EXPECT_TRUE(contains(err, "Convolutoin")) << err;
  err = error_of([&] { (void)Symbol::op("Convolution", {data}, {{"kernel", "(3, 3)"}}, "conv7"); });
  EXPECT_TRUE(contains(err, "num_filter")) << err;
  EXPECT_TRUE(contains(err, "conv7")) << err;
  err = error_of([&] {
    (void)Symbol::op("Activation", {data}, {{"act_type", "relu"}, {"slope", "1"}}, "a1");
  });
  EXPECT_TRUE(contains(err, "slope")) << err;
  err = error_of([&] {
    (void)Symbol::op("Activation", {data, data}, {{"act_type", "relu"}}, "a2");
  });
  EXPECT_TRUE(contains(err, "takes 1 inputs")) << err;
  EXPECT_TRUE(contains(err, "'a2'")) << err;
  err =
      error_of([&] { (void)sym::RNN(data, "gru", 8, 1, "gru", {}, {}, Symbol::variable("cell")); });
  EXPECT_TRUE(contains(err, "state_cell")) << err;
  EXPECT_THROW((void)Symbol().to_graph(), ValueError);
}

TEST(Symbol, FusedRnnCreatesItsParametersAndStates) {
  Symbol data = Symbol::variable("data");
  Symbol lstm = sym::RNN(data, "lstm", 8, 2, "lstm");
  EXPECT_EQ(lstm.list_arguments(),
            (Names{"data", "lstm_parameters", "lstm_state", "lstm_state_cell"}));
  Symbol gru = sym::RNN(data, "gru", 8, 1, "gru", {}, {}, {}, false, 0, /*state_outputs=*/true);
  EXPECT_EQ(gru.list_arguments(), (Names{"data", "gru_parameters", "gru_state"}));
  EXPECT_EQ(gru.list_outputs(), (Names{"gru_output", "gru_state_output"}));
}

TEST(Symbol, GraphRoundTripKeepsStructure) {
  Symbol data = Symbol::variable("data");
  Symbol bn = sym::BatchNorm(sym::Convolution(data, "conv", 4, {3, 3}), "bn");
  Symbol group = Symbol::group({sym::SliceChannel(bn, "split", 2), bn});
  const Graph g1 = group.to_graph();
  const Graph g2 = Symbol::from_graph(g1).to_graph();
  EXPECT_EQ(dump(g1), dump(g2));
  EXPECT_EQ(Symbol::from_graph(g1).list_outputs(), group.list_outputs());
  EXPECT_EQ(Symbol::from_graph(g1).list_auxiliary_states(),
            (Names{"bn_moving_mean", "bn_moving_var"}));
}

TEST(Symbol, FromGraphDropsUnreachableNodes) {
  Graph g = sym::FullyConnected(Symbol::variable("data"), "fc", 3).to_graph();
  Node stray;
  stray.name = "stray";
  g.add_node(stray);
  g.reindex();
  EXPECT_EQ(Symbol::from_graph(g).to_graph().nodes.size(), g.nodes.size() - 1);
}

TEST(Symbol, DeepChainsConvertAndDestroyWithoutRecursion) {
  // A chain deep enough that recursive traversal or teardown would exhaust the stack.
  constexpr int kDepth = 200000;
  Symbol x = Symbol::variable("x");
  // Alternating one-input nodes and nodes that use their input twice.
  for (int i = 0; i < kDepth; ++i) {
    x = i % 2 ? sym::elemwise_add(x, x, "c" + std::to_string(i))
              : Symbol::op("_copy", {x}, {}, "c" + std::to_string(i));
  }
  const Graph g = x.to_graph();
  EXPECT_EQ(g.nodes.size(), static_cast<size_t>(kDepth + 1));
  EXPECT_EQ(g.nodes.back().name, "c" + std::to_string(kDepth - 1));
  EXPECT_EQ(g.nodes[1].inputs[0].node, 0u);
  x = Symbol();  // releases the whole chain
  EXPECT_TRUE(x.empty());
}

TEST(Symbol, InferShapeReportsArgumentsOutputsAndAuxStates) {
  Symbol data = Symbol::variable("data");
  Symbol conv = sym::Convolution(data, "conv", 8, {3, 3}, {2, 2}, {1, 1}, /*no_bias=*/true);
  Symbol bn = sym::BatchNorm(conv, "bn");
  Symbol pool = sym::Pooling(bn, "pool", {2, 2}, "max", {2, 2});
  Symbol fc = sym::FullyConnected(sym::Flatten(pool, "flat"), "fc", 10);
  Symbol out = sym::SoftmaxOutput(fc, "softmax");
  EXPECT_EQ(out.list_arguments(), (Names{"data", "conv_weight", "bn_gamma", "bn_beta", "fc_weight",
                                         "fc_bias", "softmax_label"}));

  InferInputs in;
  in.shapes["data"] = Shape{4, 3, 32, 32};
  const InferredShapes s = out.infer_shape(in);
  EXPECT_TRUE(s.complete);
  // conv: (32 + 2 - 3) / 2 + 1 = 16; pool: 8; flatten 8·8·8 = 512.
  ASSERT_EQ(s.arg_shapes.size(), 7u);
  EXPECT_EQ(s.arg_shapes[0], (Shape{4, 3, 32, 32}));
  EXPECT_EQ(s.arg_shapes[1], (Shape{8, 3, 3, 3}));
  EXPECT_EQ(s.arg_shapes[2], (Shape{8}));
  EXPECT_EQ(s.arg_shapes[4], (Shape{10, 512}));
  EXPECT_EQ(s.arg_shapes[5], (Shape{10}));
  EXPECT_EQ(s.arg_shapes[6], (Shape{4}));
  ASSERT_EQ(s.out_shapes.size(), 1u);
  EXPECT_EQ(s.out_shapes[0], (Shape{4, 10}));
  ASSERT_EQ(s.aux_shapes.size(), 2u);
  EXPECT_EQ(s.aux_shapes[0], (Shape{8}));
  EXPECT_EQ(s.aux_types[1], DType::kFloat32);
  EXPECT_EQ(s.out_types[0], DType::kFloat32);

  InferInputs typo;
  typo.shapes["dta"] = Shape{4, 3, 32, 32};
  const std::string err = error_of([&] { (void)out.infer_shape(typo); });
  EXPECT_TRUE(contains(err, "'dta'")) << err;
  EXPECT_TRUE(contains(err, "softmax_label")) << err;
  // Without data nothing is complete; without require_complete that is reported, not thrown.
  const InferredShapes partial = out.infer_shape(InferInputs{}, /*require_complete=*/false);
  EXPECT_FALSE(partial.complete);
  EXPECT_THROW((void)out.infer_shape(InferInputs{}), Error);
}

TEST(Symbol, JsonRoundTripIsExact) {
  Symbol data = Symbol::variable("data", Shape{0, 3, 8, 8});
  Symbol bn =
      sym::BatchNorm(sym::Convolution(data, "conv", 4, {3, 3}, {1, 1}, {1, 1}), "bn", false, 1e-5);
  Symbol parts = sym::SliceChannel(bn, "split", 2);
  Symbol out = Symbol::group(
      {sym::SoftmaxOutput(sym::FullyConnected(parts[0], "fc", 5), "softmax"), parts[1]});
  const std::string json = out.to_json();
  const Symbol back = Symbol::from_json(json);
  EXPECT_EQ(back.to_json(), json);
  EXPECT_EQ(back.list_arguments(), out.list_arguments());
  EXPECT_EQ(back.list_outputs(), out.list_outputs());
  EXPECT_EQ(back.list_auxiliary_states(), out.list_auxiliary_states());
  EXPECT_TRUE(contains(json, "\"op\": \"Convolution\"")) << json;
  EXPECT_TRUE(contains(json, "\"__shape__\": \"(0, 3, 8, 8)\"")) << json;
  // BatchNorm's mutated moving statistics carry version 1, as in files MXNet's symbol API writes.
  EXPECT_TRUE(contains(json, "\"inputs\": [[3, 0, 0], [4, 0, 0], [5, 0, 0], [6, 0, 1], [7, 0, 1]]"))
      << json;

  const auto path = std::filesystem::temp_directory_path() / "weft_symbol_test-symbol.json";
  out.save(path);
  EXPECT_EQ(Symbol::load(path).to_json(), json);
  std::filesystem::remove(path);
}

TEST(Symbol, LoadedModelFilesSaveAsTheJsonWriterDoes) {
  WEFT_REQUIRE_MODELS();
  // MXNet writes nodes in the same DFS post-order Symbol uses, so a file that loads without
  // upgrades goes through Symbol unchanged.
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testing::models_dir())) {
    const std::string file = entry.path().filename().string();
    // Every MXNet symbol file; the TVM graph files (*graph.json) are another format.
    if (entry.path().extension() != ".json" || file.ends_with("graph.json")) continue;
    JsonInfo info;
    const Graph g = load_json_file(entry.path(), &info);
    if (info.upgraded) continue;
    const Symbol s = Symbol::from_graph(g);
    // A symbol carries no graph attributes: it is written as this library's version, as MXNet
    // writes its own version when it saves a symbol it loaded.
    Graph unversioned = g;
    unversioned.attrs.clear();
    const std::string expected = save_json(unversioned), actual = s.to_json();
    EXPECT_TRUE(actual == expected)
        << file << ": first difference at byte "
        << std::mismatch(actual.begin(), actual.end(), expected.begin(), expected.end()).first -
               actual.begin();
    EXPECT_EQ(s.list_arguments(), g.list_arguments()) << file;
    EXPECT_EQ(s.list_auxiliary_states(), g.list_auxiliary_states()) << file;
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace weft::graph
