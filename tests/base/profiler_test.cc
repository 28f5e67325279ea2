// Profiler: recording from many threads and the Chrome trace JSON it writes.
#include "base/profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tests/base/chrome_trace_check.h"

namespace weft::testing {
namespace {

/// Leaves the global profiler stopped and empty before and after each test.
class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    profiler().stop();
    profiler().set_max_events(Profiler::kDefaultMaxEvents);
    profiler().clear();
  }
  void TearDown() override {
    profiler().stop();
    profiler().set_max_events(Profiler::kDefaultMaxEvents);
    profiler().clear();
  }
  static Profiler& profiler() { return Profiler::global(); }

  /// A record of operation `name` on the calling thread's lane, from `start_ns` to `end_ns`.
  static OpTraceRecord make_record(const std::string& name, int64_t start_ns, int64_t end_ns) {
    OpTraceRecord record;
    record.id = profiler().next_op_id();
    record.name = name;
    record.device = "cpu:0";
    record.lane = profiler().thread_lane();
    record.queued_ns = start_ns - 500;
    record.ready_ns = start_ns - 100;
    record.start_ns = start_ns;
    record.end_ns = end_ns;
    return record;
  }
};

TEST_F(ProfilerTest, StartAndStopToggleEnabled) {
  EXPECT_FALSE(profiler().enabled());
  profiler().start();
  EXPECT_TRUE(profiler().enabled());
  profiler().stop();
  EXPECT_FALSE(profiler().enabled());
}

TEST_F(ProfilerTest, GlobalIsOneInstance) { EXPECT_EQ(&Profiler::global(), &Profiler::global()); }

TEST_F(ProfilerTest, NowIsMonotonic) {
  int64_t a = Profiler::now_ns();
  int64_t b = Profiler::now_ns();
  EXPECT_GE(a, 0);
  EXPECT_GE(b, a);
}

TEST_F(ProfilerTest, EmptyTraceIsValid) {
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  EXPECT_EQ(trace.problem_text(), "");
  EXPECT_TRUE(trace.slices.empty());
  EXPECT_TRUE(trace.flows.empty());
  EXPECT_EQ(profiler().op_count(), 0u);
}

TEST_F(ProfilerTest, OpIdsAreUniqueAcrossThreads) {
  constexpr int kThreads = 4, kIds = 1000;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIds; ++i) ids[t].push_back(profiler().next_op_id());
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint64_t> all;
  for (const auto& list : ids) {
    EXPECT_TRUE(std::is_sorted(list.begin(), list.end()));
    all.insert(list.begin(), list.end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kIds));
  EXPECT_EQ(all.count(0), 0u) << "0 is not a valid op id";
}

TEST_F(ProfilerTest, SlicesFlowsAndCountersFormAValidTrace) {
  OpTraceRecord first, second;
  int first_lane = -1, second_lane = -1;
  std::thread a([&] {
    first_lane = profiler().set_thread_lane("test lane a");
    first = make_record("first", 1'000'000, 1'004'000);
    profiler().record_op(first);
  });
  a.join();
  std::thread b([&] {
    second_lane = profiler().set_thread_lane("test lane b");
    second = make_record("second", 1'006'000, 1'009'500);
    profiler().record_op(second);
    profiler().record_flow(first.id, second.id);
    profiler().record_counter("bytes in use", 12345.5);
  });
  b.join();
  ASSERT_NE(first_lane, second_lane);
  EXPECT_EQ(profiler().op_count(), 2u);

  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  ASSERT_EQ(trace.problem_text(), "");
  EXPECT_EQ(trace.lane_names[first_lane], "test lane a");
  EXPECT_EQ(trace.lane_names[second_lane], "test lane b");

  auto firsts = trace.slices_named("first");
  auto seconds = trace.slices_named("second");
  ASSERT_EQ(firsts.size(), 1u);
  ASSERT_EQ(seconds.size(), 1u);
  EXPECT_EQ(firsts[0]->tid, first_lane);
  EXPECT_DOUBLE_EQ(firsts[0]->ts, 1000.0);  // microseconds
  EXPECT_DOUBLE_EQ(firsts[0]->dur, 4.0);
  EXPECT_EQ(firsts[0]->args["device"], "cpu:0");
  EXPECT_EQ(seconds[0]->tid, second_lane);
  EXPECT_DOUBLE_EQ(seconds[0]->dur, 3.5);

  ASSERT_EQ(trace.flows.size(), 1u);
  const TraceFlow& flow = trace.flows.begin()->second;
  EXPECT_EQ(flow.s_tid, first_lane);
  EXPECT_EQ(flow.f_tid, second_lane);
  EXPECT_EQ(flow.f_binding, "e");

  ASSERT_EQ(trace.counters.size(), 1u);
  EXPECT_EQ(trace.counters[0].name, "bytes in use");
  EXPECT_DOUBLE_EQ(trace.counters[0].value, 12345.5);
}

TEST_F(ProfilerTest, FailedAndSkippedFlagsReachTheTrace) {
  OpTraceRecord failed = make_record("failed op", 10'000, 20'000);
  failed.failed = true;
  OpTraceRecord skipped = make_record("skipped op", 30'000, 30'000);
  skipped.skipped = true;
  profiler().record_op(failed);
  profiler().record_op(skipped);
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  ASSERT_EQ(trace.problem_text(), "");
  ASSERT_EQ(trace.slices_named("failed op").size(), 1u);
  ASSERT_EQ(trace.slices_named("skipped op").size(), 1u);
  EXPECT_EQ(trace.slices_named("failed op")[0]->args.value("failed", false), true);
  EXPECT_EQ(trace.slices_named("skipped op")[0]->args.value("skipped", false), true);
  EXPECT_DOUBLE_EQ(trace.slices_named("skipped op")[0]->dur, 0.0);
}

TEST_F(ProfilerTest, NamesWithSpecialCharactersSurviveTheRoundTrip) {
  const std::string name = "quote\" backslash\\ newline\n tab\t bell\x07 unicode \xc3\xa9";
  profiler().record_op(make_record(name, 1000, 2000));
  profiler().record_counter(name, 1.0);
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  ASSERT_EQ(trace.problem_text(), "");
  EXPECT_EQ(trace.slices_named(name).size(), 1u);
  ASSERT_EQ(trace.counters.size(), 1u);
  EXPECT_EQ(trace.counters[0].name, name);
}

TEST_F(ProfilerTest, UnnamedThreadGetsThreadLaneName) {
  int lane = -1;
  std::thread t([&] { lane = profiler().thread_lane(); });
  t.join();
  ASSERT_GE(lane, 0);
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  ASSERT_EQ(trace.problem_text(), "");
  EXPECT_EQ(trace.lane_names[lane], "thread " + std::to_string(lane));
}

TEST_F(ProfilerTest, SetThreadLaneKeepsTheLaneAndRenamesIt) {
  int lane1 = -1, lane2 = -1, lane3 = -1;
  std::thread t([&] {
    lane1 = profiler().set_thread_lane("old name");
    lane2 = profiler().set_thread_lane("new name");
    lane3 = profiler().thread_lane();
  });
  t.join();
  EXPECT_EQ(lane1, lane2);
  EXPECT_EQ(lane1, lane3);
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  EXPECT_EQ(trace.lane_names[lane1], "new name");
}

TEST_F(ProfilerTest, FlowsToUnrecordedOpsAreLeftOut) {
  OpTraceRecord only = make_record("only", 1000, 2000);
  profiler().record_op(only);
  profiler().record_flow(only.id, only.id + 1'000'000);
  profiler().record_flow(only.id + 2'000'000, only.id);
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  EXPECT_EQ(trace.problem_text(), "");
  EXPECT_TRUE(trace.flows.empty());
}

TEST_F(ProfilerTest, ClearDropsEveryEvent) {
  profiler().record_op(make_record("gone", 1000, 2000));
  profiler().record_counter("gone", 1.0);
  EXPECT_EQ(profiler().op_count(), 1u);
  profiler().clear();
  EXPECT_EQ(profiler().op_count(), 0u);
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  EXPECT_TRUE(trace.slices.empty());
  EXPECT_TRUE(trace.counters.empty());
}

TEST_F(ProfilerTest, ConcurrentRecordingKeepsEveryEvent) {
  constexpr int kThreads = 8, kRecords = 300;
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      profiler().set_thread_lane("recorder " + std::to_string(t));
      for (int i = 0; i < kRecords; ++i) {
        OpTraceRecord record = make_record("op", 1000 * i, 1000 * i + 500);
        ids[t].push_back(record.id);
        profiler().record_op(std::move(record));
        if (i > 0) profiler().record_flow(ids[t][i - 1], ids[t][i]);
        profiler().record_counter("recorder counter", i);
      }
    });
  }
  // Read concurrently with the recording: must stay consistent JSON.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(parse_chrome_trace(profiler().chrome_trace_json()).problem_text(), "");
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(profiler().op_count(), static_cast<size_t>(kThreads * kRecords));
  ParsedTrace trace = parse_chrome_trace(profiler().chrome_trace_json());
  ASSERT_EQ(trace.problem_text(), "");
  EXPECT_EQ(trace.slices.size(), static_cast<size_t>(kThreads * kRecords));
  EXPECT_EQ(trace.flows.size(), static_cast<size_t>(kThreads * (kRecords - 1)));
  EXPECT_EQ(trace.counters.size(), static_cast<size_t>(kThreads * kRecords));
}

TEST_F(ProfilerTest, WriteChromeTraceWritesTheSameJson) {
  profiler().record_op(make_record("written", 5000, 9000));
  profiler().record_counter("written counter", 3.0);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("weft_profiler_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "_" + std::to_string(Profiler::now_ns()) + ".json");
  profiler().write_chrome_trace(path.string());
  std::ifstream file(path);
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  std::filesystem::remove(path);
  EXPECT_EQ(nlohmann::json::parse(text.str()),
            nlohmann::json::parse(profiler().chrome_trace_json()));
  ParsedTrace trace = parse_chrome_trace(text.str());
  EXPECT_EQ(trace.problem_text(), "");
  EXPECT_EQ(trace.slices_named("written").size(), 1u);
}

TEST_F(ProfilerTest, WritingToUnwritablePathThrowsErrorNamingIt) {
  const std::string path = "/nonexistent-weft-directory/sub/trace.json";
  try {
    profiler().write_chrome_trace(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// The buffers are bounded (Profiler::max_events): events past the bound are dropped and counted,
// and the trace says how many.
TEST_F(ProfilerTest, EventsPastTheBoundAreDroppedAndCounted) {
  profiler().set_max_events(100);
  profiler().start();
  for (int i = 0; i < 90; ++i) profiler().record_op(make_record("op", 1000 * i, 1000 * i + 500));
  for (int i = 0; i < 40; ++i) profiler().record_flow(1, 2);
  for (int i = 0; i < 20; ++i) profiler().record_counter("bytes", i);
  EXPECT_EQ(profiler().event_count(), 100u);
  EXPECT_EQ(profiler().op_count(), 90u);
  EXPECT_EQ(profiler().dropped_events(), 50);
  nlohmann::json doc = nlohmann::json::parse(profiler().chrome_trace_json());
  EXPECT_EQ(doc["otherData"]["dropped_events"], 50);
  EXPECT_EQ(doc["otherData"]["max_events"], 100);
  EXPECT_EQ(parse_chrome_trace(profiler().chrome_trace_json()).problem_text(), "");
  // clear() empties the buffers and the count; the bound applies afresh.
  profiler().clear();
  EXPECT_EQ(profiler().event_count(), 0u);
  EXPECT_EQ(profiler().dropped_events(), 0);
  for (int i = 0; i < 150; ++i) profiler().record_counter("bytes", i);
  EXPECT_EQ(profiler().event_count(), 100u);
  EXPECT_EQ(profiler().dropped_events(), 50);
}

TEST_F(ProfilerTest, BoundHoldsAcrossRecordingThreads) {
  profiler().set_max_events(1000);
  profiler().start();
  const int threads = 6;
  const int per_thread = 400;
  std::vector<std::thread> recorders;
  for (int t = 0; t < threads; ++t) {
    recorders.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        profiler().record_op(make_record("t" + std::to_string(t), i * 10, i * 10 + 5));
      }
    });
  }
  for (auto& thread : recorders) thread.join();
  EXPECT_LE(profiler().event_count(), 1000u);
  EXPECT_EQ(static_cast<int64_t>(profiler().event_count()) + profiler().dropped_events(),
            threads * per_thread);
}

}  // namespace
}  // namespace weft::testing
