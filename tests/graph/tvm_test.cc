// TVM graph-executor JSON: the three model files load with the counts SOURCES.md lists, the
// storage plan figures match a separate computation, and malformed files fail clearly.
#include "graph/tvm.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "base/error.h"
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

struct TvmFile {
  const char* file;
  size_t nodes;            // SOURCES.md
  size_t null_nodes;       // counted in the file
  uint32_t storage_ids;    // distinct storage ids (OPS.md §4: 175 for the first)
  uint64_t planned_bytes;  // sum over storage ids of the largest entry, float32 = 4 bytes
  uint64_t unshared_bytes;
  uint64_t param_bytes;
  const char* head_name;
};

// Figures computed from the files with a separate script (Python's json module).
const TvmFile kTvmFiles[] = {
    {"MirrorYuChen__tvm_insightface__deploy_graph.json", 253, 168, 175, 7864576, 28161280, 4147456,
     "batch_norm49_out"},
    {"YiChunHung__MobileNet_pretrain__mobilenet_deploy_graph.json", 143, 84, 90, 15294744, 27249488,
     13032712, "reshape1"},
    {"YiChunHung__MobileNet_pretrain__deploy_squ_graph.json", 101, 53, 60, 4649376, 8621224,
     3090696, "softmax0"},
};

std::string expect_value_error(const std::string& text) {
  try {
    load_tvm_json(text, "tvm.json");
  } catch (const ValueError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected ValueError for: " << text;
  return {};
}

TEST(TvmJson, ModelFilesLoad) {
  WEFT_REQUIRE_MODELS();
  for (const TvmFile& f : kTvmFiles) {
    SCOPED_TRACE(f.file);
    const std::string text = read_model(f.file);
    EXPECT_TRUE(looks_like_tvm_json(text));
    const TvmGraph g = load_tvm_json(text, f.file);
    ASSERT_EQ(g.nodes.size(), f.nodes);
    size_t nulls = 0;
    for (const TvmNode& n : g.nodes) {
      nulls += n.is_variable();
      if (!n.is_variable()) {
        EXPECT_EQ(n.op, "tvm_op");
        EXPECT_EQ(n.func_name.rfind("fuse_", 0), 0u) << n.func_name;  // NNVM-era names (SOURCES.md)
        EXPECT_EQ(static_cast<size_t>(n.num_inputs), n.inputs.size());
      }
    }
    EXPECT_EQ(nulls, f.null_nodes);
    EXPECT_EQ(g.arg_nodes.size(), f.null_nodes);
    EXPECT_EQ(g.num_entries(), f.nodes);  // one output per node in these files
    EXPECT_EQ(g.storage_id.size(), g.num_entries());
    EXPECT_EQ(g.shape.size(), g.num_entries());
    EXPECT_EQ(g.dltype.size(), g.num_entries());
    ASSERT_EQ(g.heads.size(), 1u);
    EXPECT_EQ(g.nodes[g.heads[0].node].name, f.head_name);

    const TvmStoragePlan plan = tvm_storage_plan(g);
    EXPECT_EQ(plan.num_entries, f.nodes);
    EXPECT_EQ(plan.num_storage_ids, f.storage_ids);
    EXPECT_EQ(plan.planned_bytes, f.planned_bytes);
    EXPECT_EQ(plan.unshared_bytes, f.unshared_bytes);
    EXPECT_EQ(plan.param_bytes, f.param_bytes);
  }
}

TEST(TvmJson, BlockedLayoutsKeepTheirRank) {
  WEFT_REQUIRE_MODELS();
  // OPS.md §4: the MobileFaceNet graph works in NCHW3c/NCHW8c, 5- and 6-D shapes.
  const TvmGraph g = load_tvm_json(read_model(kTvmFiles[0].file), kTvmFiles[0].file);
  std::set<size_t> ranks;
  for (const auto& s : g.shape) ranks.insert(s.size());
  EXPECT_TRUE(ranks.count(5));
  EXPECT_TRUE(ranks.count(6));
  EXPECT_EQ(g.shape[g.entry_id(g.heads[0])], (std::vector<int64_t>{1, 128}));
}

TEST(TvmJson, DltypeBytes) {
  EXPECT_EQ(tvm_dltype_bytes("float32"), 4);
  EXPECT_EQ(tvm_dltype_bytes("float16"), 2);
  EXPECT_EQ(tvm_dltype_bytes("bfloat16"), 2);
  EXPECT_EQ(tvm_dltype_bytes("int8"), 1);
  EXPECT_EQ(tvm_dltype_bytes("uint64"), 8);
  EXPECT_EQ(tvm_dltype_bytes("float32x4"), 16);
  EXPECT_EQ(tvm_dltype_bytes("uint1"), 1);
  EXPECT_EQ(tvm_dltype_bytes("bool"), 1);
  EXPECT_THROW(tvm_dltype_bytes("float"), ValueError);
  EXPECT_THROW(tvm_dltype_bytes("complex64"), ValueError);
  EXPECT_THROW(tvm_dltype_bytes("float32x"), ValueError);
  EXPECT_THROW(tvm_dltype_bytes("int-8"), ValueError);
}

TEST(TvmJson, MxnetFilesDoNotLookLikeTvm) {
  EXPECT_FALSE(looks_like_tvm_json(
      R"({"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": []})"));
  EXPECT_TRUE(looks_like_tvm_json(R"({"nodes": [{"op": "tvm_op"}]})"));
}

// A two-node graph to break in one place at a time.
std::string tvm_text(
    const std::string& op_attrs =
        R"("func_name": "fuse_relu", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
    const std::string& inputs = "[[0, 0, 0]]", const std::string& storage = "[0, 1]",
    const std::string& dltype = R"(["float32", "float32"])",
    const std::string& heads = "[[1, 0, 0]]") {
  return R"({"nodes": [{"op": "null", "name": "data", "inputs": []},
      {"op": "tvm_op", "name": "relu0", "attrs": {)" +
         op_attrs + R"(}, "inputs": )" + inputs + R"(}],
    "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": )" +
         heads + R"(,
    "attrs": {"storage_id": ["list_int", )" +
         storage + R"(], "shape": ["list_shape", [[1, 3], [1, 3]]],
              "dltype": ["list_str", )" +
         dltype + "]}}";
}

TEST(TvmJson, SmallGraphAndPlan) {
  const TvmGraph g = load_tvm_json(tvm_text(
      R"("func_name": "fuse_relu", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
      "[[0, 0, 0]]", "[0, 0]"));
  const TvmStoragePlan p = tvm_storage_plan(g);
  EXPECT_EQ(p.num_storage_ids, 1u);
  EXPECT_EQ(p.planned_bytes, 12u);
  EXPECT_EQ(p.unshared_bytes, 24u);
  EXPECT_EQ(p.param_bytes, 12u);
}

TEST(TvmJson, MalformedFilesNameTheProblem) {
  EXPECT_NE(tvm_text().size(), 0u);
  EXPECT_NO_THROW(load_tvm_json(tvm_text()));
  std::string msg = expect_value_error(tvm_text(
      R"("func_name": "fuse_relu", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0")"));
  EXPECT_NE(msg.find("node 1 ('relu0'): num_inputs is '2', the node has 1 inputs"),
            std::string::npos)
      << msg;
  msg =
      expect_value_error(tvm_text(R"("num_inputs": "1", "num_outputs": "1", "flatten_data": "0")"));
  EXPECT_NE(msg.find("node 1 ('relu0'): tvm_op without attribute 'func_name'"), std::string::npos)
      << msg;
  msg = expect_value_error(
      tvm_text(R"("func_name": "f", "num_inputs": "1", "num_outputs": "2", "flatten_data": "0")"));
  EXPECT_NE(msg.find("node 1 ('relu0'): node_row_ptr gives it 1 outputs, the node has 2"),
            std::string::npos)
      << msg;
  msg = expect_value_error(
      tvm_text(R"("func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
               "[[0, 1, 0]]"));
  EXPECT_NE(msg.find("node 1 ('relu0'): input 0 uses output 1 of node 0 ('data')"),
            std::string::npos)
      << msg;
  msg = expect_value_error(
      tvm_text(R"("func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
               "[[1, 0, 0]]"));
  EXPECT_NE(msg.find("node 1 ('relu0'): input 0 refers to node 1, which is not an earlier node"),
            std::string::npos)
      << msg;
  msg = expect_value_error(
      tvm_text(R"("func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
               "[[0, 0, 0]]", "[0]"));
  EXPECT_NE(msg.find("\"storage_id\" has 1 items, but node_row_ptr counts 2 entries"),
            std::string::npos)
      << msg;
  msg = expect_value_error(
      tvm_text(R"("func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
               "[[0, 0, 0]]", "[0, -4]"));
  EXPECT_NE(msg.find("storage_id of entry 1"), std::string::npos) << msg;
  msg = expect_value_error(
      tvm_text(R"("func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
               "[[0, 0, 0]]", "[0, 1]", R"(["float32", "quaternion"])"));
  EXPECT_NE(msg.find("dltype of entry 1: unknown dltype 'quaternion'"), std::string::npos) << msg;
  msg = expect_value_error(
      tvm_text(R"("func_name": "f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0")",
               "[[0, 0, 0]]", "[0, 1]", R"(["float32", "float32"])", "[[4, 0, 0]]"));
  EXPECT_NE(msg.find("head 0 refers to node 4"), std::string::npos) << msg;
  msg = expect_value_error(
      R"({"nodes": [{"op": "conv2d", "name": "c", "inputs": []}], "arg_nodes": [],
      "node_row_ptr": [0, 1], "heads": [], "attrs": {}})");
  EXPECT_NE(msg.find("node 0 ('c'): \"op\" must be \"null\" or \"tvm_op\""), std::string::npos)
      << msg;
  msg = expect_value_error("{\"nodes\": [\n}");
  EXPECT_NE(msg.find("tvm.json: malformed JSON at line 2"), std::string::npos) << msg;
}

}  // namespace
}  // namespace weft::graph
