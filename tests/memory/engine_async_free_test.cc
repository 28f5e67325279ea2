// Freeing pooled memory through Engine::delete_var: the block goes back to the pool only after
// every operation pushed on the variable has completed (threaded engine), or at once (sync).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "engine/engine.h"
#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::KiB;
using testing::pool_config;
using namespace std::chrono_literals;

constexpr size_t kBytes = 256 * KiB;
constexpr uint32_t kSeed = 42;

EngineConfig engine_config(EngineKind kind) {
  EngineConfig config;
  config.kind = kind;
  config.cpu_workers = 2;
  return config;
}

TEST(EngineAsyncFreeTest, ThreadedDeleteVarReturnsTheBlockOnlyAfterItsReadersFinish) {
  auto pool =
      std::make_shared<PooledAllocator>(cpu_allocator(), pool_config(PoolStrategy::kBestFit));
  auto engine = Engine::create(engine_config(EngineKind::kThreaded));
  VarHandle var = engine->new_var();

  DataPtr block = pool->allocate(kBytes);
  void* const p = block.get();
  testing::fill_pattern(p, kBytes, kSeed);

  std::promise<void> started;
  std::future<void> started_future = started.get_future();
  std::promise<void> gate;
  std::shared_future<void> gate_open = gate.get_future().share();
  std::atomic<bool> intact{false};
  std::atomic<bool> gate_timed_out{false};
  // A slow reader: it holds its read until the test has tried to take the memory, then keeps
  // reading a while longer and checks that nobody wrote into the block meanwhile.
  engine->push(
      [&started, &intact, &gate_timed_out, gate_open, p](const RunContext&) {
        started.set_value();
        if (gate_open.wait_for(30s) != std::future_status::ready) gate_timed_out = true;
        std::this_thread::sleep_for(50ms);
        intact = testing::has_pattern(p, kBytes, kSeed);
      },
      Device::cpu(), {var}, {});
  EXPECT_EQ(started_future.wait_for(30s), std::future_status::ready);

  engine->delete_var(var, [b = std::move(block)](const RunContext&) mutable { b.reset(); });
  // The reader is still running: the pool must not hand its block out.
  DataPtr other = pool->allocate(kBytes);
  EXPECT_NE(other.get(), p);
  testing::fill_pattern(other.get(), kBytes, kSeed + 1);  // would corrupt the reader's block
  EXPECT_EQ(pool->stats().in_use_bytes, 2 * kBytes);
  gate.set_value();

  engine->wait_for_all();
  EXPECT_FALSE(gate_timed_out.load());
  EXPECT_TRUE(intact.load()) << "the block changed while an operation was reading it";
  EXPECT_EQ(pool->stats().in_use_bytes, kBytes) << "the deleted variable's block came back";
  EXPECT_EQ(pool->stats().frees, 1u);
  DataPtr again = pool->allocate(kBytes);
  EXPECT_EQ(again.get(), p);
  EXPECT_TRUE(testing::has_pattern(other.get(), kBytes, kSeed + 1));
}

TEST(EngineAsyncFreeTest, ThreadedDeleteVarWithoutPendingOperationsFreesPromptly) {
  auto pool = std::make_shared<PooledAllocator>(cpu_allocator(), pool_config(PoolStrategy::kExact));
  auto engine = Engine::create(engine_config(EngineKind::kThreaded));
  for (int i = 0; i < 50; ++i) {
    VarHandle var = engine->new_var();
    DataPtr block = pool->allocate(kBytes);
    engine->push([p = block.get()](const RunContext&) { testing::fill_pattern(p, kBytes, 1); },
                 Device::cpu(), {}, {var});
    engine->delete_var(var, [b = std::move(block)](const RunContext&) mutable { b.reset(); });
  }
  engine->wait_for_all();
  const PoolStats s = pool->stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.frees, 50u);
  EXPECT_EQ(s.allocations, 50u);
}

TEST(EngineAsyncFreeTest, SyncDeleteVarReturnsTheBlockAtOnce) {
  auto pool =
      std::make_shared<PooledAllocator>(cpu_allocator(), pool_config(PoolStrategy::kBestFit));
  auto engine = Engine::create(engine_config(EngineKind::kSync));
  VarHandle var = engine->new_var();
  DataPtr block = pool->allocate(kBytes);
  void* const p = block.get();
  testing::fill_pattern(p, kBytes, kSeed);
  bool intact = false;
  engine->push([&intact, p](const RunContext&) { intact = testing::has_pattern(p, kBytes, kSeed); },
               Device::cpu(), {var}, {});
  EXPECT_TRUE(intact) << "the sync engine runs the operation inside push";
  engine->delete_var(var, [b = std::move(block)](const RunContext&) mutable { b.reset(); });
  EXPECT_EQ(pool->stats().in_use_bytes, 0u);
  DataPtr again = pool->allocate(kBytes);
  EXPECT_EQ(again.get(), p);
  engine->wait_for_all();
}

}  // namespace
}  // namespace weft
