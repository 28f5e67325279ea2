// Tests of parallel_for (ops/infer_util.h): every index is visited exactly once whatever the thread
// count on its path without OpenMP (this file is compiled with -fno-openmp, tests/CMakeLists.txt),
// and a kernel of the library run on several threads writes its whole output.
#include "ops/infer_util.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

TEST(ParallelFor, EveryIndexIsVisitedOnceForAnyThreadCount) {
  for (const int threads : {1, 2, 3, 4, 7, 16}) {
    for (const int64_t n : {1, 5, 64, 1000}) {
      for (const int64_t grain : {1, 3, 100}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        parallel_for(n, grain, threads, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
              << "index " << i << " of " << n << ", grain " << grain << ", " << threads
              << " threads";
        }
      }
    }
  }
}

// A kernel whose loops split over several threads must write every element of an output that
// holds garbage on entry (the arena reuses memory): WEFT_USE_OPENMP=OFF once ran only the first
// thread's chunk and left the rest of the output as it was.
TEST(ParallelFor, MultithreadedKernelOverwritesAllOfAGarbageOutput) {
  const int64_t rows = 8, k = 256, hidden = 64;
  const HostTensor x = HostTensor::random(Shape{rows, k}, 11);
  const HostTensor w = HostTensor::random(Shape{hidden, k}, 12);
  const HostTensor b = HostTensor::random(Shape{hidden}, 13);
  HostTensor expected = HostTensor::filled(Shape{rows, hidden}, 0.0);
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t j = 0; j < hidden; ++j) {
      double acc = b.data[j];
      for (int64_t i = 0; i < k; ++i) acc += x.data[m * k + i] * w.data[j * k + i];
      expected.data[m * hidden + j] = acc;
    }
  }
  RunOptions opt;
  opt.num_threads = 4;
  opt.initial_outputs = {
      HostTensor::filled(Shape{rows, hidden}, std::numeric_limits<double>::quiet_NaN())};
  const auto out = run_op("FullyConnected", {{"num_hidden", "64"}}, {x, w, b}, opt);
  EXPECT_TRUE(all_close(out[0], expected, 1e-4, 1e-4));
}

}  // namespace
}  // namespace weft::testing
