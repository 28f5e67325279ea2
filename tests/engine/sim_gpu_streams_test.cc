// Pinned compute streams (ComputeStreamScope, Note [Stream plans] in graph/streams.h) on the
// simulated CUDA device: operations pushed inside a scope run on the compute stream it names
// (modulo the device's streams), scopes nest, and without one the engine chooses.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "devices/device_api.h"
#include "engine/engine.h"
#include "tests/engine/sim_gpu.h"

namespace weft::testing {
namespace {

class SimGpuStreams : public ::testing::Test {
 protected:
  void SetUp() override { register_device_api(DeviceType::kCUDA, &gpu_); }
  void TearDown() override { register_device_api(DeviceType::kCUDA, nullptr); }
  static inline SimGpu gpu_{1};
};

TEST_F(SimGpuStreams, ScopePinsTheComputeStream) {
  EngineConfig config;
  config.cpu_workers = 2;
  config.gpu_compute_streams = 3;
  auto engine = Engine::create(config);
  constexpr int kOps = 12;
  std::vector<VarHandle> vars;
  for (int i = 0; i < kOps; ++i) vars.push_back(engine->new_var());
  std::mutex mutex;
  std::vector<void*> stream_of(kOps, nullptr);
  for (int i = 0; i < kOps; ++i) {
    ComputeStreamScope pin(i % 4);  // 3 streams: hint 3 is stream 0 again
    EXPECT_EQ(ComputeStreamScope::current(), i % 4);
    engine->push_sync(
        [&, i](const RunContext& rc) {
          std::lock_guard<std::mutex> lock(mutex);
          stream_of[i] = rc.stream.handle;
        },
        Device::cuda(0), {}, {vars[i]});
  }
  EXPECT_EQ(ComputeStreamScope::current(), -1);
  engine->wait_for_all();
  for (int i = 0; i < kOps; ++i) {
    ASSERT_NE(stream_of[i], nullptr);
    for (int j = 0; j < kOps; ++j) {
      EXPECT_EQ(stream_of[i] == stream_of[j], (i % 4) % 3 == (j % 4) % 3) << i << " " << j;
    }
  }
  for (VarHandle v : vars) engine->delete_var(v);
}

// A chain whose links alternate between two pinned streams: every successor is made ready by its
// predecessor's completion on the other stream's worker, which must hand it over rather than run
// it inline (may_run_inline), so each link still runs on the stream it was pinned to.
TEST_F(SimGpuStreams, SuccessorsMadeReadyOnAnotherStreamKeepTheirPin) {
  EngineConfig config;
  config.cpu_workers = 2;
  config.gpu_compute_streams = 2;
  auto engine = Engine::create(config);
  VarHandle v = engine->new_var();
  constexpr int kOps = 16;
  std::mutex mutex;
  std::vector<void*> stream_of(kOps, nullptr);
  VarHandle gate = engine->new_var();
  // The first link waits for a CPU operation, so the whole chain is queued before any runs.
  engine->push_sync(
      [](const RunContext&) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); },
      Device::cpu(), {}, {gate});
  for (int i = 0; i < kOps; ++i) {
    ComputeStreamScope pin(i % 2);
    engine->push_sync(
        [&, i](const RunContext& rc) {
          std::lock_guard<std::mutex> lock(mutex);
          stream_of[i] = rc.stream.handle;
        },
        Device::cuda(0), i == 0 ? std::vector<VarHandle>{gate} : std::vector<VarHandle>{}, {v});
  }
  engine->wait_for_all();
  ASSERT_NE(stream_of[0], stream_of[1]);
  for (int i = 2; i < kOps; ++i) EXPECT_EQ(stream_of[i], stream_of[i % 2]) << "link " << i;
  engine->delete_var(v);
  engine->delete_var(gate);
}

TEST_F(SimGpuStreams, ScopesNestAndNegativeMeansTheEnginesChoice) {
  {
    ComputeStreamScope outer(2);
    {
      ComputeStreamScope inner(-5);
      EXPECT_EQ(ComputeStreamScope::current(), -1);
    }
    EXPECT_EQ(ComputeStreamScope::current(), 2);
  }
  EXPECT_EQ(ComputeStreamScope::current(), -1);
}

}  // namespace
}  // namespace weft::testing
