// The imperative path's per-operation shortcuts, checked against what they replace: storage of
// arrays that died idle reused for the next array (Note [Recycled storage] in ndarray.cc), the
// per-thread inference cache (Note [Inference cache] in invoke.cc), and tiny kernels run on the
// caller's stack when ready (Note [Tiny kernels run where they become ready]).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"
#include "tests/ndarray/allclose.h"

namespace weft::testing {
namespace {

TEST(RecycledStorage, AnIdleDeadArrayGivesItsMemoryToTheNextOfItsSize) {
  NDArray a = NDArray::full(Shape{4}, 1.0);
  a.wait_to_read();
  const void* memory = a.raw_data();
  const VarHandle old_var = a.var();
  const uint64_t old_id = a.storage_id();
  Engine& engine = Runtime::get().engine();
  a = NDArray();  // dies idle
  NDArray b = NDArray::empty(Shape{2, 2});
  EXPECT_EQ(b.raw_data(), memory) << "same size, same thread: the memory is reused";
  EXPECT_NE(b.storage_id(), old_id) << "storage ids are never reused";
  EXPECT_EQ(b.version(), 0u) << "a new array starts at version 0";
  EXPECT_NE(b.var(), old_var);
  EXPECT_THROW(engine.var_version(old_var), ValueError) << "the dead array's handle is retired";
  // The reused array behaves as a new one.
  NDArray c = b + NDArray::full(Shape{2, 2}, 0.0);
  NDArray::full(Shape{2, 2}, 3.0).copy_to(b);
  EXPECT_EQ(b.to_vector<float>(), std::vector<float>(4, 3.0f));
  EXPECT_EQ(b.version(), 1u);
}

TEST(RecycledStorage, AnArrayWithPendingWorkIsNotReused) {
  NDArray a = NDArray::full(Shape{8}, 2.0);
  a.wait_to_read();
  const void* memory = a.raw_data();
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  // A kernel still reading `a` when it dies: its memory must not go to another array.
  Runtime::get().engine().push(
      [&](const RunContext&) {
        started = true;
        while (!release) std::this_thread::yield();
      },
      Device::cpu(), {a.var()}, {});
  while (!started) std::this_thread::yield();
  a = NDArray();
  NDArray b = NDArray::empty(Shape{8});
  EXPECT_NE(b.raw_data(), memory);
  release = true;
  waitall();
}

TEST(RecycledStorage, LoopsOverRecycledResultsComputeTheReference) {
  NDArray one = NDArray::full(Shape{3}, 1.0);
  NDArray x = NDArray::zeros(Shape{3});
  for (int i = 0; i < 1000; ++i) x = x + one;
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>(3, 1000.0f));
  // Interleaved sizes and dtypes: every result gets memory of its own size.
  NDArray s = NDArray::zeros(Shape{5});
  NDArray d = NDArray::zeros(Shape{5}, DType::kFloat64);
  for (int i = 0; i < 100; ++i) {
    s = s + NDArray::full(Shape{5}, 2.0);
    d = d + NDArray::full(Shape{5}, 0.5, DType::kFloat64);
  }
  EXPECT_EQ(s.to_vector<float>(), std::vector<float>(5, 200.0f));
  EXPECT_EQ(d.to_vector<double>(), std::vector<double>(5, 50.0));
}

TEST(RecycledStorage, ResultsOfPendingInputsAreStillOrdered) {
  // The inputs are not ready when the op is pushed: it takes the queued path.
  NDArray a = NDArray::full(Shape{2}, 1.0);
  std::atomic<bool> release{false};
  Runtime::get().engine().push(
      [&](const RunContext&) {
        while (!release) std::this_thread::yield();
      },
      Device::cpu(), {}, {a.var()});
  NDArray b = a + a;
  NDArray c = b + a;
  release = true;
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(2, 3.0f));
}

TEST(InferenceCache, SameAttributesOnOtherShapesAndTypesInferAgain) {
  const auto add = make_op_attrs("elemwise_add");
  for (int round = 0; round < 3; ++round) {
    for (int64_t n : {1, 3, 7}) {
      NDArray a = NDArray::full(Shape{n}, 1.0);
      NDArray r = invoke(add, {a, a}).at(0);
      EXPECT_EQ(r.shape(), Shape{n});
      EXPECT_EQ(r.dtype(), DType::kFloat32);
      NDArray d = NDArray::full(Shape{n}, 1.0, DType::kFloat64);
      NDArray rd = invoke(add, {d, d}).at(0);
      EXPECT_EQ(rd.dtype(), DType::kFloat64);
      EXPECT_EQ(rd.to_vector<double>(), std::vector<double>(static_cast<size_t>(n), 2.0));
    }
  }
  // A mismatch that a remembered inference of other shapes must not hide.
  NDArray a = NDArray::full(Shape{3}, 1.0);
  NDArray b = NDArray::full(Shape{4}, 1.0);
  EXPECT_THROW(invoke(add, {a, b}), ShapeError);
}

TEST(InferenceCache, GivenOutputsAreCheckedEveryTime) {
  const auto add = make_op_attrs("elemwise_add");
  NDArray a = NDArray::full(Shape{3}, 1.0);
  invoke(add, {a, a});  // remembered without given outputs
  InvokeOptions o;
  o.outputs = {NDArray::zeros(Shape{4})};
  EXPECT_THROW(invoke(add, {a, a}, o), ShapeError);
}

// Threads each recording and differentiating their own tiny graph at once: recycled storage,
// ready-at-push kernels and per-thread caches must keep every thread's gradient its own. The
// reference is the analytic gradient, d/dx sum(c * x * x) = 2 c x.
TEST(RecycledStorage, ThreadsWithTheirOwnGradients) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::vector<double>> data(kThreads), grads(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      for (int k = 0; k < 16; ++k) data[t].push_back(std::sin(1.0 + 16 * t + k + round));
    }
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        NDArray x = NDArray::from_vector(Shape{16}, data[t]);
        x.attach_grad();
        for (int it = 0; it < 5; ++it) {
          NDArray y;
          {
            autograd::RecordScope record;
            y = op::sum(x * x * double(t + 1));
          }
          autograd::backward({y});
        }
        grads[t] = x.grad().to_vector<double>();
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      for (int k = 0; k < 16; ++k) {
        ASSERT_NEAR(grads[t][k], 2.0 * (t + 1) * data[t][k], 1e-12)
            << "round " << round << " thread " << t << " element " << k;
      }
    }
  }
}

}  // namespace
}  // namespace weft::testing
