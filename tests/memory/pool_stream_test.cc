// Per-stream reuse in PooledAllocator, with a fake DeviceAPI whose events complete only when the
// test says so: a block freed on a stream is reused there at once, elsewhere only after its event.
#include <gtest/gtest.h>

#include <memory>

#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::address;
using testing::FakeDeviceAPI;
using testing::KiB;
using testing::MiB;
using testing::pool_config;

// Distinct stream handles of the fake device (the CPU device, non-null handles).
char g_stream_s_tag;
char g_stream_t_tag;
const Stream kStreamS{Device::cpu(), &g_stream_s_tag};
const Stream kStreamT{Device::cpu(), &g_stream_t_tag};

class PoolStreamTest : public ::testing::TestWithParam<PoolStrategy> {
 protected:
  PoolConfig config() {
    PoolConfig c = pool_config(GetParam());
    c.device_api = &api_;
    return c;
  }
  // A size whose block is a whole upstream allocation under every strategy (for best fit:
  // 19 MiB takes a 20 MiB segment whose 1 MiB rest is not split off), so that no split-off
  // neighbour blurs which block a request gets.
  size_t block_bytes() const { return GetParam() == PoolStrategy::kBestFit ? 19 * MiB : 4 * KiB; }

  FakeDeviceAPI api_;  // outlives the pools of the tests
};

INSTANTIATE_TEST_SUITE_P(AllStrategies, PoolStreamTest,
                         ::testing::Values(PoolStrategy::kExact, PoolStrategy::kRound,
                                           PoolStrategy::kBestFit),
                         testing::strategy_test_name);

TEST_P(PoolStreamTest, FreedBlockIsReusedAtOnceOnItsStreamAndElsewhereOnlyAfterItsEvent) {
  PooledAllocator pool(cpu_allocator(), config());
  const size_t bytes = block_bytes();

  DataPtr a = pool.allocate_on(bytes, kStreamS);
  void* const p = a.get();
  a.reset();
  EXPECT_EQ(api_.pending_events(), 1) << "freeing on a stream records an event there";

  // Same stream: reused at once although the event is pending.
  DataPtr b = pool.allocate_on(bytes, kStreamS);
  EXPECT_EQ(b.get(), p);
  b.reset();
  ASSERT_GE(api_.pending_events(), 1);

  // Another stream: not while the event is pending.
  DataPtr c = pool.allocate_on(bytes, kStreamT);
  EXPECT_NE(c.get(), p);
  EXPECT_EQ(pool.stats().upstream_allocations, 2u);

  // Once S's work is done, T gets the block.
  api_.complete_stream(kStreamS.handle);
  DataPtr d = pool.allocate_on(bytes, kStreamT);
  EXPECT_EQ(d.get(), p);
  EXPECT_EQ(pool.stats().upstream_allocations, 2u);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 2u);
}

TEST_P(PoolStreamTest, BlockFreedOnTheDefaultStreamWaitsForItsEventOnAnotherStream) {
  PooledAllocator pool(cpu_allocator(), config());
  const size_t bytes = block_bytes();
  DataPtr a = pool.allocate(bytes);  // the device's default (null) stream
  void* const p = a.get();
  a.reset();
  DataPtr b = pool.allocate_on(bytes, kStreamT);
  EXPECT_NE(b.get(), p);
  api_.complete_all();
  DataPtr c = pool.allocate_on(bytes, kStreamT);
  EXPECT_EQ(c.get(), p);
}

TEST_P(PoolStreamTest, EmptyCacheWaitsForPendingEventsBeforeReturningMemory) {
  PooledAllocator pool(cpu_allocator(), config());
  DataPtr a = pool.allocate_on(block_bytes(), kStreamS);
  a.reset();
  ASSERT_EQ(api_.pending_events(), 1);
  pool.empty_cache();
  EXPECT_EQ(api_.event_synchronizations(), 1);
  EXPECT_EQ(api_.pending_events(), 0);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(pool.stats().upstream_frees, 1u);
  EXPECT_EQ(api_.live_events(), 0) << "the pool destroys the events it created";
}

TEST_P(PoolStreamTest, EventsOfReusedBlocksAreDestroyed) {
  {
    PooledAllocator pool(cpu_allocator(), config());
    for (int i = 0; i < 20; ++i) {
      DataPtr a = pool.allocate_on(block_bytes(), i % 2 == 0 ? kStreamS : kStreamT);
      a.reset();
      api_.complete_all();
    }
    EXPECT_EQ(pool.stats().upstream_allocations, 1u) << "completed events let either stream reuse";
    // One event per free; only that of the block still cached may be alive.
    EXPECT_EQ(api_.events_created(), 20);
    EXPECT_LE(api_.live_events(), 1);
  }
  EXPECT_EQ(api_.live_events(), 0);
}

TEST_P(PoolStreamTest, FreeWithoutAnEventWaitsForTheStreamSoAnyStreamMayReuseTheBlock) {
  PooledAllocator pool(cpu_allocator(), config());
  DataPtr a = pool.allocate_on(block_bytes(), kStreamS);
  void* const p = a.get();
  api_.set_fail_event_creation(true);
  a.reset();  // no event can be recorded: the free must wait for S instead
  api_.set_fail_event_creation(false);
  EXPECT_EQ(api_.stream_synchronizations(), 1);
  DataPtr b = pool.allocate_on(block_bytes(), kStreamT);
  EXPECT_EQ(b.get(), p);
}

// Known bug, disabled until fixed (run with --gtest_also_run_disabled_tests): when best fit
// splits a free block whose event is pending for a request on the same stream, the split-off
// rest loses the event, so another stream can take memory that work queued before the free may
// still use.
TEST(PoolStreamBugTest, SplitOffRestKeepsThePendingEventOfItsFree) {
  FakeDeviceAPI api;
  PoolConfig config = pool_config(PoolStrategy::kBestFit);
  config.device_api = &api;
  PooledAllocator pool(cpu_allocator(), config);
  DataPtr a = pool.allocate_on(MiB, kStreamS);  // [0, 1 MiB) of a 2 MiB segment
  const uintptr_t p = address(a.get());
  a.reset();  // work on S before this event may still use [p, p + 1 MiB)
  ASSERT_EQ(api.pending_events(), 1);
  DataPtr b = pool.allocate_on(512 * KiB, kStreamS);  // same stream: fine to reuse at once
  EXPECT_EQ(address(b.get()), p);
  DataPtr c = pool.allocate_on(512 * KiB, kStreamT);  // must not overlap [p, p + 1 MiB)
  const uintptr_t q = address(c.get());
  EXPECT_FALSE(q + 512 * KiB > p && q < p + MiB)
      << "stream T got [" << q - p << ", " << q - p + 512 * KiB
      << ") of the range freed on S whose event is still pending";
}

// Known bug, disabled until fixed: best fit merges freed neighbours only when they were last used
// on the same stream, even once their events have completed. A block taken by stream T out of a
// free block last used on S leaves a rest marked S; when T frees its part the two never merge,
// so the segment can never go back upstream (empty_cache, out-of-memory recovery) although
// nothing in it is in use. Needs no fake device: plain CPU memory with two stream handles.
TEST(PoolStreamBugTest, FreedNeighboursOfDifferentStreamsMergeOnceTheirWorkIsDone) {
  PooledAllocator pool(cpu_allocator(), pool_config(PoolStrategy::kBestFit));
  DataPtr a = pool.allocate_on(4 * KiB, kStreamS);  // a 2 MiB segment, last used on S
  a.reset();
  DataPtr b = pool.allocate_on(4 * KiB, kStreamT);  // the same segment, now split S | T
  b.reset();
  pool.empty_cache();
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u) << "a wholly free segment stayed reserved";
}

}  // namespace
}  // namespace weft
