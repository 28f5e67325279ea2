// The Dataset core: sources in memory, map on the engine, ordering transforms, batching,
// shuffle, interleave, cache, prefetch and errors, each against values computed in the test.
#include "data/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <thread>

#include "devices/device_api.h"

namespace weft::data {
namespace {

// Map functions run inside engine operations, where waiting (to_vector) is refused: they read
// their arrays through host_data().
int64_t read_i64(const NDArray& a) { return *host_data<int64_t>(a); }

NDArray scalar_i64(int64_t v) {
  return NDArray::from_vector<int64_t>(Shape(std::vector<int64_t>{}), {v});
}
int64_t value_of(const Element& e) { return e.arrays.at(0).to_vector<int64_t>().at(0); }

std::vector<int64_t> values(const Dataset& ds) {
  std::vector<int64_t> out;
  auto it = ds.iterate();
  while (auto e = it->next()) out.push_back(value_of(*e));
  return out;
}

std::vector<int64_t> iota(int64_t begin, int64_t end, int64_t step = 1) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; i += step) v.push_back(i);
  return v;
}

// A map function that squares an int64 scalar.
MapFn square() {
  return [](std::vector<NDArray> a, Rng&) {
    const int64_t v = read_i64(a.at(0));
    return std::vector<NDArray>{scalar_i64(v * v)};
  };
}

TEST(DatasetTest, RangeTakeSkipShardSelectPositions) {
  EXPECT_EQ(values(range(0, 10)), iota(0, 10));
  EXPECT_EQ(values(range(3, 20, 4)), (std::vector<int64_t>{3, 7, 11, 15, 19}));
  EXPECT_EQ(values(range(5, 0, -2)), (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(values(range(0, 10).take(3)), iota(0, 3));
  EXPECT_EQ(values(range(0, 10).skip(7)), iota(7, 10));
  EXPECT_EQ(values(range(0, 10).shard(3, 1)), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(range(0, 10).shard(3, 1).cardinality(), 3);
  EXPECT_EQ(range(0, 10).shard(3, 0).cardinality(), 4);
  EXPECT_EQ(range(0, 10).skip(12).cardinality(), 0);
  EXPECT_THROW(range(0, 10).shard(3, 3), Error);
}

TEST(DatasetTest, RepeatCountsPassesAndStopsOnEmptyInput) {
  EXPECT_EQ(values(range(0, 3).repeat(2)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(range(0, 3).repeat(2).cardinality(), 6);
  EXPECT_EQ(range(0, 3).repeat().cardinality(), kInfiniteCardinality);
  EXPECT_EQ(values(range(0, 3).repeat().take(7)), (std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_TRUE(values(range(0, 0).repeat()).empty());  // ends instead of looping forever
}

TEST(DatasetTest, FilterKeepsMatchingElements) {
  auto even = [](const std::vector<NDArray>& a) { return a[0].to_vector<int64_t>()[0] % 2 == 0; };
  EXPECT_EQ(values(range(0, 9).filter(even)), (std::vector<int64_t>{0, 2, 4, 6, 8}));
}

TEST(DatasetTest, FromArraysGivesRowsAsCopies) {
  NDArray x = NDArray::from_vector<float>(Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  NDArray y = NDArray::from_vector<int32_t>(Shape{3}, {7, 8, 9});
  auto it = from_arrays({x, y}, "xy").iterate();
  for (int r = 0; r < 3; ++r) {
    auto e = it->next();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->arrays[0].shape(), Shape{2});
    EXPECT_EQ(e->arrays[0].to_vector<float>(), (std::vector<float>{2.f * r + 1, 2.f * r + 2}));
    EXPECT_EQ(e->arrays[1].to_vector<int32_t>()[0], 7 + r);
    EXPECT_EQ(e->origin, "xy row " + std::to_string(r));
    EXPECT_FALSE(e->arrays[0].shares_storage_with(x));
  }
  EXPECT_FALSE(it->next());
  NDArray bad = NDArray::from_vector<float>(Shape{2}, {1, 2});
  EXPECT_THROW(from_arrays({x, bad}), Error);
}

TEST(DatasetTest, MapKeepsOrderAtAnyParallelism) {
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 200; ++i) expected.push_back(i * i);
  for (int parallel : {1, 2, 4, 16}) {
    MapOptions o;
    o.num_parallel = parallel;
    EXPECT_EQ(values(range(0, 200).map(square(), o)), expected) << "num_parallel " << parallel;
  }
  MapOptions any;
  any.num_parallel = 4;
  any.deterministic = false;
  std::vector<int64_t> got = values(range(0, 200).map(square(), any));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);
  MapOptions pool;
  pool.num_parallel = 3;
  pool.executor = MapExecutor::kThreadPool;
  EXPECT_EQ(values(range(0, 200).map(square(), pool)), expected);
}

TEST(DatasetTest, SeededRandomMapIsIndependentOfParallelism) {
  auto noisy = [](std::vector<NDArray> a, Rng& rng) {
    // Uneven work, so that parallel elements finish out of order.
    std::this_thread::sleep_for(std::chrono::microseconds(rng.uniform_int(0, 300)));
    return std::vector<NDArray>{scalar_i64(rng.uniform_int(0, 1'000'000'000))};
  };
  std::vector<int64_t> reference;
  for (int parallel : {1, 4}) {
    MapOptions o;
    o.num_parallel = parallel;
    o.seed = 1234;
    std::vector<int64_t> got = values(range(0, 64).map(noisy, o));
    if (reference.empty()) {
      reference = got;
      EXPECT_GT(std::set<int64_t>(got.begin(), got.end()).size(), 60u);
    } else {
      EXPECT_EQ(got, reference);
    }
  }
  MapOptions other;
  other.seed = 1235;
  EXPECT_NE(values(range(0, 64).map(noisy, other)), reference);
}

TEST(DatasetTest, MapErrorNamesElementAndIterationContinues) {
  auto fail_on_3 = [](std::vector<NDArray> a, Rng&) -> std::vector<NDArray> {
    if (read_i64(a[0]) == 3) throw ValueError("three is not allowed");
    return a;
  };
  MapOptions o;
  o.num_parallel = 2;
  o.name = "no_threes";
  auto it = range(0, 6).map(fail_on_3, o).iterate();
  std::vector<int64_t> got;
  for (int i = 0; i < 6; ++i) {
    try {
      auto e = it->next();
      ASSERT_TRUE(e);
      got.push_back(value_of(*e));
    } catch (const DataError& e) {
      EXPECT_EQ(e.index(), 3);
      EXPECT_EQ(e.origin(), "range value 3");
      const std::string what = e.what();
      EXPECT_NE(what.find("map(no_threes)"), std::string::npos) << what;
      EXPECT_NE(what.find("three is not allowed"), std::string::npos) << what;
    }
  }
  EXPECT_FALSE(it->next());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 1, 2, 4, 5}));

  auto skipping = range(0, 6).map(fail_on_3, o).ignore_errors().iterate();
  int n = 0;
  while (skipping->next()) ++n;
  EXPECT_EQ(n, 5);
  EXPECT_EQ(skipping->stats().skipped_errors, 1);
  EXPECT_EQ(skipping->stats().elements, 5);
}

TEST(DatasetTest, BatchStacksRowsAndHandlesRemainder) {
  NDArray x = NDArray::arange(0, 7 * 3).reshape(Shape{7, 3});
  auto it = from_arrays({x}).batch(3).iterate();
  std::vector<Shape> shapes;
  std::vector<float> all;
  while (auto e = it->next()) {
    shapes.push_back(e->arrays[0].shape());
    for (float v : e->arrays[0].to_vector<float>()) all.push_back(v);
  }
  EXPECT_EQ(shapes, (std::vector<Shape>{Shape{3, 3}, Shape{3, 3}, Shape{1, 3}}));
  std::vector<float> expected(21);
  std::iota(expected.begin(), expected.end(), 0.f);
  EXPECT_EQ(all, expected);
  EXPECT_EQ(from_arrays({x}).batch(3, true).cardinality(), 2);
  int batches = 0;
  for (auto dropped = from_arrays({x}).batch(3, true).iterate(); dropped->next();) ++batches;
  EXPECT_EQ(batches, 2);
}

TEST(DatasetTest, LargeBatchCopiedByEngineOperationsMatchesRows) {
  // 64 rows of 32 KiB: above the threshold where rows are copied by parallel operations.
  const int64_t rows = 64, cols = 8192;
  std::vector<float> data(rows * cols);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 9973) * 0.5f;
  NDArray x = NDArray::from_vector<float>(Shape{rows, cols}, data);
  auto it = from_arrays({x}).batch(rows, false, 4).iterate();
  auto e = it->next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->arrays[0].to_vector<float>(), data);
}

TEST(DatasetTest, BatchRefusesMismatchedShapesNamingTheElement) {
  int calls = 0;
  auto gen = [&calls]() -> GeneratorFn {
    return [&calls]() -> std::optional<std::vector<NDArray>> {
      if (calls >= 2) return std::nullopt;
      ++calls;
      return std::vector<NDArray>{NDArray::zeros(Shape{calls})};
    };
  };
  auto it = from_generator(gen, "growing").batch(2).iterate();
  try {
    it->next();
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.index(), 1);
    EXPECT_NE(std::string(e.what()).find("padded_batch"), std::string::npos) << e.what();
  }
}

TEST(DatasetTest, PaddedBatchPadsToLargestOrGivenShape) {
  auto gen = []() -> GeneratorFn {
    auto n = std::make_shared<int>(0);
    return [n]() -> std::optional<std::vector<NDArray>> {
      if (*n >= 3) return std::nullopt;
      ++*n;
      std::vector<int32_t> v(*n);
      std::iota(v.begin(), v.end(), 10 * *n);
      return std::vector<NDArray>{NDArray::from_vector<int32_t>(Shape{*n}, v)};
    };
  };
  auto it = from_generator(gen).padded_batch(3, {}, -1).iterate();
  auto e = it->next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->arrays[0].shape(), (Shape{3, 3}));
  EXPECT_EQ(e->arrays[0].to_vector<int32_t>(),
            (std::vector<int32_t>{10, -1, -1, 20, 21, -1, 30, 31, 32}));
  auto fixed = from_generator(gen).padded_batch(2, {{5}}, 0).iterate();
  auto f = fixed->next();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->arrays[0].to_vector<int32_t>(),
            (std::vector<int32_t>{10, 0, 0, 0, 0, 20, 21, 0, 0, 0}));
  auto small = from_generator(gen).padded_batch(3, {{2}}).iterate();
  EXPECT_THROW(small->next(), DataError);
}

TEST(DatasetTest, ShuffleIsSeededPermutationWithinBufferBound) {
  const int64_t n = 500, buffer = 16;
  std::vector<int64_t> a = values(range(0, n).shuffle(buffer, 7));
  EXPECT_EQ(a, values(range(0, n).shuffle(buffer, 7)));
  EXPECT_NE(a, values(range(0, n).shuffle(buffer, 8)));
  EXPECT_NE(a, iota(0, n));
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(0, n));
  // Element i is drawn no earlier than output position i - buffer + 1 (Note [Shuffle buffer]).
  for (int64_t pos = 0; pos < n; ++pos) EXPECT_GE(pos, a[pos] - buffer + 1) << a[pos];
  EXPECT_EQ(values(range(0, 20).shuffle(1, 3)), iota(0, 20));
  // Each pass of repeat() draws a new order; without reshuffling, passes repeat.
  std::vector<int64_t> two = values(range(0, 50).shuffle(64, 5).repeat(2));
  EXPECT_NE(std::vector<int64_t>(two.begin(), two.begin() + 50),
            std::vector<int64_t>(two.begin() + 50, two.end()));
  std::vector<int64_t> same = values(range(0, 50).shuffle(64, 5, false).repeat(2));
  EXPECT_EQ(std::vector<int64_t>(same.begin(), same.begin() + 50),
            std::vector<int64_t>(same.begin() + 50, same.end()));
}

TEST(DatasetTest, EachIterationReshufflesAndSeededProgramsRepeatTheirOrders) {
  Dataset a = range(0, 40).shuffle(64, 11);
  Dataset b = range(0, 40).shuffle(64, 11);
  const std::vector<int64_t> a1 = values(a), a2 = values(a);
  EXPECT_NE(a1, a2);  // a new epoch, a new order
  EXPECT_EQ(values(b), a1);
  EXPECT_EQ(values(b), a2);
  Dataset fixed = range(0, 40).shuffle(64, std::nullopt, false);
  EXPECT_EQ(values(fixed), values(fixed));  // unseeded, not reshuffled: one order
  // Random maps draw new numbers each epoch, the same ones in a rerun.
  auto draw = [](std::vector<NDArray>, Rng& rng) {
    return std::vector<NDArray>{scalar_i64(rng.uniform_int(0, 1 << 30))};
  };
  MapOptions o;
  o.seed = 3;
  Dataset m = range(0, 8).map(draw, o), m2 = range(0, 8).map(draw, o);
  const std::vector<int64_t> e1 = values(m), e2 = values(m);
  EXPECT_NE(e1, e2);
  EXPECT_EQ(values(m2), e1);
}

TEST(DatasetTest, ShuffleWithFullBufferIsUniform) {
  // Position of element 0 over many seeds: uniform over 4 positions (chi-square, 3 dof).
  std::vector<int> counts(4, 0);
  const int trials = 4000;
  for (int s = 0; s < trials; ++s) {
    std::vector<int64_t> v = values(range(0, 4).shuffle(4, static_cast<uint64_t>(s)));
    ++counts[std::find(v.begin(), v.end(), 0) - v.begin()];
  }
  double chi2 = 0;
  for (int c : counts) chi2 += (c - trials / 4.0) * (c - trials / 4.0) / (trials / 4.0);
  EXPECT_LT(chi2, 16.27);  // p = 0.001
}

TEST(DatasetTest, InterleaveCyclesThroughInnerDatasetsByBlock) {
  // Inputs 0, 1, 2 map to ranges [10k, 10k + k + 2): lengths 2, 3, 4.
  auto inner = [](const Element& e) {
    const int64_t k = value_of(e);
    return range(10 * k, 10 * k + k + 2);
  };
  EXPECT_EQ(values(range(0, 3).interleave(inner, 2, 1)),
            (std::vector<int64_t>{0, 10, 1, 11, 12, 20, 21, 22, 23}));
  EXPECT_EQ(values(range(0, 3).interleave(inner, 2, 2)),
            (std::vector<int64_t>{0, 1, 10, 11, 12, 20, 21, 22, 23}));
  EXPECT_EQ(values(range(0, 3).interleave(inner, 1, 1)),
            (std::vector<int64_t>{0, 1, 10, 11, 12, 20, 21, 22, 23}));
}

TEST(DatasetTest, InterleaveReleasesInnerPipelinesSafelyAndGivesThemTheirOwnRandomness) {
  // Inner datasets with a cache (whose iterator touches its node when destroyed) and a seeded
  // random map: each file draws its own numbers, and each epoch new ones.
  auto draw = [](std::vector<NDArray> a, Rng& rng) {
    return std::vector<NDArray>{scalar_i64(rng.uniform_int(0, 1 << 30))};
  };
  MapOptions o;
  o.seed = 9;
  auto inner = [&](const Element&) { return range(0, 4).map(draw, o).cache(); };
  const std::vector<int64_t> two_epochs = values(range(0, 2).interleave(inner, 1).repeat(2));
  ASSERT_EQ(two_epochs.size(), 16u);
  const std::vector<int64_t> file0(two_epochs.begin(), two_epochs.begin() + 4);
  const std::vector<int64_t> file1(two_epochs.begin() + 4, two_epochs.begin() + 8);
  const std::vector<int64_t> epoch1(two_epochs.begin() + 8, two_epochs.end());
  EXPECT_NE(file0, file1);
  EXPECT_NE(std::vector<int64_t>(two_epochs.begin(), two_epochs.begin() + 8), epoch1);
  EXPECT_EQ(values(range(0, 2).interleave(inner, 1).repeat(2)), two_epochs);  // reproducible
}

TEST(DatasetTest, RepeatCountsFailedElementsAsAPassThatWasNotEmpty) {
  auto fail = [](std::vector<NDArray>, Rng&) -> std::vector<NDArray> {
    throw ValueError("always");
  };
  auto it = range(0, 3).map(fail).repeat(2).ignore_errors().iterate();
  EXPECT_FALSE(it->next());
  EXPECT_EQ(it->stats().skipped_errors, 6);
}

TEST(DatasetTest, AnElementThatDoesNotFitABatchFailsAloneAndTheRowsStay) {
  auto gen = []() -> GeneratorFn {
    auto n = std::make_shared<int>(0);
    return [n]() -> std::optional<std::vector<NDArray>> {
      const int i = (*n)++;
      if (i >= 4) return std::nullopt;
      return std::vector<NDArray>{NDArray::full(Shape{i == 1 ? 3 : 2}, i)};
    };
  };
  auto it = from_generator(gen).batch(2).iterate();
  try {
    it->next();
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.index(), 1);
  }
  auto batch = it->next();  // rows 0 and 2
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->arrays[0].to_vector<float>(), (std::vector<float>{0, 0, 2, 2}));
  EXPECT_EQ(it->next()->arrays[0].to_vector<float>(), (std::vector<float>{3, 3}));
}

TEST(DatasetTest, MemoryCacheReplaysWithoutRunningEarlierStages) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto counted = [calls](std::vector<NDArray> a, Rng&) {
    ++*calls;
    return a;
  };
  Dataset ds = range(0, 10).map(counted).cache();
  EXPECT_EQ(values(ds), iota(0, 10));
  EXPECT_EQ(calls->load(), 10);
  EXPECT_EQ(values(ds), iota(0, 10));
  EXPECT_EQ(values(ds.repeat(2)), values(range(0, 10).repeat(2)));
  EXPECT_EQ(calls->load(), 10);
  // An incomplete first pass keeps nothing.
  auto calls2 = std::make_shared<std::atomic<int>>(0);
  Dataset partial = range(0, 10)
                        .map([calls2](std::vector<NDArray> a, Rng&) {
                          ++*calls2;
                          return a;
                        })
                        .cache();
  {
    auto it = partial.iterate();
    it->next();
  }
  EXPECT_EQ(values(partial), iota(0, 10));
  EXPECT_EQ(calls2->load(), 11);
}

TEST(DatasetTest, FileCacheIsWrittenOnceAndReadBack) {
  const auto dir = std::filesystem::temp_directory_path() / "weft_cache_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "c.bin").string();
  NDArray x = NDArray::from_vector<float>(Shape{4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Dataset ds = from_arrays({x}, "x").cache(path);
  auto first = ds.iterate();
  std::vector<std::vector<float>> rows;
  while (auto e = first->next()) rows.push_back(e->arrays[0].to_vector<float>());
  first.reset();
  ASSERT_TRUE(std::filesystem::exists(path));
  // A new pipeline over different data reads the complete file, like tf.data.
  NDArray other = NDArray::zeros(Shape{4, 2});
  auto replay = from_arrays({other}, "other").cache(path).iterate();
  std::vector<std::vector<float>> again;
  while (auto e = replay->next()) {
    again.push_back(e->arrays[0].to_vector<float>());
    EXPECT_NE(e->origin.find("x row"), std::string::npos);
  }
  EXPECT_EQ(again, rows);
  // A damaged file is an error naming it, and the replay ends there.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  auto damaged = ds.iterate();
  EXPECT_THROW(
      {
        while (damaged->next()) {
        }
      },
      DataError);
  EXPECT_FALSE(damaged->next());
  // A header announcing more data than the file holds fails before allocating it.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8 + 4 + 8 + 4 + static_cast<std::streamoff>(std::string("x row 0").size()) + 8);
    const int64_t huge = int64_t{1} << 40;
    f.write(reinterpret_cast<const char*>(&huge), 8);
  }
  auto lying = ds.iterate();
  try {
    lying->next();
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("more data than the file holds"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(DatasetTest, PrefetchBoundsHowFarTheProducerRunsAhead) {
  auto produced = std::make_shared<std::atomic<int>>(0);
  auto gen = [produced]() -> GeneratorFn {
    return [produced]() -> std::optional<std::vector<NDArray>> {
      const int i = (*produced)++;
      if (i >= 100) return std::nullopt;
      return std::vector<NDArray>{scalar_i64(i)};
    };
  };
  auto it = from_generator(gen).prefetch(4).iterate();
  for (int consumed = 1; consumed <= 10; ++consumed) {
    auto e = it->next();
    ASSERT_TRUE(e);
    EXPECT_EQ(value_of(*e), consumed - 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // buffer (4) + the element being produced now (1) ahead of what was consumed.
    EXPECT_LE(produced->load(), consumed + 4 + 1);
  }
  it.reset();  // stops the producer mid-stream without hanging
  EXPECT_LT(produced->load(), 100);
}

TEST(DatasetTest, PrefetchOverlapsProductionWithASlowConsumer) {
  // Producing an element takes 4 ms; the consumer spends 10 ms on each. Without overlap the
  // consumer would wait 4 ms per element (80 ms over 20); with a full buffer it waits only when
  // the producer falls behind. The bound is half the no-overlap figure: a scheduling stall on a
  // loaded machine does not fail it, a prefetch that does not run ahead does.
  auto slow_map = [](std::vector<NDArray> a, Rng&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
    return a;
  };
  auto it = range(0, 30).map(slow_map).prefetch(4).iterate();
  for (int i = 0; i < 4; ++i) it->next();  // warm up
  const int64_t warm_wait = it->stats().consumer_wait_ns;
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(it->next());
  }
  EXPECT_LT(it->stats().consumer_wait_ns - warm_wait, 40'000'000);
}

TEST(DatasetTest, PrefetchDeliversErrorsInOrderAndCountsSkips) {
  auto fail_even = [](std::vector<NDArray> a, Rng&) -> std::vector<NDArray> {
    if (read_i64(a[0]) % 2 == 0) throw ValueError("even");
    return a;
  };
  auto it = range(0, 4).map(fail_even).prefetch(2).iterate();
  EXPECT_THROW(it->next(), DataError);
  EXPECT_EQ(value_of(*it->next()), 1);
  EXPECT_THROW(it->next(), DataError);
  EXPECT_EQ(value_of(*it->next()), 3);
  EXPECT_FALSE(it->next());
  auto skipping = range(0, 10).map(fail_even).ignore_errors().prefetch(2).iterate();
  std::vector<int64_t> got;
  while (auto e = skipping->next()) got.push_back(value_of(*e));
  EXPECT_EQ(got, (std::vector<int64_t>{1, 3, 5, 7, 9}));
  EXPECT_EQ(skipping->stats().skipped_errors, 5);
}

TEST(DatasetTest, PrefetchToTheCpuKeepsArraysOnTheCpu) {
  PrefetchOptions o;
  o.buffer = 2;
  o.device = Device::cpu();
  auto it = range(0, 3).prefetch(o).iterate();
  auto e = it->next();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->arrays[0].device(), Device::cpu());
}

TEST(DatasetTest, PrefetchToADeviceThatCannotBeReachedNamesStageAndDevice) {
  // Without a GPU (or before CUDA copies exist) the copy fails; the consumer gets an error
  // naming the stage and device, then the end.
  DeviceAPI* cuda = DeviceAPI::try_get(DeviceType::kCUDA);
  if (cuda != nullptr && cuda->device_count() > 0) GTEST_SKIP() << "a GPU is present";
  PrefetchOptions o;
  o.device = Device::cuda(0);
  auto it = range(0, 2).prefetch(o).iterate();
  try {
    it->next();
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("prefetch(cuda:0)"), std::string::npos) << e.what();
    EXPECT_EQ(e.index(), 0);
  }
}

TEST(DatasetTest, DescribeNamesEveryStage) {
  Dataset ds = range(0, 4)
                   .map(square(), MapOptions{2, true, 1, MapExecutor::kEngine, "sq"})
                   .batch(2)
                   .prefetch(3);
  EXPECT_EQ(ds.describe(), "prefetch(3) <- batch(2) <- map(sq, 2) <- range(0, 4, 1)");
  EXPECT_EQ(ds.cardinality(), 2);
}

}  // namespace
}  // namespace weft::data
