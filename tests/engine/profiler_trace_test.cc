// The engine's trace: a threaded workload's ops, lanes and dependency flows in Chrome trace JSON.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/profiler.h"
#include "engine/engine.h"
#include "tests/base/chrome_trace_check.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

/// Leaves the global profiler stopped and empty before and after each test.
class ProfilerTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Profiler::global().stop();
    Profiler::global().clear();
  }
  void TearDown() override {
    Profiler::global().stop();
    Profiler::global().clear();
  }

  /// produce -> transform -> consume on one chain, and four side ops reading produce's output.
  static void push_workload(Engine& engine) {
    VarHandle a = engine.new_var();
    VarHandle b = engine.new_var();
    VarHandle c = engine.new_var();
    auto work = [](const RunContext&) {
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    };
    engine.push(work, Device::cpu(), {}, {a}, FnProperty::kNormal, 0, "produce");
    engine.push(work, Device::cpu(), {a}, {b}, FnProperty::kNormal, 0, "transform");
    engine.push(work, Device::cpu(), {b}, {c}, FnProperty::kNormal, 0, "consume");
    for (int i = 0; i < 4; ++i) {
      VarHandle side = engine.new_var();
      engine.push(work, Device::cpu(), {a}, {side}, FnProperty::kNormal, 0,
                  "side " + std::to_string(i));
    }
  }
};

/// The one slice named `name`, or null (with a test failure).
const TraceSlice* only_slice(const ParsedTrace& trace, const std::string& name) {
  auto found = trace.slices_named(name);
  EXPECT_EQ(found.size(), 1u) << "slices named '" << name << "'";
  return found.size() == 1 ? found[0] : nullptr;
}

/// Whether the trace has a flow arrow from slice `from` to slice `to`.
bool has_flow(const ParsedTrace& trace, const TraceSlice& from, const TraceSlice& to) {
  for (const auto& [id, flow] : trace.flows) {
    bool starts_in_from = flow.s_tid == from.tid && flow.s_ts >= from.ts - kTraceTimeSlackUs &&
                          flow.s_ts <= from.end() + kTraceTimeSlackUs;
    bool ends_at_to = flow.f_tid == to.tid && flow.f_ts >= to.ts - kTraceTimeSlackUs &&
                      flow.f_ts <= to.end() + kTraceTimeSlackUs;
    if (starts_in_from && ends_at_to) return true;
  }
  return false;
}

TEST_F(ProfilerTraceTest, ThreadedWorkloadTraceIsValidAndOrdered) {
  Profiler::global().start();
  auto engine = Engine::create(make_config(EngineKind::kThreaded, 2));
  push_workload(*engine);
  Profiler::global().record_counter("test counter", 7.5);
  run_with_deadline("wait and destroy", [&] {
    engine->wait_for_all();
    engine.reset();  // every record is in once the workers are gone
  });
  Profiler::global().stop();

  ParsedTrace trace = parse_chrome_trace(Profiler::global().chrome_trace_json());
  ASSERT_EQ(trace.problem_text(), "");
  EXPECT_EQ(trace.slices.size(), 7u);
  EXPECT_EQ(Profiler::global().op_count(), 7u);
  const TraceSlice* produce = only_slice(trace, "produce");
  const TraceSlice* transform = only_slice(trace, "transform");
  const TraceSlice* consume = only_slice(trace, "consume");
  ASSERT_TRUE(produce && transform && consume);
  for (const auto& slice : trace.slices) {
    EXPECT_EQ(slice.args.value("device", ""), "cpu:0") << slice.name;
  }
  // Dependent ops start after their predecessor ended.
  EXPECT_GE(transform->ts + kTraceTimeSlackUs, produce->end());
  EXPECT_GE(consume->ts + kTraceTimeSlackUs, transform->end());
  for (int i = 0; i < 4; ++i) {
    const TraceSlice* side = only_slice(trace, "side " + std::to_string(i));
    ASSERT_NE(side, nullptr);
    EXPECT_GE(side->ts + kTraceTimeSlackUs, produce->end()) << side->name;
  }
  // Completing an op records the release of the ops it made ready.
  EXPECT_FALSE(trace.flows.empty());
  EXPECT_TRUE(has_flow(trace, *produce, *transform));
  EXPECT_TRUE(has_flow(trace, *transform, *consume));

  bool counter_found = false;
  for (const auto& counter : trace.counters) {
    if (counter.name == "test counter") {
      counter_found = true;
      EXPECT_DOUBLE_EQ(counter.value, 7.5);
    }
  }
  EXPECT_TRUE(counter_found);
}

TEST_F(ProfilerTraceTest, DisabledProfilerRecordsNoOps) {
  auto engine = Engine::create(make_config(EngineKind::kThreaded, 2));
  push_workload(*engine);
  run_with_deadline("wait and destroy", [&] {
    engine->wait_for_all();
    engine.reset();
  });
  EXPECT_EQ(Profiler::global().op_count(), 0u);
}

TEST_F(ProfilerTraceTest, FailedOpIsMarkedInTheTrace) {
  Profiler::global().start();
  auto engine = Engine::create(make_config(EngineKind::kThreaded, 2));
  VarHandle v = engine->new_var();
  engine->push([](const RunContext&) { throw TestFailure("traced failure"); }, Device::cpu(), {},
               {v}, FnProperty::kNormal, 0, "explodes");
  run_with_deadline("wait and destroy", [&] {
    EXPECT_THROW(engine->wait_for_all(), EngineError);
    engine.reset();
  });
  Profiler::global().stop();
  ParsedTrace trace = parse_chrome_trace(Profiler::global().chrome_trace_json());
  ASSERT_EQ(trace.problem_text(), "");
  const TraceSlice* slice = only_slice(trace, "explodes");
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->args.value("failed", false), true);
}

TEST_F(ProfilerTraceTest, ProfilePathWritesTraceWhenEngineIsDestroyed) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("weft_engine_trace_" + std::to_string(Profiler::now_ns()) + ".json");
  auto engine = Engine::create(make_config(EngineKind::kThreaded, 2, true, path.string()));
  push_workload(*engine);
  run_with_deadline("wait and destroy", [&] {
    engine->wait_for_all();
    engine.reset();
  });
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << "no trace at " << path;
  std::stringstream text;
  text << file.rdbuf();
  file.close();
  std::filesystem::remove(path);
  ParsedTrace trace = parse_chrome_trace(text.str());
  ASSERT_EQ(trace.problem_text(), "");
  EXPECT_EQ(trace.slices_named("produce").size(), 1u);
  EXPECT_EQ(trace.slices_named("consume").size(), 1u);
}

}  // namespace
}  // namespace weft::testing
