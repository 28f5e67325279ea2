// MXNet symbol JSON: every model file loads, >= 1.0 files save back byte for byte, the legacy
// upgrades match MXNet's, and malformed input fails with a message naming the node.
#include "graph/json.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "base/error.h"
#include "graph/tvm.h"
#include "tests/graph/models_dir.h"

namespace weft::graph {
namespace {

std::string read_model(const std::string& file) {
  std::ifstream in(testing::models_dir() / file, std::ios::binary);
  EXPECT_TRUE(in.good()) << file;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct ModelFile {
  const char* file;
  size_t nodes;  // models/SOURCES.md
  int version;   // attrs.mxnet_version, 800 when absent
  const char* layout;
};

// The 14 MXNet files with their node counts, versions and layouts as listed in models/SOURCES.md.
const ModelFile kMxnetFiles[] = {
    {"apache__mxnet__save_000800.json", 17, 800, "legacy (param/attr)"},
    {"deepinsight__insightface__det1-symbol.json", 24, 800, "legacy (param/attr)"},
    {"pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json", 334, 800,
     "legacy (param/attr)"},
    {"lucasjinreal__Char-Generator-LSTM__obama-symbol.json", 6084, 800, "legacy (param/attr)"},
    {"miaow1988__SqueezeNet_v1.2__model-symbol.json", 113, 903, "attr"},
    {"KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json", 425, 1100, "attr"},
    {"soeaver__mxnet-model__inception_v3-symbol.json", 785, 1100, "attr"},
    {"soeaver__mxnet-model__se-resnext50-32x4d-symbol.json", 621, 10001, "attrs"},
    {"apache__mxnet__test_mkldnn_test_mkldnn_model_model1.json", 73, 10200, "attrs"},
    {"bogireddytejareddy__retinaface-pytorch__mnet.25-symbol.json", 436, 10300, "attrs"},
    {"Mengman__TensorRT_Tutorial__ocr-symbol.json", 1152, 10300, "attrs"},
    {"fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json", 474, 10901, "attrs"},
    {"kylehoffpauir__AdvOSBig__net-symbol.json", 12, 10700, "attrs"},
    {"MirrorYuChen__tvm_insightface__model-symbol.json", 432, 10000, "attrs"},
};

/// Node count of the file itself, read with nlohmann directly (an independent count).
size_t raw_node_count(const std::string& text, const std::string& op) {
  const auto doc = nlohmann::json::parse(text);
  size_t n = 0;
  for (const auto& node : doc["nodes"]) n += node["op"] == op;
  return n;
}

std::string expect_value_error(const std::string& text) {
  try {
    load_json(text, nullptr, "test.json");
  } catch (const ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ValueError, got " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected ValueError for: " << text;
  return {};
}

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    EXPECT_EQ(x.name, y.name) << "node " << i;
    EXPECT_EQ(x.op, y.op) << "node " << i;
    EXPECT_EQ(x.written_op_name(), y.written_op_name()) << "node " << i;
    EXPECT_EQ(x.attrs, y.attrs) << "node " << i;
    ASSERT_EQ(x.inputs.size(), y.inputs.size()) << "node " << i;
    for (size_t k = 0; k < x.inputs.size(); ++k) {
      EXPECT_EQ(x.inputs[k], y.inputs[k]) << "node " << i << " input " << k;
      EXPECT_EQ(x.inputs[k].version, y.inputs[k].version) << "node " << i << " input " << k;
    }
    EXPECT_EQ(x.control_deps, y.control_deps) << "node " << i;
  }
  EXPECT_EQ(a.heads, b.heads);
}

TEST(JsonLoad, EveryModelFileLoads) {
  WEFT_REQUIRE_MODELS();
  for (const ModelFile& m : kMxnetFiles) {
    SCOPED_TRACE(m.file);
    const std::string text = read_model(m.file);
    JsonInfo info;
    const Graph g = load_json(text, &info, m.file);
    EXPECT_EQ(info.mxnet_version, m.version);
    EXPECT_EQ(info.layout, m.layout);
    EXPECT_EQ(g.nodes.size(), m.nodes + static_cast<size_t>(info.added_variables));
    EXPECT_EQ(g.variable_nodes().size(),
              raw_node_count(text, "null") + static_cast<size_t>(info.added_variables));
    EXPECT_FALSE(g.heads.empty());
    EXPECT_FALSE(looks_like_tvm_json(text));
  }
}

TEST(JsonLoad, HeadCountsAndOutputNames) {
  WEFT_REQUIRE_MODELS();
  // SOURCES.md / OPS.md §1.1: 129 SoftmaxOutput heads in the char-LSTM, 9 in RetinaFace, 2 in det1.
  EXPECT_EQ(
      load_json_file(testing::models_dir() / "lucasjinreal__Char-Generator-LSTM__obama-symbol.json")
          .heads.size(),
      129u);
  EXPECT_EQ(load_json_file(testing::models_dir() /
                           "bogireddytejareddy__retinaface-pytorch__mnet.25-symbol.json")
                .heads.size(),
            9u);
  const Graph det1 =
      load_json_file(testing::models_dir() / "deepinsight__insightface__det1-symbol.json");
  ASSERT_EQ(det1.heads.size(), 2u);
}

TEST(JsonSave, Mxnet10FilesSaveBackByteForByte) {
  WEFT_REQUIRE_MODELS();
  int checked = 0;
  for (const ModelFile& m : kMxnetFiles) {
    if (m.version < 10000) continue;
    SCOPED_TRACE(m.file);
    std::string text = read_model(m.file);
    JsonInfo info;
    const Graph g = load_json(text, &info, m.file);
    EXPECT_FALSE(info.upgraded);
    // Two files were touched after MXNet wrote them; undo exactly those edits. MXNet's writer ends
    // the text at the closing brace, and the MKL-DNN test file gained a final newline in its
    // repository. RetinaFace's three softmax nodes had their attrs retyped by hand without the
    // space dmlc writes after a colon.
    if (!text.empty() && text.back() == '\n') text.pop_back();
    const std::string hand_edit = R"({"axis":"1"})";
    size_t edits = 0;
    for (size_t p = text.find(hand_edit); p != std::string::npos; p = text.find(hand_edit, p)) {
      text.replace(p, hand_edit.size(), R"({"axis": "1"})");
      ++edits;
    }
    EXPECT_EQ(edits, std::string(m.file).find("retinaface") != std::string::npos ? 3u : 0u);
    const std::string saved = save_json(g);
    EXPECT_EQ(saved.size(), text.size());
    if (saved != text) {
      size_t i = 0;
      while (i < saved.size() && i < text.size() && saved[i] == text[i]) ++i;
      ADD_FAILURE() << "first difference at byte " << i
                    << ":\n saved: " << saved.substr(i > 80 ? i - 80 : 0, 160)
                    << "\n file:  " << text.substr(i > 80 ? i - 80 : 0, 160);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

TEST(JsonSave, OlderFilesLoadSaveLoadToTheSameGraph) {
  WEFT_REQUIRE_MODELS();
  for (const ModelFile& m : kMxnetFiles) {
    if (m.version >= 10000) continue;
    SCOPED_TRACE(m.file);
    const Graph g = load_json(read_model(m.file), nullptr, m.file);
    const std::string saved = save_json(g);
    JsonInfo info;
    const Graph again = load_json(saved, &info, "saved");
    EXPECT_EQ(info.layout, "attrs");
    EXPECT_EQ(info.mxnet_version, 10901);
    EXPECT_FALSE(info.upgraded);
    expect_same_graph(g, again);
    EXPECT_EQ(save_json(again), saved);
  }
}

TEST(JsonLegacy, ResNet50BatchNormGetsMovingStatistics) {
  WEFT_REQUIRE_MODELS();
  const std::string file = "pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json";
  const std::string text = read_model(file);
  JsonInfo info;
  const Graph g = load_json(text, &info, file);
  const size_t num_bn = raw_node_count(text, "BatchNorm");
  ASSERT_EQ(num_bn, 51u);
  EXPECT_TRUE(info.upgraded);
  EXPECT_EQ(info.added_variables, static_cast<int>(2 * num_bn));
  EXPECT_EQ(g.nodes.size(), 334u + 2 * num_bn);
  size_t seen = 0;
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    if (!n.op || n.op->name() != "BatchNorm") continue;
    ++seen;
    ASSERT_EQ(n.inputs.size(), 5u) << n.name;
    const Node& mean = g.nodes[n.inputs[3].node];
    const Node& var = g.nodes[n.inputs[4].node];
    EXPECT_EQ(mean.name, n.name + "_moving_mean");
    EXPECT_EQ(var.name, n.name + "_moving_var");
    EXPECT_TRUE(mean.is_variable() && var.is_variable());
    // Inserted right before their consumer.
    EXPECT_EQ(n.inputs[3].node, nid - 2);
    EXPECT_EQ(n.inputs[4].node, nid - 1);
    // The 0.9.4 upgrade's initializers, and MXNet's copy of the node's attrs.
    EXPECT_EQ(mean.attrs.at("__init__"), R"(["zero", {}])");
    EXPECT_EQ(var.attrs.at("__init__"), R"(["one", {}])");
    EXPECT_EQ(mean.attrs.at("eps"), n.attrs.at("eps"));
  }
  EXPECT_EQ(seen, num_bn);
  const auto aux = g.list_auxiliary_states();
  ASSERT_EQ(aux.size(), 2 * num_bn);
  EXPECT_EQ(aux[0], "bn_data_moving_mean");
  EXPECT_EQ(aux[1], "bn_data_moving_var");
  EXPECT_GE(g.find_variable("bn_data_moving_var"), 0);
  // The head (softmax) moved with the renumbering.
  ASSERT_EQ(g.heads.size(), 1u);
  EXPECT_EQ(g.nodes[g.heads[0].node].name, "softmax");
}

TEST(JsonLegacy, Save000800MovesSuffixedKeysToTheirVariables) {
  WEFT_REQUIRE_MODELS();
  JsonInfo info;
  const Graph g =
      load_json(read_model("apache__mxnet__save_000800.json"), &info, "save_000800.json");
  EXPECT_TRUE(info.upgraded);
  EXPECT_EQ(info.added_variables, 2);  // batchnorm0's moving mean and var
  auto node = [&](const std::string& name) -> const Node& {
    for (const Node& n : g.nodes) {
      if (n.name == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return g.nodes.front();
  };
  // Plain hidden keys become __key__.
  EXPECT_EQ(node("data").attrs.at("__lr_mult__"), "0.2");
  EXPECT_EQ(node("data").attrs.at("__ctx_group__"), "stage1");
  EXPECT_EQ(node("data").attrs.count("lr_mult"), 0u);
  // fc1's weight_lr_mult moves to its `weight` input as __lr_mult__.
  EXPECT_EQ(node("fc1").attrs.count("weight_lr_mult"), 0u);
  EXPECT_EQ(node("fc1").attrs.at("__wd_mult__"), "0.3");
  EXPECT_EQ(node("fc1_weight").attrs.at("__lr_mult__"), "1.2");
  EXPECT_EQ(node("fc1_weight").attrs.at("__wd_mult__"), "0.3");
  // On a variable the suffixed form stays as it was (MXNet only moves from op nodes).
  EXPECT_EQ(node("fc1_bias").attrs.at("weight_lr_mult"), "1.2");
  EXPECT_EQ(node("fc1_bias").attrs.count("__lr_mult__"), 0u);
  EXPECT_EQ(node("fc2_weight").attrs.at("__lr_mult__"), "0.01");
  EXPECT_EQ(node("batchnorm0_moving_mean").attrs.at("__ctx_group__"), "stage2");
  // The param dict is merged in: FullyConnected's num_hidden came from "param".
  EXPECT_EQ(node("fc1").attrs.at("num_hidden"), "128");
  // Saved as the current version.
  EXPECT_NE(save_json(g).find(R"("mxnet_version": ["int", 10901])"), std::string::npos);
}

TEST(JsonLegacy, PReLUGammaGetsItsInitializer) {
  WEFT_REQUIRE_MODELS();
  JsonInfo info;
  const Graph g =
      load_json(read_model("deepinsight__insightface__det1-symbol.json"), &info, "det1");
  EXPECT_TRUE(info.upgraded);
  EXPECT_EQ(info.added_variables, 0);
  int prelu = 0;
  for (const Node& n : g.nodes) {
    if (!n.op || n.op->name() != "LeakyReLU") continue;
    ++prelu;
    EXPECT_EQ(g.nodes[n.inputs[1].node].attrs.at("__init__"), R"(["Constant", {"value": 0.25}])");
  }
  EXPECT_EQ(prelu, 3);
}

TEST(JsonLoad, AliasesResolveAndAreWrittenBackAsWritten) {
  WEFT_REQUIRE_MODELS();
  const Graph g = load_json_file(testing::models_dir() /
                                 "lucasjinreal__Char-Generator-LSTM__obama-symbol.json");
  int plus = 0, mul = 0;
  for (const Node& n : g.nodes) {
    if (n.op_name == "_Plus") {
      ++plus;
      EXPECT_EQ(n.op->name(), "elemwise_add");
    }
    if (n.op_name == "_Mul") {
      ++mul;
      EXPECT_EQ(n.op->name(), "elemwise_mul");
    }
  }
  EXPECT_EQ(plus, 774);  // OPS.md §2 counts 790 over two files; 774 are here, 16 in ResNet-50
  EXPECT_EQ(mul, 1161);
  const std::string saved = save_json(g);
  EXPECT_NE(saved.find(R"("op": "_Plus")"), std::string::npos);
  EXPECT_EQ(saved.find(R"("op": "elemwise_add")"), std::string::npos);
}

TEST(JsonLoad, SmallAliasGraph) {
  const std::string text = R"({"nodes": [
      {"op": "null", "name": "x", "inputs": []},
      {"op": "_MulScalar", "name": "scale", "attrs": {"scalar": "0.5"}, "inputs": [[0, 0]]},
      {"op": "_Plus", "name": "sum", "inputs": [[1, 0], [0, 0]]},
      {"op": "null", "name": "label", "inputs": []},
      {"op": "Softmax", "name": "out", "inputs": [[2, 0], [3, 0]]}],
    "arg_nodes": [0, 3], "heads": [[4, 0]], "attrs": {"mxnet_version": ["int", 10901]}})";
  JsonInfo info;
  const Graph g = load_json(text, &info);
  EXPECT_EQ(info.layout, "attrs");
  EXPECT_FALSE(info.upgraded);
  EXPECT_EQ(g.nodes[1].op->name(), "_mul_scalar");
  EXPECT_EQ(g.nodes[2].op->name(), "elemwise_add");
  EXPECT_EQ(g.nodes[4].op->name(), "SoftmaxOutput");
  const std::string saved = save_json(g);
  EXPECT_NE(saved.find(R"("op": "_MulScalar")"), std::string::npos);
  EXPECT_NE(saved.find(R"("op": "Softmax")"), std::string::npos);
  EXPECT_EQ(g.list_arguments(), (std::vector<std::string>{"x", "label"}));
}

TEST(JsonLoad, KeepsEntryVersionsAndFileOutputCounts) {
  WEFT_REQUIRE_MODELS();
  // OPS.md §1.2: entry versions are 1 on BatchNorm's moving statistics in 0.11-1.3 files.
  const Graph retina = load_json_file(
      testing::models_dir() / "bogireddytejareddy__retinaface-pytorch__mnet.25-symbol.json");
  int versioned = 0;
  for (const Node& n : retina.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].version == 0) continue;
      ++versioned;
      EXPECT_EQ(n.op->name(), "BatchNorm");
      EXPECT_TRUE(i == 3 || i == 4);
    }
  }
  EXPECT_GT(versioned, 0);
  // OPS.md §1.6: the MKL-DNN build counted a workspace output on max pooling.
  const Graph vgg = load_json_file(testing::models_dir() /
                                   "apache__mxnet__test_mkldnn_test_mkldnn_model_model1.json");
  int max_pooling = 0;
  for (const Node& n : vgg.nodes) {
    if (!n.op || n.op->name() != "Pooling") continue;
    EXPECT_EQ(n.num_outputs(), 1);
    if (n.attrs.at("pool_type") == "max") {
      ++max_pooling;
      EXPECT_EQ(n.file_num_outputs, 2) << n.name;
    } else {
      EXPECT_EQ(n.file_num_outputs, 1) << n.name;
    }
  }
  EXPECT_EQ(max_pooling, 5);
}

TEST(JsonLoad, MergesAttrsAndParamAsNnvmDoes) {
  const std::string text = R"({"nodes": [
      {"op": "null", "name": "x", "inputs": []},
      {"op": "null", "name": "w", "inputs": []},
      {"op": "FullyConnected", "name": "fc", "attr": {"num_hidden": "10", "__lr_mult__": "2"},
       "param": {"num_hidden": "20", "no_bias": "True"}, "inputs": [[0, 0, 0], [1, 0, 0]]}],
    "arg_nodes": [0, 1], "heads": [[2, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}})";
  const Graph g = load_json(text);
  EXPECT_EQ(g.nodes[2].attrs.at("num_hidden"), "10");
  EXPECT_EQ(g.nodes[2].attrs.at("no_bias"), "True");
  EXPECT_EQ(g.nodes[2].attrs.at("__lr_mult__"), "2");
}

TEST(JsonLegacy, ArgmaxAxisMinusOneBecomesUnsetInOldFiles) {
  auto text = [](int version) {
    return R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
        {"op": "argmax", "name": "am", "attr": {"axis": "-1"}, "inputs": [[0, 0, 0]]}],
        "arg_nodes": [0], "heads": [[1, 0, 0]], "attrs": {"mxnet_version": ["int", )" +
           std::to_string(version) + "]}}";
  };
  JsonInfo info;
  const Graph old_graph = load_json(text(904), &info);
  EXPECT_TRUE(info.upgraded);
  EXPECT_EQ(old_graph.nodes[1].attrs.count("axis"), 0u);
  const Graph new_graph = load_json(text(905), &info);
  EXPECT_FALSE(info.upgraded);
  EXPECT_EQ(new_graph.nodes[1].attrs.at("axis"), "-1");
}

TEST(JsonLegacy, UpgradeRenumbersHeadsAndControlDeps) {
  // An 0.8 graph (2-element entries, no version) whose BatchNorm lacks its aux inputs.
  const std::string text = R"({"nodes": [
      {"op": "null", "name": "x", "inputs": []},
      {"op": "null", "name": "g", "inputs": []},
      {"op": "null", "name": "b", "inputs": []},
      {"op": "Activation", "name": "act", "param": {"act_type": "relu"}, "inputs": [[0, 0]]},
      {"op": "BatchNorm", "name": "bn", "param": {}, "inputs": [[3, 0], [1, 0], [2, 0]], "control_deps": [3]},
      {"op": "Activation", "name": "out", "param": {"act_type": "tanh"}, "inputs": [[4, 0]],
       "control_deps": [4]}],
    "arg_nodes": [0, 1, 2], "heads": [[5, 0], [3, 0]]})";
  JsonInfo info;
  const Graph g = load_json(text, &info);
  EXPECT_EQ(info.layout, "legacy (param/attr)");
  EXPECT_EQ(info.added_variables, 2);
  ASSERT_EQ(g.nodes.size(), 8u);
  EXPECT_EQ(g.nodes[4].name, "bn_moving_mean");
  EXPECT_EQ(g.nodes[5].name, "bn_moving_var");
  EXPECT_EQ(g.nodes[6].name, "bn");
  EXPECT_EQ(g.nodes[6].inputs[0].node, 3u);
  EXPECT_EQ(g.nodes[6].control_deps, (std::vector<uint32_t>{3}));
  EXPECT_EQ(g.nodes[7].inputs[0].node, 6u);
  EXPECT_EQ(g.nodes[7].control_deps, (std::vector<uint32_t>{6}));
  ASSERT_EQ(g.heads.size(), 2u);
  EXPECT_EQ(g.heads[0].node, 7u);
  EXPECT_EQ(g.heads[1].node, 3u);
  // control_deps are written back.
  const std::string saved = save_json(g);
  EXPECT_NE(saved.find("\"control_deps\": [6]"), std::string::npos);
  expect_same_graph(g, load_json(saved));
}

TEST(JsonSave, WritesMxnetFormatForAGraphBuiltInWeft) {
  Graph g;
  Node x;
  x.name = "data";
  g.add_node(x);
  Node w;
  w.name = "w";
  w.attrs = {{"__shape__", "(4, 0)"}};
  g.add_node(w);
  Node fc;
  fc.name = "fc";
  fc.op = &get_op("FullyConnected");
  fc.attrs = {{"num_hidden", "4"}, {"no_bias", "True"}};
  fc.inputs = {{0, 0, 0}, {1, 0, 0}};
  g.add_node(fc);
  Node act;
  act.name = "relu";
  act.op = &get_op("Activation");
  act.attrs = {{"act_type", "relu"}};
  act.inputs = {{2, 0, 0}};
  g.add_node(act);
  g.heads = {{3, 0, 0}};
  g.reindex();
  // Written by hand after the files MXNet 1.x saves (dmlc JSONWriter): 2-space indents, ", "
  // then a newline between items, one-key objects and short number arrays on one line.
  const std::string expected =
      "{\n"
      "  \"nodes\": [\n"
      "    {\n"
      "      \"op\": \"null\", \n"
      "      \"name\": \"data\", \n"
      "      \"inputs\": []\n"
      "    }, \n"
      "    {\n"
      "      \"op\": \"null\", \n"
      "      \"name\": \"w\", \n"
      "      \"attrs\": {\"__shape__\": \"(4, 0)\"}, \n"
      "      \"inputs\": []\n"
      "    }, \n"
      "    {\n"
      "      \"op\": \"FullyConnected\", \n"
      "      \"name\": \"fc\", \n"
      "      \"attrs\": {\n"
      "        \"no_bias\": \"True\", \n"
      "        \"num_hidden\": \"4\"\n"
      "      }, \n"
      "      \"inputs\": [[0, 0, 0], [1, 0, 0]]\n"
      "    }, \n"
      "    {\n"
      "      \"op\": \"Activation\", \n"
      "      \"name\": \"relu\", \n"
      "      \"attrs\": {\"act_type\": \"relu\"}, \n"
      "      \"inputs\": [[2, 0, 0]]\n"
      "    }\n"
      "  ], \n"
      "  \"arg_nodes\": [0, 1], \n"
      "  \"node_row_ptr\": [0, 1, 2, 3, 4], \n"
      "  \"heads\": [[3, 0, 0]], \n"
      "  \"attrs\": {\"mxnet_version\": [\"int\", 10901]}\n"
      "}";
  EXPECT_EQ(save_json(g), expected);
}

TEST(JsonSave, LongListsAreMultiLine) {
  // dmlc writes a vector of numbers or entries on one line up to 10 items, one per line beyond.
  std::string nodes = R"({"op": "null", "name": "v", "inputs": []})";
  std::string inputs = "[0, 0, 0]";
  for (int i = 1; i < 11; ++i) {
    nodes += R"(, {"op": "null", "name": "v)" + std::to_string(i) + R"(", "inputs": []})";
    inputs += ", [" + std::to_string(i) + ", 0, 0]";
  }
  const std::string text = R"({"nodes": [)" + nodes +
                           R"(, {"op": "Concat", "name": "c", "attrs": {"num_args": "11"},
      "inputs": [)" + inputs +
                           R"(]}], "arg_nodes": [], "heads": [[11, 0, 0]]})";
  const std::string saved = save_json(load_json(text));
  EXPECT_NE(saved.find("\"inputs\": [\n        [0, 0, 0], \n        [1, 0, 0], "),
            std::string::npos)
      << saved;
  EXPECT_NE(saved.find("        [10, 0, 0]\n      ]\n"), std::string::npos) << saved;
  EXPECT_NE(saved.find("\"arg_nodes\": [\n    0, \n    1, "), std::string::npos);
  EXPECT_NE(saved.find("\"heads\": [[11, 0, 0]]"), std::string::npos);
}

TEST(JsonSave, UnicodeAndEscapesRoundTrip) {
  // Names with quotes, backslashes, tabs, newlines, a \u escape and raw UTF-8.
  const std::string text =
      R"({"nodes": [{"op": "null", "name": "donn\u00e9es/\u6570\u636e \"q\" \\ \t\n", "attrs": {"note": "caf\u00e9\r"},
      "inputs": []}, {"op": "Activation", "name": "act√", "attrs": {"act_type": "relu"}, "inputs": [[0, 0, 0]]}],
      "arg_nodes": [0], "heads": [[1, 0, 0]]})";
  JsonInfo info;
  const Graph g = load_json(text, &info);
  // No mxnet_version: read as 0.8.0, held as the current version.
  EXPECT_EQ(info.mxnet_version, 800);
  EXPECT_EQ(g.mxnet_version(), 10901);
  EXPECT_EQ(g.nodes[0].name,
            "donn\xC3\xA9"
            "es/\xE6\x95\xB0\xE6\x8D\xAE \"q\" \\ \t\n");
  EXPECT_EQ(g.nodes[0].attrs.at("note"), "caf\xC3\xA9\r");
  EXPECT_EQ(g.nodes[1].name, "act\xE2\x88\x9A");
  const std::string saved = save_json(g);
  // dmlc's WriteString escapes exactly \r \n \\ \t and "; UTF-8 passes through.
  EXPECT_NE(saved.find(R"("name": "données/数据 \"q\" \\ \t\n")"), std::string::npos) << saved;
  EXPECT_NE(saved.find(R"("note": "café\r")"), std::string::npos) << saved;
  const Graph again = load_json(saved);
  expect_same_graph(g, again);
  EXPECT_EQ(save_json(again), saved);
  // Other control characters are escaped so that the output stays valid JSON.
  Graph c;
  Node v;
  v.name = std::string("a\x01z");
  c.add_node(v);
  c.heads = {{0, 0, 0}};
  c.reindex();
  const std::string with_control = save_json(c);
  EXPECT_NE(with_control.find(R"("name": "a\u0001z")"), std::string::npos);
  EXPECT_EQ(load_json(with_control).nodes[0].name, std::string("a\x01z"));
}

// ---- malformed input
// -----------------------------------------------------------------------------

// A valid three-node graph to break in one place at a time.
std::string graph_text(const std::string& node1, const std::string& node2,
                       const std::string& tail = R"("heads": [[2, 0, 0]])") {
  return R"({"nodes": [{"op": "null", "name": "x", "inputs": []}, )" + node1 + ", " + node2 +
         "], " + tail + "}";
}
const std::string kRelu =
    R"({"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[0, 0, 0]]})";
const std::string kTanh =
    R"({"op": "Activation", "name": "tanh", "attrs": {"act_type": "tanh"}, "inputs": [[1, 0, 0]]})";

TEST(JsonErrors, TheValidBaseGraphLoads) {
  EXPECT_EQ(load_json(graph_text(kRelu, kTanh)).nodes.size(), 3u);
}

TEST(JsonErrors, SyntaxErrorGivesLineAndColumn) {
  const std::string msg =
      expect_value_error("{\n  \"nodes\": [\n    {\"op\": \"null\",, }\n  ]\n}");
  EXPECT_NE(msg.find("test.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed JSON at line 3, column 19"), std::string::npos) << msg;
  EXPECT_NE(expect_value_error("").find("line 1, column 1"), std::string::npos);
  EXPECT_NE(expect_value_error("{\"nodes\": [] } x").find("line 1, column 16"), std::string::npos);
}

TEST(JsonErrors, NumberTooLargeForADouble) {
  const std::string msg = expect_value_error("{\"nodes\": [],\n \"heads\": [1e4000]}");
  EXPECT_NE(msg.find("malformed JSON at line 2, column 12: number overflow parsing '1e4000'"),
            std::string::npos)
      << msg;
}

TEST(JsonErrors, MissingOrMistypedTopLevelFields) {
  EXPECT_NE(expect_value_error(R"({"heads": []})").find("missing \"nodes\""), std::string::npos);
  EXPECT_NE(expect_value_error(R"({"nodes": {}, "heads": []})").find("\"nodes\" must be an array"),
            std::string::npos);
  EXPECT_NE(expect_value_error(R"([1, 2])").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(expect_value_error(R"({"nodes": [], "heads": [], "extra": 1})")
                .find("unknown top-level field \"extra\""),
            std::string::npos);
  const std::string msg =
      expect_value_error(R"({"nodes": [], "heads": [], "attrs": {"mxnet_version": ["int", "x"]}})");
  EXPECT_NE(msg.find("mxnet_version"), std::string::npos) << msg;
}

TEST(JsonErrors, NodeWithoutOpOrName) {
  std::string msg =
      expect_value_error(graph_text(R"({"name": "relu", "inputs": [[0, 0, 0]]})", kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): missing \"op\""), std::string::npos) << msg;
  msg = expect_value_error(graph_text(R"({"op": "Activation", "inputs": [[0, 0, 0]]})", kTanh));
  EXPECT_NE(msg.find("node 1: missing \"name\""), std::string::npos) << msg;
  msg = expect_value_error(graph_text(kRelu, R"({"op": "Activation", "name": 7, "inputs": []})"));
  EXPECT_NE(msg.find("node 2: \"name\" must be a string"), std::string::npos) << msg;
}

TEST(JsonErrors, InputsNotAnArray) {
  const std::string msg = expect_value_error(
      graph_text(R"({"op": "Activation", "name": "relu", "inputs": {"0": 0}})", kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): \"inputs\" must be an array"), std::string::npos) << msg;
}

TEST(JsonErrors, BadInputEntries) {
  std::string msg = expect_value_error(graph_text(
      R"({"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[0, -1, 0]]})",
      kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): input 0 must be [node, output]"), std::string::npos) << msg;
  msg = expect_value_error(graph_text(
      R"({"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[0]]})",
      kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): input 0"), std::string::npos) << msg;
}

TEST(JsonErrors, DanglingInput) {
  const std::string msg = expect_value_error(graph_text(
      kRelu,
      R"({"op": "Activation", "name": "tanh", "attrs": {"act_type": "tanh"}, "inputs": [[9, 0, 0]]})"));
  EXPECT_NE(msg.find("node 2 ('tanh'): input 0 refers to node 9, but the graph has 3 nodes"),
            std::string::npos)
      << msg;
}

TEST(JsonErrors, CycleOrForwardReference) {
  std::string msg = expect_value_error(graph_text(
      R"({"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[2, 0, 0]]})",
      kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): input 0 refers to node 2, which is not an earlier node"),
            std::string::npos)
      << msg;
  msg = expect_value_error(graph_text(
      R"({"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[1, 0, 0]]})",
      kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): input 0 refers to node 1, which is not an earlier node"),
            std::string::npos)
      << msg;
  msg = expect_value_error(
      graph_text(kRelu, R"({"op": "Activation", "name": "tanh", "attrs": {"act_type": "tanh"},
      "inputs": [[1, 0, 0]], "control_deps": [2]})"));
  EXPECT_NE(msg.find("node 2 ('tanh'): control dependency 0"), std::string::npos) << msg;
}

TEST(JsonErrors, NonExistentOutput) {
  const std::string msg = expect_value_error(graph_text(
      kRelu,
      R"({"op": "Activation", "name": "tanh", "attrs": {"act_type": "tanh"}, "inputs": [[1, 3, 0]]})"));
  EXPECT_NE(msg.find("node 2 ('tanh'): input 0 uses output 3 of node 1 ('relu')"),
            std::string::npos)
      << msg;
}

TEST(JsonErrors, BadHead) {
  std::string msg = expect_value_error(graph_text(kRelu, kTanh, R"("heads": [[5, 0, 0]])"));
  EXPECT_NE(msg.find("head 0 refers to node 5, but the graph has 3 nodes"), std::string::npos)
      << msg;
  msg = expect_value_error(graph_text(kRelu, kTanh, R"("heads": [[2, 0, 0], "x"])"));
  EXPECT_NE(msg.find("head 1 must be"), std::string::npos) << msg;
  msg = expect_value_error(graph_text(kRelu, kTanh, R"("heads": [[2, 4, 0]])"));
  EXPECT_NE(msg.find("head 0 uses output 4 of node 2 ('tanh')"), std::string::npos) << msg;
}

TEST(JsonErrors, UnknownOpNamesNodeAndSuggests) {
  const std::string msg = expect_value_error(graph_text(
      R"({"op": "Activaton", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[0, 0, 0]]})",
      kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): unknown operator 'Activaton'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Activation"), std::string::npos) << msg;
  // A long name is cut short and gets no suggestions.
  const std::string long_name(5000, 'Z');
  const std::string msg2 = expect_value_error(graph_text(
      R"({"op": ")" + long_name + R"(", "name": "relu", "inputs": [[0, 0, 0]]})", kTanh));
  EXPECT_NE(msg2.find("node 1 ('relu'): unknown operator 'ZZZZ"), std::string::npos);
  EXPECT_LT(msg2.size(), 400u);
}

TEST(JsonErrors, BadAttributeValue) {
  std::string msg = expect_value_error(graph_text(
      R"({"op": "Activation", "name": "relu", "attrs": {"act_type": "rellu"}, "inputs": [[0, 0, 0]]})",
      kTanh));
  EXPECT_NE(msg.find("node 1 ('relu')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("act_type"), std::string::npos) << msg;
  msg = expect_value_error(graph_text(
      R"({"op": "Activation", "name": "relu", "attrs": {"act_type": 3}, "inputs": [[0, 0, 0]]})",
      kTanh));
  EXPECT_NE(msg.find("node 1 ('relu'): attribute 'act_type' in \"attrs\" must be a string"),
            std::string::npos)
      << msg;
}

TEST(JsonErrors, WrongArity) {
  const std::string msg = expect_value_error(graph_text(
      R"({"op": "FullyConnected", "name": "fc", "attrs": {"num_hidden": "3"}, "inputs": [[0, 0, 0]]})",
      kTanh, R"("heads": [[2, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]})"));
  EXPECT_NE(msg.find("node 1 ('fc')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("takes 3 inputs, the node has 1"), std::string::npos) << msg;
}

TEST(JsonErrors, VariableWithInputsAndBadFields) {
  std::string msg = expect_value_error(
      graph_text(R"({"op": "null", "name": "v", "inputs": [[0, 0, 0]]})", kTanh));
  EXPECT_NE(msg.find("node 1 ('v'): a variable"), std::string::npos) << msg;
  msg = expect_value_error(
      graph_text(kRelu, R"({"op": "Activation", "name": "tanh", "inputs": [], "color": 1})"));
  EXPECT_NE(msg.find("node 2 ('tanh'): unknown field \"color\""), std::string::npos) << msg;
  msg = expect_value_error(graph_text(kRelu, kTanh, R"("heads": [[2, 0, 0]], "arg_nodes": [1])"));
  EXPECT_NE(msg.find("node 1 ('relu') is not a variable"), std::string::npos) << msg;
  msg = expect_value_error(
      graph_text(kRelu, kTanh, R"("heads": [[2, 0, 0]], "node_row_ptr": [0, 1])"));
  EXPECT_NE(msg.find("\"node_row_ptr\" has 2 entries"), std::string::npos) << msg;
}

TEST(JsonErrors, DeepNestingIsRejectedNotRecursed) {
  const std::string deep = R"({"nodes": [], "heads": [], "attrs": {"x": ["str", )" +
                           std::string(100000, '[') + std::string(100000, ']') + "]}}";
  EXPECT_NE(expect_value_error(deep).find("nesting deeper than"), std::string::npos);
}

TEST(JsonErrors, ReadingAMissingFileNamesThePath) {
  try {
    load_json_file("/nonexistent/graph-symbol.json");
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/graph-symbol.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace weft::graph
