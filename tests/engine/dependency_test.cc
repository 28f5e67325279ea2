// Read/write ordering, versions, duplicate vars and waits of every engine.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

class DependencyTest : public EngineTest {};

TEST_P(DependencyTest, NewVarStartsAtVersionZero) {
  VarHandle v = engine_->new_var();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(engine_->var_version(v), 0u);
  VarHandle w = engine_->new_var();
  EXPECT_NE(v, w);
}

TEST_P(DependencyTest, ReadsLeaveVersionUnchanged) {
  VarHandle v = engine_->new_var();
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) {
    engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {v}, {});
  }
  wait_var(v);
  EXPECT_EQ(ran.load(), 10);
  EXPECT_EQ(engine_->var_version(v), 0u);
}

TEST_P(DependencyTest, TenWritesRaiseVersionByTen) {
  VarHandle v = engine_->new_var();
  engine_->push([](const RunContext&) {}, Device::cpu(), {}, {v});
  wait_var(v);
  const uint64_t before = engine_->var_version(v);
  EXPECT_EQ(before, 1u);
  for (int i = 0; i < 10; ++i) engine_->push([](const RunContext&) {}, Device::cpu(), {}, {v});
  wait_var(v);
  EXPECT_EQ(engine_->var_version(v), before + 10);
  for (int i = 0; i < 10; ++i) engine_->push([](const RunContext&) {}, Device::cpu(), {v}, {});
  wait_all();
  EXPECT_EQ(engine_->var_version(v), before + 10);
}

TEST_P(DependencyTest, WritesToOneVarRunInPushOrder) {
  VarHandle v = engine_->new_var();
  const int n = 2000;
  std::vector<int> order;  // guarded by the engine's write ordering only
  for (int i = 0; i < n; ++i) {
    engine_->push([&order, i](const RunContext&) { order.push_back(i); }, Device::cpu(), {}, {v});
  }
  wait_var(v);
  ASSERT_EQ(static_cast<int>(order.size()), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(order[i], i);
  EXPECT_EQ(engine_->var_version(v), static_cast<uint64_t>(n));
}

// Each read observes exactly the writes pushed before it: reads after a write wait for it, and
// a write waits for the reads pushed before it.
TEST_P(DependencyTest, ReadsSeeExactlyTheWritesPushedBeforeThem) {
  constexpr int kVars = 4;
  const int n = 4000;
  std::vector<VarHandle> vars = new_vars(kVars);
  std::vector<int64_t> counters(kVars, 0);  // written only by write ops of its var
  std::vector<int64_t> writes_pushed(kVars, 0);
  std::atomic<int> wrong_reads{0};
  std::atomic<int> reads_run{0};
  std::mt19937 rng(11);
  for (int i = 0; i < n; ++i) {
    int k = static_cast<int>(rng() % kVars);
    if (rng() % 3 == 0) {
      engine_->push([c = &counters[k]](const RunContext&) { ++*c; }, Device::cpu(), {}, {vars[k]});
      ++writes_pushed[k];
    } else {
      engine_->push(
          [&, c = &counters[k], expect = writes_pushed[k]](const RunContext&) {
            if (*c != expect) wrong_reads.fetch_add(1);
            reads_run.fetch_add(1);
          },
          Device::cpu(), {vars[k]}, {});
    }
  }
  wait_all();
  EXPECT_EQ(wrong_reads.load(), 0);
  EXPECT_GT(reads_run.load(), 0);
  for (int k = 0; k < kVars; ++k) {
    EXPECT_EQ(counters[k], writes_pushed[k]);
    EXPECT_EQ(engine_->var_version(vars[k]), static_cast<uint64_t>(writes_pushed[k]));
  }
}

TEST_P(DependencyTest, DuplicateVarsCountOnce) {
  VarHandle v = engine_->new_var();
  VarHandle w = engine_->new_var();
  std::atomic<int> ran{0};
  engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {v, v, v}, {});
  wait_var(v);
  EXPECT_EQ(engine_->var_version(v), 0u);
  engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {}, {v, v});
  wait_var(v);
  EXPECT_EQ(engine_->var_version(v), 1u);
  // Read and written: a single write.
  engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {v, w, v}, {v});
  wait_all();
  EXPECT_EQ(engine_->var_version(v), 2u);
  EXPECT_EQ(engine_->var_version(w), 0u);
  EXPECT_EQ(ran.load(), 3);
}

TEST_P(DependencyTest, OpWithoutVarsRuns) {
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) {
    engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {}, {});
  }
  wait_all();
  EXPECT_EQ(ran.load(), 20);
}

TEST_P(DependencyTest, WaitForVarWaitsForPendingReads) {
  VarHandle v = engine_->new_var();
  std::atomic<int> done{0};
  for (int i = 0; i < 8; ++i) {
    engine_->push(
        [&](const RunContext&) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          done.fetch_add(1);
        },
        Device::cpu(), {v}, {});
  }
  wait_var(v);
  EXPECT_EQ(done.load(), 8);
}

TEST_P(DependencyTest, RunContextNamesDeviceAndWorker) {
  VarHandle v = engine_->new_var();
  std::mutex mutex;
  std::vector<RunContext> seen;
  for (int i = 0; i < 16; ++i) {
    engine_->push(
        [&](const RunContext& ctx) {
          std::lock_guard<std::mutex> lock(mutex);
          seen.push_back(ctx);
        },
        Device::cpu(), {}, {v});
  }
  wait_all();
  ASSERT_EQ(seen.size(), 16u);
  for (const RunContext& ctx : seen) {
    EXPECT_EQ(ctx.device, Device::cpu());
    EXPECT_EQ(ctx.stream.device, Device::cpu());
    EXPECT_EQ(ctx.stream.handle, nullptr);
    if (!is_sync()) {
      EXPECT_GE(ctx.worker, 0);
      EXPECT_LT(ctx.worker, GetParam().cpu_workers);
    }
  }
}

TEST_P(DependencyTest, NumWorkersMatchesConfig) {
  EXPECT_EQ(engine_->kind(), GetParam().kind);
  EXPECT_EQ(engine_->num_workers(Device::cpu()), is_sync() ? 0 : GetParam().cpu_workers);
}

TEST_P(DependencyTest, StatsCountCompletedOpsAndLiveVars) {
  const EngineStats before = engine_->stats();
  EXPECT_EQ(before.live_vars, 0);
  EXPECT_EQ(before.completed_ops, 0);
  std::vector<VarHandle> vars = new_vars(5);
  EXPECT_EQ(engine_->stats().live_vars, 5);
  for (int i = 0; i < 50; ++i) {
    engine_->push([](const RunContext&) {}, Device::cpu(), {vars[i % 5]}, {vars[(i + 1) % 5]});
  }
  wait_all();
  EngineStats after = engine_->stats();
  EXPECT_EQ(after.pending_ops, 0);
  EXPECT_EQ(after.completed_ops, 50);
  EXPECT_EQ(after.failed_ops, 0);
  EXPECT_EQ(after.skipped_ops, 0);
  EXPECT_EQ(after.live_vars, 5);
  engine_->delete_var(vars[0]);
  engine_->delete_var(vars[1]);
  wait_all();
  EXPECT_EQ(engine_->stats().live_vars, 3);
}

// The counters describe the operations the caller pushed; waits and deletions are not ops.
TEST_P(DependencyTest, StatsCountOnlyPushedOps) {
  VarHandle v = engine_->new_var();
  VarHandle w = engine_->new_var();
  engine_->push([](const RunContext&) {}, Device::cpu(), {}, {v});
  wait_var(v);
  wait_var(v);
  engine_->delete_var(w);
  wait_all();
  EngineStats stats = engine_->stats();
  EXPECT_EQ(stats.completed_ops, 1);
  EXPECT_EQ(stats.pending_ops, 0);
  EXPECT_EQ(stats.live_vars, 1);
}

// An operation may push further operations; a child that writes its parent's var runs after the
// parent has completed, and wait_for_all waits for the whole cascade.
TEST_P(DependencyTest, OpsPushedFromInsideOpsRunAfterTheirParent) {
  VarHandle v = engine_->new_var();
  constexpr int kDepth = 50;
  std::vector<int> log;  // ordered by the writes on v
  std::atomic<int> child_saw_parent_unfinished{0};
  std::function<void(int)> push_level = [&](int level) {
    engine_->push(
        [&, level](const RunContext&) {
          log.push_back(level);
          if (level + 1 < kDepth) push_level(level + 1);
          // Still inside the parent: a child writing v must not have run yet.
          if (log.back() != level) child_saw_parent_unfinished.fetch_add(1);
        },
        Device::cpu(), {}, {v});
  };
  push_level(0);
  wait_all();
  ASSERT_EQ(static_cast<int>(log.size()), kDepth);
  for (int i = 0; i < kDepth; ++i) EXPECT_EQ(log[i], i);
  EXPECT_EQ(child_saw_parent_unfinished.load(), 0);
  EXPECT_EQ(engine_->var_version(v), static_cast<uint64_t>(kDepth));
}

TEST_P(DependencyTest, PushWithNullVarThrowsValueErrorAndPushesNothing) {
  VarHandle v = engine_->new_var();
  std::atomic<int> ran{0};
  EXPECT_THROW(
      engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {v, nullptr}, {}),
      ValueError);
  EXPECT_THROW(
      engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {}, {nullptr}),
      ValueError);
  wait_all();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(engine_->stats().completed_ops, 0);
  // The engine is still usable.
  engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {v}, {v});
  wait_all();
  EXPECT_EQ(ran.load(), 1);
}

TEST_P(DependencyTest, PushWithVarOfAnotherEngineThrowsValueError) {
  auto other = Engine::create(GetParam().config());
  VarHandle foreign = other->new_var();
  VarHandle mine = engine_->new_var();
  std::atomic<int> ran{0};
  EXPECT_THROW(
      engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {mine}, {foreign}),
      ValueError);
  wait_all();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(engine_->var_version(mine), 0u);
  other->delete_var(foreign);
  run_with_deadline("second engine destruction", [&] { other.reset(); });
}

TEST_P(DependencyTest, PushWithEmptyFunctionThrowsValueError) {
  VarHandle v = engine_->new_var();
  EXPECT_THROW(engine_->push(SyncFn(), Device::cpu(), {}, {v}), ValueError);
  EXPECT_THROW(engine_->push_async(AsyncFn(), Device::cpu(), {}, {v}), ValueError);
  wait_all();
  EXPECT_EQ(engine_->var_version(v), 0u);
  EXPECT_EQ(engine_->stats().pending_ops, 0);
}

TEST_P(DependencyTest, PushForDeviceWithoutWorkersThrowsNotImplemented) {
  if (engine_->num_workers(Device::cuda(0)) > 0) {
    GTEST_SKIP() << "this engine has workers for cuda:0";
  }
  VarHandle v = engine_->new_var();
  std::atomic<int> ran{0};
  EXPECT_THROW(
      engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cuda(0), {}, {v}),
      NotImplemented);
  EXPECT_THROW(engine_->push_async(
                   [&](const RunContext&, CallbackOnComplete done) {
                     ran.fetch_add(1);
                     done();
                   },
                   Device::cuda(0), {}, {v}),
               NotImplemented);
  wait_all();
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(engine_->var_version(v), 0u);
  EXPECT_EQ(engine_->stats().pending_ops, 0);
}

INSTANTIATE_TEST_SUITE_P(Engines, DependencyTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

// ---- threaded-only: blocking one op to observe what may and may not run meanwhile ------------

class ThreadedDependencyTest : public EngineTest {};

TEST_P(ThreadedDependencyTest, WriteAfterReadWaitsForReader) {
  VarHandle v = engine_->new_var();
  Notification reader_started, release_reader;
  std::atomic<bool> reader_finished{false};
  std::atomic<int> writer_ran_early{0};
  std::atomic<bool> writer_ran{false};
  engine_->push(
      [&](const RunContext&) {
        reader_started.notify();
        release_reader.wait_for();
        reader_finished.store(true);
      },
      Device::cpu(), {v}, {});
  engine_->push(
      [&](const RunContext&) {
        if (!reader_finished.load()) writer_ran_early.fetch_add(1);
        writer_ran.store(true);
      },
      Device::cpu(), {}, {v});
  ASSERT_TRUE(reader_started.wait_for());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // give a wrong writer a chance
  EXPECT_FALSE(writer_ran.load());
  release_reader.notify();
  wait_var(v);
  EXPECT_TRUE(writer_ran.load());
  EXPECT_EQ(writer_ran_early.load(), 0);
  EXPECT_EQ(engine_->var_version(v), 1u);
}

TEST_P(ThreadedDependencyTest, ReadAfterWriteWaitsForWriter) {
  VarHandle v = engine_->new_var();
  Notification writer_started, release_writer;
  std::atomic<bool> writer_finished{false};
  std::atomic<int> reader_ran_early{0};
  std::atomic<bool> reader_ran{false};
  engine_->push(
      [&](const RunContext&) {
        writer_started.notify();
        release_writer.wait_for();
        writer_finished.store(true);
      },
      Device::cpu(), {}, {v});
  engine_->push(
      [&](const RunContext&) {
        if (!writer_finished.load()) reader_ran_early.fetch_add(1);
        reader_ran.store(true);
      },
      Device::cpu(), {v}, {});
  ASSERT_TRUE(writer_started.wait_for());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(reader_ran.load());
  release_writer.notify();
  wait_var(v);
  EXPECT_TRUE(reader_ran.load());
  EXPECT_EQ(reader_ran_early.load(), 0);
}

TEST_P(ThreadedDependencyTest, WaitForVarDoesNotWaitForUnrelatedVars) {
  VarHandle busy = engine_->new_var();
  VarHandle other = engine_->new_var();
  Notification started, release;
  engine_->push(
      [&](const RunContext&) {
        started.notify();
        release.wait_for(kHangLimit);
      },
      Device::cpu(), {}, {busy});
  ASSERT_TRUE(started.wait_for());
  std::atomic<bool> other_ran{false};
  engine_->push([&](const RunContext&) { other_ran.store(true); }, Device::cpu(), {}, {other});
  // Must return while `busy` is still held (the watchdog fails the test otherwise).
  run_with_deadline(
      "wait_for_var on an unrelated var", [&] { engine_->wait_for_var(other); }, kBlockLimit);
  EXPECT_TRUE(other_ran.load());
  EXPECT_FALSE(release.notified());
  release.notify();
  wait_all();
}

INSTANTIATE_TEST_SUITE_P(Threaded, ThreadedDependencyTest,
                         ::testing::ValuesIn(concurrent_engines()), engine_param_name);

}  // namespace
}  // namespace weft::testing
