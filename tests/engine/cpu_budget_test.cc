// The thread budget and the contention estimate (Note [Thread budget], Note [Contention
// estimate] in engine/cpu_budget.cc): parsing /proc/stat and cgroup quotas, the estimator's
// arithmetic and hysteresis on synthetic samples, and the live monitor's bounds.
#include "engine/cpu_budget.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <vector>

namespace weft::testing {
namespace {

using detail::ContentionEstimator;
using detail::CpuSample;
using detail::parse_cgroup_cpu_max;
using detail::parse_proc_stat_idle;

constexpr const char* kProcStat =
    "cpu  1000 50 200 9000 30 5 7 11 0 0\n"
    "cpu0 400 20 100 4500 10 2 3 5 0 0\n"
    "cpu1 600 30 100 4500 20 3 4 6 0 0\n"
    "intr 12345 0 0 0\n"
    "ctxt 999\n"
    "cpu7 1 1 1 1 1 1 1 1\n";  // not a CPU line any more: after the block

TEST(ProcStatTest, SumsIdleAndIowaitOfEveryCpuLine) {
  auto idle = parse_proc_stat_idle(kProcStat, {});
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(idle->ticks, (4500 + 10) + (4500 + 20));  // the total line is not counted twice
  EXPECT_EQ(idle->cpus, 2);
}

TEST(ProcStatTest, SumsOnlyTheGivenCpus) {
  auto one = parse_proc_stat_idle(kProcStat, {1});
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->ticks, 4500 + 20);
  EXPECT_EQ(one->cpus, 1);
  auto both = parse_proc_stat_idle(kProcStat, {0, 1, 9});  // CPU 9 is not there
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->cpus, 2);
}

TEST(ProcStatTest, UnknownCpusOrTextGiveNothing) {
  EXPECT_FALSE(parse_proc_stat_idle(kProcStat, {5}).has_value());
  EXPECT_FALSE(parse_proc_stat_idle("", {}).has_value());
  EXPECT_FALSE(parse_proc_stat_idle("garbage\nmore\n", {}).has_value());
}

TEST(ProcStatTest, OlderKernelsWithFewerFieldsParse) {
  // Kernels before 2.5.41 had no iowait field; four fields are the minimum.
  auto idle = parse_proc_stat_idle("cpu  10 20 30 40\ncpu0 10 20 30 40\n", {});
  ASSERT_TRUE(idle.has_value());
  EXPECT_EQ(idle->ticks, 40);
}

TEST(CgroupQuotaTest, ParsesQuotaIntoCoresRoundedUp) {
  EXPECT_EQ(parse_cgroup_cpu_max("200000 100000\n"), 2);
  EXPECT_EQ(parse_cgroup_cpu_max("150000 100000"), 2);
  EXPECT_EQ(parse_cgroup_cpu_max("50000 100000"), 1);
  EXPECT_FALSE(parse_cgroup_cpu_max("max 100000\n").has_value());
  EXPECT_FALSE(parse_cgroup_cpu_max("-1 100000").has_value());  // cgroup v1: no limit
  EXPECT_FALSE(parse_cgroup_cpu_max("").has_value());
  EXPECT_FALSE(parse_cgroup_cpu_max("abc def").has_value());
}

TEST(ProcessCoresTest, CountsTheAffinityMaskAtMost) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int mask = CPU_COUNT(&set);
  EXPECT_GE(process_cpu_cores(), 1);
  EXPECT_LE(process_cpu_cores(), mask);
  EXPECT_EQ(resolve_thread_budget(0), process_cpu_cores());
  EXPECT_EQ(resolve_thread_budget(7), 7);
}

// Samples 100 ms apart on kCpus CPUs in which other processes used `others` cores and this one
// `self` cores.
constexpr int kCpus = 16;
struct Feed {
  ContentionEstimator estimator;
  CpuSample now;
  Feed() {
    now.cpus = kCpus;
    estimator.add(now);
  }
  void window(double others, double self, int64_t ns = 100'000'000) {
    now.wall_ns += ns;
    now.idle_ns += static_cast<int64_t>((kCpus - others - self) * static_cast<double>(ns));
    now.self_ns += static_cast<int64_t>(self * static_cast<double>(ns));
    estimator.add(now);
  }
};

TEST(ContentionEstimatorTest, QuietMachineLeavesTheWholeBudget) {
  Feed f;
  f.window(0.0, 2.0);
  f.window(0.05, 1.9);
  EXPECT_NEAR(f.estimator.others(), 0.025, 1e-9);
  EXPECT_EQ(f.estimator.free_cores(2), 2);
  EXPECT_EQ(f.estimator.free_cores(16), 16);
}

TEST(ContentionEstimatorTest, OneBusyProcessTakesOneCore) {
  Feed f;
  for (int i = 0; i < 4; ++i) f.window(1.0, 1.0);
  EXPECT_NEAR(f.estimator.others(), 1.0, 1e-9);
  EXPECT_EQ(f.estimator.free_cores(2), 1);
  EXPECT_EQ(f.estimator.free_cores(8), 7);
}

TEST(ContentionEstimatorTest, AFairShareSeenWhileCompetingAlreadyShrinksTheTeam) {
  // One busy process beside a 2-thread team on 2 cores gets 2/3 of a core: that is contention.
  Feed f;
  for (int i = 0; i < 4; ++i) f.window(2.0 / 3, 4.0 / 3);
  EXPECT_EQ(f.estimator.free_cores(2), 1);
}

TEST(ContentionEstimatorTest, HysteresisKeepsTheAnswerBetweenThresholds) {
  Feed f;
  for (int i = 0; i < 6; ++i) f.window(1.0, 1.0);
  ASSERT_EQ(f.estimator.free_cores(2), 1);
  // 0.2 cores used by others: below the 0.25 that takes a thread off, above the 0.15 that
  // gives it back. Coming from 1, it stays 1.
  for (int i = 0; i < 10; ++i) f.window(0.2, 1.0);
  EXPECT_EQ(f.estimator.free_cores(2), 1);
  for (int i = 0; i < 10; ++i) f.window(0.0, 1.0);
  EXPECT_EQ(f.estimator.free_cores(2), 2);
  // Coming from 2 it stays 2 at 0.2.
  for (int i = 0; i < 10; ++i) f.window(0.2, 2.0);
  EXPECT_EQ(f.estimator.free_cores(2), 2);
  for (int i = 0; i < 10; ++i) f.window(0.5, 2.0);
  EXPECT_EQ(f.estimator.free_cores(2), 1);
}

TEST(ContentionEstimatorTest, NeverBelowOneNorAboveTheBudget) {
  Feed f;
  for (int i = 0; i < 4; ++i) f.window(12.0, 1.0);
  EXPECT_EQ(f.estimator.free_cores(4), 1);
  EXPECT_EQ(f.estimator.free_cores(1), 1);
  Feed g;
  g.window(0.0, 0.0);
  EXPECT_EQ(g.estimator.free_cores(3), 3);
}

TEST(ContentionEstimatorTest, ShortWindowsAreIgnored) {
  Feed f;
  f.window(1.0, 1.0);
  ASSERT_NEAR(f.estimator.others(), 1.0, 1e-9);
  // 10 ms is one clock tick: too coarse to count; the next long window spans both.
  f.window(0.0, 1.0, 10'000'000);
  EXPECT_NEAR(f.estimator.others(), 1.0, 1e-9);
  f.window(0.0, 1.0, ContentionEstimator::kMinWindowNs);
  EXPECT_LT(f.estimator.others(), 1.0);
}

TEST(ContentionEstimatorTest, OwnTimeAboveBusyTimeCountsAsNoOthers) {
  // Idle time in whole clock ticks can lag the precise own CPU time: never a negative estimate.
  Feed f;
  f.now.self_ns += 50'000'000;
  f.window(0.0, 1.0);
  EXPECT_EQ(f.estimator.others(), 0.0);
}

TEST(CpuLoadMonitorTest, AnswersWithinTheBudget) {
  for (int budget : {1, 2, 3, 64}) {
    const int free = uncontended_cores(budget);
    EXPECT_GE(free, 1);
    EXPECT_LE(free, budget);
  }
  EXPECT_EQ(uncontended_cores(1), 1);
  EXPECT_FALSE(cores_contended(1));
}

}  // namespace
}  // namespace weft::testing
