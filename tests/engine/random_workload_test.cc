// Random dependent workloads through every engine, checked bit for bit against a serial loop.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

/// One operation of a workload: reads `reads` (in this order) and writes `write`.
struct OpSpec {
  uint32_t write = 0;
  std::vector<uint32_t> reads;
};

enum class ReadMode {
  kDistinct,              ///< distinct reads, never the written var
  kWithSelfAndDuplicates  ///< drawn with replacement, and half the ops also read their output
};

std::vector<OpSpec> make_workload(uint64_t seed, int num_ops, int num_vars, ReadMode mode) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint32_t> pick_var(0, num_vars - 1);
  std::uniform_int_distribution<int> pick_count(2, 19);
  std::vector<OpSpec> ops(num_ops);
  for (auto& op : ops) {
    op.write = pick_var(rng);
    int count = pick_count(rng);
    if (mode == ReadMode::kDistinct) {
      std::vector<bool> taken(num_vars, false);
      taken[op.write] = true;
      while (static_cast<int>(op.reads.size()) < count) {
        uint32_t v = pick_var(rng);
        if (taken[v]) continue;
        taken[v] = true;
        op.reads.push_back(v);
      }
    } else {
      // With replacement from a small window, so duplicates are common.
      for (int i = 0; i < count; ++i) op.reads.push_back(pick_var(rng) % 16);
      if (rng() % 2 == 0) op.reads.insert(op.reads.begin() + rng() % op.reads.size(), op.write);
    }
  }
  return ops;
}

std::vector<uint64_t> initial_values(int num_vars) {
  std::vector<uint64_t> values(num_vars);
  for (int i = 0; i < num_vars; ++i) values[i] = mix64(0x1234 + i);
  return values;
}

/// The work of operation `index`: an order-dependent hash of its output's old value, every read
/// value and the op index, stored into its output.
void apply_op(const OpSpec& op, uint64_t index, uint64_t* values) {
  uint64_t h = mix64(values[op.write] ^ (index * 0x9e3779b97f4a7c15ULL));
  for (uint32_t r : op.reads) h = mix64(h ^ values[r]) + r;
  values[op.write] = h;
}

/// The independent reference: a plain serial loop.
std::vector<uint64_t> run_serial(const std::vector<OpSpec>& ops, int num_vars) {
  std::vector<uint64_t> values = initial_values(num_vars);
  for (size_t i = 0; i < ops.size(); ++i) apply_op(ops[i], i, values.data());
  return values;
}

std::vector<uint64_t> writes_per_var(const std::vector<OpSpec>& ops, int num_vars) {
  std::vector<uint64_t> writes(num_vars, 0);
  for (const auto& op : ops) ++writes[op.write];
  return writes;
}

class RandomWorkloadTest : public EngineTest {
 protected:
  static constexpr int kNumVars = 100;
  static constexpr int kNumOps = 10000;

  /// Pushes every op of `ops` in order (values live in a plain array the ops share).
  void push_all(const std::vector<OpSpec>& ops, const std::vector<VarHandle>& vars,
                std::vector<uint64_t>& values) {
    std::vector<VarHandle> reads;
    for (size_t i = 0; i < ops.size(); ++i) {
      reads.clear();
      for (uint32_t r : ops[i].reads) reads.push_back(vars[r]);
      engine_->push([op = &ops[i], data = values.data(),
                     index = uint64_t{i}](const RunContext&) { apply_op(*op, index, data); },
                    Device::cpu(), reads, {vars[ops[i].write]}, FnProperty::kNormal, 0,
                    "random_op");
    }
  }

  void run_and_check(ReadMode mode, uint64_t seed) {
    const std::vector<OpSpec> ops = make_workload(seed, kNumOps, kNumVars, mode);
    const std::vector<uint64_t> expected = run_serial(ops, kNumVars);
    const std::vector<uint64_t> expected_versions = writes_per_var(ops, kNumVars);

    std::vector<VarHandle> vars = new_vars(kNumVars);
    std::vector<uint64_t> values = initial_values(kNumVars);
    push_all(ops, vars, values);
    wait_all();

    EXPECT_EQ(first_difference(values, expected), "");
    std::vector<uint64_t> versions;
    for (VarHandle v : vars) versions.push_back(engine_->var_version(v));
    EXPECT_EQ(first_difference(versions, expected_versions), "");
    EngineStats stats = engine_->stats();
    EXPECT_EQ(stats.pending_ops, 0);
    EXPECT_EQ(stats.completed_ops, kNumOps);
    EXPECT_EQ(stats.failed_ops, 0);
    EXPECT_EQ(stats.skipped_ops, 0);
    for (VarHandle v : vars) engine_->delete_var(v);
  }
};

TEST_P(RandomWorkloadTest, FinalValuesMatchSerialLoop) { run_and_check(ReadMode::kDistinct, 42); }

TEST_P(RandomWorkloadTest, SelfReadsAndDuplicateReadsMatchSerialLoop) {
  run_and_check(ReadMode::kWithSelfAndDuplicates, 7);
}

// After wait_for_var(v) returns, v holds exactly what the serial loop computed for the ops
// pushed so far (and the waiting thread sees it without a data race).
TEST_P(RandomWorkloadTest, WaitForVarMidStreamSeesPrefixResult) {
  const int num_ops = 5000;
  const std::vector<OpSpec> ops = make_workload(99, num_ops, kNumVars, ReadMode::kDistinct);
  std::vector<uint64_t> reference = initial_values(kNumVars);
  std::vector<VarHandle> vars = new_vars(kNumVars);
  std::vector<uint64_t> values = initial_values(kNumVars);
  std::mt19937 rng(5);
  std::vector<VarHandle> reads;
  int checks = 0;
  for (int i = 0; i < num_ops; ++i) {
    reads.clear();
    for (uint32_t r : ops[i].reads) reads.push_back(vars[r]);
    engine_->push([op = &ops[i], data = values.data(),
                   index = uint64_t(i)](const RunContext&) { apply_op(*op, index, data); },
                  Device::cpu(), reads, {vars[ops[i].write]});
    apply_op(ops[i], i, reference.data());
    if (i % 250 == 249) {
      uint32_t v = ops[i - static_cast<int>(rng() % 5)].write;
      wait_var(vars[v]);
      ASSERT_EQ(values[v], reference[v]) << "var " << v << " after op " << i;
      ++checks;
    }
  }
  wait_all();
  EXPECT_EQ(first_difference(values, reference), "");
  EXPECT_GT(checks, 0);
}

INSTANTIATE_TEST_SUITE_P(Engines, RandomWorkloadTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

}  // namespace
}  // namespace weft::testing
