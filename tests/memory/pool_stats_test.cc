// PooledAllocator statistics: exact counts after scripted allocation sequences (one thread, one
// arena), with every expected value worked out by hand from the documented strategy rules.
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
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

/// What the statistics should read; updated by hand after each step of a script.
struct Expected {
  size_t in_use = 0;
  size_t requested = 0;
  size_t cached = 0;
  size_t reserved = 0;
  size_t peak_in_use = 0;
  uint64_t allocations = 0;
  uint64_t frees = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t upstream_allocations = 0;
  uint64_t upstream_frees = 0;
};

void expect_stats(const PooledAllocator& pool, const BudgetAllocator& upstream, const Expected& e,
                  int line) {
  SCOPED_TRACE("script step at line " + std::to_string(line));
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.in_use_bytes, e.in_use);
  EXPECT_EQ(s.requested_bytes, e.requested);
  EXPECT_EQ(s.cached_bytes, e.cached);
  EXPECT_EQ(s.reserved_bytes, e.reserved);
  EXPECT_EQ(s.peak_in_use_bytes, e.peak_in_use);
  EXPECT_EQ(s.allocations, e.allocations);
  EXPECT_EQ(s.frees, e.frees);
  EXPECT_EQ(s.hits, e.hits);
  EXPECT_EQ(s.misses, e.misses);
  EXPECT_EQ(s.upstream_allocations, e.upstream_allocations);
  EXPECT_EQ(s.upstream_frees, e.upstream_frees);
  EXPECT_EQ(s.oom_recoveries, 0u);
  // Cross-checks against the upstream's own accounting.
  EXPECT_EQ(upstream.live_bytes(), e.reserved);
  EXPECT_EQ(upstream.calls(), e.upstream_allocations);
  EXPECT_EQ(upstream.frees(), e.upstream_frees);
}
#define EXPECT_POOL_STATS(e) expect_stats(pool, *upstream, e, __LINE__)

std::shared_ptr<BudgetAllocator> unlimited_upstream() {
  return std::make_shared<BudgetAllocator>(std::numeric_limits<size_t>::max() / 4);
}

TEST(PoolStatsTest, RoundStatisticsAreExactAfterAScript) {
  auto upstream = unlimited_upstream();
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kRound));
  Expected e;
  EXPECT_POOL_STATS(e);

  DataPtr a = pool.allocate(1000);  // 1024-byte block, new
  EXPECT_EQ(a.size(), 1024u);
  e.in_use = 1024, e.requested = 1000, e.reserved = 1024, e.peak_in_use = 1024;
  e.allocations = 1, e.misses = 1, e.upstream_allocations = 1;
  EXPECT_POOL_STATS(e);

  DataPtr b = pool.allocate(3000);  // 4096, new
  EXPECT_EQ(b.size(), 4096u);
  e.in_use = 5120, e.requested = 4000, e.reserved = 5120, e.peak_in_use = 5120;
  e.allocations = 2, e.misses = 2, e.upstream_allocations = 2;
  EXPECT_POOL_STATS(e);

  void* const pa = a.get();
  void* const pb = b.get();
  a.reset();
  e.in_use = 4096, e.requested = 3000, e.cached = 1024, e.frees = 1;
  EXPECT_POOL_STATS(e);

  DataPtr c = pool.allocate(600);  // 1024: a's block
  EXPECT_EQ(c.get(), pa);
  e.in_use = 5120, e.requested = 3600, e.cached = 0, e.allocations = 3, e.hits = 1;
  EXPECT_POOL_STATS(e);

  DataPtr d = pool.allocate(100);  // 512, new
  EXPECT_EQ(d.size(), 512u);
  e.in_use = 5632, e.requested = 3700, e.reserved = 5632, e.peak_in_use = 5632;
  e.allocations = 4, e.misses = 3, e.upstream_allocations = 3;
  EXPECT_POOL_STATS(e);

  b.reset();
  c.reset();
  e.in_use = 512, e.requested = 100, e.cached = 5120, e.frees = 3;
  EXPECT_POOL_STATS(e);

  DataPtr f = pool.allocate(2048);  // 2048: neither cached block (1024, 4096) serves it
  EXPECT_NE(f.get(), pa);
  EXPECT_NE(f.get(), pb);
  e.in_use = 2560, e.requested = 2148, e.reserved = 7680;
  e.allocations = 5, e.misses = 4, e.upstream_allocations = 4;
  EXPECT_POOL_STATS(e);
  EXPECT_EQ(pool.stats().peak_reserved_bytes, 7680u);

  pool.empty_cache();  // returns the cached 1024- and 4096-byte blocks
  e.cached = 0, e.reserved = 2560, e.upstream_frees = 2;
  EXPECT_POOL_STATS(e);

  pool.reset_peak();
  e.peak_in_use = 2560;
  EXPECT_POOL_STATS(e);
  EXPECT_EQ(pool.stats().peak_reserved_bytes, 2560u);

  DataPtr g = pool.allocate(513);  // 1024, new (the cache is empty)
  e.in_use = 3584, e.requested = 2661, e.reserved = 3584, e.peak_in_use = 3584;
  e.allocations = 6, e.misses = 5, e.upstream_allocations = 5;
  EXPECT_POOL_STATS(e);

  d.reset();
  f.reset();
  g.reset();
  e.in_use = 0, e.requested = 0, e.cached = 3584, e.frees = 6;
  EXPECT_POOL_STATS(e);

  pool.empty_cache();
  e.cached = 0, e.reserved = 0, e.upstream_frees = 5;
  EXPECT_POOL_STATS(e);
  EXPECT_EQ(upstream->requests(), (std::vector<size_t>{1024, 4096, 512, 2048, 1024}));
}

TEST(PoolStatsTest, ExactStatisticsAreExactAndOtherSizesAreNotServedFromTheCache) {
  auto upstream = unlimited_upstream();
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kExact));
  Expected e;

  DataPtr a = pool.allocate(100);  // 512
  DataPtr b = pool.allocate(600);  // 1024
  void* const pa = a.get();
  a.reset();
  DataPtr c = pool.allocate(1000);  // 1024: the cached 512-byte block does not serve it
  EXPECT_NE(c.get(), pa);
  DataPtr d = pool.allocate(512);  // 512: a's block
  EXPECT_EQ(d.get(), pa);
  e.in_use = 512 + 1024 + 1024, e.requested = 600 + 1000 + 512, e.reserved = 2560;
  e.peak_in_use = 2560, e.allocations = 4, e.frees = 1, e.hits = 1, e.misses = 3;
  e.upstream_allocations = 3;
  EXPECT_POOL_STATS(e);

  b.reset();
  c.reset();
  d.reset();
  pool.empty_cache();
  e.in_use = 0, e.requested = 0, e.reserved = 0, e.frees = 4, e.upstream_frees = 3;
  EXPECT_POOL_STATS(e);
}

// Best fit: requests up to 1 MiB (after rounding to 512) come from 2 MiB segments, requests in
// (1 MiB, 10 MiB) from 20 MiB segments, larger ones from the request rounded up to 2 MiB. A free
// block is split when the rest is >= 512 B (small pool) or > 1 MiB (large pool).
TEST(PoolStatsTest, BestFitStatisticsAreExactAfterAScript) {
  auto upstream = unlimited_upstream();
  PooledAllocator pool(upstream, pool_config(PoolStrategy::kBestFit));
  Expected e;

  DataPtr a = pool.allocate(1000);  // 1024 B from a new 2 MiB segment S
  const uintptr_t s = address(a.get());
  EXPECT_EQ(a.size(), 1024u);
  e.in_use = 1024, e.requested = 1000, e.cached = 2 * MiB - 1024, e.reserved = 2 * MiB;
  e.peak_in_use = 1024, e.allocations = 1, e.misses = 1, e.upstream_allocations = 1;
  EXPECT_POOL_STATS(e);

  DataPtr b = pool.allocate(5000);  // 5120 B from the rest of S
  EXPECT_EQ(address(b.get()), s + 1024);
  EXPECT_EQ(b.size(), 5120u);
  e.in_use = 6144, e.requested = 6000, e.cached = 2 * MiB - 6144, e.peak_in_use = 6144;
  e.allocations = 2, e.hits = 1;
  EXPECT_POOL_STATS(e);

  DataPtr c = pool.allocate(3 * MiB);  // a new 20 MiB segment L; 17 MiB stay free
  const uintptr_t l = address(c.get());
  EXPECT_EQ(c.size(), 3 * MiB);
  e.in_use = 6144 + 3 * MiB, e.requested = 6000 + 3 * MiB;
  e.cached = (2 * MiB - 6144) + 17 * MiB, e.reserved = 22 * MiB, e.peak_in_use = e.in_use;
  e.allocations = 3, e.misses = 2, e.upstream_allocations = 2;
  EXPECT_POOL_STATS(e);

  DataPtr d = pool.allocate(12 * MiB + 1);  // 12 MiB + 512 from L's free 17 MiB
  EXPECT_EQ(address(d.get()), l + 3 * MiB);
  EXPECT_EQ(d.size(), 12 * MiB + 512);
  e.in_use = 6144 + 15 * MiB + 512, e.requested = 6000 + 15 * MiB + 1;
  e.cached = (2 * MiB - 6144) + (5 * MiB - 512), e.peak_in_use = e.in_use;
  e.allocations = 4, e.hits = 2;
  EXPECT_POOL_STATS(e);

  // 15 MiB: L's rest (5 MiB - 512) is too small; a new 16 MiB segment whose 1 MiB rest is not
  // worth splitting off, so the block is the whole segment.
  DataPtr f = pool.allocate(15 * MiB);
  EXPECT_EQ(f.size(), 16 * MiB);
  e.in_use = 6144 + 31 * MiB + 512, e.requested = 6000 + 30 * MiB + 1, e.reserved = 38 * MiB;
  e.peak_in_use = e.in_use, e.allocations = 5, e.misses = 3, e.upstream_allocations = 3;
  EXPECT_POOL_STATS(e);
  const size_t peak_before_reset = e.peak_in_use;

  a.reset();  // S: [a free][b][rest free]: no merge across b
  e.in_use -= 1024, e.requested -= 1000, e.cached += 1024, e.frees = 1;
  EXPECT_POOL_STATS(e);
  c.reset();  // L: [c free 3 MiB][d][rest free 5 MiB - 512]
  e.in_use -= 3 * MiB, e.requested -= 3 * MiB, e.cached += 3 * MiB, e.frees = 2;
  EXPECT_POOL_STATS(e);

  // 2 MiB + 512: the smallest fitting free block is c's 3 MiB one; its 1 MiB - 512 rest stays
  // with the block.
  DataPtr g = pool.allocate(2 * MiB + 1);
  EXPECT_EQ(address(g.get()), l);
  EXPECT_EQ(g.size(), 3 * MiB);
  e.in_use += 3 * MiB, e.requested += 2 * MiB + 1, e.cached -= 3 * MiB;
  e.allocations = 6, e.hits = 3;
  EXPECT_POOL_STATS(e);

  pool.empty_cache();  // no segment is wholly free: nothing to return
  EXPECT_POOL_STATS(e);

  b.reset();                  // S merges back into one free 2 MiB block
  e.in_use = 31 * MiB + 512;  // d (12 MiB + 512) + f (16 MiB) + g (3 MiB)
  e.requested = (12 * MiB + 1) + 15 * MiB + (2 * MiB + 1);
  e.cached = 2 * MiB + (5 * MiB - 512), e.frees = 3;
  EXPECT_POOL_STATS(e);

  pool.empty_cache();  // returns S
  e.cached = 5 * MiB - 512, e.reserved = 36 * MiB, e.upstream_frees = 1;
  EXPECT_POOL_STATS(e);

  EXPECT_EQ(pool.stats().peak_in_use_bytes, peak_before_reset);
  EXPECT_EQ(pool.stats().peak_reserved_bytes, 38 * MiB);
  pool.reset_peak();
  e.peak_in_use = 31 * MiB + 512;
  EXPECT_POOL_STATS(e);
  EXPECT_EQ(pool.stats().peak_reserved_bytes, 36 * MiB);

  d.reset();  // merges with L's free rest: [g 3 MiB][free 17 MiB]
  e.in_use = 19 * MiB, e.requested = 17 * MiB + 1, e.cached = 17 * MiB, e.frees = 4;
  EXPECT_POOL_STATS(e);
  g.reset();  // L is one free 20 MiB block again
  e.in_use = 16 * MiB, e.requested = 15 * MiB, e.cached = 20 * MiB, e.frees = 5;
  EXPECT_POOL_STATS(e);

  DataPtr h = pool.allocate(20 * MiB);  // the whole of L, no new segment
  EXPECT_EQ(address(h.get()), l);
  EXPECT_EQ(h.size(), 20 * MiB);
  e.in_use = 36 * MiB, e.requested = 35 * MiB, e.cached = 0, e.peak_in_use = 36 * MiB;
  e.allocations = 7, e.hits = 4;
  EXPECT_POOL_STATS(e);

  h.reset();
  f.reset();
  e.in_use = 0, e.requested = 0, e.cached = 36 * MiB, e.frees = 7;
  EXPECT_POOL_STATS(e);
  pool.empty_cache();
  e.cached = 0, e.reserved = 0, e.upstream_frees = 3;
  EXPECT_POOL_STATS(e);
  EXPECT_EQ(upstream->requests(), (std::vector<size_t>{2 * MiB, 20 * MiB, 16 * MiB}));
}

TEST(PoolStatsTest, DescribeNamesTheStateOfThePool) {
  PoolConfig config = pool_config(PoolStrategy::kBestFit);
  config.limit_bytes = 64 * MiB;
  PooledAllocator pool(cpu_allocator(), config);
  DataPtr a = pool.allocate(3 * MiB);
  const std::string text = pool.describe();
  EXPECT_NE(text.find(pool.name()), std::string::npos) << text;
  EXPECT_NE(text.find("reserved 20.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("64.00 MiB"), std::string::npos) << text;  // the limit
  EXPECT_NE(text.find("in use 3.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("cached 17.00 MiB"), std::string::npos) << text;
}

TEST(PoolStatsTest, PeakInUseSumsOverArenasAndIsExactOnOneThread) {
  PoolConfig config = pool_config(PoolStrategy::kExact);
  config.arenas = 4;  // one thread still uses a single arena
  PooledAllocator pool(cpu_allocator(), config);
  {
    DataPtr a = pool.allocate(1000);
    DataPtr b = pool.allocate(2000);
  }
  DataPtr c = pool.allocate(512);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.peak_in_use_bytes, 1024u + 2048u);
  EXPECT_EQ(s.in_use_bytes, 512u);
  EXPECT_EQ(s.reserved_bytes, s.in_use_bytes + s.cached_bytes);
}

}  // namespace
}  // namespace weft
