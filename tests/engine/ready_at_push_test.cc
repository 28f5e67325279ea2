// Operations ready when pushed run on the pushing thread without an operation block (Note [Ready
// at push] in engine/ready_at_push.cc): Engine::run_if_ready, kAsync pushes, delete_var and
// wait_for_var of idle variables, and Engine::renew_var. Each is checked against what the queued
// path does: order, versions, errors, and the refusal of stale handles.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

class ReadyAtPush : public ::testing::Test {
 protected:
  void SetUp() override { engine_ = Engine::create(make_config(EngineKind::kThreaded, 2)); }
  void TearDown() override {
    run_with_deadline("engine destruction", [this] { engine_.reset(); });
  }
  // Pushes an operation writing (or reading) `var` that holds it until `release` is notified;
  // returns once it runs.
  void hold(VarHandle var, bool write, Notification& release) {
    Notification started;
    engine_->push(
        [&started, &release](const RunContext&) {
          started.notify();
          EXPECT_TRUE(release.wait_for());
        },
        Device::cpu(), write ? VarList{} : VarList{var}, write ? VarList{var} : VarList{});
    ASSERT_TRUE(started.wait_for());
  }
  std::unique_ptr<Engine> engine_;
};

TEST_F(ReadyAtPush, RunsAnIdleOperationOnTheCallingThreadAndBumpsVersions) {
  VarHandle a = engine_->new_var(), b = engine_->new_var();
  std::thread::id ran_on;
  SyncFn fn([&ran_on](const RunContext& rc) {
    ran_on = std::this_thread::get_id();
    EXPECT_EQ(rc.worker, -1);
  });
  EXPECT_TRUE(engine_->run_if_ready(fn, Device::cpu(), {a}, {b}, "idle"));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(static_cast<bool>(fn)) << "a function that ran is consumed";
  EXPECT_EQ(engine_->var_version(a), 0u);
  EXPECT_EQ(engine_->var_version(b), 1u);
  EXPECT_EQ(engine_->stats().completed_ops, 1);
  engine_->wait_for_all();
}

TEST_F(ReadyAtPush, LeavesTheFunctionWhenAVariableIsBusy) {
  VarHandle v = engine_->new_var();
  Notification release;
  hold(v, /*write=*/true, release);
  int ran = 0;
  SyncFn fn([&ran](const RunContext&) { ++ran; });
  EXPECT_FALSE(engine_->run_if_ready(fn, Device::cpu(), {v}, {}, "busy"));
  EXPECT_TRUE(static_cast<bool>(fn)) << "refused: the function is left to push";
  EXPECT_EQ(ran, 0);
  release.notify();
  engine_->push(std::move(fn), Device::cpu(), {v}, {});
  run_with_deadline("wait", [&] { engine_->wait_for_all(); });
  EXPECT_EQ(ran, 1);
}

TEST_F(ReadyAtPush, ReadsRunBesideARunningReadButAWriteWaits) {
  VarHandle v = engine_->new_var();
  Notification release;
  hold(v, /*write=*/false, release);
  SyncFn read([](const RunContext&) {});
  EXPECT_TRUE(engine_->run_if_ready(read, Device::cpu(), {v}, {}, "read"));
  SyncFn write([](const RunContext&) {});
  EXPECT_FALSE(engine_->run_if_ready(write, Device::cpu(), {}, {v}, "write"));
  release.notify();
  run_with_deadline("wait", [&] { engine_->wait_for_all(); });
}

TEST_F(ReadyAtPush, ARunningReadDoesNotLetAReadOvertakeAQueuedWrite) {
  // Order per variable is push order: a read pushed after a queued write runs after it.
  VarHandle v = engine_->new_var();
  Notification release;
  hold(v, /*write=*/false, release);
  std::vector<int> order;
  engine_->push([&order](const RunContext&) { order.push_back(1); }, Device::cpu(), {}, {v});
  SyncFn read([&order](const RunContext&) { order.push_back(2); });
  EXPECT_FALSE(engine_->run_if_ready(read, Device::cpu(), {v}, {}, "read"));
  engine_->push(std::move(read), Device::cpu(), {v}, {});
  release.notify();
  run_with_deadline("wait", [&] { engine_->wait_for_all(); });
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST_F(ReadyAtPush, AFailureReachesTheWrittenVariables) {
  VarHandle in = engine_->new_var(), out = engine_->new_var(), next = engine_->new_var();
  SyncFn fail([](const RunContext&) { throw TestFailure("boom"); });
  EXPECT_TRUE(engine_->run_if_ready(fail, Device::cpu(), {in}, {out}, "fails"));
  EXPECT_EQ(engine_->var_version(out), 0u) << "a failed write bumps no version";
  // A reader of `out`, ready at push, is skipped and passes the error on.
  bool ran = false;
  SyncFn reader([&ran](const RunContext&) { ran = true; });
  EXPECT_TRUE(engine_->run_if_ready(reader, Device::cpu(), {out}, {next}, "skipped"));
  EXPECT_FALSE(ran);
  EXPECT_THROW(engine_->wait_for_var(next), TestFailure);
  EXPECT_THROW(engine_->wait_for_all(), EngineError);
  EXPECT_EQ(engine_->stats().failed_ops, 1);
  EXPECT_EQ(engine_->stats().skipped_ops, 1);
}

TEST_F(ReadyAtPush, NullAndDeletedVariablesAreRefused) {
  VarHandle v = engine_->new_var();
  engine_->delete_var(v);
  SyncFn fn([](const RunContext&) {});
  EXPECT_THROW(engine_->run_if_ready(fn, Device::cpu(), {v}, {}, "stale"), ValueError);
  EXPECT_THROW(engine_->run_if_ready(fn, Device::cpu(), {}, {VarHandle()}, "null"), ValueError);
  EXPECT_TRUE(static_cast<bool>(fn));
}

TEST_F(ReadyAtPush, DeleteVarOfAnIdleVariableFreesItAtOnce) {
  VarHandle v = engine_->new_var();
  bool deleted = false;
  engine_->delete_var(v, [&deleted](const RunContext&) { deleted = true; });
  EXPECT_TRUE(deleted) << "nothing was pending: on_deleted ran before delete_var returned";
  EXPECT_EQ(engine_->stats().live_vars, 0);
}

TEST_F(ReadyAtPush, WaitForAnIdleVariableDeliversItsError) {
  VarHandle v = engine_->new_var();
  engine_->push([](const RunContext&) { throw TestFailure("failed write"); }, Device::cpu(), {},
                {v});
  run_with_deadline("wait", [&] { EXPECT_THROW(engine_->wait_for_var(v), TestFailure); });
  // Delivered once; the variable is idle and clean now.
  EXPECT_NO_THROW(engine_->wait_for_var(v));
  EXPECT_THROW(engine_->wait_for_all(), EngineError) << "the failure still counts for wait_for_all";
}

TEST_F(ReadyAtPush, RenewVarGivesAFreshHandleAndRetiresTheOldOne) {
  VarHandle v = engine_->new_var();
  engine_->push([](const RunContext&) {}, Device::cpu(), {}, {v});
  engine_->wait_for_all();
  ASSERT_EQ(engine_->var_version(v), 1u);
  VarHandle fresh = engine_->renew_var(v);
  ASSERT_TRUE(fresh);
  EXPECT_NE(fresh, v);
  EXPECT_EQ(engine_->var_version(fresh), 0u);
  EXPECT_THROW(engine_->var_version(v), ValueError);
  EXPECT_THROW(engine_->wait_for_var(v), ValueError);
  EXPECT_THROW(engine_->push([](const RunContext&) {}, Device::cpu(), {v}, {}), ValueError);
  EXPECT_EQ(engine_->stats().live_vars, 1);
  engine_->push([](const RunContext&) {}, Device::cpu(), {}, {fresh});
  engine_->wait_for_var(fresh);
  EXPECT_EQ(engine_->var_version(fresh), 1u);
  engine_->delete_var(fresh);
}

TEST_F(ReadyAtPush, RenewVarRefusesBusyOrFailedVariables) {
  VarHandle busy = engine_->new_var();
  Notification release;
  hold(busy, /*write=*/false, release);
  EXPECT_FALSE(engine_->renew_var(busy));
  EXPECT_NO_THROW(engine_->var_version(busy)) << "a refused renewal changes nothing";
  release.notify();
  VarHandle failed = engine_->new_var();
  engine_->push([](const RunContext&) { throw TestFailure("x"); }, Device::cpu(), {}, {failed});
  run_with_deadline("wait", [&] { EXPECT_THROW(engine_->wait_for_all(), EngineError); });
  // wait_for_all cleared the error: the variable is clean again.
  EXPECT_TRUE(engine_->renew_var(failed));
  VarHandle failing = engine_->new_var();
  SyncFn fail([](const RunContext&) { throw TestFailure("y"); });
  ASSERT_TRUE(engine_->run_if_ready(fail, Device::cpu(), {}, {failing}));
  EXPECT_FALSE(engine_->renew_var(failing)) << "an undelivered error stays with its variable";
  EXPECT_THROW(engine_->wait_for_all(), EngineError);
}

TEST(ReadyAtPushSyncEngine, SyncEngineHasNoSuchPath) {
  auto engine = Engine::create(make_config(EngineKind::kSync, 0));
  VarHandle v = engine->new_var();
  SyncFn fn([](const RunContext&) {});
  EXPECT_FALSE(engine->run_if_ready(fn, Device::cpu(), {}, {v}));
  EXPECT_TRUE(static_cast<bool>(fn));
  EXPECT_FALSE(engine->renew_var(v));
}

// Threads mixing operations run at push with queued ones on shared variables: every increment
// lands exactly once, in an order the variables allow (run under TSan in CI).
TEST_F(ReadyAtPush, ConcurrentPushersAgreeWithASerialCount) {
  constexpr int kThreads = 4;
  const int per_thread = kUnderTsan ? 2000 : 20000;
  VarHandle x = engine_->new_var(), y = engine_->new_var();
  int64_t x_value = 0, y_value = 0;
  std::atomic<int64_t> ran_here{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        if ((i + t) % 3 == 0) {
          // Reads x, writes y.
          SyncFn fn([&](const RunContext&) { y_value += x_value >= 0 ? 1 : 0; });
          if (engine_->run_if_ready(fn, Device::cpu(), {x}, {y})) {
            ran_here.fetch_add(1, std::memory_order_relaxed);
          } else {
            engine_->push(std::move(fn), Device::cpu(), {x}, {y});
          }
        } else {
          engine_->push_sync([&](const RunContext&) { ++x_value; }, Device::cpu(), {}, {x},
                             FnProperty::kAsync);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  run_with_deadline("wait", [&] { engine_->wait_for_all(); });
  int64_t expected_x = 0, expected_y = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < per_thread; ++i) ((i + t) % 3 == 0 ? expected_y : expected_x) += 1;
  }
  EXPECT_EQ(x_value, expected_x);
  EXPECT_EQ(y_value, expected_y);
  EXPECT_EQ(engine_->var_version(x), static_cast<uint64_t>(expected_x));
  EXPECT_EQ(engine_->var_version(y), static_cast<uint64_t>(expected_y));
}

}  // namespace
}  // namespace weft::testing
