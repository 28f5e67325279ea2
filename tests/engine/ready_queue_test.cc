// The ready queue's consumers back off while a producer is stopped between the two steps of a
// push (Note [Link in flight]), and the Backoff helper's schedule.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "engine/backoff.h"
#include "engine/var.h"
#include "engine/worker_pool.h"
#include "tests/engine/engine_test_util.h"

namespace weft::detail {

/// Performs a push in its two steps, so that a test can stop "the producer" between them.
class ReadyQueueTestPeer {
 public:
  static OprBlock* begin_push(ReadyQueue& queue, OprBlock* op) { return queue.exchange_tail(op); }
  static void finish_push(OprBlock* previous, OprBlock* op) { ReadyQueue::link(previous, op); }
};

}  // namespace weft::detail

namespace weft::testing {
namespace {

using detail::Backoff;
using detail::OprBlock;
using detail::ReadyQueue;
using detail::ReadyQueueTestPeer;

TEST(BackoffTest, PausesInGrowingRunsThenGivesTheCoreAwayOnEveryStep) {
  Backoff backoff;
  for (int i = 0; i <= Backoff::kPauseDoublings; ++i) {
    EXPECT_FALSE(backoff.giving_way()) << "step " << i;
    backoff.pause();
  }
  EXPECT_TRUE(backoff.giving_way());
  EXPECT_EQ(backoff.gave_way(), 0);
  // Yields, then sleeps (kFirstSleep, doubling up to kLongestSleep).
  const int steps = Backoff::kYieldSteps + 3;
  for (int i = 0; i < steps; ++i) backoff.pause();
  EXPECT_EQ(backoff.gave_way(), steps);
  backoff.reset();
  EXPECT_FALSE(backoff.giving_way());
  EXPECT_EQ(backoff.gave_way(), 0);
}

// A consumer that finds the queue non-empty but cannot take the operation yet (its producer was
// preempted between the tail exchange and the link store) must give its core away rather than
// retry in a tight loop, and must get the operation once the link is written.
TEST(ReadyQueueTest, ConsumerGivesWayWhileAProducerIsStoppedMidPush) {
  ReadyQueue queue;
  auto op = std::make_unique<OprBlock>();
  OprBlock* previous = ReadyQueueTestPeer::begin_push(queue, op.get());  // the producer stops

  std::atomic<OprBlock*> taken{nullptr};
  std::thread consumer([&] { taken.store(queue.pop([](bool) {})); });

  // Wait (bounded) until the consumer has given way a few times while the link is missing.
  const auto deadline = std::chrono::steady_clock::now() + kBlockLimit;
  while (queue.stalled_waits() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  const int64_t waits = queue.stalled_waits();
  EXPECT_EQ(taken.load(), nullptr) << "the consumer took an operation that was not linked yet";

  ReadyQueueTestPeer::finish_push(previous, op.get());  // the producer resumes
  run_with_deadline("consumer", [&] { consumer.join(); });
  EXPECT_GE(waits, 3) << "the consumer never gave way while waiting for the producer's link";
  EXPECT_EQ(taken.load(), op.get());
  queue.shutdown();
}

TEST(ReadyQueueTest, OperationsPushedWhileAnEarlierPushIsInFlightComeOutInOrder) {
  ReadyQueue queue;
  auto first = std::make_unique<OprBlock>();
  auto second = std::make_unique<OprBlock>();
  OprBlock* previous = ReadyQueueTestPeer::begin_push(queue, first.get());
  queue.push(second.get());  // another producer completes its push behind the stalled one
  std::atomic<int> taken_count{0};
  OprBlock* taken[2] = {nullptr, nullptr};
  std::thread consumer([&] {
    for (int i = 0; i < 2; ++i) {
      taken[i] = queue.pop([](bool) {});
      taken_count.fetch_add(1);
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + kBlockLimit;
  while (queue.stalled_waits() < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(taken_count.load(), 0);
  ReadyQueueTestPeer::finish_push(previous, first.get());
  run_with_deadline("consumer", [&] { consumer.join(); });
  EXPECT_EQ(taken[0], first.get());
  EXPECT_EQ(taken[1], second.get());
  queue.shutdown();
}

}  // namespace
}  // namespace weft::testing
