// The failure log's bound (Note [Failure log bound]): errors are dropped once a wait delivers
// them, undelivered ones are kept up to a bound, and wait_for_all still reports the first.
#include "engine/failure_log.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

class FailureLogEngineTest : public EngineTest {};

// The imperative front end waits per array and never calls wait_for_all: what it waits for must
// not pile up in the engine.
TEST_P(FailureLogEngineTest, ErrorsDeliveredByWaitForVarAreDropped) {
  const int n = 300;
  for (int i = 0; i < n; ++i) {
    VarHandle v = engine_->new_var();
    VarHandle w = engine_->new_var();
    engine_->push([i](const RunContext&) { throw TestFailure("failure " + std::to_string(i)); },
                  Device::cpu(), {}, {v});
    engine_->push([](const RunContext&) {}, Device::cpu(), {v}, {w});  // skipped, inherits it
    EXPECT_THROW(wait_var(w), TestFailure);
    EXPECT_EQ(engine_->stats().undelivered_errors, 0) << "after failure " << i;
    // The same error still reaches the other variable it is attached to, once.
    EXPECT_THROW(wait_var(v), TestFailure);
    EXPECT_NO_THROW(wait_var(v));
    engine_->delete_var(v);
    engine_->delete_var(w);
  }
  // wait_for_all still reports what happened since the last one, with the first error.
  try {
    wait_all();
    ADD_FAILURE() << "wait_for_all did not throw";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.failed_count(), n);
    EXPECT_EQ(e.skipped_count(), n);
    try {
      e.rethrow_first();
    } catch (const TestFailure& first) {
      EXPECT_EQ(std::string(first.what()), "failure 0");
    }
  }
  EXPECT_EQ(engine_->stats().undelivered_errors, 0);
}

TEST_P(FailureLogEngineTest, UndeliveredErrorsAreCountedUntilWaitForAll) {
  VarHandle v = engine_->new_var();
  for (int i = 0; i < 5; ++i) {
    engine_->push([](const RunContext&) { throw TestFailure("never waited for"); }, Device::cpu(),
                  {}, {v});
  }
  run_with_deadline("idle", [&] {
    while (engine_->stats().pending_ops != 0) std::this_thread::yield();
  });
  // The first failure is recorded; the four later writers are skipped (they inherit it).
  EXPECT_EQ(engine_->stats().undelivered_errors, 1);
  EXPECT_THROW(wait_all(), EngineError);
  EXPECT_EQ(engine_->stats().undelivered_errors, 0);
  EXPECT_NO_THROW(wait_var(v));
}

INSTANTIATE_TEST_SUITE_P(Engines, FailureLogEngineTest, ::testing::ValuesIn(all_engines()),
                         engine_param_name);

TEST(FailureLogTest, RetainsAtMostItsBoundAndCountsTheRest) {
  detail::FailureLog log(8);
  std::vector<std::shared_ptr<detail::ErrorSlot>> slots;
  for (int i = 0; i < 100; ++i) {
    slots.push_back(
        log.record_failure(std::make_exception_ptr(TestFailure("f" + std::to_string(i))),
                           detail::OpName("op" + std::to_string(i))));
  }
  EXPECT_EQ(log.retained(), 8u);
  EXPECT_EQ(log.undelivered(), 100);
  // Delivering a retained and an unretained failure drops one of each.
  log.delivered(slots[0]);
  log.delivered(slots[50]);
  log.delivered(slots[50]);  // a second delivery of the same error changes nothing
  EXPECT_EQ(log.retained(), 7u);
  EXPECT_EQ(log.undelivered(), 98);
  try {
    log.throw_and_clear();
    ADD_FAILURE() << "throw_and_clear did not throw";
  } catch (const EngineError& e) {
    EXPECT_EQ(e.failed_count(), 100);
    EXPECT_NE(std::string(e.what()).find("op0"), std::string::npos) << e.what();
  }
  EXPECT_EQ(log.retained(), 0u);
  EXPECT_EQ(log.undelivered(), 0);
  for (const auto& slot : slots) EXPECT_TRUE(slot->cleared());
  EXPECT_NO_THROW(log.throw_and_clear());
}

TEST(FailureLogTest, ViolationsAreReportedByTheNextWaitForAll) {
  detail::FailureLog log;
  log.record_violation(std::make_exception_ptr(TestFailure("late")), "op", "threw after X");
  EXPECT_EQ(log.undelivered(), 1);
  try {
    log.throw_and_clear();
    ADD_FAILURE() << "throw_and_clear did not throw";
  } catch (const EngineError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("operation 'op' threw after X: late", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace weft::testing
