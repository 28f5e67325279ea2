// The oneDNN caches stay within their bounds however many shapes and weights go through them
// (Note [oneDNN cache bounds]), and still give right results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/cpu/dnnl_util.h"
#include "tests/ops/op_harness.h"

#if WEFT_USE_ONEDNN
namespace weft::testing {
namespace {

/// Restores the caches' default bounds around each test.
class CacheBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dnnl_util::set_primitive_cache_limit(dnnl_util::kDefaultPrimitiveCacheEntries);
    dnnl_util::set_weight_cache_limit(dnnl_util::kDefaultWeightCacheBytes);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(CacheBoundsTest, PrimitiveCacheOfAThreadStaysWithinItsBound) {
  dnnl_util::set_primitive_cache_limit(8);
  const uint64_t evictions_before = dnnl_util::cache_stats().primitive_evictions;
  // 40 distinct shapes, then the first ones again (rebuilt after eviction): relu is checked
  // against max(x, 0) each time.
  for (int round = 0; round < 2; ++round) {
    for (int n = 1; n <= 40; ++n) {
      HostTensor x = HostTensor::random(Shape{n, 3}, 100 + n);
      auto out = run_op("Activation", {{"act_type", "relu"}}, {x});
      ASSERT_EQ(out.size(), 1u);
      for (int64_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(out[0].data[i], std::max(static_cast<double>(static_cast<float>(x.data[i])), 0.0))
            << "shape (" << n << ", 3), element " << i;
      }
      ASSERT_LE(dnnl_util::cache_stats().primitive_entries_this_thread, 8u) << "after shape " << n;
    }
  }
  EXPECT_GE(dnnl_util::cache_stats().primitive_evictions - evictions_before, 72u);
}

TEST_F(CacheBoundsTest, CachedReferenceOutlivesItsEvictionForTheNextLookups) {
  dnnl_util::set_primitive_cache_limit(1);
  int& first = dnnl_util::cached<int>("cache-bounds-test|first", [] { return 41; });
  int& second = dnnl_util::cached<int>("cache-bounds-test|second", [] { return 7; });
  // The bound of 1 evicted "first", but the reference a kernel holds is still alive.
  EXPECT_EQ(first, 41);
  EXPECT_EQ(second, 7);
  EXPECT_LE(dnnl_util::cache_stats().primitive_entries_this_thread, 1u);
}

/// A plain float32 OIHW weight view and the blocked layout a convolution would want for it.
struct Weight {
  std::vector<float> values;
  Shape shape{64, 64, 3, 3};  // the view points into it
  TensorView view;
  dnnl::memory::desc want;
  Weight(const Weight&) = delete;  // `view` points into this object
  explicit Weight(float seed) : values(64 * 64 * 3 * 3) {
    for (size_t i = 0; i < values.size(); ++i) values[i] = seed + static_cast<float>(i % 97);
    view = TensorView(values.data(), Device::cpu(), DType::kFloat32, shape);
    want = dnnl::memory::desc({64, 64, 3, 3}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::OIhw16i16o);
  }
  /// The cached (blocked) memory reordered back to the plain layout.
  std::vector<float> unblocked(const dnnl::memory& blocked) const {
    std::vector<float> plain(values.size());
    dnnl::memory back(dnnl_util::plain_desc(view), dnnl_util::cpu_engine(), plain.data());
    dnnl::reorder(blocked, back)
        .execute(dnnl_util::thread_stream(), const_cast<dnnl::memory&>(blocked), back);
    dnnl_util::thread_stream().wait();
    return plain;
  }
};

TEST_F(CacheBoundsTest, WeightCacheStaysWithinItsByteBudget) {
  const int64_t budget = int64_t{1} << 20;  // 1 MiB: six 147 KiB weights
  dnnl_util::set_weight_cache_limit(budget);
  const uint64_t evictions_before = dnnl_util::cache_stats().weight_evictions;
  for (int i = 0; i < 50; ++i) {
    Weight w(static_cast<float>(i));
    auto blocked = dnnl_util::cached_weight("cache-bounds-test|conv", w.view, w.want,
                                            /*storage_id=*/900000 + i, /*version=*/1);
    ASSERT_EQ(w.unblocked(*blocked), w.values) << "weight " << i;
    ASSERT_LE(dnnl_util::cache_stats().weight_bytes, budget) << "after weight " << i;
  }
  dnnl_util::CacheStats stats = dnnl_util::cache_stats();
  EXPECT_GT(stats.weight_entries, 0u);
  EXPECT_GE(stats.weight_evictions - evictions_before, 40u);
}

TEST_F(CacheBoundsTest, NewVersionOfAWeightReplacesTheOld) {
  dnnl_util::set_weight_cache_limit(int64_t{64} << 20);
  dnnl_util::set_weight_cache_limit(0);  // empties the cache
  dnnl_util::set_weight_cache_limit(int64_t{64} << 20);
  Weight w(3.0f);
  for (uint64_t version = 1; version <= 20; ++version) {
    for (auto& v : w.values) v += 1.0f;  // written in place: its version moves on
    auto blocked = dnnl_util::cached_weight("cache-bounds-test|versions", w.view, w.want,
                                            /*storage_id=*/777777, version);
    ASSERT_EQ(w.unblocked(*blocked), w.values) << "version " << version;
    ASSERT_EQ(dnnl_util::cache_stats().weight_entries, 1u) << "version " << version;
  }
}

TEST_F(CacheBoundsTest, WeightLargerThanTheBudgetIsReorderedButNotCached) {
  dnnl_util::set_weight_cache_limit(0);
  dnnl_util::set_weight_cache_limit(1000);
  Weight w(5.0f);
  auto blocked = dnnl_util::cached_weight("cache-bounds-test|large", w.view, w.want,
                                          /*storage_id=*/888888, /*version=*/1);
  EXPECT_EQ(w.unblocked(*blocked), w.values);
  EXPECT_EQ(dnnl_util::cache_stats().weight_entries, 0u);
  EXPECT_EQ(dnnl_util::cache_stats().weight_bytes, 0);
}

TEST_F(CacheBoundsTest, InvalidBoundsAreRejected) {
  EXPECT_THROW(dnnl_util::set_primitive_cache_limit(0), ValueError);
  EXPECT_THROW(dnnl_util::set_weight_cache_limit(-1), ValueError);
}

}  // namespace
}  // namespace weft::testing
#endif  // WEFT_USE_ONEDNN
