// The best-fit strategy: the smallest fitting free block is taken, the rest is split off, and
// freed neighbours merge again so whole segments can be reused and returned.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::address;
using testing::BudgetAllocator;
using testing::KiB;
using testing::MiB;
using testing::pool_config;

TEST(BestFitTest, TakesTheSmallestFittingFreeBlockAndSplitsTheRest) {
  auto upstream = std::make_shared<BudgetAllocator>(64 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));

  // Carve one 2 MiB segment into blocks separated by 512-byte guards that stay allocated, so the
  // freed blocks cannot merge: [A 4 KiB][g][B 16 KiB][g][C 8 KiB][g][D 9.5 KiB][g][E 9 KiB][g]
  // [F 8.5 KiB][g][rest].
  const std::vector<size_t> sizes = {4096, 16384, 8192, 9728, 9216, 8704};
  std::vector<DataPtr> blocks;
  std::vector<DataPtr> guards;
  std::vector<uintptr_t> offsets;
  uintptr_t base = 0;
  size_t offset = 0;
  for (size_t size : sizes) {
    blocks.push_back(pool.allocate(size));
    if (base == 0) base = address(blocks.back().get());
    EXPECT_EQ(address(blocks.back().get()), base + offset) << "block of " << size;
    offsets.push_back(offset);
    offset += size;
    guards.push_back(pool.allocate(1));
    EXPECT_EQ(address(guards.back().get()), base + offset);
    offset += 512;
  }
  const uintptr_t rest = base + offset;
  ASSERT_EQ(upstream->calls(), 1u) << "all blocks should come from one 2 MiB segment";

  // Free E before D so that D is first in any list of equal-class blocks.
  for (int i : {4, 3, 5, 2, 0, 1}) blocks[i].reset();
  const uintptr_t a = base + offsets[0], b = base + offsets[1], c = base + offsets[2];
  const uintptr_t d = base + offsets[3], e = base + offsets[4], f = base + offsets[5];
  static_cast<void>(d);

  // 6 KiB: C (8 KiB) is the smallest that fits; 2 KiB stay free right after it.
  DataPtr r1 = pool.allocate(6000);
  EXPECT_EQ(address(r1.get()), c);
  EXPECT_EQ(r1.size(), 6144u);
  // 8.5 KiB: F exactly.
  DataPtr r2 = pool.allocate(8300);
  EXPECT_EQ(address(r2.get()), f);
  // 9 KiB: E (9 KiB), not D (9.5 KiB).
  DataPtr r3 = pool.allocate(8800);
  EXPECT_EQ(address(r3.get()), e);
  // 1.5 KiB: the 2 KiB split off C.
  DataPtr r4 = pool.allocate(1500);
  EXPECT_EQ(address(r4.get()), c + 6144);
  // 3 KiB: A (4 KiB).
  DataPtr r5 = pool.allocate(3000);
  EXPECT_EQ(address(r5.get()), a);
  // 12 KiB: D (9.5 KiB) is too small; B (16 KiB).
  DataPtr r6 = pool.allocate(12000);
  EXPECT_EQ(address(r6.get()), b);
  // 1 KiB: the 1 KiB split off A (A's 4 KiB served 3 KiB).
  DataPtr r7 = pool.allocate(1000);
  EXPECT_EQ(address(r7.get()), a + 3072);
  // 100 KB: nothing but the rest of the segment fits.
  DataPtr r8 = pool.allocate(100000);
  EXPECT_EQ(address(r8.get()), rest);
  EXPECT_EQ(upstream->calls(), 1u);
  EXPECT_EQ(pool.stats().hits, pool.stats().allocations - 1);

  // Freeing everything merges the segment back into one block, which empty_cache returns.
  for (DataPtr* p : {&r1, &r2, &r3, &r4, &r5, &r6, &r7, &r8}) p->reset();
  guards.clear();
  blocks.clear();
  const PoolStats before = pool.stats();
  EXPECT_EQ(before.in_use_bytes, 0u);
  EXPECT_EQ(before.cached_bytes, 2 * MiB);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(pool.stats().upstream_frees, 1u);
  EXPECT_EQ(upstream->live_bytes(), 0u);
}

TEST(BestFitTest, FreedNeighboursMergeSoTheWholeLargeSegmentIsReused) {
  auto upstream = std::make_shared<BudgetAllocator>(64 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));
  // One 20 MiB segment: [x 3 MiB][y 4 MiB][z 2 MiB][w 5 MiB][rest 6 MiB].
  DataPtr x = pool.allocate(3 * MiB);
  DataPtr y = pool.allocate(4 * MiB);
  DataPtr z = pool.allocate(2 * MiB);
  DataPtr w = pool.allocate(5 * MiB);
  const uintptr_t l = address(x.get());
  EXPECT_EQ(address(y.get()), l + 3 * MiB);
  EXPECT_EQ(address(z.get()), l + 7 * MiB);
  EXPECT_EQ(address(w.get()), l + 9 * MiB);
  ASSERT_EQ(upstream->calls(), 1u);
  EXPECT_EQ(upstream->requests()[0], 20 * MiB);

  // Free in an order that needs merges on both sides.
  y.reset();
  w.reset();
  x.reset();
  z.reset();
  EXPECT_EQ(pool.stats().cached_bytes, 20 * MiB);

  DataPtr whole = pool.allocate(20 * MiB);
  EXPECT_EQ(address(whole.get()), l);
  EXPECT_EQ(whole.size(), 20 * MiB);
  EXPECT_EQ(upstream->calls(), 1u);  // no new upstream allocation
  EXPECT_EQ(pool.stats().upstream_allocations, 1u);
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
}

TEST(BestFitTest, SmallAndLargeRequestsUseSeparateSegments) {
  auto upstream = std::make_shared<BudgetAllocator>(64 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));
  DataPtr small = pool.allocate(MiB);         // the largest small request: a 2 MiB segment
  DataPtr large = pool.allocate(MiB + 1);     // the smallest large one: a 20 MiB segment
  DataPtr small2 = pool.allocate(512 * KiB);  // fits the small segment's free 1 MiB
  EXPECT_EQ(upstream->requests(), (std::vector<size_t>{2 * MiB, 20 * MiB}));
  EXPECT_EQ(address(small2.get()), address(small.get()) + MiB);
  // A free large block never serves a small request and vice versa.
  large.reset();
  DataPtr small3 = pool.allocate(768 * KiB);  // S has 512 KiB left: a new small segment
  EXPECT_EQ(upstream->requests().size(), 3u);
  EXPECT_EQ(upstream->requests().back(), 2 * MiB);
  EXPECT_EQ(pool.stats().cached_bytes, 20 * MiB + 512 * KiB + (2 * MiB - 768 * KiB));
}

TEST(BestFitTest, EmptyCacheKeepsSegmentsWithBlocksInUse) {
  auto upstream = std::make_shared<BudgetAllocator>(64 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));
  DataPtr kept = pool.allocate(4 * KiB);
  DataPtr freed = pool.allocate(4 * KiB);
  freed.reset();
  pool.empty_cache();
  EXPECT_EQ(pool.stats().upstream_frees, 0u);
  EXPECT_EQ(pool.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(upstream->live_bytes(), 2 * MiB);
  // The kept block is intact and still usable.
  testing::fill_pattern(kept.get(), kept.size(), 7);
  EXPECT_TRUE(testing::has_pattern(kept.get(), kept.size(), 7));
  kept.reset();
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(upstream->live_bytes(), 0u);
}

}  // namespace
}  // namespace weft

// ---- the default segment policy and release-on-miss -------------------------------------------

namespace weft {
namespace {

using testing::BudgetAllocator;
using testing::KiB;
using testing::MiB;
using testing::pool_config;

TEST(BestFitSegmentPolicyTest, LargeSegmentIsTheRequestRoundedToTwoMiBByDefault) {
  auto upstream = std::make_shared<BudgetAllocator>(size_t{1} << 40);
  PoolConfig config = pool_config(PoolStrategy::kBestFit);
  config.large_buffer_segments = false;  // the default
  PooledAllocator pool(upstream, config);
  DataPtr a = pool.allocate(3 * MiB + 1);  // 1 MiB < request < 10 MiB: 4 MiB, not 20 MiB
  DataPtr b = pool.allocate(12 * MiB);     // already a multiple of 2 MiB
  DataPtr c = pool.allocate(512 * KiB);    // small pool: a 2 MiB segment
  EXPECT_EQ(upstream->requests(), (std::vector<size_t>{4 * MiB, 12 * MiB, 2 * MiB}));
  EXPECT_EQ(pool.stats().reserved_bytes, 18 * MiB);
  EXPECT_EQ(PoolConfig{}.large_buffer_segments, false);
}

TEST(BestFitSegmentPolicyTest, ReleaseOnMissReturnsWholeFreeSegmentsBeforeGrowing) {
  // Activations that grow: a freed 4 MiB segment cannot hold the next 8 MiB request. Without
  // release_on_miss it stays cached (reserved 12 MiB for 8 MiB live); with it, it goes back.
  for (bool release : {false, true}) {
    auto upstream = std::make_shared<BudgetAllocator>(size_t{1} << 40);
    PoolConfig config = pool_config(PoolStrategy::kBestFit);
    config.large_buffer_segments = false;
    config.release_on_miss = release;
    PooledAllocator pool(upstream, config);
    pool.allocate(4 * MiB).reset();
    DataPtr big = pool.allocate(8 * MiB);
    PoolStats s = pool.stats();
    EXPECT_EQ(s.in_use_bytes, 8 * MiB);
    EXPECT_EQ(s.reserved_bytes, release ? 8 * MiB : 12 * MiB) << "release_on_miss=" << release;
    EXPECT_EQ(s.upstream_frees, release ? 1u : 0u);
    EXPECT_EQ(upstream->live_bytes(), s.reserved_bytes);
  }
}

}  // namespace
}  // namespace weft
