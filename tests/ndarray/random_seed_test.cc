// `_random_seed_next`, the op that advances the seed words of captured CUDA graphs (Note [Random
// numbers in captured graphs] in graph/graph_capture.cc), on the CPU (its CUDA kernel:
// tests/gpu/gpu_ndarray_test.cc): each word moves on by the Weyl step, wrapping at 2^64, computed
// here with unsigned arithmetic as the reference; and the seeds derived from a word differ
// between nodes and passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "ndarray/ndarray.h"
#include "ops/defs/seed_word.h"

namespace weft {
namespace {

std::vector<int64_t> words() {
  return {0, 1, -1, INT64_MIN, INT64_MAX, 0x0123456789ABCDEF, -0x6A09E667F3BCC909};
}

void check_next(Device device) {
  const std::vector<int64_t> w = words();
  const NDArray x = NDArray::from_vector(Shape{static_cast<int64_t>(w.size())}, w).copy_to(device);
  const std::vector<int64_t> y = invoke1("_random_seed_next", {x}).to_vector<int64_t>();
  ASSERT_EQ(y.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const uint64_t want = static_cast<uint64_t>(w[i]) + 0x9E3779B97F4A7C15ull;
    EXPECT_EQ(static_cast<uint64_t>(y[i]), want) << "word " << i << " on " << to_string(device);
  }
}

TEST(RandomSeedNext, AdvancesEachWordByTheWeylStepOnTheCpu) { check_next(Device::cpu()); }

TEST(RandomSeedNext, RefusesOtherTypes) {
  const NDArray x = NDArray::zeros(Shape{2}, DType::kFloat32);
  EXPECT_THROW(invoke1("_random_seed_next", {x}), ValueError);
}

// 64 passes × 16 nodes: every derived seed distinct, and the word's sequence does not repeat.
TEST(RandomSeedCombine, DistinctAcrossNodesAndPasses) {
  std::set<uint64_t> seen;
  uint64_t word = 12345;
  for (int pass = 0; pass < 64; ++pass) {
    word = seed_word::next(word);
    for (uint64_t k = 0; k < 16; ++k) seen.insert(seed_word::combine(word, k));
  }
  EXPECT_EQ(seen.size(), 64u * 16u);
}

}  // namespace
}  // namespace weft
