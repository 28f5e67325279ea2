// CUDA graph capture of an executor's forward (graph/graph_capture.h, Note [CUDA graph capture])
// on the simulated device (tests/engine/sim_gpu.h, Note [Simulated capture]), so that the capture
// logic runs, sanitizers included, without a GPU: a fork and a join over two streams, kernels
// that run well behind the host, the warm-up / capture / replay states, new input values read by
// every replay, scratch memory served from the capture's buffers, and a kernel that breaks the
// capture falling back to eager runs. The reference is the arithmetic done here on the host.
#include "graph/graph_capture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/symbol.h"
#include "ndarray/runtime.h"
#include "ops/defs/seed_word.h"
#include "tests/engine/sim_gpu.h"

namespace weft::graph::executor_detail {
namespace {

constexpr int64_t kN = 256;
constexpr std::chrono::microseconds kSlow{2000};

testing::SimGpu& sim() {
  static testing::SimGpu gpu(1);
  return gpu;
}

// Host memory standing in for the device pool; counts what it hands out.
class HostPool final : public Allocator {
 public:
  DataPtr allocate(size_t bytes, size_t) override {
    ++allocations;
    void* p = std::malloc(std::max<size_t>(bytes, 1));
    return DataPtr(p, bytes, Device::cuda(0), nullptr,
                   [](void*, void* ptr, size_t) noexcept { std::free(ptr); });
  }
  Device device() const override { return Device::cuda(0); }
  std::string name() const override { return "host-pool"; }
  int allocations = 0;
};

// x → a = x + 1 (stream 0), b = 2x (stream 1), c = a + b (stream 0): a fork and a join.
struct Diamond {
  Graph graph;
  StreamPlan plan;
  std::vector<float> x, a, b, c;
  std::vector<int64_t> shape = {kN};
  std::map<std::string, FCompute> kernels;
  std::vector<NodeRun> runs;
  HostPool pool;
  bool break_capture = false;  // the join kernel synchronises its stream (refused in capture)
  size_t scratch_seen = 0;     // bytes the last kernel got from its temp allocator
  // With make_random(): a and b are random nodes; the seeds they used when they last ran on the
  // device (read there from the pass's word), and the generator their runs name.
  RandomState generator;
  uint64_t seed_a = 0, seed_b = 0;

  void make_random() {
    for (NodeRun& r : runs) {
      if (r.name == "a" || r.name == "b") r.random = &generator;
    }
  }
  // What a random kernel does with its seed: reads the word on the device when it runs.
  static void record_seed(const OpContext& ctx, uint64_t* into) {
    if (ctx.device_seed == nullptr) return;
    sim().launch(ctx.run.stream, [word = ctx.device_seed, k = ctx.seed_offset, into] {
      *into = seed_word::combine(*word, k);
    });
  }

  Diamond() : x(kN), a(kN), b(kN), c(kN) {
    Symbol in = Symbol::variable("x");
    Symbol sa = Symbol::op("relu", {in}, {}, "a");
    Symbol sb = Symbol::op("sigmoid", {in}, {}, "b");
    graph = Symbol::op("elemwise_add", {sa, sb}, {}, "c").to_graph();
    plan = plan_streams(graph, 2);
    // Kernels: slow device work on the given stream, reading and writing host memory.
    kernels["a"] = [this](const OpAttrs&, const OpContext& ctx, std::span<const TensorView>,
                          std::span<const OpReq>, std::span<const TensorView>) {
      record_seed(ctx, &seed_a);
      sim().launch(
          ctx.run.stream,
          [this] {
            for (int64_t i = 0; i < kN; ++i) a[i] = x[i] + 1;
          },
          kSlow);
    };
    kernels["b"] = [this](const OpAttrs&, const OpContext& ctx, std::span<const TensorView>,
                          std::span<const OpReq>, std::span<const TensorView>) {
      record_seed(ctx, &seed_b);
      DataPtr scratch = ctx.temp_allocator->allocate_on(1000, ctx.run.stream, 64);
      scratch_seen = scratch.size();
      sim().launch(
          ctx.run.stream,
          [this] {
            for (int64_t i = 0; i < kN; ++i) b[i] = 2 * x[i];
          },
          kSlow);
    };
    kernels["c"] = [this](const OpAttrs&, const OpContext& ctx, std::span<const TensorView>,
                          std::span<const OpReq>, std::span<const TensorView>) {
      if (break_capture) sim().synchronize(ctx.run.stream);
      sim().launch(ctx.run.stream, [this] {
        for (int64_t i = 0; i < kN; ++i) c[i] = a[i] + b[i];
      });
    };
    for (uint32_t nid = 0; nid < graph.nodes.size(); ++nid) {
      const Node& n = graph.nodes[nid];
      if (n.is_variable()) continue;
      NodeRun r;
      r.nid = nid;
      r.name = n.name;
      r.call.attrs = n.op_attrs.get();
      r.call.kernel.compute = &kernels.at(n.name);
      r.temp_allocator = &pool;
      r.device = Device::cuda(0);
      runs.push_back(std::move(r));
    }
  }
  // Sets x for a run; the expected c is 3x + 1.
  void set_input(float base) {
    for (int64_t i = 0; i < kN; ++i) x[i] = base + static_cast<float>(i);
  }
  ::testing::AssertionResult check(float base) const {
    for (int64_t i = 0; i < kN; ++i) {
      const float want = 3 * (base + static_cast<float>(i)) + 1;
      if (c[i] != want)
        return ::testing::AssertionFailure() << "c[" << i << "] = " << c[i] << ", want " << want;
    }
    return ::testing::AssertionSuccess();
  }
};

class SimCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    register_device_api(DeviceType::kCUDA, &sim());
    stream_ = sim().create_stream(Device::cuda(0));
  }
  void TearDown() override {
    sim().destroy_stream(stream_);
    register_device_api(DeviceType::kCUDA, nullptr);
  }
  // One forward on the "worker's" stream, then the host waits for it.
  void run(GraphCapture& capture, Diamond& d, float base) {
    d.set_input(base);
    const RunContext rc{Device::cuda(0), stream_, 0};
    capture.run(Runtime::get().engine(), rc);
    sim().synchronize(stream_);
  }
  Stream stream_;
};

TEST_F(SimCapture, WarmUpCaptureThenReplayWithNewInputs) {
  Diamond d;
  ASSERT_EQ(d.plan.streams_used, 2);
  {
    std::shared_ptr<Allocator> pool(&d.pool, [](Allocator*) {});
    GraphCapture capture(Device::cuda(0), d.runs, &d.plan, pool);
    EXPECT_EQ(capture.state(), GraphCapture::State::kWarmUp);
    const int64_t waits = sim().cross_stream_waits();
    run(capture, d, 0);  // warm-up: eager, measures scratch
    EXPECT_TRUE(d.check(0));
    EXPECT_GT(sim().cross_stream_waits(), waits) << "the join did not wait across streams";
    EXPECT_EQ(capture.state(), GraphCapture::State::kCapture);
    const int from_pool = d.pool.allocations;
    run(capture, d, 10);  // capture, then the first launch
    EXPECT_EQ(capture.state(), GraphCapture::State::kCaptured) << capture.failure();
    EXPECT_TRUE(d.check(10));
    EXPECT_EQ(capture.launches(), 1);
    EXPECT_GE(d.scratch_seen, 1000u);
    // Only the per-stream scratch buffers came from the pool while capturing.
    EXPECT_LE(d.pool.allocations - from_pool, 2);
    for (int k = 0; k < 5; ++k) {  // replays read the new values of x
      run(capture, d, 100.0f * static_cast<float>(k + 2));
      EXPECT_TRUE(d.check(100.0f * static_cast<float>(k + 2))) << "replay " << k;
    }
    EXPECT_EQ(capture.launches(), 6);
  }
}

TEST_F(SimCapture, ACaptureBreakingKernelFallsBackToEagerRuns) {
  Diamond d;
  d.break_capture = true;
  std::shared_ptr<Allocator> pool(&d.pool, [](Allocator*) {});
  GraphCapture capture(Device::cuda(0), d.runs, &d.plan, pool);
  run(capture, d, 1);  // warm-up: the synchronisation is fine outside capture
  EXPECT_TRUE(d.check(1));
  run(capture, d, 2);  // the capture breaks; this run is redone eagerly
  EXPECT_EQ(capture.state(), GraphCapture::State::kEager);
  EXPECT_NE(capture.failure().find("synchronize"), std::string::npos) << capture.failure();
  EXPECT_TRUE(d.check(2));
  run(capture, d, 3);
  EXPECT_TRUE(d.check(3));
  EXPECT_EQ(capture.launches(), 0);
}

TEST_F(SimCapture, OneStreamCapturesOnTheWorkersStreamAlone) {
  Diamond d;
  std::shared_ptr<Allocator> pool(&d.pool, [](Allocator*) {});
  GraphCapture capture(Device::cuda(0), d.runs, nullptr, pool);
  for (int k = 0; k < 4; ++k) {
    run(capture, d, static_cast<float>(k));
    EXPECT_TRUE(d.check(static_cast<float>(k))) << "run " << k;
  }
  EXPECT_EQ(capture.state(), GraphCapture::State::kCaptured) << capture.failure();
  EXPECT_EQ(capture.launches(), 3);
}

// Note [Random numbers in captured graphs]: two random nodes on two streams. The pass's word
// starts from one draw of their generator, every pass (the graph's replays included) advances
// it on the device first, and each node seeds itself from the word and its number. The
// reference is the sequence computed here on the host.
TEST_F(SimCapture, RandomNodesDrawFromASeedWordAdvancedOnTheDevice) {
  Diamond d;
  d.make_random();
  d.generator.engine.seed(42);
  std::mt19937_64 reference(42);
  const uint64_t first = reference();
  std::shared_ptr<Allocator> pool(&d.pool, [](Allocator*) {});
  int advances = 0;
  SeedAdvance advance = [&advances](uint64_t* word, const RunContext& rc) {
    ++advances;  // on the host: once per eager pass, once at capture
    sim().launch(rc.stream, [word] { *word = seed_word::next(*word); });
  };
  GraphCapture capture(Device::cuda(0), d.runs, &d.plan, pool, false, advance);
  EXPECT_EQ(capture.random_runs(), 2u);
  std::vector<uint64_t> seeds;
  for (int pass = 1; pass <= 5; ++pass) {
    run(capture, d, static_cast<float>(pass));
    EXPECT_TRUE(d.check(static_cast<float>(pass)));
    uint64_t word = first;
    for (int k = 0; k < pass; ++k) word = seed_word::next(word);
    EXPECT_EQ(d.seed_a, seed_word::combine(word, 0)) << "pass " << pass;
    EXPECT_EQ(d.seed_b, seed_word::combine(word, 1)) << "pass " << pass;
    EXPECT_EQ(*capture.seed_word(), word) << "pass " << pass;
    seeds.push_back(d.seed_a);
    seeds.push_back(d.seed_b);
  }
  EXPECT_EQ(capture.state(), GraphCapture::State::kCaptured) << capture.failure();
  EXPECT_EQ(capture.launches(), 4);
  EXPECT_EQ(advances, 2) << "replays must advance the word without the host";
  std::sort(seeds.begin(), seeds.end());
  EXPECT_EQ(std::unique(seeds.begin(), seeds.end()), seeds.end()) << "a seed repeated";
  // The generator was drawn from once, at the first pass; nodes keep no device seed afterwards.
  std::mt19937_64 after(42);
  after.discard(1);
  EXPECT_TRUE(d.generator.engine == after);
  for (const NodeRun& r : d.runs) EXPECT_EQ(r.device_seed, nullptr);
  // Reseeded (as Runtime::seed does): the next replay starts the sequence again, as a new
  // capture would.
  d.generator.engine.seed(42);
  ++d.generator.reseeds;
  run(capture, d, 6);
  EXPECT_EQ(d.seed_a, seed_word::combine(seed_word::next(first), 0));
  EXPECT_EQ(d.seed_b, seed_word::combine(seed_word::next(first), 1));
  EXPECT_EQ(capture.launches(), 5);
  EXPECT_EQ(advances, 2);
}

// An op that draws in training only (Dropout with mode=training) is no random node of an
// inference pass: no word, no advance, no device seed.
TEST_F(SimCapture, TrainOnlyRandomNodesNeedNoSeedAtInference) {
  Diamond d;
  d.make_random();
  for (NodeRun& r : d.runs) r.random_train_only = true;
  std::shared_ptr<Allocator> pool(&d.pool, [](Allocator*) {});
  int advances = 0;
  SeedAdvance advance = [&advances](uint64_t*, const RunContext&) { ++advances; };
  GraphCapture capture(Device::cuda(0), d.runs, &d.plan, pool, false, advance);
  EXPECT_EQ(capture.random_runs(), 0u);
  EXPECT_EQ(capture.seed_word(), nullptr);
  for (int pass = 0; pass < 3; ++pass) run(capture, d, static_cast<float>(pass));
  EXPECT_EQ(advances, 0);
  EXPECT_EQ(d.seed_a, 0u);
  GraphCapture training(Device::cuda(0), d.runs, &d.plan, pool, true, advance);
  EXPECT_EQ(training.random_runs(), 2u);
}

TEST_F(SimCapture, RandomNodesNeedASeedAdvance) {
  Diamond d;
  d.make_random();
  std::shared_ptr<Allocator> pool(&d.pool, [](Allocator*) {});
  EXPECT_THROW(GraphCapture(Device::cuda(0), d.runs, &d.plan, pool), Error);
}

}  // namespace
}  // namespace weft::graph::executor_detail
