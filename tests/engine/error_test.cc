// Failure handling: errors attach to written vars, skip dependents, surface in waits, then clear.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

/// How a failing operation fails.
enum class FailureKind {
  kSyncThrow,               ///< push_sync whose function throws
  kAsyncCompleteWithError,  ///< push_async completing with on_complete(error) on its own thread
  kAsyncErrorFromThread,    ///< push_async completing with an error from a foreign thread
  kAsyncThrow,              ///< push_async whose function throws without completing
};

const char* failure_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::kSyncThrow:
      return "sync op throws";
    case FailureKind::kAsyncCompleteWithError:
      return "async op completes with an error";
    case FailureKind::kAsyncErrorFromThread:
      return "async op completes with an error elsewhere";
    case FailureKind::kAsyncThrow:
      return "async op throws";
  }
  return "?";
}

constexpr FailureKind kAllFailureKinds[] = {
    FailureKind::kSyncThrow, FailureKind::kAsyncCompleteWithError,
    FailureKind::kAsyncErrorFromThread, FailureKind::kAsyncThrow};

/// The message of the `E` that `fn` throws; "<none>" when it throws nothing, "<other: ...>" when
/// it throws something else.
template <typename E, typename Fn>
std::string thrown_message(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other: ") + e.what() + ">";
  } catch (...) {
    return "<other: non-std exception>";
  }
  return "<none>";
}

class ErrorTest : public EngineTest {
 protected:
  /// Pushes an operation that fails with TestFailure(message) the way `kind` says.
  void push_failing(FailureKind kind, VarList reads, VarList writes, std::string message) {
    switch (kind) {
      case FailureKind::kSyncThrow:
        engine_->push([message](const RunContext&) { throw TestFailure(message); }, Device::cpu(),
                      reads, writes);
        break;
      case FailureKind::kAsyncCompleteWithError:
        engine_->push_async(
            [message](const RunContext&, CallbackOnComplete done) {
              done(std::make_exception_ptr(TestFailure(message)));
            },
            Device::cpu(), reads, writes);
        break;
      case FailureKind::kAsyncErrorFromThread:
        engine_->push_async(
            [this, message](const RunContext&, CallbackOnComplete done) {
              completers_.spawn([message, done] {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
                done(std::make_exception_ptr(TestFailure(message)));
              });
            },
            Device::cpu(), reads, writes);
        break;
      case FailureKind::kAsyncThrow:
        engine_->push_async(
            [message](const RunContext&, CallbackOnComplete) { throw TestFailure(message); },
            Device::cpu(), reads, writes);
        break;
    }
  }

  /// wait_for_all, accepting an EngineError: leaves no error behind, whatever the test's
  /// earlier waits already reported.
  void clear_errors() {
    try {
      wait_all();
    } catch (const EngineError&) {
    }
  }

  void TearDown() override {
    EngineTest::TearDown();
    completers_.join_all();
  }

  ThreadCollector completers_;
};

TEST_P(ErrorTest, FailurePropagatesDownAChainAndSkipsBodies) {
  for (FailureKind kind : kAllFailureKinds) {
    SCOPED_TRACE(failure_name(kind));
    const EngineStats before = engine_->stats();
    VarHandle v1 = engine_->new_var();
    VarHandle v2 = engine_->new_var();
    VarHandle v3 = engine_->new_var();
    VarHandle unrelated = engine_->new_var();
    std::atomic<int> ran_reader{0}, ran_chain{0}, ran_writer{0}, ran_read_only{0};
    std::atomic<int> ran_unrelated{0};

    push_failing(kind, {}, {v1}, "boom");
    engine_->push([&](const RunContext&) { ran_reader.fetch_add(1); }, Device::cpu(), {v1}, {v2});
    engine_->push([&](const RunContext&) { ran_chain.fetch_add(1); }, Device::cpu(), {v2}, {v3});
    engine_->push([&](const RunContext&) { ran_writer.fetch_add(1); }, Device::cpu(), {}, {v1});
    engine_->push([&](const RunContext&) { ran_read_only.fetch_add(1); }, Device::cpu(), {v3}, {});
    engine_->push([&](const RunContext&) { ran_unrelated.fetch_add(1); }, Device::cpu(),
                  {unrelated}, {unrelated});

    EXPECT_NO_THROW(wait_var(unrelated));
    EXPECT_EQ(ran_unrelated.load(), 1);
    // The original exception type and message arrive at the end of the chain.
    EXPECT_EQ(thrown_message<TestFailure>([&] { wait_var(v3); }), "boom");
    EXPECT_EQ(ran_reader.load(), 0);
    EXPECT_EQ(ran_chain.load(), 0);
    EXPECT_EQ(ran_writer.load(), 0);
    EXPECT_EQ(ran_read_only.load(), 0);
    // Failed and skipped writes do not count as versions.
    EXPECT_EQ(engine_->var_version(v1), 0u);
    EXPECT_EQ(engine_->var_version(v2), 0u);
    EXPECT_EQ(engine_->var_version(v3), 0u);
    EXPECT_EQ(engine_->var_version(unrelated), 1u);

    try {
      wait_all();
      ADD_FAILURE() << "wait_for_all did not throw";
    } catch (const EngineError& e) {
      EXPECT_EQ(e.failed_count(), 1);
      EXPECT_EQ(e.skipped_count(), 4);
      EXPECT_NE(e.first(), nullptr);
      EXPECT_EQ(thrown_message<TestFailure>([&] { e.rethrow_first(); }), "boom");
    }
    const EngineStats after = engine_->stats();
    EXPECT_EQ(after.failed_ops - before.failed_ops, 1);
    EXPECT_EQ(after.skipped_ops - before.skipped_ops, 4);
    EXPECT_EQ(after.pending_ops, 0);

    // The errors are cleared: the same vars take new work, and waits are quiet.
    std::atomic<int> ran_after{0};
    for (VarHandle v : {v1, v2, v3}) {
      engine_->push([&](const RunContext&) { ran_after.fetch_add(1); }, Device::cpu(), {v}, {v});
    }
    EXPECT_NO_THROW(wait_var(v1));
    EXPECT_NO_THROW(wait_var(v2));
    EXPECT_NO_THROW(wait_var(v3));
    EXPECT_NO_THROW(wait_all());
    EXPECT_EQ(ran_after.load(), 3);
    EXPECT_EQ(engine_->var_version(v1), 1u);
    EXPECT_EQ(engine_->var_version(v3), 1u);
  }
}

TEST_P(ErrorTest, FailedOpAttachesErrorToEveryVarItWrites) {
  for (FailureKind kind : kAllFailureKinds) {
    SCOPED_TRACE(failure_name(kind));
    VarHandle input = engine_->new_var();
    VarHandle a = engine_->new_var();
    VarHandle b = engine_->new_var();
    push_failing(kind, {input}, {a, b}, "two outputs");
    EXPECT_EQ(thrown_message<TestFailure>([&] { wait_var(a); }), "two outputs");
    EXPECT_EQ(thrown_message<TestFailure>([&] { wait_var(b); }), "two outputs");
    // Only written vars carry the error: the input was only read.
    EXPECT_NO_THROW(wait_var(input));
    clear_errors();
  }
}

TEST_P(ErrorTest, WaitForVarClearsTheVarsError) {
  VarHandle v = engine_->new_var();
  push_failing(FailureKind::kSyncThrow, {}, {v}, "once");
  EXPECT_EQ(thrown_message<TestFailure>([&] { wait_var(v); }), "once");
  EXPECT_NO_THROW(wait_var(v));
  std::atomic<int> ran{0};
  engine_->push([&](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {}, {v});
  EXPECT_NO_THROW(wait_var(v));
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(engine_->var_version(v), 1u);
  clear_errors();
}

// engine.h: "If any failed since the last wait_for_all, throws EngineError": a failure already
// rethrown by wait_for_var still counts, and is reported once.
TEST_P(ErrorTest, WaitForAllReportsFailureAlreadySeenByWaitForVar) {
  VarHandle v = engine_->new_var();
  VarHandle w = engine_->new_var();
  push_failing(FailureKind::kSyncThrow, {}, {v}, "seen");
  engine_->push([](const RunContext&) {}, Device::cpu(), {v}, {w});
  EXPECT_EQ(thrown_message<TestFailure>([&] { wait_var(w); }), "seen");
  try {
    wait_all();
    ADD_FAILURE() << "wait_for_all did not throw";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.failed_count(), 1);
    EXPECT_EQ(e.skipped_count(), 1);
    EXPECT_EQ(thrown_message<TestFailure>([&] { e.rethrow_first(); }), "seen");
  }
  EXPECT_NO_THROW(wait_all());
}

TEST_P(ErrorTest, WaitForAllWithoutFailuresDoesNotThrow) {
  VarHandle v = engine_->new_var();
  engine_->push([](const RunContext&) {}, Device::cpu(), {}, {v});
  EXPECT_NO_THROW(wait_all());
  EXPECT_NO_THROW(wait_all());
}

TEST_P(ErrorTest, WaitForAllReportsFirstOfSeveralFailures) {
  std::vector<VarHandle> vars = new_vars(5);
  std::set<std::string> messages;
  for (int i = 0; i < 5; ++i) {
    std::string message = "failure " + std::to_string(i);
    messages.insert(message);
    push_failing(FailureKind::kSyncThrow, {}, {vars[i]}, message);
    engine_->push([](const RunContext&) {}, Device::cpu(), {vars[i]}, {});
  }
  try {
    wait_all();
    ADD_FAILURE() << "wait_for_all did not throw";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.failed_count(), 5);
    EXPECT_EQ(e.skipped_count(), 5);
    std::string first = thrown_message<TestFailure>([&] { e.rethrow_first(); });
    EXPECT_EQ(messages.count(first), 1u) << first;
  }
  // All errors were cleared by wait_for_all, the per-var ones included.
  for (VarHandle v : vars) EXPECT_NO_THROW(wait_var(v));
}

TEST_P(ErrorTest, NonStdExceptionIsCarriedToo) {
  VarHandle v = engine_->new_var();
  engine_->push([](const RunContext&) { throw 42; }, Device::cpu(), {}, {v});
  try {
    wait_var(v);
    ADD_FAILURE() << "wait_for_var did not throw";
  } catch (int value) {
    EXPECT_EQ(value, 42);
  } catch (...) {
    ADD_FAILURE() << "wait_for_var threw something other than the original int";
  }
  clear_errors();
}

// A random workload in which a few ops throw, against a serial model of the documented rules:
// an op that uses (reads or writes) a var carrying an error is skipped and its outputs inherit
// the error; a failing op puts the error on its outputs; only successful writes count.
TEST_P(ErrorTest, RandomFailuresMatchSerialPropagationModel) {
  constexpr int kVars = 200;
  const int num_ops = 4000;
  struct Op {
    uint32_t write;
    std::vector<uint32_t> reads;
    bool throws;
  };
  std::mt19937_64 rng(2024);
  std::vector<Op> ops(num_ops);
  for (auto& op : ops) {
    op.write = rng() % kVars;
    int count = static_cast<int>(rng() % 3);
    for (int i = 0; i < count; ++i) {
      uint32_t r = rng() % kVars;
      if (r != op.write) op.reads.push_back(r);
    }
    op.throws = rng() % 600 == 0;
  }

  // Reference model.
  std::vector<uint64_t> expected(kVars), values(kVars);
  for (int i = 0; i < kVars; ++i) expected[i] = values[i] = mix64(i);
  std::vector<bool> poisoned(kVars, false);
  std::vector<uint64_t> expected_versions(kVars, 0);
  int64_t expected_failed = 0, expected_skipped = 0;
  std::set<std::string> failure_messages;
  auto apply = [](const Op& op, uint64_t index, uint64_t* data) {
    uint64_t h = mix64(data[op.write] + index);
    for (uint32_t r : op.reads) h = mix64(h ^ data[r]);
    data[op.write] = h;
  };
  for (int i = 0; i < num_ops; ++i) {
    const Op& op = ops[i];
    bool skip = poisoned[op.write];
    for (uint32_t r : op.reads) skip = skip || poisoned[r];
    if (skip) {
      ++expected_skipped;
      poisoned[op.write] = true;
    } else if (op.throws) {
      ++expected_failed;
      poisoned[op.write] = true;
      failure_messages.insert("op " + std::to_string(i));
    } else {
      apply(op, i, expected.data());
      ++expected_versions[op.write];
    }
  }
  ASSERT_GT(expected_failed, 0) << "the workload must contain failures";
  ASSERT_GT(expected_skipped, 0);
  ASSERT_LT(expected_failed + expected_skipped, num_ops);

  std::vector<VarHandle> vars = new_vars(kVars);
  std::vector<VarHandle> reads;
  for (int i = 0; i < num_ops; ++i) {
    reads.clear();
    for (uint32_t r : ops[i].reads) reads.push_back(vars[r]);
    engine_->push(
        [op = &ops[i], data = values.data(), index = uint64_t(i), &apply](const RunContext&) {
          if (op->throws) throw TestFailure("op " + std::to_string(index));
          apply(*op, index, data);
        },
        Device::cpu(), reads, {vars[ops[i].write]});
  }
  try {
    wait_all();
    ADD_FAILURE() << "wait_for_all did not throw";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.failed_count(), expected_failed);
    EXPECT_EQ(e.skipped_count(), expected_skipped);
    std::string first = thrown_message<TestFailure>([&] { e.rethrow_first(); });
    EXPECT_EQ(failure_messages.count(first), 1u) << first;
  }
  EXPECT_EQ(first_difference(values, expected), "");
  std::vector<uint64_t> versions;
  for (VarHandle v : vars) versions.push_back(engine_->var_version(v));
  EXPECT_EQ(first_difference(versions, expected_versions), "");
  for (VarHandle v : vars) EXPECT_NO_THROW(wait_var(v));
}

INSTANTIATE_TEST_SUITE_P(Engines, ErrorTest, ::testing::ValuesIn(all_engines()), engine_param_name);

}  // namespace
}  // namespace weft::testing
