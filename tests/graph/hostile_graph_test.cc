// Hostile graphs, shapes and files through JSON -> infer -> plan -> bind and the `weft replay`
// program: sizes beyond weft's limit or the device's memory end in an error naming the node (or
// input, or array) and its shape, before any allocation or oneDNN descriptor; never a signal.
// Entry indices of 2^31 and more, output counts past kMaxNodeOutputs and sparse records that
// densify out of proportion to the file are refused at load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "graph/executor.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "graph/plan.h"
#include "graph/symbol.h"
#include "memory/arena.h"
#include "tests/graph/cli_run.h"
#include "tests/ndarray/crafted_params.h"

namespace weft::graph {
namespace {

namespace fs = std::filesystem;

const std::string k2to62 = "4611686018427387904";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// MXNet 1.x JSON: data -> FullyConnected(num_hidden) -> relu; data has `__shape__` = `shape`
// when `shape` is not empty.
std::string fc_json(const std::string& num_hidden, const std::string& shape) {
  const std::string data_attrs = shape.empty() ? "" : "\"__shape__\": \"" + shape + "\"";
  return R"json({"nodes": [
    {"op": "null", "name": "data", "attrs": {)json" +
         data_attrs + R"json(}, "inputs": []},
    {"op": "null", "name": "fc_weight", "inputs": []},
    {"op": "null", "name": "fc_bias", "inputs": []},
    {"op": "FullyConnected", "name": "fc", "attrs": {"num_hidden": ")json" +
         num_hidden + R"json("}, "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},
    {"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[3, 0, 0]]}],
  "arg_nodes": [0, 1, 2], "node_row_ptr": [0, 1, 2, 3, 4, 5], "heads": [[4, 0, 0]],
  "attrs": {"mxnet_version": ["int", 10500]}})json";
}

// data -> relu, where relu reads output `input_index` of data and the head is output
// `head_index` of node `head_node`.
std::string entry_json(const std::string& input_index, const std::string& head_node,
                       const std::string& head_index) {
  return R"json({"nodes": [
    {"op": "null", "name": "data", "inputs": []},
    {"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[0, )json" +
         input_index + R"json(, 0]]}],
  "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[)json" +
         head_node + ", " + head_index + R"json(, 0]],
  "attrs": {"mxnet_version": ["int", 10500]}})json";
}

// data (n, 8) -> SliceChannel(num_outputs) -> head: the first part.
std::string split_json(const std::string& num_outputs) {
  return R"json({"nodes": [
    {"op": "null", "name": "data", "attrs": {"__shape__": "(2, 8)"}, "inputs": []},
    {"op": "SliceChannel", "name": "split", "attrs": {"num_outputs": ")json" +
         num_outputs + R"json(", "axis": "1"}, "inputs": [[0, 0, 0]]}],
  "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
  "attrs": {"mxnet_version": ["int", 10500]}})json";
}

std::shared_ptr<const Graph> load(const std::string& text) {
  return std::make_shared<const Graph>(load_json(text, nullptr, "hostile.json"));
}

// Runs `f`, expecting ErrorT; returns its message.
template <typename ErrorT, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ErrorT& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

TEST(HostileGraph, HugeShapeAttributeNamesTheNodeAtInferAndBind) {
  auto g = load(fc_json("4", "(" + k2to62 + ", " + k2to62 + ")"));
  std::string m = error_of<ShapeError>([&] { infer_shapes_types(*g, {}); });
  EXPECT_TRUE(contains(m, "'data'")) << m;
  EXPECT_TRUE(contains(m, "__shape__")) << m;
  EXPECT_TRUE(contains(m, k2to62)) << m;
  m = error_of<ShapeError>([&] { Executor::bind(g, BindOptions{}); });
  EXPECT_TRUE(contains(m, "'data'")) << m;
}

TEST(HostileGraph, HugeShapeAttributeWithAnUnknownBatchDimensionIsStillRefused) {
  // (0, 2^62, 2^62): dimension 0 is left to the batch size, the rest is already too large.
  auto g = load(fc_json("4", "(0, " + k2to62 + ", " + k2to62 + ")"));
  const std::string m = error_of<ShapeError>([&] { infer_shapes_types(*g, {}, false); });
  EXPECT_TRUE(contains(m, "'data'")) << m;
}

TEST(HostileGraph, HugeNumHiddenNamesTheNodeBeforeAnyAllocation) {
  auto g = load(fc_json(k2to62, "(2, 3)"));
  std::string m = error_of<ShapeError>([&] { infer_shapes_types(*g, {}); });
  EXPECT_TRUE(contains(m, "'fc'")) << m;
  EXPECT_TRUE(contains(m, k2to62)) << m;
  m = error_of<ShapeError>([&] { Executor::bind(g, BindOptions{}); });
  EXPECT_TRUE(contains(m, "'fc'")) << m;
}

TEST(HostileGraph, HugeInputShapeNamesTheInput) {
  auto g = load(fc_json("4", ""));
  InferInputs in;
  in.shapes["data"] = Shape{int64_t{1} << 62, int64_t{1} << 62};
  const std::string m = error_of<ShapeError>([&] { infer_shapes_types(*g, in); });
  EXPECT_TRUE(contains(m, "'data'")) << m;
  EXPECT_TRUE(contains(m, "input shape")) << m;
}

TEST(HostileGraph, ReshapeWhoseTargetOverflowsNamesTheNode) {
  // 2^33 * 2^33 wraps to 4 in 64 bits: the -1 would have been inferred as 2 and the product of
  // the output shape checked in wrapped arithmetic as equal to the input's 8 elements.
  auto g = load(R"json({"nodes": [
    {"op": "null", "name": "data", "attrs": {"__shape__": "(8,)"}, "inputs": []},
    {"op": "Reshape", "name": "reshape0", "attrs": {"shape": "(8589934592, 8589934592, -1)"},
     "inputs": [[0, 0, 0]]}],
    "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
    "attrs": {"mxnet_version": ["int", 10500]}})json");
  const std::string m = error_of<ShapeError>([&] { infer_shapes_types(*g, {}); });
  EXPECT_TRUE(contains(m, "'reshape0'")) << m;
}

TEST(HostileGraph, EntryLargerThanTheDeviceIsOutOfMemoryNamingTheNode) {
  if (device_memory_capacity(Device::cpu()) == 0)
    GTEST_SKIP() << "the machine's memory size is unknown";
  // fc_weight is (2^34, 1024) float32: 64 TiB, within weft's limit but not on this machine.
  auto g = load(fc_json("17179869184", "(1, 1024)"));
  InferInputs in;
  EXPECT_NO_THROW(infer_shapes_types(*g, in));  // no device: planning for another machine is fine
  in.device = Device::cpu();
  const std::string m = error_of<OutOfMemory>([&] { infer_shapes_types(*g, in); });
  EXPECT_TRUE(contains(m, "'fc_weight'")) << m;
  EXPECT_TRUE(contains(m, "(17179869184, 1024)")) << m;
  // Binding without the device in InferInputs still fails cleanly, naming the shape.
  const std::string b = error_of<OutOfMemory>([&] { Executor::bind(g, BindOptions{}); });
  EXPECT_TRUE(contains(b, "(17179869184, 1024)")) << b;
}

TEST(HostileGraph, InputEntryIndexOf2To31OrMoreIsRefusedNamingNodeAndIndex) {
  for (const std::string index : {"2147483648", "4294967295"}) {
    const std::string m = error_of<ValueError>([&] { load(entry_json(index, "1", "0")); });
    EXPECT_TRUE(contains(m, "hostile.json")) << m;
    EXPECT_TRUE(contains(m, "'relu'")) << m;
    EXPECT_TRUE(contains(m, "input 0 uses output " + index)) << m;
    EXPECT_TRUE(contains(m, "'data'")) << m;
  }
}

TEST(HostileGraph, HeadEntryIndexOf2To31OrMoreIsRefusedNamingHeadNodeAndIndex) {
  for (const std::string index : {"2147483648", "4294967295"}) {
    for (const std::string node : {"0", "1"}) {
      const std::string m = error_of<ValueError>([&] { load(entry_json("0", node, index)); });
      EXPECT_TRUE(contains(m, "head 0 uses output " + index)) << m;
      EXPECT_TRUE(contains(m, node == "0" ? "'data'" : "'relu'")) << m;
    }
  }
}

TEST(HostileGraph, OutputCountPastTheLimitIsRefusedAtLoadNamingTheNode) {
  for (const std::string& n :
       {std::string("2147483647"), std::string("1048576"), std::to_string(kMaxNodeOutputs + 1)}) {
    const std::string m = error_of<ValueError>([&] { load(split_json(n)); });
    EXPECT_TRUE(contains(m, "'split'")) << m;
    EXPECT_TRUE(contains(m, n + " outputs")) << m;
    EXPECT_TRUE(contains(m, "kMaxNodeOutputs")) << m;
  }
  // At the limit the graph loads, and binds with the op's own output count.
  auto g = load(R"json({"nodes": [
    {"op": "null", "name": "data", "attrs": {"__shape__": "(1, 4096)"}, "inputs": []},
    {"op": "SliceChannel", "name": "split", "attrs": {"num_outputs": "4096"},
     "inputs": [[0, 0, 0]]}],
    "arg_nodes": [0], "heads": [[1, 4095, 0]]})json");
  EXPECT_EQ(g->num_entries(), 1u + static_cast<uint32_t>(kMaxNodeOutputs));
  const InferResult r = infer_shapes_types(*g, {});
  EXPECT_EQ(r.shapes[g->entry_id(g->heads[0])], (Shape{1, 1}));
}

TEST(HostileGraph, SymbolApiRefusesAnOutputCountPastTheLimit) {
  const Symbol data = Symbol::variable("data");
  const std::string m = error_of<ValueError>([&] { sym::SliceChannel(data, "split", 1 << 20); });
  EXPECT_TRUE(contains(m, "'split'")) << m;
  EXPECT_TRUE(contains(m, "kMaxNodeOutputs")) << m;
  EXPECT_EQ(sym::SliceChannel(data, "split4", 4).num_outputs(), 4u);
}

TEST(HostilePlan, BuffersWhoseOffsetsWouldOverflowAreRefused) {
  // Twenty live buffers of 2^60 bytes: their offsets add up past 2^64.
  std::vector<PlanBuffer> buffers(20);
  for (auto& b : buffers) {
    b.bytes = size_t{1} << 60;
    b.first = 0;
    b.last = 1;
  }
  EXPECT_THROW(plan_buffers(buffers), OutOfMemory);
  EXPECT_THROW(plan_buffers_block_sharing(buffers), OutOfMemory);
}

TEST(HostilePlan, ArenaLargerThanTheDeviceFailsBeforeAllocating) {
  if (device_memory_capacity(Device::cpu()) == 0)
    GTEST_SKIP() << "the machine's memory size is unknown";
  const std::string m =
      error_of<OutOfMemory>([&] { Arena arena(cpu_allocator(), size_t{1} << 62); });
  EXPECT_TRUE(contains(m, "arena")) << m;
  EXPECT_TRUE(contains(m, "cpu:0")) << m;
}

// ---- the `weft` program end to end ----------------------------------------------------------

using testing::CliRun;
using testing::run_cli;

class HostileCli : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef WEFT_CLI_PATH
    GTEST_SKIP() << "the weft program is not built (WEFT_BUILD_TOOLS=OFF)";
#endif
    dir_ = fs::temp_directory_path() / ("weft_hostile_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    CliRun m = run_cli("model mlp -o " + path("mlp-symbol.json"));
    ASSERT_EQ(m.code, 0) << m.output;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // A clean failure: an exit code of 1..127 (128 and above, or -1, is a signal).
  static void expect_clean_failure(const CliRun& r, const std::string& must_mention) {
    EXPECT_EQ(r.signal, 0) << r.output;
    EXPECT_GE(r.code, 1) << r.output;
    EXPECT_LE(r.code, 127) << r.output;
    EXPECT_TRUE(contains(r.output, must_mention)) << r.output;
  }
  fs::path dir_;
};

TEST_F(HostileCli, ReplayWithACraftedRowSparseParamsFileFailsCleanly) {
  testing::write_bytes(
      path("crafted.params"),
      testing::row_sparse_params("arg:fc1_weight", int64_t{1} << 59, 16, int64_t{1} << 58));
  const CliRun r = run_cli("replay " + path("mlp-symbol.json") + " --input data=2x784 --params " +
                           path("crafted.params") + " --iters 1 --warmup 0 --quiet");
  expect_clean_failure(r, "arg:fc1_weight");
}

TEST_F(HostileCli, ReplayWithACraftedCsrParamsFileFailsCleanly) {
  testing::write_bytes(
      path("crafted.params"),
      testing::csr_params("arg:fc1_weight", int64_t{1} << 62, (int64_t{1} << 62) - 7));
  const CliRun r = run_cli("replay " + path("mlp-symbol.json") + " --input data=2x784 --params " +
                           path("crafted.params") + " --iters 1 --warmup 0 --quiet");
  expect_clean_failure(r, "arg:fc1_weight");
}

TEST_F(HostileCli, InfoAndReplayRefuseEntryIndicesOf2To31OrMore) {
  for (const std::string index : {"2147483648", "4294967295"}) {
    for (const bool head : {false, true}) {
      const std::string file = path("entry.json");
      std::ofstream(file, std::ios::trunc)
          << (head ? entry_json("0", "1", index) : entry_json(index, "1", "0"));
      expect_clean_failure(run_cli("info " + file), index);
      const CliRun r = run_cli("replay " + file + " --input data=2x3 --iters 1 --warmup 0 --quiet");
      expect_clean_failure(r, index);
      EXPECT_TRUE(contains(r.output, head ? "head 0" : "'relu'")) << r.output;
    }
  }
}

TEST_F(HostileCli, InfoAndReplayRefuseAHugeOutputCountAtLoad) {
  for (const std::string n : {"2147483647", "1048576"}) {
    const std::string file = path("split.json");
    std::ofstream(file, std::ios::trunc) << split_json(n);
    expect_clean_failure(run_cli("info " + file), "kMaxNodeOutputs");
    expect_clean_failure(
        run_cli("replay " + file + " --input data=2x8 --iters 1 --warmup 0 --quiet"),
        "kMaxNodeOutputs");
  }
}

TEST_F(HostileCli, ReplayRefusesAnEmptySparseRecordDeclaringOneGiB) {
  // 121 bytes: a row_sparse (2^28, 1) float32 record with no stored rows.
  const std::vector<uint8_t> bytes = testing::empty_row_sparse_params("arg:w", int64_t{1} << 28, 1);
  EXPECT_EQ(bytes.size(), 121u);
  testing::write_bytes(path("empty.params"), bytes);
  const CliRun r = run_cli("replay " + path("mlp-symbol.json") + " --input data=2x784 --params " +
                           path("empty.params") + " --iters 1 --warmup 0 --quiet");
  expect_clean_failure(r, "max_sparse_expansion_bytes");
  EXPECT_TRUE(contains(r.output, "'arg:w'")) << r.output;
}

TEST_F(HostileCli, ReplayWithAHugeInputShapeFailsCleanly) {
  const CliRun r = run_cli("replay " + path("mlp-symbol.json") + " --input data=" + k2to62 + "x" +
                           k2to62 + " --iters 1 --warmup 0 --quiet");
  expect_clean_failure(r, "data");
}

}  // namespace
}  // namespace weft::graph
