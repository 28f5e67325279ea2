// A PooledAllocator destroyed while blocks are still out (docs/LIFETIMES.md): the blocks stay
// valid, may be freed later from any thread, and every byte goes back to the upstream allocator
// once the last block of a segment is freed. The upstream's own counters are the reference.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::fill_pattern;
using testing::has_pattern;
using testing::KiB;
using testing::MiB;

class PoolLifetimeTest : public ::testing::TestWithParam<PoolStrategy> {};

struct Held {
  DataPtr block;
  size_t bytes;
  uint32_t seed;
};

// Sizes that share best-fit segments (small ones), take a segment each (large ones), and bypass
// the cache (over-aligned).
std::vector<Held> allocate_mix(PooledAllocator& pool) {
  std::vector<Held> held;
  const size_t sizes[] = {100, 512, 3000, 64 * KiB, 1 * MiB, 3 * MiB, 700, 12 * KiB, 100};
  uint32_t seed = 1;
  for (size_t bytes : sizes) {
    held.push_back({pool.allocate(bytes), bytes, seed});
    fill_pattern(held.back().block.get(), bytes, seed++);
  }
  held.push_back({pool.allocate(5000, 4096), 5000, seed});  // over-aligned: a direct block
  fill_pattern(held.back().block.get(), 5000, seed++);
  return held;
}

TEST_P(PoolLifetimeTest, BlocksOutliveThePoolAndReturnEveryByteWhenFreed) {
  auto upstream = std::make_shared<testing::BudgetAllocator>(size_t{1} << 30);
  std::vector<Held> held;
  {
    PooledAllocator pool(upstream, testing::pool_config(GetParam()));
    held = allocate_mix(pool);
    // Some blocks freed before the pool goes: they are cached, and the cache goes back upstream
    // with the pool (or with the segment they share with a block still out).
    held[1].block.reset();
    held[4].block.reset();
    held[7].block.reset();
  }
  ASSERT_GT(upstream->live_bytes(), 0u) << "blocks still out must keep their memory";
  for (const Held& h : held) {
    if (h.block) {
      EXPECT_TRUE(has_pattern(h.block.get(), h.bytes, h.seed)) << h.bytes << " bytes";
    }
  }
  // Free in an order that leaves segments partly used for a while.
  for (size_t i : {0, 8, 3, 9, 2, 6, 5}) {
    held[i].block.reset();
    for (const Held& h : held) {
      if (h.block) {
        EXPECT_TRUE(has_pattern(h.block.get(), h.bytes, h.seed)) << h.bytes << " bytes";
      }
    }
  }
  EXPECT_EQ(upstream->live_bytes(), 0u);
  EXPECT_EQ(upstream->frees(), upstream->calls());
}

TEST_P(PoolLifetimeTest, OrphanedBlocksKeepTheUpstreamAllocatorAlive) {
  auto upstream = std::make_shared<testing::BudgetAllocator>(size_t{1} << 30);
  std::weak_ptr<testing::BudgetAllocator> watch = upstream;
  DataPtr a, b;
  {
    PooledAllocator pool(std::move(upstream), testing::pool_config(GetParam()));
    a = pool.allocate(1000);
    b = pool.allocate(2 * MiB);
  }
  ASSERT_FALSE(watch.expired()) << "the upstream went away while its memory is still handed out";
  a.reset();
  EXPECT_FALSE(watch.expired());
  b.reset();  // the last block: the orphaned pool's remains are released, upstream included
  EXPECT_TRUE(watch.expired());
}

TEST_P(PoolLifetimeTest, OrphanedBlocksMayBeFreedFromManyThreadsAtOnce) {
  auto upstream = std::make_shared<testing::BudgetAllocator>(size_t{1} << 30);
  constexpr int kThreads = 4;
  const int per_thread = testing::scaled(200, 50);
  std::vector<std::vector<DataPtr>> blocks(kThreads);
  {
    PoolConfig config = testing::pool_config(GetParam());
    config.arenas = kThreads;  // allocating threads land on several shards
    PooledAllocator pool(upstream, config);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          blocks[t].push_back(pool.allocate(static_cast<size_t>(64 + 97 * ((i * 7 + t) % 50))));
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  // Each thread frees blocks allocated by every other thread (every shard at once).
  std::vector<std::thread> freers;
  for (int t = 0; t < kThreads; ++t) {
    freers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        for (int owner = 0; owner < kThreads; ++owner) {
          if ((i + owner) % kThreads == t) blocks[owner][i].reset();
        }
      }
    });
  }
  for (auto& thread : freers) thread.join();
  EXPECT_EQ(upstream->live_bytes(), 0u);
  EXPECT_EQ(upstream->frees(), upstream->calls());
}

TEST_P(PoolLifetimeTest, PoolWithNothingOutGivesEverythingBackAtOnce) {
  auto upstream = std::make_shared<testing::BudgetAllocator>(size_t{1} << 30);
  {
    PooledAllocator pool(upstream, testing::pool_config(GetParam()));
    std::vector<Held> held = allocate_mix(pool);
  }
  EXPECT_EQ(upstream->live_bytes(), 0u);
  EXPECT_EQ(upstream->frees(), upstream->calls());
}

INSTANTIATE_TEST_SUITE_P(Strategies, PoolLifetimeTest,
                         ::testing::Values(PoolStrategy::kExact, PoolStrategy::kRound,
                                           PoolStrategy::kBestFit),
                         testing::strategy_test_name);

// On a device with streams, a block freed after its pool is gone may still be in use by work
// queued on its stream: its segment goes back upstream only after that stream is synchronized.
TEST(PoolLifetimeStreamTest, OrphanedBlockWaitsForItsStreamBeforeItsSegmentIsReleased) {
  testing::FakeDeviceAPI api;
  auto upstream = std::make_shared<testing::BudgetAllocator>(size_t{1} << 30);
  const Stream stream = api.create_stream(Device::cpu());
  DataPtr block;
  {
    PoolConfig config = testing::pool_config(PoolStrategy::kBestFit);
    config.device_api = &api;
    PooledAllocator pool(upstream, config);
    block = pool.allocate_on(4 * KiB, stream);
    DataPtr other = pool.allocate_on(4 * KiB, stream);
    other.reset();  // an event is pending on the stream
  }
  EXPECT_EQ(api.pending_events(), 0) << "destroying the pool waits for its cached blocks' events";
  const int syncs_before = api.stream_synchronizations();
  block.reset();
  EXPECT_EQ(api.stream_synchronizations(), syncs_before + 1);
  EXPECT_EQ(upstream->live_bytes(), 0u);
}

}  // namespace
}  // namespace weft
