// Var deletion, engine destruction, and waiting from inside an operation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

class LifecycleTest : public EngineTest {};

TEST_P(LifecycleTest, DeleteVarAfterWorkDropsLiveVars) {
  std::vector<VarHandle> vars = new_vars(3);
  std::atomic<int> ran{0};
  for (VarHandle v : vars) {
    engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {}, {v});
  }
  EXPECT_EQ(engine_->stats().live_vars, 3);
  engine_->delete_var(vars[1]);
  wait_all();
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(engine_->stats().live_vars, 2);
  engine_->delete_var(vars[0]);
  engine_->delete_var(vars[2]);
  wait_all();
  EXPECT_EQ(engine_->stats().live_vars, 0);
}

TEST_P(LifecycleTest, InsideEngineOperationIsTrueOnlyInsideOps) {
  VarHandle v = engine_->new_var();
  std::atomic<int> inside_sync{0}, inside_prioritized{0}, inside_async{0};
  EXPECT_FALSE(inside_engine_operation());
  engine_->push([&](const RunContext&) { inside_sync.store(inside_engine_operation() ? 1 : -1); },
                Device::cpu(), {}, {v});
  engine_->push(
      [&](const RunContext&) { inside_prioritized.store(inside_engine_operation() ? 1 : -1); },
      Device::cpu(), {v}, {}, FnProperty::kCPUPrioritized);
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        inside_async.store(inside_engine_operation() ? 1 : -1);
        done();
      },
      Device::cpu(), {}, {v});
  wait_all();
  EXPECT_EQ(inside_sync.load(), 1);
  EXPECT_EQ(inside_prioritized.load(), 1);
  EXPECT_EQ(inside_async.load(), 1);
  EXPECT_FALSE(inside_engine_operation());
}

// Waiting inside an operation would wait for itself (or for work queued behind it): the engine
// throws weft::Error instead of hanging.
TEST_P(LifecycleTest, WaitingInsideAnOpThrowsInsteadOfHanging) {
  VarHandle own = engine_->new_var();
  VarHandle other = engine_->new_var();
  engine_->push([](const RunContext&) {}, Device::cpu(), {}, {other});
  std::atomic<int> wait_own_threw{0}, wait_other_threw{0}, wait_all_threw{0};
  std::atomic<int> body_finished{0};
  run_with_deadline("op that waits inside its body", [&] {
    engine_->push(
        [&](const RunContext&) {
          try {
            engine_->wait_for_var(own);
          } catch (const Error&) {
            wait_own_threw.store(1);
          }
          try {
            engine_->wait_for_var(other);
          } catch (const Error&) {
            wait_other_threw.store(1);
          }
          try {
            engine_->wait_for_all();
          } catch (const Error&) {
            wait_all_threw.store(1);
          }
          body_finished.store(1);
        },
        Device::cpu(), {}, {own});
    engine_->wait_for_all();
  });
  EXPECT_EQ(body_finished.load(), 1);
  EXPECT_EQ(wait_own_threw.load(), 1);
  EXPECT_EQ(wait_other_threw.load(), 1);
  EXPECT_EQ(wait_all_threw.load(), 1);
  EXPECT_EQ(engine_->var_version(own), 1u);
}

// The Error from waiting, left uncaught, fails the op like any other exception.
TEST_P(LifecycleTest, UncaughtWaitErrorFailsTheOp) {
  VarHandle v = engine_->new_var();
  run_with_deadline("op whose wait error escapes", [&] {
    engine_->push([&](const RunContext&) { engine_->wait_for_all(); }, Device::cpu(), {}, {v});
    EXPECT_THROW(engine_->wait_for_var(v), Error);
    try {
      engine_->wait_for_all();
    } catch (const EngineError&) {
    }
  });
  EXPECT_EQ(engine_->var_version(v), 0u);
}

TEST_P(LifecycleTest, DestructionWaitsForPendingWork) {
  std::atomic<int> slow_done{0}, dependent_done{0};
  VarHandle v = engine_->new_var();
  engine_->push(
      [&](const RunContext&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        slow_done.store(1);
      },
      Device::cpu(), {}, {v});
  engine_->push([&](const RunContext&) { dependent_done.store(slow_done.load() + 1); },
                Device::cpu(), {v}, {});
  destroy_engine();
  EXPECT_EQ(slow_done.load(), 1);
  EXPECT_EQ(dependent_done.load(), 2) << "the dependent must run, after the slow op";
}

TEST_P(LifecycleTest, DestructionWaitsForAsyncOpCompletedElsewhere) {
  std::atomic<int> completed{0}, dependent_saw{0};
  ThreadCollector completers;
  VarHandle v = engine_->new_var();
  engine_->push_async(
      [&](const RunContext&, CallbackOnComplete done) {
        completers.spawn([&completed, done] {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          completed.store(1);
          done();
        });
      },
      Device::cpu(), {}, {v});
  engine_->push([&](const RunContext&) { dependent_saw.store(completed.load() + 1); },
                Device::cpu(), {v}, {});
  destroy_engine();
  EXPECT_EQ(completed.load(), 1);
  EXPECT_EQ(dependent_saw.load(), 2);
  completers.join_all();
}

TEST_P(LifecycleTest, DestructionWithUnobservedErrorsDoesNotCrash) {
  std::vector<VarHandle> vars = new_vars(3);
  std::atomic<int> dependents_ran{0};
  engine_->push([](const RunContext&) { throw TestFailure("never observed"); }, Device::cpu(), {},
                {vars[0]});
  engine_->push([&](const RunContext&) { dependents_ran.fetch_add(1); }, Device::cpu(), {vars[0]},
                {vars[1]});
  engine_->push([&](const RunContext&) { dependents_ran.fetch_add(1); }, Device::cpu(), {},
                {vars[2]});
  destroy_engine();
  EXPECT_EQ(dependents_ran.load(), 1) << "only the op independent of the failure runs";
}

TEST_P(LifecycleTest, EnginesCanBeCreatedAndDestroyedRepeatedly) {
  const int rounds = 20;
  run_with_deadline("create/destroy cycles", [&] {
    for (int i = 0; i < rounds; ++i) {
      auto engine = Engine::create(GetParam().config());
      if (i % 2 == 1) {
        VarHandle v = engine->new_var();
        engine->push([](const RunContext&) {}, Device::cpu(), {}, {v});
      }
      engine.reset();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, LifecycleTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

// ---- threaded: deletion while an op still holds the var --------------------------------------

class ThreadedLifecycleTest : public EngineTest {};

TEST_P(ThreadedLifecycleTest, DeleteVarWithPendingOpKeepsItUntilTheOpFinishes) {
  VarHandle held = engine_->new_var();
  VarHandle out = engine_->new_var();
  Notification started, release;
  std::atomic<int> slow_done{0};
  int64_t result = 0;
  engine_->push(
      [&](const RunContext&) {
        started.notify();
        release.wait_for(kHangLimit);
        slow_done.store(1);
      },
      Device::cpu(), {}, {held});
  // Pushed before the deletion, so it must still run (after the slow op).
  engine_->push([&](const RunContext&) { result = slow_done.load() + 41; }, Device::cpu(), {held},
                {out});
  ASSERT_TRUE(started.wait_for());
  engine_->delete_var(held);
  EXPECT_EQ(engine_->stats().live_vars, 2) << "a var is counted until its pending ops finish";

  // Pushing on the deleted var is refused, and the refused op never runs.
  std::atomic<int> refused_ran{0};
  EXPECT_THROW(engine_->push([&](const RunContext&) { refused_ran.fetch_add(1); }, Device::cpu(),
                             {held}, {out}),
               ValueError);
  EXPECT_THROW(engine_->push([&](const RunContext&) { refused_ran.fetch_add(1); }, Device::cpu(),
                             {}, {held}),
               ValueError);
  EXPECT_THROW(engine_->wait_for_var(held), ValueError);

  release.notify();
  wait_all();
  EXPECT_EQ(slow_done.load(), 1);
  EXPECT_EQ(result, 42);
  EXPECT_EQ(refused_ran.load(), 0);
  EXPECT_EQ(engine_->var_version(out), 1u);
  EXPECT_EQ(engine_->stats().live_vars, 1);
}

TEST_P(ThreadedLifecycleTest, DestructionWaitsForOpBlockedOnAnotherThread) {
  Notification started, release;
  std::atomic<int> done{0};
  VarHandle v = engine_->new_var();
  engine_->push(
      [&](const RunContext&) {
        started.notify();
        release.wait_for(kHangLimit);
        done.store(1);
      },
      Device::cpu(), {}, {v});
  ASSERT_TRUE(started.wait_for());
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release.notify();
  });
  destroy_engine();
  opener.join();
  EXPECT_EQ(done.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(Threaded, ThreadedLifecycleTest, ::testing::ValuesIn(concurrent_engines()),
                         engine_param_name);

}  // namespace
}  // namespace weft::testing
