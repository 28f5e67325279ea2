// The completion contract: on_complete exactly once, exceptions after completion, stale variable
// handles, and which threads run kAsync operations (docs/ENGINE.md, "Completion contract").
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

class CompletionTest : public EngineTest {
 protected:
  /// wait_for_all; returns the EngineError's message, or "<none>" when it did not throw.
  std::string wait_all_message() {
    try {
      wait_all();
    } catch (const EngineError& e) {
      return e.what();
    }
    return "<none>";
  }
  void TearDown() override {
    EngineTest::TearDown();
    completers_.join_all();
  }
  ThreadCollector completers_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_P(CompletionTest, OnCompleteCalledTwiceIsAnErrorAndReleasesOnce) {
  VarHandle v = engine_->new_var();
  std::atomic<int> second_call_errors{0};
  std::string second_message;
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        done();
        try {
          done();
        } catch (const Error& e) {
          second_message = e.what();
          second_call_errors.fetch_add(1);
        }
      },
      Device::cpu(), {}, {v}, FnProperty::kNormal, 0, "twice");
  std::atomic<int> dependents{0};
  engine_->push([&](const RunContext&) { dependents.fetch_add(1); }, Device::cpu(), {}, {v});
  wait_var(v);
  std::string report = wait_all_message();
  EXPECT_EQ(second_call_errors.load(), 1);
  EXPECT_TRUE(contains(second_message, "on_complete")) << second_message;
  EXPECT_TRUE(contains(report, "on_complete")) << report;
  EXPECT_TRUE(contains(report, "twice")) << report;
  EXPECT_EQ(dependents.load(), 1);
  // One release per operation: the async op's write and the dependent's write.
  EXPECT_EQ(engine_->var_version(v), 2u);
  // The engine stays usable.
  engine_->push([&](const RunContext&) { dependents.fetch_add(1); }, Device::cpu(), {v}, {v});
  wait_all();
  EXPECT_EQ(dependents.load(), 2);
  EXPECT_EQ(engine_->var_version(v), 3u);
}

TEST_P(CompletionTest, OnCompleteCalledTwiceFromAForeignThreadThrowsThere) {
  VarHandle v = engine_->new_var();
  std::atomic<int> second_call_errors{0};
  Notification finished;
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        completers_.spawn([&, done] {
          done();
          try {
            done();
          } catch (const Error&) {
            second_call_errors.fetch_add(1);
          }
          finished.notify();
        });
      },
      Device::cpu(), {}, {v}, FnProperty::kNormal, 0, "foreign twice");
  ASSERT_TRUE(finished.wait_for());
  wait_var(v);
  EXPECT_EQ(second_call_errors.load(), 1);
  EXPECT_EQ(engine_->var_version(v), 1u);
  EXPECT_TRUE(contains(wait_all_message(), "on_complete"));
  EXPECT_EQ(wait_all_message(), "<none>");
}

TEST_P(CompletionTest, ThrowAfterOnCompleteDoesNotReleaseTwice) {
  VarHandle v = engine_->new_var();
  VarHandle w = engine_->new_var();
  std::atomic<int> dependents{0};
  engine_->push_async(
      [](const RunContext&, CallbackOnComplete done) {
        done();
        throw TestFailure("late failure");
      },
      Device::cpu(), {}, {v}, FnProperty::kNormal, 0, "late thrower");
  engine_->push([&](const RunContext&) { dependents.fetch_add(1); }, Device::cpu(), {v}, {w});
  engine_->push([&](const RunContext&) { dependents.fetch_add(1); }, Device::cpu(), {}, {v});
  // The variables were released before the exception: they carry no error.
  EXPECT_NO_THROW(wait_var(w));
  EXPECT_NO_THROW(wait_var(v));
  std::string report = wait_all_message();
  EXPECT_TRUE(contains(report, "late thrower")) << report;
  EXPECT_TRUE(contains(report, "late failure")) << report;
  EXPECT_TRUE(contains(report, "after")) << report;
  EXPECT_EQ(dependents.load(), 2);
  EXPECT_EQ(engine_->var_version(v), 2u);
  EXPECT_EQ(engine_->var_version(w), 1u);
  engine_->push([&](const RunContext&) { dependents.fetch_add(1); }, Device::cpu(), {w}, {v});
  wait_all();
  EXPECT_EQ(dependents.load(), 3);
  EXPECT_EQ(engine_->var_version(v), 3u);
}

TEST_P(CompletionTest, StaleVarHandleIsRejectedAfterItsSlotIsReused) {
  VarHandle stale = engine_->new_var();
  engine_->delete_var(stale);
  wait_all();
  // Variables are pooled: new ones soon reuse the deleted variable's memory (at once when it was
  // freed on this thread, as here: nothing was pending on it).
  std::vector<VarHandle> fresh;
  bool reused = false;
  for (int i = 0; i < 65536 && !reused; ++i) {
    fresh.push_back(engine_->new_var());
    reused = fresh.back().get() == stale.get();  // same memory, new generation
  }
  ASSERT_TRUE(reused) << "the pool never handed the deleted variable's slot out again";
  VarHandle successor = fresh.back();
  std::atomic<int> ran{0};
  EXPECT_THROW(
      engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {}, {stale}),
      ValueError);
  EXPECT_THROW(
      engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {stale}, {}),
      ValueError);
  EXPECT_THROW(engine_->wait_for_var(stale), ValueError);
  EXPECT_THROW(engine_->var_version(stale), ValueError);
  EXPECT_THROW(engine_->delete_var(stale), ValueError);
  wait_all();
  EXPECT_EQ(ran.load(), 0);
  // The variable that reuses the slot is untouched and works.
  EXPECT_EQ(engine_->var_version(successor), 0u);
  engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {}, {successor});
  wait_var(successor);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(engine_->var_version(successor), 1u);
  for (VarHandle v : fresh) engine_->delete_var(v);
}

TEST_P(CompletionTest, DeletedVarHandleIsRejectedBeforeItsSlotIsReused) {
  VarHandle v = engine_->new_var();
  engine_->delete_var(v);
  wait_all();
  EXPECT_THROW(engine_->push([](const RunContext&) {}, Device::cpu(), {v}, {}), ValueError);
  EXPECT_THROW(engine_->delete_var(v), ValueError);
}

INSTANTIATE_TEST_SUITE_P(Engines, CompletionTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

// Which thread runs a kAsync operation (threaded engine only).
class KAsyncThreadTest : public CompletionTest {};

TEST_P(KAsyncThreadTest, KAsyncOpReleasedByAForeignThreadRunsOnAWorker) {
  VarHandle a = engine_->new_var();
  VarHandle b = engine_->new_var();
  Notification release;
  std::atomic<std::thread::id> foreign{};
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        completers_.spawn([&, done] {
          foreign.store(std::this_thread::get_id());
          if (release.wait_for())
            done();
          else
            done(std::make_exception_ptr(TestFailure("never released")));
        });
      },
      Device::cpu(), {}, {a}, FnProperty::kNormal, 0, "foreign completion");
  std::thread::id ran_on{};
  int worker = -2;
  engine_->push_async(
      [&](const RunContext& rc, CallbackOnComplete done) {
        ran_on = std::this_thread::get_id();
        worker = rc.worker;
        done();
      },
      Device::cpu(), {a}, {b}, FnProperty::kAsync, 0, "tiny kernel");
  release.notify();
  wait_var(b);
  EXPECT_NE(ran_on, foreign.load()) << "the kAsync op ran on the thread that called on_complete";
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_GE(worker, 0) << "the kAsync op did not run on an engine worker";
}

TEST_P(KAsyncThreadTest, KAsyncOpReadyAtPushRunsOnThePushingThread) {
  VarHandle a = engine_->new_var();
  std::thread::id ran_on{};
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        ran_on = std::this_thread::get_id();
        done();
      },
      Device::cpu(), {}, {a}, FnProperty::kAsync, 0, "ready tiny kernel");
  wait_var(a);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST_P(KAsyncThreadTest, KAsyncOpReleasedByAWorkerRunsOnThatWorker) {
  VarHandle a = engine_->new_var();
  VarHandle b = engine_->new_var();
  Notification release;
  std::thread::id producer{};
  engine_->push(
      [&](const RunContext&) {
        producer = std::this_thread::get_id();
        release.wait_for();
      },
      Device::cpu(), {}, {a}, FnProperty::kNormal, 0, "producer");
  std::thread::id consumer{};
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        consumer = std::this_thread::get_id();
        done();
      },
      Device::cpu(), {a}, {b}, FnProperty::kAsync, 0, "tiny consumer");
  release.notify();
  wait_var(b);
  EXPECT_EQ(consumer, producer);
}

INSTANTIATE_TEST_SUITE_P(Threaded, KAsyncThreadTest, ::testing::ValuesIn(concurrent_engines()),
                         engine_param_name);

}  // namespace
}  // namespace weft::testing
