// PooledAllocator's profiler counters: allocations and frees add "C" counter events for the bytes
// in use and reserved to the Chrome trace.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "base/profiler.h"
#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::MiB;

struct CounterSample {
  std::string name;
  double value = 0;
};

// The "C" events of the global profiler's trace, in order.
std::vector<CounterSample> counter_events() {
  const nlohmann::json trace = nlohmann::json::parse(Profiler::global().chrome_trace_json());
  std::vector<CounterSample> samples;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("ph", "") != "C") continue;
    samples.push_back(
        {event.at("name").get<std::string>(), event.at("args").at("value").get<double>()});
  }
  return samples;
}

// Starts the global profiler clean and leaves it stopped and clean.
class PoolProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Profiler::global().stop();
    Profiler::global().clear();
    Profiler::global().start();
  }
  void TearDown() override {
    Profiler::global().stop();
    Profiler::global().clear();
  }
};

TEST_F(PoolProfilerTest, AllocationsAddInUseAndReservedCounterEvents) {
  PoolConfig config = testing::pool_config(PoolStrategy::kBestFit);
  config.trace_counters = true;
  PooledAllocator pool(cpu_allocator(), config);
  {
    DataPtr a = pool.allocate(1000);  // 1024 in use, 2 MiB reserved
    DataPtr b = pool.allocate(3 * MiB);
  }
  pool.empty_cache();
  Profiler::global().stop();

  std::vector<double> in_use;
  std::vector<double> reserved;
  for (const CounterSample& sample : counter_events()) {
    if (sample.name.find(pool.name()) == std::string::npos) continue;
    if (sample.name.find("in use") != std::string::npos) in_use.push_back(sample.value);
    if (sample.name.find("reserved") != std::string::npos) reserved.push_back(sample.value);
  }
  ASSERT_GE(in_use.size(), 4u) << "two allocations and two frees";
  EXPECT_EQ(in_use[0], 1024.0);
  EXPECT_EQ(in_use[1], 1024.0 + 3 * MiB);
  EXPECT_EQ(in_use.back(), 0.0);
  ASSERT_FALSE(reserved.empty());
  EXPECT_EQ(reserved[0], 2.0 * MiB);
  EXPECT_EQ(reserved[1], 22.0 * MiB);
  EXPECT_EQ(reserved.back(), 0.0) << "empty_cache reports the returned memory";
}

TEST_F(PoolProfilerTest, NoCounterEventsWhenTraceCountersIsOff) {
  PoolConfig config = testing::pool_config(PoolStrategy::kRound);
  config.trace_counters = false;
  PooledAllocator pool(cpu_allocator(), config);
  { DataPtr a = pool.allocate(1000); }
  Profiler::global().stop();
  for (const CounterSample& sample : counter_events()) {
    EXPECT_EQ(sample.name.find(pool.name()), std::string::npos) << sample.name;
  }
}

TEST_F(PoolProfilerTest, NoCounterEventsWhileTheProfilerIsStopped) {
  Profiler::global().stop();
  PoolConfig config = testing::pool_config(PoolStrategy::kExact);
  config.trace_counters = true;
  PooledAllocator pool(cpu_allocator(), config);
  { DataPtr a = pool.allocate(1000); }
  EXPECT_TRUE(counter_events().empty());
}

TEST_F(PoolProfilerTest, CountersFromManyThreadsAreAllRecorded) {
  PoolConfig config;
  config.strategy = PoolStrategy::kBestFit;
  config.trace_counters = true;
  PooledAllocator pool(cpu_allocator(), config);
  constexpr int kThreads = 4;
  const int iterations = testing::scaled(500, 100);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, iterations, t] {
      for (int i = 0; i < iterations; ++i) {
        DataPtr block = pool.allocate(static_cast<size_t>(512 * (1 + (i + t) % 16)));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  Profiler::global().stop();
  size_t in_use_samples = 0;
  for (const CounterSample& sample : counter_events()) {
    if (sample.name.find(pool.name()) == std::string::npos) continue;
    if (sample.name.find("in use") == std::string::npos) continue;
    ++in_use_samples;
    EXPECT_GE(sample.value, 0.0);
    EXPECT_LE(sample.value, kThreads * 8192.0);  // at most one block per thread at a time
  }
  EXPECT_EQ(in_use_samples, static_cast<size_t>(2 * kThreads * iterations));
}

}  // namespace
}  // namespace weft
