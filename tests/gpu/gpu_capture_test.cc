// CUDA graph capture of the executor's inference forward (Note [CUDA graph capture] in
// graph/graph_capture.cc) and multi-stream plans on cuda:0: the replayed graph equals the eager
// executor bit for bit on every model at batch 1, new input values reach the replay, a reshape
// captures again, training runs eagerly, and a node with a CPU kernel only runs on the CPU with
// copies (mixed placement). Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/profiler.h"
#include "graph/symbol.h"
#include "ndarray/runtime.h"
#include "ops/infer_util.h"
#include "ops/op.h"
#include "tests/gpu/gpu_model_case.h"

namespace weft::graph {
namespace {

using namespace gpu_testing;  // NOLINT: the shared test helpers

// Bit-for-bit equality of two arrays of one shape and type.
::testing::AssertionResult same_bits(const NDArray& a, const NDArray& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << "shapes or types differ";
  const NDArray ha = a.copy_to(Device::cpu()), hb = b.copy_to(Device::cpu());
  ha.wait_to_read();
  hb.wait_to_read();
  const size_t bytes = static_cast<size_t>(a.shape().size()) * dtype_size(a.dtype());
  if (std::memcmp(ha.raw_data(), hb.raw_data(), bytes) == 0) return ::testing::AssertionSuccess();
  const std::vector<double> x = ha.to_doubles(), y = hb.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != y[i])
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  }
  return ::testing::AssertionFailure() << "bytes differ";
}

std::unique_ptr<Executor> bind_on_gpu(const Case& c, bool cuda_graph, int streams = 0) {
  auto [args, aux] = split(*c.graph, c.vars, Device::cuda(0));
  BindOptions bo;
  bo.device = Device::cuda(0);
  bo.inputs = c.inputs;
  bo.cuda_graph = cuda_graph;
  bo.streams = streams;
  return Executor::bind(c.graph, bo, args, aux);
}

// Writes `value` into the executor's bound "data" array (its memory stays where the graph reads).
void write_input(const NDArray& value, const Executor& ex) {
  NDArray dst = ex.arg("data");
  value.copy_to(dst);
}

class GpuCapture : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuCapture, ReplayEqualsEagerBitForBit) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  const Case c(file, 1, 5);
  auto eager = bind_on_gpu(c, false);
  auto graph = bind_on_gpu(c, true);
  EXPECT_FALSE(eager->cuda_graph().enabled);
  ASSERT_TRUE(graph->cuda_graph().enabled) << file;
  eager->forward(false);
  for (int run = 0; run < 3; ++run) graph->forward(false);  // warm-up, capture, replay
  const CudaGraphInfo info = graph->cuda_graph();
  EXPECT_TRUE(info.captured) << file << ": " << info.failure;
  EXPECT_EQ(info.launches, info.captured ? 2 : 0);
  ASSERT_EQ(eager->outputs().size(), graph->outputs().size());
  for (size_t h = 0; h < eager->outputs().size(); ++h) {
    EXPECT_TRUE(same_bits(graph->outputs()[h], eager->outputs()[h])) << file << " head " << h;
  }
  // The eager executor's stream plan: branches on streams, when the graph has any.
  if (const StreamPlan* p = eager->stream_plan()) {
    std::printf("  %-60s streams %d event edges %d arena %.2f MB\n", file.c_str(), p->streams_used,
                p->event_edges, eager->memory_plan().plan.arena_bytes / 1e6);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, GpuCapture, ::testing::ValuesIn(testing::mxnet_model_files()),
                         testing::ModelTestName());

const char* const kResNet = "fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json";

TEST(GpuCaptureBinding, NewInputsReachTheReplayAndReshapeCapturesAgain) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  WEFT_REQUIRE_MODELS();
  const Case c(kResNet, 1, 9);
  auto eager = bind_on_gpu(c, false);
  auto graph = bind_on_gpu(c, true);
  for (int run = 0; run < 2; ++run) graph->forward(false);
  ASSERT_TRUE(graph->cuda_graph().captured) << graph->cuda_graph().failure;
  // New data written into the bound input array: the next launch reads it.
  const NDArray data = NDArray::uniform(graph->arg("data").shape(), -1, 1);
  write_input(data, *graph);
  write_input(data, *eager);
  graph->forward(false);
  eager->forward(false);
  EXPECT_TRUE(same_bits(graph->outputs()[0], eager->outputs()[0]));
  EXPECT_EQ(graph->cuda_graph().launches, 2);

  // A reshape drops the graph (it holds the old arena's addresses) and captures again.
  InferInputs b4 = testing::model_inputs(kResNet, 4);
  graph->reshape(b4);
  eager->reshape(b4);
  EXPECT_FALSE(graph->cuda_graph().captured);
  EXPECT_EQ(graph->cuda_graph().launches, 0);
  const NDArray data4 = NDArray::uniform(graph->arg("data").shape(), -1, 1);
  write_input(data4, *graph);
  write_input(data4, *eager);
  for (int run = 0; run < 3; ++run) graph->forward(false);
  eager->forward(false);
  EXPECT_TRUE(graph->cuda_graph().captured) << graph->cuda_graph().failure;
  EXPECT_EQ(graph->outputs()[0].shape()[0], 4);
  EXPECT_TRUE(same_bits(graph->outputs()[0], eager->outputs()[0]));
}

TEST(GpuCaptureBinding, TrainingAndOneStreamRunWithoutCapture) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  WEFT_REQUIRE_MODELS();
  const Case c(kResNet, 2, 3);
  // forward(is_train) on an inference binding runs node by node: nothing is launched.
  auto graph = bind_on_gpu(c, true);
  graph->forward(true);
  graph->forward(true);
  EXPECT_EQ(graph->cuda_graph().launches, 0);
  // One stream: no stream plan, and capture still works on the worker's stream alone.
  auto one = bind_on_gpu(c, true, 1);
  EXPECT_EQ(one->stream_plan(), nullptr);
  auto eager = bind_on_gpu(c, false, 1);
  for (int run = 0; run < 3; ++run) one->forward(false);
  eager->forward(false);
  EXPECT_TRUE(one->cuda_graph().captured) << one->cuda_graph().failure;
  EXPECT_TRUE(same_bits(one->outputs()[0], eager->outputs()[0]));
}

// A training step of the MLP file, captured (training forward and backward as two graphs),
// equals the eager executor's bit for bit: outputs and every gradient, on every step.
TEST(GpuCaptureBinding, TrainingStepsReplayBitForBit) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  WEFT_REQUIRE_MODELS();
  const Case c("apache__mxnet__save_000800.json", 16, 13);
  std::unique_ptr<Executor> ex[2];
  for (int k = 0; k < 2; ++k) {
    auto [args, aux] = split(*c.graph, c.vars, Device::cuda(0));
    BindOptions bo;
    bo.device = Device::cuda(0);
    bo.inputs = c.inputs;
    bo.cuda_graph = k == 1;
    bo.default_grad_req = GradReq::kWrite;
    for (uint32_t nid : label_variables(*c.graph))
      bo.grad_req[c.graph->nodes[nid].name] = GradReq::kNull;
    for (const auto& [name, s] : c.inputs.shapes) bo.grad_req[name] = GradReq::kNull;
    ex[k] = Executor::bind(c.graph, bo, args, aux);
  }
  for (int step = 0; step < 4; ++step) {
    const NDArray data = NDArray::uniform(ex[0]->arg("data").shape(), -1, 1);
    for (auto& e : ex) {
      write_input(data, *e);
      e->forward(true);
      e->backward();
    }
    EXPECT_TRUE(same_bits(ex[1]->outputs()[0], ex[0]->outputs()[0])) << "step " << step;
    for (const std::string& name : ex[0]->arg_names()) {
      if (ex[0]->grad(name).is_none()) continue;
      EXPECT_TRUE(same_bits(ex[1]->grad(name), ex[0]->grad(name))) << name << " step " << step;
    }
  }
  const CudaGraphInfo info = ex[1]->cuda_graph();
  EXPECT_TRUE(info.captured) << info.failure;
  // Steps 1 to 3 (the capturing run launches its graph too), forward and backward each.
  EXPECT_EQ(info.launches, 6);
}

// Note [Random numbers in captured graphs]: a training bind with Dropout is captured, and every
// step (replays included) draws a new mask: y = x · mask with mask ∈ {0, 1/(1-p)}, about 1-p of
// it kept, the gradient equal to the same mask, and masks of two steps different. Two executors
// seeded alike draw the same masks, and a replay after seeding again repeats the first one.
TEST(GpuCaptureBinding, DropoutTrainingIsCapturedWithNewMasksEveryStep) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  constexpr double kP = 0.3;
  const Shape shape{64, 512};
  Symbol x = Symbol::variable("data");
  auto g = std::make_shared<const Graph>(
      Symbol::op("Dropout", {x}, {{"p", std::to_string(kP)}}, "drop").to_graph());
  auto bind = [&] {
    BindOptions bo;
    bo.device = Device::cuda(0);
    bo.inputs.shapes["data"] = shape;
    bo.cuda_graph = true;
    bo.default_grad_req = GradReq::kWrite;
    return Executor::bind(g, bo);
  };
  const NDArray data = NDArray::uniform(shape, 1, 2).copy_to(Device::cuda(0));
  std::vector<std::vector<double>> masks[2];
  for (int run = 0; run < 2; ++run) {
    Runtime::get().seed(7);
    auto ex = bind();
    write_input(data, *ex);
    const std::vector<double> xs = data.copy_to(Device::cpu()).to_doubles();
    for (int step = 0; step < 5; ++step) {
      ex->forward(true);
      ex->backward();
      const std::vector<double> y = ex->outputs()[0].copy_to(Device::cpu()).to_doubles();
      const std::vector<double> dx = ex->grad("data").copy_to(Device::cpu()).to_doubles();
      std::vector<double> mask(y.size());
      size_t kept = 0;
      for (size_t i = 0; i < y.size(); ++i) {
        mask[i] = static_cast<double>(static_cast<float>(y[i] / xs[i]));
        const bool keep = std::abs(mask[i] - 1 / (1 - kP)) < 1e-5;
        ASSERT_TRUE(keep || mask[i] == 0) << "step " << step << " element " << i << ": " << y[i];
        ASSERT_NEAR(dx[i], keep ? 1 / (1 - kP) : 0, 1e-5) << "step " << step << " element " << i;
        kept += keep;
      }
      const double frac = static_cast<double>(kept) / static_cast<double>(y.size());
      EXPECT_NEAR(frac, 1 - kP, 0.02) << "step " << step;  // 32768 draws: 6 sigma is 0.015
      masks[run].push_back(std::move(mask));
    }
    const CudaGraphInfo info = ex->cuda_graph();
    EXPECT_TRUE(info.captured) << info.failure;
    EXPECT_EQ(info.launches, 8);  // steps 1 to 4, forward and backward each
    if (run == 1) {               // seeded again: the replay starts the masks over
      Runtime::get().seed(7);
      ex->forward(true);
      const std::vector<double> y = ex->outputs()[0].copy_to(Device::cpu()).to_doubles();
      size_t same = 0;
      for (size_t i = 0; i < y.size(); ++i)
        same += static_cast<double>(static_cast<float>(y[i] / xs[i])) == masks[0][0][i];
      EXPECT_EQ(same, y.size()) << "a reseeded replay did not repeat the first mask";
    }
  }
  for (int step = 1; step < 5; ++step) {
    size_t changed = 0;
    for (size_t i = 0; i < masks[0][step].size(); ++i)
      changed += masks[0][step][i] != masks[0][step - 1][i];
    EXPECT_GT(changed, masks[0][step].size() / 4) << "step " << step << " repeats the mask";
  }
  for (int step = 0; step < 5; ++step) EXPECT_EQ(masks[0][step], masks[1][step]) << step;
}

// An op with a CPU kernel only, as a foreign operator registered through the C ABI for the CPU
// would be: out = in * in.
const Op& cpu_only_square() {
  static const Op& op = OpRegistry::register_runtime("_test_cpu_only_square", [](Op& o) {
    o.set_input_names({"data"});
    o.set_attr<FInferShape>(infer_same_shape);
    o.set_attr<FCompute>(DeviceType::kCPU,
                         [](const OpAttrs&, const OpContext&, std::span<const TensorView> in,
                            std::span<const OpReq>, std::span<const TensorView> out) {
                           const float* x = static_cast<const float*>(in[0].data);
                           float* y = static_cast<float*>(out[0].data);
                           for (int64_t i = 0; i < in[0].size(); ++i) y[i] = x[i] * x[i];
                         });
  });
  return op;
}

// Note [Mixed placement]: the CPU-only node runs on the CPU between two GPU layers, with a copy
// each way, and the result equals the same graph bound on the CPU.
TEST(GpuMixedPlacement, CpuOnlyNodeRunsOnTheCpuWithCopies) {
  cpu_only_square();
  Symbol x = Symbol::variable("data");
  Symbol h = Symbol::op("FullyConnected", {x}, {{"num_hidden", "32"}}, "fc1");
  h = Symbol::op("_test_cpu_only_square", {h}, {}, "square");
  h = Symbol::op("FullyConnected", {h}, {{"num_hidden", "8"}}, "fc2");
  auto g = std::make_shared<const Graph>(h.to_graph());
  InferInputs in;
  in.shapes["data"] = Shape({4, 16});
  random_seed(3);
  const Arrays vars = initial_values(*g, in, infer_shapes_types(*g, in));
  std::vector<NDArray> out[2];
  for (int d = 0; d < 2; ++d) {
    // The CPU reference runs everywhere (the op and the graph are checked without a GPU too).
    if (d == 1 && !have_gpu()) GTEST_SKIP() << "no CUDA device";
    const Device device = d == 0 ? Device::cpu() : Device::cuda(0);
    auto [args, aux] = split(*g, vars, device);
    BindOptions bo;
    bo.device = device;
    bo.inputs = in;
    auto ex = Executor::bind(g, bo, args, aux);
    for (int run = 0; run < 3; ++run) ex->forward(false);
    out[d] = ex->outputs();
    if (d == 1) {
      EXPECT_EQ(ex->placement().fallback_nodes, 1);
      EXPECT_EQ(ex->placement().copy_nodes, 2);
      EXPECT_FALSE(ex->cuda_graph().enabled);
      EXPECT_EQ(out[d][0].device(), device);
    }
  }
  EXPECT_TRUE(close(out[1][0], out[0][0], 1e-5, 1e-4));
}

}  // namespace
}  // namespace weft::graph
