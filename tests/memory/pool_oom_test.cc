// PooledAllocator out of memory: with a failing upstream or over its limit the pool releases its
// cache, retries once, and otherwise throws OutOfMemory naming the size and its state, leaking
// nothing.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <new>
#include <string>

#include "base/error.h"
#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::BudgetAllocator;
using testing::KiB;
using testing::MiB;
using testing::pool_config;

// Expects `fn` to throw OutOfMemory whose message names `bytes` and the pool's state.
template <typename Fn>
void expect_pool_oom(Fn&& fn, size_t bytes, const PooledAllocator& pool) {
  try {
    fn();
    ADD_FAILURE() << "allocating " << bytes << " bytes did not throw OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(bytes) + " bytes"), std::string::npos) << what;
    EXPECT_NE(what.find(pool.name()), std::string::npos) << what;
    EXPECT_NE(what.find("reserved"), std::string::npos) << what;
    EXPECT_NE(what.find("in use"), std::string::npos) << what;
    EXPECT_NE(what.find("cached"), std::string::npos) << what;
  }
}

// The shared script: a 4 MiB block cached, 3 MiB in use, then a 5 MiB request that only fits
// once the cache is released, then a 1 MiB request that never fits. Budget or limit: 8 MiB.
void run_release_and_retry_script(PooledAllocator& pool, BudgetAllocator& upstream) {
  DataPtr a = pool.allocate(4 * MiB);
  a.reset();                           // 4 MiB cached
  DataPtr b = pool.allocate(3 * MiB);  // another size: not served by the cache
  EXPECT_EQ(upstream.live_bytes(), 7 * MiB);
  EXPECT_EQ(pool.stats().oom_recoveries, 0u);

  // 7 + 5 > 8: the cache goes back upstream, and 3 + 5 fits.
  DataPtr c = pool.allocate(5 * MiB);
  ASSERT_TRUE(c);
  PoolStats s = pool.stats();
  EXPECT_EQ(s.oom_recoveries, 1u);
  EXPECT_EQ(s.upstream_frees, 1u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 8 * MiB);
  EXPECT_EQ(s.in_use_bytes, 8 * MiB);
  EXPECT_EQ(upstream.live_bytes(), 8 * MiB);
  testing::fill_pattern(c.get(), 5 * MiB, 3);  // the memory is really there

  // Nothing left to release: one more recovery, then OutOfMemory.
  const uint64_t allocations = s.allocations;
  expect_pool_oom([&] { DataPtr d = pool.allocate(MiB); }, MiB, pool);
  s = pool.stats();
  EXPECT_EQ(s.oom_recoveries, 2u);
  EXPECT_EQ(s.allocations, allocations);
  EXPECT_EQ(s.reserved_bytes, 8 * MiB);
  EXPECT_EQ(upstream.live_bytes(), s.reserved_bytes);  // nothing leaked by the failure
  EXPECT_TRUE(testing::has_pattern(c.get(), 5 * MiB, 3));

  // The pool stays usable: freeing makes room again.
  b.reset();
  DataPtr e = pool.allocate(MiB);
  ASSERT_TRUE(e);
  EXPECT_EQ(upstream.live_bytes(), pool.stats().reserved_bytes);

  c.reset();
  e.reset();
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(upstream.live_bytes(), 0u);
  EXPECT_EQ(upstream.frees(), upstream.calls());
}

TEST(PoolOutOfMemoryTest, FailingUpstreamReleasesTheCacheRetriesOnceThenThrows) {
  auto upstream = std::make_shared<BudgetAllocator>(8 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kExact));
  run_release_and_retry_script(pool, *upstream);
  EXPECT_GT(upstream->failures(), 0u);
}

TEST(PoolOutOfMemoryTest, LimitBytesReleasesTheCacheRetriesOnceThenThrows) {
  auto upstream = std::make_shared<BudgetAllocator>(std::numeric_limits<size_t>::max() / 4);
  PoolConfig config = pool_config(PoolStrategy::kExact);
  config.limit_bytes = 8 * MiB;
  PooledAllocator pool(upstream, config);
  EXPECT_EQ(pool.limit(), 8 * MiB);
  run_release_and_retry_script(pool, *upstream);
  EXPECT_EQ(upstream->failures(), 0u);  // the pool never asked for more than its limit
  EXPECT_LE(pool.stats().peak_reserved_bytes, 8 * MiB);
}

TEST(PoolOutOfMemoryTest, RoundPoolReleasesTheCacheOfAnotherSizeClass) {
  auto upstream = std::make_shared<BudgetAllocator>(8 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kRound));
  { DataPtr cached = pool.allocate(6 * MiB); }  // an 8 MiB block, cached
  DataPtr small = pool.allocate(100);           // 512 B: over the budget until the cache goes
  ASSERT_TRUE(small);
  EXPECT_EQ(pool.stats().oom_recoveries, 1u);
  EXPECT_EQ(upstream->live_bytes(), 512u);
}

TEST(PoolOutOfMemoryTest, BestFitRequestFitsAfterReleasingAFreeSegmentOfTheOtherPool) {
  // A free 20 MiB large segment is cached; a small request needs a new 2 MiB segment, which
  // fits the 21 MiB budget only once the large segment is returned.
  auto upstream = std::make_shared<BudgetAllocator>(21 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));
  { DataPtr large = pool.allocate(3 * MiB); }
  EXPECT_EQ(pool.stats().cached_bytes, 20 * MiB);
  DataPtr small = pool.allocate(4 * KiB);
  ASSERT_TRUE(small);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.oom_recoveries, 1u);
  EXPECT_EQ(s.upstream_frees, 1u);
  EXPECT_EQ(s.reserved_bytes, 2 * MiB);
  EXPECT_EQ(upstream->live_bytes(), 2 * MiB);
}

TEST(PoolOutOfMemoryTest, BestFitThrowsNamingTheSizeAndLeaksNothing) {
  auto upstream = std::make_shared<BudgetAllocator>(24 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));
  DataPtr a = pool.allocate(3 * MiB);  // 20 MiB segment
  DataPtr b = pool.allocate(4 * KiB);  // 2 MiB segment
  // Larger than the 17 MiB left in the 20 MiB segment: needs a new 20 MiB one, 22 + 20 > 24.
  const size_t huge = 18 * MiB + 3;
  expect_pool_oom([&] { DataPtr c = pool.allocate(huge); }, huge, pool);
  EXPECT_EQ(pool.stats().oom_recoveries, 1u);
  EXPECT_EQ(upstream->live_bytes(), pool.stats().reserved_bytes);
  EXPECT_EQ(pool.stats().reserved_bytes, 22 * MiB);
  // A request that fits the free part of the 20 MiB segment still succeeds.
  DataPtr d = pool.allocate(10 * MiB);
  EXPECT_EQ(upstream->calls(), 2u);
  a.reset();
  b.reset();
  d.reset();
  pool.empty_cache();
  EXPECT_EQ(upstream->live_bytes(), 0u);
}

TEST(PoolOutOfMemoryTest, RequestLargerThanTheLimitThrowsEvenWithAnEmptyPool) {
  PoolConfig config = pool_config(PoolStrategy::kBestFit);
  config.limit_bytes = 4 * MiB;
  PooledAllocator pool(cpu_allocator(), config);
  expect_pool_oom([&] { DataPtr big = pool.allocate(5 * MiB); }, 5 * MiB, pool);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(pool.stats().allocations, 0u);
  try {
    DataPtr big = pool.allocate(5 * MiB);
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("4.00 MiB limit"), std::string::npos) << e.what();
  }
}

TEST(PoolOutOfMemoryTest, UnrepresentableSizeThrowsOutOfMemory) {
  PooledAllocator pool(cpu_allocator(), pool_config(PoolStrategy::kBestFit));
  EXPECT_THROW(pool.allocate(std::numeric_limits<size_t>::max() - 10), OutOfMemory);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(pool.stats().allocations, 0u);
}

TEST(PoolOutOfMemoryTest, OverAlignedRequestOverTheLimitThrowsNamingTheSize) {
  PoolConfig config = pool_config(PoolStrategy::kBestFit);
  config.limit_bytes = 4 * MiB;
  PooledAllocator pool(cpu_allocator(), config);
  expect_pool_oom([&] { DataPtr big = pool.allocate(5 * MiB, 4096); }, 5 * MiB, pool);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
}

// Known bug, disabled until fixed (run with --gtest_also_run_disabled_tests): an over-aligned
// request (alignment > 512) bypasses the cache and throws at once when over the limit or when
// the upstream fails; it neither releases the cache nor retries, contrary to the class contract
// ("On upstream failure or when over the limit it releases the cache and retries once").
TEST(PoolOutOfMemoryTest, OverAlignedRequestReleasesTheCacheWhenOverTheLimit) {
  PoolConfig config = pool_config(PoolStrategy::kExact);
  config.limit_bytes = 8 * MiB;
  PooledAllocator pool(cpu_allocator(), config);
  { DataPtr cached = pool.allocate(6 * MiB); }     // 6 MiB cached
  DataPtr aligned = pool.allocate(4 * MiB, 4096);  // fits once the cache is released
  EXPECT_TRUE(aligned);
  EXPECT_EQ(pool.stats().oom_recoveries, 1u);
}

// Known bug, disabled until fixed: an over-aligned request whose upstream allocation fails
// rethrows the upstream's error, which names neither the pool nor its state (and the cache is
// not released first).
TEST(PoolOutOfMemoryTest, OverAlignedRequestWithAFailingUpstreamNamesThePoolState) {
  auto upstream = std::make_shared<BudgetAllocator>(4 * MiB);
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));
  expect_pool_oom([&] { DataPtr big = pool.allocate(5 * MiB, 4096); }, 5 * MiB, pool);
}

// An upstream that throws something other than OutOfMemory (here std::bad_alloc).
class ThrowingAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t, size_t) override { throw std::bad_alloc(); }
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "throwing"; }
};

// Known bug, disabled until fixed: when the upstream throws anything but OutOfMemory the error
// propagates (fine) but the bytes reserved for the segment are never given back, so
// reserved_bytes stays inflated for good and, with a limit, the pool eventually refuses every
// request.
TEST(PoolOutOfMemoryTest, UpstreamErrorOtherThanOutOfMemoryLeavesNothingReserved) {
  PooledAllocator pool(std::make_shared<ThrowingAllocator>(), pool_config(PoolStrategy::kBestFit));
  EXPECT_THROW(pool.allocate(1000), std::bad_alloc);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
}

}  // namespace
}  // namespace weft
