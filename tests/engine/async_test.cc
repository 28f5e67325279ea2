// Asynchronous operations: completion from the op's own thread, from foreign threads, in any order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

class AsyncTest : public EngineTest {};

TEST_P(AsyncTest, AsyncOpCompletedInsideItsFunctionActsLikeSyncOp) {
  VarHandle v = engine_->new_var();
  int64_t value = 0;
  const int n = 100;
  for (int i = 0; i < n; ++i) {
    engine_->push_async(
        [&value](const RunContext&, CallbackOnComplete done) {
          ++value;
          done();
        },
        Device::cpu(), {}, {v}, i % 2 == 0 ? FnProperty::kAsync : FnProperty::kNormal);
  }
  wait_var(v);
  EXPECT_EQ(value, n);
  EXPECT_EQ(engine_->var_version(v), static_cast<uint64_t>(n));
}

TEST_P(AsyncTest, AsyncOpCompletedFromForeignThreadReleasesDependents) {
  std::atomic<int> completed{0};
  std::atomic<int> early_dependents{0};
  std::atomic<int> dependents_ran{0};
  ThreadCollector completers;
  VarHandle v = engine_->new_var();
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        completers.spawn([&completed, done] {
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
          completed.store(1);
          done();
        });
      },
      Device::cpu(), {}, {v}, FnProperty::kAsync);
  auto dependent = [&](const RunContext&) {
    if (completed.load() == 0) early_dependents.fetch_add(1);
    dependents_ran.fetch_add(1);
  };
  engine_->push(dependent, Device::cpu(), {v}, {});
  engine_->push(dependent, Device::cpu(), {}, {v});
  wait_var(v);
  EXPECT_EQ(completed.load(), 1);
  EXPECT_EQ(dependents_ran.load(), 2);
  EXPECT_EQ(early_dependents.load(), 0);
  EXPECT_EQ(engine_->var_version(v), 2u);
  completers.join_all();
}

// Many async ops whose callbacks a separate thread completes in scrambled order; a final op
// reads every output.
TEST_P(AsyncTest, AsyncOpsCompletedOutOfOrderFeedAFinalReader) {
  const int n = 300;
  std::vector<VarHandle> outs = new_vars(n);
  VarHandle input = engine_->new_var();
  std::vector<int64_t> results(n, 0);
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<int, CallbackOnComplete>> queue;
  bool stop = false;
  std::thread completer([&] {
    std::mt19937 rng(9);
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;
      std::vector<std::pair<int, CallbackOnComplete>> batch(queue.begin(), queue.end());
      queue.clear();
      lock.unlock();
      std::shuffle(batch.begin(), batch.end(), rng);
      for (auto& [index, done] : batch) {
        results[index] = int64_t{index} * index;
        done();
      }
      lock.lock();
    }
  });
  engine_->push([](const RunContext&) {}, Device::cpu(), {}, {input});
  for (int i = 0; i < n; ++i) {
    engine_->push_async(
        [&, i](const RunContext&, CallbackOnComplete done) {
          // Notifies under the lock: once the last op completes, the test may destroy `cv`.
          std::lock_guard<std::mutex> lock(mutex);
          queue.emplace_back(i, done);
          cv.notify_one();
        },
        Device::cpu(), {input}, {outs[i]});
  }
  int64_t sum = -1;
  engine_->push(
      [&](const RunContext&) {
        int64_t s = 0;
        for (int64_t r : results) s += r;
        sum = s;
      },
      Device::cpu(), outs, {input});
  wait_all();
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
    cv.notify_one();
  }
  completer.join();
  int64_t expected = 0;
  for (int64_t i = 0; i < n; ++i) expected += i * i;
  EXPECT_EQ(sum, expected);
  for (VarHandle v : outs) EXPECT_EQ(engine_->var_version(v), 1u);
  EXPECT_EQ(engine_->var_version(input), 2u);
}

// A completion callback may itself push work before completing (an MPI or device callback
// that schedules the follow-up): the push must not wait for the operation it belongs to.
TEST_P(AsyncTest, CompleterThreadMayPushBeforeCompleting) {
  VarHandle v = engine_->new_var();
  VarHandle follow_up = engine_->new_var();
  std::atomic<int> follow_up_ran{0};
  ThreadCollector completers;
  run_with_deadline("async op whose completer pushes", [&] {
    engine_->push_async(
        [&](const RunContext&, CallbackOnComplete done) {
          completers.spawn([&, done] {
            engine_->push([&](const RunContext&) { follow_up_ran.fetch_add(1); }, Device::cpu(), {},
                          {follow_up});
            done();
          });
        },
        Device::cpu(), {}, {v});
    engine_->wait_for_all();
  });
  EXPECT_EQ(follow_up_ran.load(), 1);
  EXPECT_EQ(engine_->var_version(v), 1u);
  EXPECT_EQ(engine_->var_version(follow_up), 1u);
  completers.join_all();
}

TEST(CallbackOnCompleteTest, EmptyCallbackThrowsValueError) {
  CallbackOnComplete empty;
  EXPECT_THROW(empty(), ValueError);
}

INSTANTIATE_TEST_SUITE_P(Engines, AsyncTest, ::testing::ValuesIn(all_engines()), engine_param_name);

// ---- threaded: observing an async op while it is still incomplete ---------------------------

class ThreadedAsyncTest : public EngineTest {};

TEST_P(ThreadedAsyncTest, WaitForVarReturnsOnlyAfterAsyncCompletion) {
  Notification release;
  std::atomic<int> completed{0};
  std::atomic<int> dependent_ran{0};
  std::atomic<int> waiter_returned{0};
  std::atomic<int> waiter_saw_completed{0};
  ThreadCollector completers;
  VarHandle v = engine_->new_var();
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        completers.spawn([&, done] {
          release.wait_for(kHangLimit);
          completed.store(1);
          done();
        });
      },
      Device::cpu(), {}, {v});
  engine_->push([&](const RunContext&) { dependent_ran.store(completed.load() + 1); },
                Device::cpu(), {v}, {});
  std::thread waiter([&] {
    engine_->wait_for_var(v);
    waiter_saw_completed.store(completed.load());
    waiter_returned.store(1);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // give a wrong engine a chance
  EXPECT_EQ(waiter_returned.load(), 0);
  EXPECT_EQ(dependent_ran.load(), 0);
  release.notify();
  run_with_deadline("waiter thread", [&] { waiter.join(); });
  EXPECT_EQ(waiter_saw_completed.load(), 1);
  EXPECT_EQ(dependent_ran.load(), 2);
  completers.join_all();
}

INSTANTIATE_TEST_SUITE_P(Threaded, ThreadedAsyncTest, ::testing::ValuesIn(concurrent_engines()),
                         engine_param_name);

}  // namespace
}  // namespace weft::testing
