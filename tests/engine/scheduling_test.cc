// Scheduling: priorities among ready ops, the CPU priority lane, and where each FnProperty runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

/// Runs `fn` while every one of `workers` normal workers of `engine` is held by a gate op, then
/// opens the gates and waits for everything.
void with_workers_blocked(Engine& engine, int workers, const std::function<void()>& fn) {
  std::vector<std::unique_ptr<Notification>> started;
  Notification release;
  for (int i = 0; i < workers; ++i) {
    started.push_back(std::make_unique<Notification>());
    VarHandle gate = engine.new_var();
    engine.push(
        [&release, s = started.back().get()](const RunContext&) {
          s->notify();
          release.wait_for(kHangLimit);
        },
        Device::cpu(), {}, {gate}, FnProperty::kNormal, 1000, "gate");
  }
  bool all_started = true;
  for (auto& s : started) all_started = s->wait_for() && all_started;
  EXPECT_TRUE(all_started) << "the gate ops did not all start";
  if (all_started) fn();
  release.notify();
  run_with_deadline("wait_for_all after opening the gates", [&] { engine.wait_for_all(); });
}

TEST(SchedulingTest, ReadyOpsRunInDescendingPriorityOnOneWorker) {
  auto engine = Engine::create(make_config(EngineKind::kThreaded, 1));
  std::vector<int> priorities;
  for (int p = -10; p < 20; ++p) priorities.push_back(p * 3);
  std::shuffle(priorities.begin(), priorities.end(), std::mt19937(17));
  std::mutex mutex;
  std::vector<int> order;
  with_workers_blocked(*engine, 1, [&] {
    for (int p : priorities) {
      VarHandle v = engine->new_var();
      engine->push(
          [&, p](const RunContext&) {
            std::lock_guard<std::mutex> lock(mutex);
            order.push_back(p);
          },
          Device::cpu(), {}, {v}, FnProperty::kNormal, p);
    }
  });
  std::vector<int> expected = priorities;
  std::sort(expected.begin(), expected.end(), std::greater<int>());
  EXPECT_EQ(order, expected);
  run_with_deadline("engine destruction", [&] { engine.reset(); });
}

TEST(SchedulingTest, PrioritizedOpRunsWhileEveryNormalWorkerIsBlocked) {
  constexpr int kWorkers = 2;
  auto engine = Engine::create(make_config(EngineKind::kThreaded, kWorkers, true));
  Notification prioritized_ran;
  std::atomic<int> normal_ran{0};
  with_workers_blocked(*engine, kWorkers, [&] {
    VarHandle v = engine->new_var();
    VarHandle w = engine->new_var();
    engine->push([&](const RunContext&) { normal_ran.fetch_add(1); }, Device::cpu(), {}, {w});
    engine->push([&](const RunContext&) { prioritized_ran.notify(); }, Device::cpu(), {}, {v},
                 FnProperty::kCPUPrioritized);
    EXPECT_TRUE(prioritized_ran.wait_for())
        << "a kCPUPrioritized op must not wait for the blocked normal workers";
    EXPECT_EQ(normal_ran.load(), 0) << "no normal worker was free";
  });
  EXPECT_EQ(normal_ran.load(), 1);
  run_with_deadline("engine destruction", [&] { engine.reset(); });
}

TEST(SchedulingTest, PrioritizedOpWithoutLaneRunsAheadOfQueuedNormalWork) {
  auto engine = Engine::create(make_config(EngineKind::kThreaded, 1, false));
  std::mutex mutex;
  std::vector<std::string> order;
  with_workers_blocked(*engine, 1, [&] {
    for (int i = 0; i < 5; ++i) {
      VarHandle v = engine->new_var();
      engine->push(
          [&, i](const RunContext&) {
            std::lock_guard<std::mutex> lock(mutex);
            order.push_back("normal " + std::to_string(i));
          },
          Device::cpu(), {}, {v});
    }
    VarHandle p = engine->new_var();
    engine->push(
        [&](const RunContext&) {
          std::lock_guard<std::mutex> lock(mutex);
          order.push_back("prioritized");
        },
        Device::cpu(), {}, {p}, FnProperty::kCPUPrioritized);
  });
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order.front(), "prioritized");
  run_with_deadline("engine destruction", [&] { engine.reset(); });
}

class PropertyTest : public EngineTest {};

TEST_P(PropertyTest, EveryPropertyRunsOnTheCpu) {
  VarHandle v = engine_->new_var();
  std::mutex mutex;
  std::vector<FnProperty> ran;
  for (FnProperty property : {FnProperty::kNormal, FnProperty::kCopyToDevice,
                              FnProperty::kCopyFromDevice, FnProperty::kCPUPrioritized}) {
    engine_->push(
        [&, property](const RunContext& ctx) {
          EXPECT_EQ(ctx.device, Device::cpu());
          std::lock_guard<std::mutex> lock(mutex);
          ran.push_back(property);
        },
        Device::cpu(), {}, {v}, property);
  }
  engine_->push_async(
      [&](const RunContext& ctx, CallbackOnComplete done) {
        {
          std::lock_guard<std::mutex> lock(mutex);
          ran.push_back(FnProperty::kAsync);
        }
        done();
      },
      Device::cpu(), {}, {v}, FnProperty::kAsync);
  wait_all();
  // All write v, so they ran in push order.
  std::vector<FnProperty> expected = {FnProperty::kNormal, FnProperty::kCopyToDevice,
                                      FnProperty::kCopyFromDevice, FnProperty::kCPUPrioritized,
                                      FnProperty::kAsync};
  EXPECT_EQ(ran, expected);
  EXPECT_EQ(engine_->var_version(v), 5u);
}

TEST_P(PropertyTest, PriorityDoesNotReorderDependentOps) {
  VarHandle v = engine_->new_var();
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    engine_->push([&order, i](const RunContext&) { order.push_back(i); }, Device::cpu(), {}, {v},
                  FnProperty::kNormal, (i * 37) % 11 - 5);
  }
  wait_all();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

INSTANTIATE_TEST_SUITE_P(Engines, PropertyTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

}  // namespace
}  // namespace weft::testing
