// Hostile graphs, shapes and files through JSON -> infer -> plan -> bind and the `weft replay`
// program: sizes beyond weft's limit or the device's memory end in an error naming the node (or
// input, or array) and its shape, before any allocation or oneDNN descriptor; never a signal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "graph/executor.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "graph/plan.h"
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

TEST_F(HostileCli, ReplayWithAHugeInputShapeFailsCleanly) {
  const CliRun r = run_cli("replay " + path("mlp-symbol.json") + " --input data=" + k2to62 + "x" +
                           k2to62 + " --iters 1 --warmup 0 --quiet");
  expect_clean_failure(r, "data");
}

}  // namespace
}  // namespace weft::graph
