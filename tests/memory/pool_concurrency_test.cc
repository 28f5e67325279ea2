// PooledAllocator under concurrency: eight threads allocate, fill, check and free random sizes,
// also freeing each other's blocks, while another thread empties the cache and reads statistics.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "base/error.h"
#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::BudgetAllocator;
using testing::is_aligned;
using testing::KiB;
using testing::MiB;
using testing::scaled;

constexpr int kThreads = 8;

struct Item {
  DataPtr block;
  size_t bytes = 0;
  uint32_t seed = 0;
  int owner = -1;
};

// Random request sizes: mostly small, some medium, a few large (none under ThreadSanitizer).
size_t random_size(std::mt19937& rng) {
  const uint32_t r = rng() % 100;
  if (r < 60) return rng() % 4097;                  // 0 .. 4 KiB
  if (r < 90) return 4 * KiB + rng() % (60 * KiB);  // 4 .. 64 KiB
  if (testing::kUnderTsan) return 64 * KiB + rng() % (64 * KiB);
  if (r < 99) return 64 * KiB + rng() % (2 * MiB);  // 64 KiB .. 2 MiB
  return MiB + rng() % (2 * MiB);                   // 1 .. 3 MiB
}

// Counts of what the threads saw; checked after they join.
struct Findings {
  std::atomic<int> corrupted{0};
  std::atomic<int> misaligned{0};
  std::atomic<int> too_small{0};
  std::atomic<int> cross_thread_frees{0};
  std::atomic<int> out_of_memory{0};
  std::atomic<int> inconsistent_stats{0};
};

// Verifies an item's pattern, then frees it.
void check_and_free(Item& item, int freeing_thread, Findings& findings) {
  if (!testing::has_pattern(item.block.get(), item.bytes, item.seed)) findings.corrupted++;
  if (item.owner != freeing_thread) findings.cross_thread_frees++;
  item.block.reset();
}

// One thread's share of the hammer: random allocations and frees, some through `exchange`.
void hammer(PooledAllocator& pool, int thread, int iterations, std::mutex& exchange_mutex,
            std::vector<Item>& exchange, Findings& findings) {
  std::mt19937 rng(1234u + static_cast<uint32_t>(thread));
  std::vector<Item> live;
  for (int i = 0; i < iterations; ++i) {
    const uint32_t choice = rng() % 10;
    if (choice < 5 || live.empty()) {
      Item item;
      item.bytes = random_size(rng);
      item.seed = static_cast<uint32_t>(thread) << 24 | static_cast<uint32_t>(i);
      item.owner = thread;
      try {
        item.block = pool.allocate(item.bytes);
      } catch (const OutOfMemory&) {
        findings.out_of_memory++;
        continue;
      }
      if (!is_aligned(item.block.get(), kDefaultAlignment)) findings.misaligned++;
      if (item.block.size() < item.bytes) findings.too_small++;
      testing::fill_pattern(item.block.get(), item.bytes, item.seed);
      live.push_back(std::move(item));
    } else if (choice < 8) {
      const size_t k = rng() % live.size();
      check_and_free(live[k], thread, findings);
      live[k] = std::move(live.back());
      live.pop_back();
    } else {
      // Hand one of ours to the exchange and take someone's (maybe ours) back to free.
      Item taken;
      {
        std::lock_guard<std::mutex> lock(exchange_mutex);
        exchange.push_back(std::move(live.back()));
        if (exchange.size() > 4) {
          const size_t k = rng() % exchange.size();
          taken = std::move(exchange[k]);
          exchange[k] = std::move(exchange.back());
          exchange.pop_back();
        }
      }
      live.pop_back();
      if (taken.block) check_and_free(taken, thread, findings);
    }
    if (live.size() > 24) {
      check_and_free(live.front(), thread, findings);
      live.erase(live.begin());
    }
  }
  for (Item& item : live) check_and_free(item, thread, findings);
}

class PoolHammerTest : public ::testing::TestWithParam<PoolStrategy> {};

INSTANTIATE_TEST_SUITE_P(AllStrategies, PoolHammerTest,
                         ::testing::Values(PoolStrategy::kExact, PoolStrategy::kRound,
                                           PoolStrategy::kBestFit),
                         testing::strategy_test_name);

TEST_P(PoolHammerTest, EightThreadsNeverGetOverlappingBlocksAndLeakNothing) {
  PoolConfig config;
  config.strategy = GetParam();
  config.trace_counters = false;  // arenas: the default (several, shared by the threads)
  auto upstream = std::make_shared<BudgetAllocator>(size_t{1} << 40);
  PooledAllocator pool(upstream, config);
  const int iterations = scaled(3000, 300);

  std::mutex exchange_mutex;
  std::vector<Item> exchange;
  Findings findings;
  // After its random phase each thread leaves blocks in its slot and frees its neighbour's,
  // so some frees are always on another thread than the allocation.
  std::vector<std::vector<Item>> slots(kThreads);
  std::barrier sync(kThreads);
  std::atomic<bool> done{false};

  std::thread observer([&] {
    // Cache release, statistics and peak resets race with the allocations.
    while (!done.load()) {
      pool.empty_cache();
      const PoolStats s = pool.stats();
      if (s.allocations < s.frees || s.hits + s.misses != s.allocations)
        findings.inconsistent_stats++;
      pool.reset_peak();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      hammer(pool, t, iterations, exchange_mutex, exchange, findings);
      for (uint32_t k = 0; k < 8; ++k) {
        Item item;
        item.bytes = 1000 + 512 * k;
        item.seed = 0xF0000000u | static_cast<uint32_t>(t) << 8 | k;
        item.owner = t;
        item.block = pool.allocate(item.bytes);
        testing::fill_pattern(item.block.get(), item.bytes, item.seed);
        slots[t].push_back(std::move(item));
      }
      sync.arrive_and_wait();
      for (Item& item : slots[(t + 1) % kThreads]) check_and_free(item, t, findings);
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  observer.join();
  for (Item& item : exchange) check_and_free(item, -1, findings);
  exchange.clear();

  EXPECT_EQ(findings.corrupted.load(), 0) << "a block was overwritten while in use";
  EXPECT_EQ(findings.misaligned.load(), 0);
  EXPECT_EQ(findings.too_small.load(), 0);
  EXPECT_EQ(findings.out_of_memory.load(), 0);
  EXPECT_EQ(findings.inconsistent_stats.load(), 0);
  EXPECT_GE(findings.cross_thread_frees.load(), kThreads * 8);

  const PoolStats s = pool.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.requested_bytes, 0u);
  EXPECT_EQ(s.allocations, s.frees);
  EXPECT_EQ(s.hits + s.misses, s.allocations);
  EXPECT_EQ(s.reserved_bytes, s.cached_bytes);
  EXPECT_EQ(upstream->live_bytes(), s.reserved_bytes);
  pool.empty_cache();  // every segment merged back whole: all of it goes back
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(upstream->live_bytes(), 0u);
}

TEST(PoolHammerTest, ConcurrentOutOfMemoryRecoveryLeaksNothing) {
  // Eight threads on four arenas want far more than the 48 MiB budget (each arena needs its own
  // 20 MiB segment for requests over 1 MiB): they hit OutOfMemory, release each other's caches
  // and retry, concurrently.
  auto upstream = std::make_shared<BudgetAllocator>(48 * MiB);
  PoolConfig config;
  config.strategy = PoolStrategy::kBestFit;
  config.trace_counters = false;
  config.arenas = 4;
  config.large_buffer_segments = true;
  PooledAllocator pool(upstream, config);
  const int iterations = scaled(400, 60);
  Findings findings;
  std::vector<std::thread> threads;
  // All threads start together: a thread that ran its iterations alone, before the others were
  // scheduled, would never see the budget run out (seen on a 2-core machine).
  std::latch start(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(99u + static_cast<uint32_t>(t));
      std::vector<Item> live;
      start.arrive_and_wait();
      for (int i = 0; i < iterations; ++i) {
        Item item;
        item.bytes = rng() % 2 == 0 ? 1 + rng() % (256 * KiB) : MiB + rng() % (2 * MiB);
        item.seed = static_cast<uint32_t>(t) << 24 | static_cast<uint32_t>(i);
        item.owner = t;
        try {
          item.block = pool.allocate(item.bytes);
        } catch (const OutOfMemory&) {
          findings.out_of_memory++;
          if (!live.empty()) {
            check_and_free(live.front(), t, findings);
            live.erase(live.begin());
          }
          continue;
        }
        const size_t check = std::min<size_t>(item.bytes, 4 * KiB);  // the first bytes suffice
        item.bytes = check;
        testing::fill_pattern(item.block.get(), check, item.seed);
        live.push_back(std::move(item));
        if (live.size() > 4) {
          check_and_free(live.front(), t, findings);
          live.erase(live.begin());
        }
      }
      for (Item& item : live) check_and_free(item, t, findings);
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(findings.corrupted.load(), 0);
  // The budget runs out: some allocation released the caches and retried. Whether a retry then
  // still failed (an OutOfMemory the thread saw) depends on the interleaving, so it is counted
  // but not required.
  const PoolStats s = pool.stats();
  EXPECT_GT(s.oom_recoveries, 0u) << "the budget was meant to run out ("
                                  << findings.out_of_memory.load() << " allocations failed)";
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.allocations, s.frees);
  EXPECT_EQ(upstream->live_bytes(), s.reserved_bytes);
  pool.empty_cache();
  EXPECT_EQ(upstream->live_bytes(), 0u);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
}

}  // namespace
}  // namespace weft
