// Arena: one block carved at planned offsets; reserve keeps or replaces the block, pointer()
// checks every range against the capacity and the alignment.
#include "memory/arena.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>

#include "base/error.h"
#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::address;
using testing::BudgetAllocator;
using testing::is_aligned;
using testing::KiB;
using testing::MiB;

// Expects pointer(offset, bytes) to throw ValueError whose message contains every `parts`.
void expect_range_error(const Arena& arena, size_t offset, size_t bytes,
                        std::initializer_list<std::string> parts) {
  try {
    arena.pointer(offset, bytes);
    ADD_FAILURE() << "pointer(" << offset << ", " << bytes << ") did not throw";
  } catch (const ValueError& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' missing from: " << e.what();
    }
  }
}

TEST(ArenaTest, PointerReturnsAddressesInsideTheBlock) {
  Arena arena(cpu_allocator(), 4096);
  ASSERT_NE(arena.base(), nullptr);
  EXPECT_EQ(arena.capacity(), 4096u);
  EXPECT_EQ(arena.device(), Device::cpu());
  EXPECT_TRUE(is_aligned(arena.base(), kDefaultAlignment));
  const uintptr_t base = address(arena.base());
  EXPECT_EQ(address(arena.pointer(0, 4096)), base);
  EXPECT_EQ(address(arena.pointer(64, 100)), base + 64);
  EXPECT_EQ(address(arena.pointer(4032, 64)), base + 4032);
  EXPECT_EQ(address(arena.pointer(4096, 0)), base + 4096);  // an empty range at the end
  // Every byte of the capacity is usable.
  testing::fill_pattern(arena.pointer(0, 4096), 4096, 5);
  EXPECT_TRUE(testing::has_pattern(arena.base(), 4096, 5));
}

TEST(ArenaTest, RangePastTheCapacityThrowsValueErrorNamingTheRange) {
  Arena arena(cpu_allocator(), 4096);
  expect_range_error(arena, 4032, 128, {"[4032, 4160)", "4096"});
  expect_range_error(arena, 0, 4097, {"[0, 4097)", "4096"});
  expect_range_error(arena, 4160, 0, {"4160", "4096"});
  expect_range_error(arena, size_t{1} << 62, 64, {"4096"});
  // Huge sizes must not wrap around into a "valid" range.
  expect_range_error(arena, 64, std::numeric_limits<size_t>::max() - 32, {"4096"});
}

TEST(ArenaTest, MisalignedOffsetThrowsValueError) {
  Arena arena(cpu_allocator(), 4096);
  for (size_t offset : {size_t{1}, size_t{8}, size_t{32}, size_t{100}, size_t{4095}}) {
    expect_range_error(arena, offset, 1, {std::to_string(offset)});
  }
}

TEST(ArenaTest, ReserveSmallerKeepsTheBlockAndLargerReplacesIt) {
  Arena arena(cpu_allocator(), 8 * KiB);
  void* const base = arena.base();
  EXPECT_FALSE(arena.reserve(4 * KiB));
  EXPECT_EQ(arena.base(), base);
  EXPECT_EQ(arena.capacity(), 8 * KiB);  // the capacity stays what it was
  EXPECT_FALSE(arena.reserve(8 * KiB));
  EXPECT_EQ(arena.base(), base);
  EXPECT_NO_THROW(arena.pointer(0, 8 * KiB));

  EXPECT_TRUE(arena.reserve(64 * KiB));
  EXPECT_EQ(arena.capacity(), 64 * KiB);
  ASSERT_NE(arena.base(), nullptr);
  EXPECT_TRUE(is_aligned(arena.base(), kDefaultAlignment));
  EXPECT_NO_THROW(arena.pointer(0, 64 * KiB));
  testing::fill_pattern(arena.base(), 64 * KiB, 9);
  EXPECT_TRUE(testing::has_pattern(arena.pointer(0, 64 * KiB), 64 * KiB, 9));
}

TEST(ArenaTest, EmptyArenaHasNoCapacityUntilReserved) {
  Arena arena(cpu_allocator());
  EXPECT_EQ(arena.capacity(), 0u);
  EXPECT_EQ(arena.base(), nullptr);
  expect_range_error(arena, 0, 1, {"[0, 1)"});
  EXPECT_TRUE(arena.reserve(1000));
  EXPECT_EQ(arena.capacity(), 1000u);
  EXPECT_NE(arena.base(), nullptr);
  EXPECT_NO_THROW(arena.pointer(960, 40));
  expect_range_error(arena, 960, 41, {"[960, 1001)", "1000"});
}

TEST(ArenaTest, NullAllocatorThrowsValueError) {
  EXPECT_THROW({ Arena arena(nullptr); }, ValueError);
  EXPECT_THROW({ Arena arena(nullptr, 64); }, ValueError);
}

TEST(ArenaTest, GrowingAnArenaOverAPoolGivesTheOldBlockBack) {
  auto pool = std::make_shared<PooledAllocator>(cpu_allocator(),
                                                testing::pool_config(PoolStrategy::kExact));
  Arena arena(pool, 64 * KiB);
  EXPECT_EQ(pool->stats().in_use_bytes, 64 * KiB);
  EXPECT_TRUE(arena.reserve(256 * KiB));
  EXPECT_EQ(pool->stats().in_use_bytes, 256 * KiB) << "only the new block is in use";
  EXPECT_EQ(pool->stats().cached_bytes, 64 * KiB);
  EXPECT_FALSE(arena.reserve(128 * KiB));
  EXPECT_EQ(pool->stats().in_use_bytes, 256 * KiB);
}

TEST(ArenaTest, ReserveThrowsOutOfMemoryFromTheAllocatorAndStaysConsistent) {
  auto upstream = std::make_shared<BudgetAllocator>(MiB);
  Arena arena(upstream, 64 * KiB);
  EXPECT_THROW(arena.reserve(2 * MiB), OutOfMemory);
  // Whatever the arena holds afterwards, its capacity describes it.
  if (arena.capacity() > 0) {
    ASSERT_NE(arena.base(), nullptr);
    testing::fill_pattern(arena.pointer(0, arena.capacity()), arena.capacity(), 3);
  } else {
    expect_range_error(arena, 0, 1, {"[0, 1)"});
  }
  EXPECT_TRUE(arena.reserve(512 * KiB));
  EXPECT_EQ(arena.capacity(), 512 * KiB);
  EXPECT_EQ(upstream->live_bytes(), 512 * KiB);
}

}  // namespace
}  // namespace weft
