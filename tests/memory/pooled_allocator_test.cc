// PooledAllocator basics: reuse of freed blocks, size-class rounding, zero-byte requests,
// alignment of every pointer and the configuration checks.
#include "memory/pooled_allocator.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "memory/allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::address;
using testing::is_aligned;
using testing::KiB;
using testing::MiB;
using testing::pool_config;

// Independent references for the documented rounding rules.
size_t round_to_multiple(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}
size_t power_of_two_at_least(size_t n, size_t floor) {
  size_t p = floor;
  while (p < n) p *= 2;
  return p;
}

class PoolStrategyTest : public ::testing::TestWithParam<PoolStrategy> {};

INSTANTIATE_TEST_SUITE_P(AllStrategies, PoolStrategyTest,
                         ::testing::Values(PoolStrategy::kExact, PoolStrategy::kRound,
                                           PoolStrategy::kBestFit),
                         testing::strategy_test_name);

TEST_P(PoolStrategyTest, FreedBlockIsReusedForTheSameSize) {
  PooledAllocator pool(cpu_allocator(), pool_config(GetParam()));
  for (size_t bytes : {size_t{1}, size_t{3000}, size_t{64 * KiB}, size_t{3 * MiB}}) {
    SCOPED_TRACE("bytes = " + std::to_string(bytes));
    DataPtr first = pool.allocate(bytes);
    ASSERT_TRUE(first);
    void* const p = first.get();
    first.reset();
    const PoolStats before = pool.stats();

    DataPtr second = pool.allocate(bytes);
    EXPECT_EQ(second.get(), p);
    const PoolStats after = pool.stats();
    EXPECT_EQ(after.hits, before.hits + 1);
    EXPECT_EQ(after.misses, before.misses);
    EXPECT_EQ(after.upstream_allocations, before.upstream_allocations);
    EXPECT_EQ(after.allocations, before.allocations + 1);
  }
}

TEST_P(PoolStrategyTest, FreedBlockIsReusedForAnotherRequestOfTheSameRoundedSize) {
  PooledAllocator pool(cpu_allocator(), pool_config(GetParam()));
  // 2600 and 3000 bytes round to the same block under every strategy (3072 or 4096).
  ASSERT_EQ(pool.rounded_size(2600), pool.rounded_size(3000));
  DataPtr first = pool.allocate(3000);
  void* const p = first.get();
  first.reset();
  DataPtr second = pool.allocate(2600);
  EXPECT_EQ(second.get(), p);
  EXPECT_EQ(pool.stats().hits, 1u);
}

TEST_P(PoolStrategyTest, ZeroByteAllocationsAreDistinctAndNonNull) {
  PooledAllocator pool(cpu_allocator(), pool_config(GetParam()));
  std::vector<DataPtr> blocks;
  std::set<void*> pointers;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(pool.allocate(0));
    ASSERT_NE(blocks.back().get(), nullptr);
    EXPECT_GE(blocks.back().size(), 1u);
    pointers.insert(blocks.back().get());
  }
  EXPECT_EQ(pointers.size(), blocks.size());
  blocks.clear();
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
  EXPECT_EQ(pool.stats().frees, 16u);
}

TEST_P(PoolStrategyTest, EveryPointerIsAlignedToAtLeastSixtyFourBytes) {
  PooledAllocator pool(cpu_allocator(), pool_config(GetParam()));
  const std::vector<size_t> sizes = {0,     1,     3,      63,      64,      65,
                                     511,   512,   513,    1000,    4095,    4097,
                                     12345, 65537, 100003, MiB - 1, MiB + 1, 3 * MiB + 7};
  const std::vector<size_t> alignments = {1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  for (int round = 0; round < 2; ++round) {  // the second round is served from the cache
    std::vector<DataPtr> live;
    for (size_t alignment : alignments) {
      for (size_t bytes : sizes) {
        DataPtr block = (bytes % 2 == 0)
                            ? pool.allocate(bytes, alignment)
                            : pool.allocate_on(bytes, Stream{Device::cpu(), nullptr}, alignment);
        const size_t expected = alignment < 64 ? 64 : alignment;
        ASSERT_NE(block.get(), nullptr);
        EXPECT_TRUE(is_aligned(block.get(), expected))
            << block.get() << " for " << bytes << " bytes at alignment " << alignment;
        EXPECT_GE(block.size(), bytes);
        EXPECT_EQ(block.device(), Device::cpu());
        if (bytes > 0) {  // the whole range is usable (AddressSanitizer checks the ends)
          static_cast<char*>(block.get())[0] = 1;
          static_cast<char*>(block.get())[bytes - 1] = 2;
        }
        live.push_back(std::move(block));
      }
    }
    // Default alignment: kDefaultAlignment.
    DataPtr plain = pool.allocate(77);
    EXPECT_TRUE(is_aligned(plain.get(), kDefaultAlignment));
  }
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
}

TEST_P(PoolStrategyTest, BadAlignmentThrowsValueErrorAndAllocatesNothing) {
  PooledAllocator pool(cpu_allocator(), pool_config(GetParam()));
  for (size_t alignment : {size_t{0}, size_t{3}, size_t{96}, size_t{1000}}) {
    SCOPED_TRACE("alignment = " + std::to_string(alignment));
    EXPECT_THROW(pool.allocate(128, alignment), ValueError);
    EXPECT_THROW(pool.allocate_on(128, Stream{Device::cpu(), nullptr}, alignment), ValueError);
    try {
      pool.allocate(128, alignment);
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(alignment)), std::string::npos)
          << e.what();
    }
  }
  const PoolStats stats = pool.stats();
  EXPECT_EQ(stats.allocations, 0u);
  EXPECT_EQ(stats.reserved_bytes, 0u);
}

TEST(CpuAllocatorTest, BadAlignmentThrowsValueError) {
  EXPECT_THROW(cpu_allocator()->allocate(64, 0), ValueError);
  EXPECT_THROW(cpu_allocator()->allocate(64, 3), ValueError);
}

TEST(CpuAllocatorTest, AllocationsAreAlignedAndDistinct) {
  auto cpu = cpu_allocator();
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu, cpu_allocator());  // one process-wide allocator
  EXPECT_EQ(cpu->device(), Device::cpu());
  DataPtr a = cpu->allocate(0);
  DataPtr b = cpu->allocate(0);
  ASSERT_NE(a.get(), nullptr);
  ASSERT_NE(b.get(), nullptr);
  EXPECT_NE(a.get(), b.get());
  for (size_t alignment : {1, 64, 256, 4096}) {
    DataPtr c = cpu->allocate(1000, alignment);
    EXPECT_TRUE(is_aligned(c.get(), alignment < 64 ? 64 : alignment));
    EXPECT_GE(c.size(), 1000u);
  }
}

TEST(PoolRoundingTest, ExactRoundsToMultiplesOfTheGranularity) {
  PooledAllocator pool(cpu_allocator(), pool_config(PoolStrategy::kExact));
  EXPECT_EQ(pool.config().exact_granularity, 512u);  // the documented default
  for (size_t n : {size_t{1}, size_t{511}, size_t{512}, size_t{513}, size_t{1000}, size_t{4097},
                   size_t{MiB + 1}, size_t{17 * MiB + 3}}) {
    EXPECT_EQ(pool.rounded_size(n), round_to_multiple(n, 512)) << n;
  }
  EXPECT_EQ(pool.rounded_size(0), 512u);

  PoolConfig coarse = pool_config(PoolStrategy::kExact);
  coarse.exact_granularity = 4096;
  PooledAllocator coarse_pool(cpu_allocator(), coarse);
  for (size_t n : {size_t{1}, size_t{4096}, size_t{4097}, size_t{10000}}) {
    EXPECT_EQ(coarse_pool.rounded_size(n), round_to_multiple(n, 4096)) << n;
  }
}

TEST(PoolRoundingTest, RoundUsesPowersOfTwoBelowTheCutoffAndMultiplesAbove) {
  for (size_t cutoff : {size_t{1} * MiB, size_t{16} * MiB}) {
    SCOPED_TRACE("cutoff = " + std::to_string(cutoff));
    PoolConfig config = pool_config(PoolStrategy::kRound);
    config.round_cutoff = cutoff;
    PooledAllocator pool(cpu_allocator(), config);
    const std::vector<size_t> below = {1,         511, 512, 513, 1000, 4097, 65535, cutoff / 2 + 1,
                                       cutoff - 1};
    for (size_t n : below) {
      EXPECT_EQ(pool.rounded_size(n), power_of_two_at_least(n, 512)) << n;
    }
    const std::vector<size_t> above = {cutoff,     cutoff + 1,       3 * cutoff - 5,
                                       5 * cutoff, 5 * cutoff + 512, 9 * cutoff - 1};
    for (size_t n : above) {
      EXPECT_EQ(pool.rounded_size(n), round_to_multiple(n, cutoff)) << n;
    }
  }
  // The documented default cutoff: 2^24 bytes; just below it a power of two, above it linear.
  PooledAllocator default_pool(cpu_allocator(), pool_config(PoolStrategy::kRound));
  EXPECT_EQ(default_pool.config().round_cutoff, 16 * MiB);
  EXPECT_EQ(default_pool.rounded_size(9 * MiB), 16 * MiB);
  EXPECT_EQ(default_pool.rounded_size(17 * MiB), 32 * MiB);
  EXPECT_EQ(default_pool.rounded_size(40 * MiB), 48 * MiB);
  EXPECT_EQ(default_pool.rounded_size(0), 512u);
}

TEST(PoolRoundingTest, BestFitRoundsToMultiplesOf512) {
  PooledAllocator pool(cpu_allocator(), pool_config(PoolStrategy::kBestFit));
  for (size_t n : {size_t{1}, size_t{512}, size_t{513}, size_t{5000}, size_t{MiB + 1},
                   size_t{12 * MiB + 1}, size_t{100 * MiB + 7}}) {
    EXPECT_EQ(pool.rounded_size(n), round_to_multiple(n, 512)) << n;
  }
  EXPECT_EQ(pool.rounded_size(0), 512u);
}

TEST_P(PoolStrategyTest, BlockSizeEqualsTheRoundedSize) {
  PoolConfig config = pool_config(GetParam());
  config.round_cutoff = MiB;  // keeps kRound's linear range small
  PooledAllocator pool(cpu_allocator(), config);
  // Sizes whose best-fit remainder is always split off (see PooledAllocatorStatsTest for the
  // unsplit case).
  for (size_t n : {size_t{1}, size_t{700}, size_t{4097}, size_t{300 * KiB + 1}, size_t{MiB},
                   size_t{MiB + 1}, size_t{3 * MiB - 5}}) {
    DataPtr block = pool.allocate(n);
    EXPECT_EQ(block.size(), pool.rounded_size(n)) << n;
    EXPECT_GE(block.size(), n);
  }
}

TEST(PoolConfigTest, InvalidConfigurationThrowsValueError) {
  PoolConfig bad_cutoff;
  bad_cutoff.round_cutoff = 1000;
  EXPECT_THROW({ PooledAllocator pool(cpu_allocator(), bad_cutoff); }, ValueError);
  PoolConfig small_cutoff;
  small_cutoff.round_cutoff = 256;
  EXPECT_THROW({ PooledAllocator pool(cpu_allocator(), small_cutoff); }, ValueError);
  PoolConfig bad_granularity;
  bad_granularity.exact_granularity = 600;
  EXPECT_THROW({ PooledAllocator pool(cpu_allocator(), bad_granularity); }, ValueError);
  PoolConfig bad_fraction;
  bad_fraction.limit_fraction = 1.5;
  EXPECT_THROW({ PooledAllocator pool(cpu_allocator(), bad_fraction); }, ValueError);
  PoolConfig bad_arenas;
  bad_arenas.arenas = -1;
  EXPECT_THROW({ PooledAllocator pool(cpu_allocator(), bad_arenas); }, ValueError);
  EXPECT_THROW({ PooledAllocator pool(nullptr); }, ValueError);
}

TEST(PoolConfigTest, LimitFractionIsAFractionOfPhysicalMemory) {
  DeviceAPI* cpu = DeviceAPI::get(DeviceType::kCPU);
  const int64_t total = cpu->attribute(Device::cpu(), DeviceAttribute::kTotalMemory);
  ASSERT_GT(total, 0);
  PoolConfig config;
  config.limit_fraction = 0.25;
  PooledAllocator by_fraction(cpu_allocator(), config);
  const double expected = static_cast<double>(total) * 0.25;
  EXPECT_NEAR(static_cast<double>(by_fraction.limit()), expected, 1.0);
  // With both limits set the smaller applies.
  config.limit_bytes = 64 * MiB;
  PooledAllocator both(cpu_allocator(), config);
  EXPECT_EQ(both.limit(), 64 * MiB);
  PooledAllocator unlimited(cpu_allocator());
  EXPECT_EQ(unlimited.limit(), 0u);
}

TEST(PoolStrategyNameTest, NamesRoundTripAndUnknownTextThrows) {
  for (PoolStrategy s : {PoolStrategy::kExact, PoolStrategy::kRound, PoolStrategy::kBestFit}) {
    EXPECT_EQ(parse_pool_strategy(pool_strategy_name(s)), s);
  }
  EXPECT_EQ(parse_pool_strategy("best_fit"), PoolStrategy::kBestFit);
  try {
    parse_pool_strategy("bestest");
    ADD_FAILURE() << "parse_pool_strategy accepted 'bestest'";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("bestest"), std::string::npos) << e.what();
  }
}

TEST(PooledAllocatorTest, NameAndDeviceComeFromTheUpstream) {
  PooledAllocator pool(cpu_allocator(), pool_config(PoolStrategy::kRound));
  EXPECT_EQ(pool.device(), Device::cpu());
  EXPECT_NE(pool.name().find("cpu"), std::string::npos) << pool.name();
  DataPtr block = pool.allocate(10);
  EXPECT_EQ(block.device(), Device::cpu());
}

TEST(PooledAllocatorTest, BlockCanBeFreedAfterMovingItToAnotherHandle) {
  PooledAllocator pool(cpu_allocator(), pool_config(PoolStrategy::kBestFit));
  DataPtr a = pool.allocate(1000);
  void* const p = a.get();
  DataPtr b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from handles are empty
  EXPECT_EQ(b.get(), p);
  EXPECT_EQ(pool.stats().in_use_bytes, 1024u);
  b = DataPtr();
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
  EXPECT_EQ(pool.stats().frees, 1u);
}

}  // namespace
}  // namespace weft
