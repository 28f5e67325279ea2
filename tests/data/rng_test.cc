// The per-element generator: Philox-4x32-10 known answers, streams, ranges.
#include <gtest/gtest.h>

#include <set>

#include "data/element.h"

namespace weft::data {
namespace {

TEST(RngTest, MatchesPhiloxKnownAnswerForZeroKeyAndCounter) {
  // Random123's known-answer vector for philox4x32-10 with counter {0,0,0,0} and key {0,0}.
  Rng rng(0, 0);
  EXPECT_EQ(rng.next_u32(), 0x6627e8d5u);
  EXPECT_EQ(rng.next_u32(), 0xe169c58du);
  EXPECT_EQ(rng.next_u32(), 0xbc57ac4cu);
  EXPECT_EQ(rng.next_u32(), 0x9b00dbd8u);
}

TEST(RngTest, SameSeedAndStreamRepeatOtherStreamsDiffer) {
  Rng a(42, 7), b(42, 7), c(42, 8), d(43, 7);
  bool differs_c = false, differs_d = false;
  for (int i = 0; i < 16; ++i) {
    const uint32_t va = a.next_u32();
    EXPECT_EQ(va, b.next_u32());
    differs_c |= va != c.next_u32();
    differs_d |= va != d.next_u32();
  }
  EXPECT_TRUE(differs_c);
  EXPECT_TRUE(differs_d);
}

TEST(RngTest, UniformIntCoversRangeInclusively) {
  Rng rng(1, 2);
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = rng.uniform_int(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
  double sum = 0;
  for (int i = 0; i < 20000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 20000, 0.5, 0.01);  // 7 standard errors
  EXPECT_THROW(rng.uniform_int(2, 1), Error);
}

}  // namespace
}  // namespace weft::data
