// Concurrency guarantees: concurrent reads, exclusive writes, many threads pushing at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <latch>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

// ---- reads of one var run at the same time (threaded engine, >= 2 workers) -------------------

class ConcurrentReadTest : public EngineTest {};

TEST_P(ConcurrentReadTest, ReadsOfOneVarRunConcurrently) {
  VarHandle v = engine_->new_var();
  int64_t value = 0;
  engine_->push([&](const RunContext&) { value = 7; }, Device::cpu(), {}, {v});
  // As many readers as workers: they can only all meet if the engine runs them together.
  const int readers = GetParam().cpu_workers;
  Rendezvous meet(readers);
  std::atomic<int> met{0};
  std::atomic<int> saw_write{0};
  for (int i = 0; i < readers; ++i) {
    engine_->push(
        [&](const RunContext&) {
          if (value == 7) saw_write.fetch_add(1);
          if (meet.arrive_and_wait_for()) met.fetch_add(1);
        },
        Device::cpu(), {v}, {});
  }
  wait_all();
  EXPECT_EQ(met.load(), readers) << "reads of one var did not run concurrently";
  EXPECT_EQ(saw_write.load(), readers);
  EXPECT_EQ(engine_->var_version(v), 1u);
}

TEST_P(ConcurrentReadTest, OpsOnDifferentVarsRunConcurrently) {
  std::vector<VarHandle> vars = new_vars(2);
  Rendezvous meet(2);
  std::atomic<int> met{0};
  for (VarHandle v : vars) {
    engine_->push(
        [&](const RunContext&) {
          if (meet.arrive_and_wait_for()) met.fetch_add(1);
        },
        Device::cpu(), {}, {v});
  }
  wait_all();
  EXPECT_EQ(met.load(), 2) << "writes of different vars did not run concurrently";
}

INSTANTIATE_TEST_SUITE_P(Threaded, ConcurrentReadTest, ::testing::ValuesIn(concurrent_engines()),
                         engine_param_name);

// ---- writes are exclusive ---------------------------------------------------------------------

class ExclusiveWriteTest : public EngineTest {};

/// Who is inside an operation on one var right now.
struct Occupancy {
  std::atomic<int> readers{0};
  std::atomic<int> writers{0};
};

void spin_briefly() {
  for (int i = 0; i < 3; ++i) std::this_thread::yield();
}

TEST_P(ExclusiveWriteTest, WritesNeverOverlapOtherOpsOnTheirVar) {
  constexpr int kVars = 3;
  const int n = 3000;
  std::vector<VarHandle> vars = new_vars(kVars);
  std::vector<Occupancy> occupancy(kVars);
  std::vector<int64_t> writes_done(kVars, 0);  // plain: only writers of the var touch it
  std::vector<int64_t> writes_pushed(kVars, 0);
  std::atomic<int> overlaps{0};
  std::atomic<int> max_readers{0};
  std::mt19937 rng(3);

  auto enter_write = [&](int k) {
    if (occupancy[k].writers.fetch_add(1) != 0) overlaps.fetch_add(1);
    if (occupancy[k].readers.load() != 0) overlaps.fetch_add(1);
  };
  auto leave_write = [&](int k) { occupancy[k].writers.fetch_sub(1); };

  for (int i = 0; i < n; ++i) {
    int a = static_cast<int>(rng() % kVars);
    int kind = static_cast<int>(rng() % 4);
    if (kind == 0) {  // read
      engine_->push(
          [&, a](const RunContext&) {
            int inside = occupancy[a].readers.fetch_add(1) + 1;
            int seen = max_readers.load();
            while (inside > seen && !max_readers.compare_exchange_weak(seen, inside)) {
            }
            if (occupancy[a].writers.load() != 0) overlaps.fetch_add(1);
            spin_briefly();
            occupancy[a].readers.fetch_sub(1);
          },
          Device::cpu(), {vars[a]}, {});
    } else if (kind == 1) {  // write two vars at once
      int b = (a + 1 + static_cast<int>(rng() % (kVars - 1))) % kVars;
      engine_->push(
          [&, a, b](const RunContext&) {
            enter_write(a);
            enter_write(b);
            ++writes_done[a];
            ++writes_done[b];
            spin_briefly();
            leave_write(b);
            leave_write(a);
          },
          Device::cpu(), {}, {vars[b], vars[a]});
      ++writes_pushed[a];
      ++writes_pushed[b];
    } else {  // write one var (half of them also list it as a read)
      std::vector<VarHandle> read_list;
      if (kind == 3) read_list.push_back(vars[a]);
      engine_->push(
          [&, a](const RunContext&) {
            enter_write(a);
            ++writes_done[a];
            spin_briefly();
            leave_write(a);
          },
          Device::cpu(), read_list, {vars[a]});
      ++writes_pushed[a];
    }
  }
  wait_all();
  EXPECT_EQ(overlaps.load(), 0);
  for (int k = 0; k < kVars; ++k) {
    EXPECT_EQ(writes_done[k], writes_pushed[k]);
    EXPECT_EQ(engine_->var_version(vars[k]), static_cast<uint64_t>(writes_pushed[k]));
  }
  RecordProperty("max_concurrent_readers", max_readers.load());
}

INSTANTIATE_TEST_SUITE_P(Engines, ExclusiveWriteTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

// ---- many threads pushing at once -----------------------------------------------------------

class ConcurrentPushTest : public EngineTest {};

TEST_P(ConcurrentPushTest, EightPushingThreadsMatchCounts) {
  constexpr int kThreads = 8;
  constexpr int kShared = 4;
  const int ops_per_thread = 1500;
  std::vector<VarHandle> shared = new_vars(kShared);
  std::vector<VarHandle> mine = new_vars(kThreads);
  std::vector<int64_t> shared_count(kShared, 0);  // guarded by the engine: writers of the var
  std::vector<int64_t> private_count(kThreads, 0);
  std::vector<int64_t> private_reads_of_shared(kThreads, 0);
  // What each pushing thread planned; summed after they finish (the independent reference).
  std::vector<std::vector<int64_t>> planned_shared(kThreads, std::vector<int64_t>(kShared, 0));
  std::vector<int64_t> planned_private(kThreads, 0);
  std::vector<int64_t> planned_reads(kThreads, 0);
  int64_t total_ops = 0;

  run_with_deadline("eight threads pushing, then wait_for_all", [&] {
    std::latch start(kThreads);
    std::vector<std::thread> pushers;
    for (int t = 0; t < kThreads; ++t) {
      pushers.emplace_back([&, t] {
        std::mt19937 rng(100 + t);
        start.arrive_and_wait();
        for (int i = 0; i < ops_per_thread; ++i) {
          int a = static_cast<int>(rng() % kShared);
          switch (rng() % 4) {
            case 0:
              engine_->push([c = &private_count[t]](const RunContext&) { ++*c; }, Device::cpu(), {},
                            {mine[t]});
              ++planned_private[t];
              break;
            case 1:
              engine_->push([c = &shared_count[a]](const RunContext&) { ++*c; }, Device::cpu(), {},
                            {shared[a]});
              ++planned_shared[t][a];
              break;
            case 2: {
              // Several shared vars, listed in an order that differs between threads.
              int b = (a + 1 + static_cast<int>(rng() % (kShared - 1))) % kShared;
              std::vector<VarHandle> writes = {shared[a], shared[b], mine[t]};
              if (t % 2 == 1) std::reverse(writes.begin(), writes.end());
              engine_->push(
                  [ca = &shared_count[a], cb = &shared_count[b],
                   cp = &private_count[t]](const RunContext&) {
                    ++*ca;
                    ++*cb;
                    ++*cp;
                  },
                  Device::cpu(), {}, writes);
              ++planned_shared[t][a];
              ++planned_shared[t][b];
              ++planned_private[t];
              break;
            }
            default:
              engine_->push(
                  [c = &private_count[t], r = &private_reads_of_shared[t],
                   s = &shared_count[a]](const RunContext&) {
                    ++*c;
                    *r += (*s >= 0) ? 1 : 0;  // reads the shared counter: a data race if unordered
                  },
                  Device::cpu(), {shared[a]}, {mine[t]});
              ++planned_private[t];
              ++planned_reads[t];
              break;
          }
        }
      });
    }
    for (auto& pusher : pushers) pusher.join();
    engine_->wait_for_all();
  });

  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(private_count[t], planned_private[t]) << "thread " << t;
    EXPECT_EQ(private_reads_of_shared[t], planned_reads[t]) << "thread " << t;
    EXPECT_EQ(engine_->var_version(mine[t]), static_cast<uint64_t>(planned_private[t]));
  }
  for (int a = 0; a < kShared; ++a) {
    int64_t expected = 0;
    for (int t = 0; t < kThreads; ++t) expected += planned_shared[t][a];
    EXPECT_EQ(shared_count[a], expected) << "shared var " << a;
    EXPECT_EQ(engine_->var_version(shared[a]), static_cast<uint64_t>(expected));
  }
  total_ops = static_cast<int64_t>(kThreads) * ops_per_thread;
  EngineStats stats = engine_->stats();
  EXPECT_EQ(stats.completed_ops, total_ops);
  EXPECT_EQ(stats.pending_ops, 0);
}

// Two ops that write the same two vars, listed in opposite orders, pushed from two threads many
// times: lock-ordering mistakes in the engine show up as a hang (caught by the watchdog).
TEST_P(ConcurrentPushTest, OppositeOrderMultiVarWritesDoNotDeadlock) {
  const int rounds = 2000;
  VarHandle a = engine_->new_var();
  VarHandle b = engine_->new_var();
  int64_t count = 0;
  run_with_deadline("opposite-order pushes", [&] {
    std::latch start(2);
    auto pusher = [&](bool reversed) {
      const std::vector<VarHandle> writes =
          reversed ? std::vector<VarHandle>{b, a} : std::vector<VarHandle>{a, b};
      start.arrive_and_wait();
      for (int i = 0; i < rounds; ++i) {
        engine_->push([&count](const RunContext&) { ++count; }, Device::cpu(), {}, writes);
      }
    };
    std::thread first(pusher, false);
    std::thread second(pusher, true);
    first.join();
    second.join();
    engine_->wait_for_all();
  });
  EXPECT_EQ(count, 2 * rounds);
  EXPECT_EQ(engine_->var_version(a), static_cast<uint64_t>(2 * rounds));
  EXPECT_EQ(engine_->var_version(b), static_cast<uint64_t>(2 * rounds));
}

INSTANTIATE_TEST_SUITE_P(Engines, ConcurrentPushTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

}  // namespace
}  // namespace weft::testing
