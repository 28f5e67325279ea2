// NDArray behaviour: asynchronous invocation, waits, views, copies, errors at the call site.
#include "ndarray/ndarray.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "base/build_config.h"
#include "ndarray/autograd.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"

#if WEFT_USE_ONEDNN
#include <omp.h>
#endif

namespace weft {
namespace {

TEST(NDArray, FromVectorRoundTripsValues) {
  auto a = NDArray::from_vector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), DType::kFloat32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(a.to_vector<double>(), ValueError);
}

TEST(NDArray, OpReturnsBeforeItsKernelRunsAndAReadWaits) {
  auto a = NDArray::from_vector<float>(Shape{4}, {1, 2, 3, 4});
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> blocker_done{false};
  // A write to `a` that blocks until released: everything reading `a` must wait behind it.
  Runtime::get().engine().push_sync(
      [gate, &blocker_done, p = static_cast<float*>(a.raw_data())](const RunContext&) {
        gate.wait();
        p[0] = 10;
        blocker_done = true;
      },
      Device::cpu(), {}, {a.var()});
  NDArray b = a + a;  // must return although its input is still being written
  EXPECT_FALSE(blocker_done.load());
  EXPECT_EQ(b.version(), 0u);  // b has not been written yet
  release.set_value();
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{20, 4, 6, 8}));
  EXPECT_TRUE(blocker_done.load());
  EXPECT_EQ(b.version(), 1u);
}

TEST(NDArray, ReshapeAndSliceAreViewsOfTheSameStorage) {
  auto a = NDArray::from_vector<float>(Shape{3, 2}, {0, 1, 2, 3, 4, 5});
  NDArray r = a.reshape(Shape{2, -1});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_TRUE(r.shares_storage_with(a));
  NDArray s = a.slice(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(a.at(2).to_vector<float>(), (std::vector<float>{4, 5}));
  // Writing into the slice changes the base array.
  NDArray ones = NDArray::from_vector<float>(Shape{2, 2}, {1, 1, 1, 1});
  s += ones;
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0, 1, 3, 4, 5, 6}));
  EXPECT_THROW(a.reshape(Shape{4, 2}), ShapeError);
  EXPECT_THROW(a.slice(2, 5), ValueError);
}

TEST(NDArray, ArithmeticBroadcastsAndUsesScalars) {
  auto a = NDArray::from_vector<float>(Shape{2, 2}, {1, 2, 3, 4});
  auto row = NDArray::from_vector<float>(Shape{1, 2}, {10, 20});
  EXPECT_EQ((a + row).to_vector<float>(), (std::vector<float>{11, 22, 13, 24}));
  EXPECT_EQ((a * 2.0).to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ((1.0 - a).to_vector<float>(), (std::vector<float>{0, -1, -2, -3}));
  EXPECT_EQ((-a).to_vector<float>(), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ((a / a).to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
}

TEST(NDArray, ShapeMismatchThrowsAtTheCallNamingTheOp) {
  auto a = NDArray::from_vector<float>(Shape{2, 2}, {1, 2, 3, 4});
  auto b = NDArray::from_vector<float>(Shape{3}, {1, 2, 3});
  try {
    invoke1("elemwise_add", {a, b});
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("elemwise_add"), std::string::npos) << e.what();
  }
  EXPECT_THROW(invoke1("no_such_op", {a}), ValueError);
  EXPECT_THROW(invoke1("Convolution", {a, a}, {{"kernel", "(3,3)"}}),
               ValueError);  // num_filter missing
  // The arrays are intact and usable afterwards.
  EXPECT_EQ((a + a).to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
}

TEST(NDArray, CopyIsIndependentOfTheSource) {
  auto a = NDArray::from_vector<float>(Shape{3}, {1, 2, 3});
  NDArray c = a.copy();
  EXPECT_FALSE(c.shares_storage_with(a));
  a += a;
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST(NDArray, CreationOpsAndRandomSeedAreReproducible) {
  EXPECT_EQ(NDArray::zeros(Shape{2}).to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(NDArray::ones(Shape{2}).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(NDArray::full(Shape{2}, 2.5).to_vector<float>(), (std::vector<float>{2.5, 2.5}));
  EXPECT_EQ(NDArray::arange(0, 4).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
  random_seed(42);
  auto u1 = NDArray::uniform(Shape{16}).to_vector<float>();
  auto n1 = NDArray::normal(Shape{16}).to_vector<float>();
  random_seed(42);
  auto u2 = NDArray::uniform(Shape{16}).to_vector<float>();
  auto n2 = NDArray::normal(Shape{16}).to_vector<float>();
  EXPECT_EQ(u1, u2);
  EXPECT_EQ(n1, n2);
  for (float v : u1) EXPECT_TRUE(v >= 0 && v < 1);
}

TEST(NDArray, ManyThreadsInvokingConcurrentlyGetCorrectResults) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      auto x = NDArray::full(Shape{64}, t);
      NDArray acc = NDArray::zeros(Shape{64});
      for (int i = 0; i < 50; ++i) acc += x;
      for (float v : acc.to_vector<float>())
        if (v != 50.0f * t) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(NDArray, KernelErrorSurfacesAtTheWaitAndTheRuntimeStaysUsable) {
  auto a = NDArray::from_vector<float>(Shape{2}, {1, 2});
  // An operation that fails while writing `a`: readers see its error, later work still runs.
  Runtime::get().engine().push_sync([](const RunContext&) { throw ValueError("injected failure"); },
                                    Device::cpu(), {}, {a.var()});
  NDArray b = a + a;
  EXPECT_THROW(b.wait_to_read(), ValueError);
  EXPECT_THROW(waitall(), EngineError);
  auto c = NDArray::from_vector<float>(Shape{2}, {3, 4});
  EXPECT_EQ((c + c).to_vector<float>(), (std::vector<float>{6, 8}));
}

}  // namespace
}  // namespace weft

#if WEFT_USE_ONEDNN
namespace weft {
namespace {
// A thread that pushes with fewer OpenMP threads than a worker runs the kernel with (a host
// program such as Python with PyTorch loaded sets 1) must still get a large enough workspace: the
// request is computed from the pushing thread's oneDNN plan, the kernel uses the worker's (Note
// [Primitive thread count] in ops/cpu/dnnl_util.cc). Grouped convolutions size their scratchpad by
// the thread count.
TEST(NDArray, ConvolutionWorkspaceHoldsWhenThePusherHasFewerOpenMPThreads) {
  const int previous = omp_get_max_threads();
  omp_set_num_threads(1);
  for (int groups : {2, 4}) {
    NDArray x = NDArray::uniform(Shape{2, 4, 9, 8});
    NDArray w = NDArray::uniform(Shape{8, 4 / groups, 3, 3});
    NDArray b = NDArray::uniform(Shape{8});
    NDArray y = invoke1("Convolution", {x, w, b},
                        {{"kernel", "(3, 3)"},
                         {"pad", "(1, 1)"},
                         {"num_filter", "8"},
                         {"num_group", std::to_string(groups)}});
    // The same convolution as `groups` separate ones over channel slices: equal within rounding.
    std::vector<float> got = y.to_vector<float>();
    const int64_t per_in = 4 / groups, per_out = 8 / groups;
    std::vector<float> xs = x.to_vector<float>(), ws = w.to_vector<float>(),
                       bs = b.to_vector<float>();
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t f = 0; f < 8; ++f)
        for (int64_t i = 0; i < 9; ++i)
          for (int64_t j = 0; j < 8; ++j) {
            double acc = bs[f];
            const int64_t g = f / per_out;
            for (int64_t c = 0; c < per_in; ++c)
              for (int64_t ki = 0; ki < 3; ++ki)
                for (int64_t kj = 0; kj < 3; ++kj) {
                  const int64_t ii = i + ki - 1, jj = j + kj - 1;
                  if (ii < 0 || ii >= 9 || jj < 0 || jj >= 8) continue;
                  acc += double(xs[((n * 4 + g * per_in + c) * 9 + ii) * 8 + jj]) *
                         ws[((f * per_in + c) * 3 + ki) * 3 + kj];
                }
            ASSERT_NEAR(got[((n * 8 + f) * 9 + i) * 8 + j], acc, 1e-4 * (1 + std::abs(acc)))
                << "groups " << groups << " at (" << n << ", " << f << ", " << i << ", " << j
                << ")";
          }
  }
  omp_set_num_threads(previous);
}
}  // namespace
}  // namespace weft
#endif
