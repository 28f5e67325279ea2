// Bounded exponential backoff for waits on another thread's progress.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace weft::detail {

/// Backs off a thread that waits for another thread to finish a few instructions (a producer
/// between the two stores of a queue push). Each pause() waits longer: 1, 2, 4, ...
/// 2^kPauseDoublings CPU pause instructions; after that every pause() gives the core away:
/// kYieldSteps yields, then sleeps of kFirstSleep, doubling up to kLongestSleep. So a waiter
/// never keeps a core from a preempted thread it waits for, also when that thread is queued on
/// another core (a yield alone only helps a thread queued on the waiter's own core), and a long
/// wait costs no CPU. Call from one thread.
class Backoff {
 public:
  /// Pause steps before giving the core away: 1 + 2 + ... + 64 pauses in all.
  static constexpr int kPauseDoublings = 6;
  /// Steps that yield before the first sleep.
  static constexpr int kYieldSteps = 4;
  static constexpr std::chrono::microseconds kFirstSleep{10};
  static constexpr std::chrono::microseconds kLongestSleep{1000};

  /// One waiting step.
  void pause() {
    if (step_ <= kPauseDoublings) {
      for (int i = 0, n = 1 << step_; i < n; ++i) cpu_relax();
      ++step_;
      return;
    }
    if (gave_way_ < kYieldSteps) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(sleep_);
      sleep_ = std::min(sleep_ * 2, kLongestSleep);
    }
    ++gave_way_;
  }
  /// Whether the next pause() gives the core away (yields or sleeps).
  bool giving_way() const { return step_ > kPauseDoublings; }
  /// Steps that gave the core away since the last reset.
  int gave_way() const { return gave_way_; }
  /// Starts over (after the awaited progress happened).
  void reset() {
    step_ = 0;
    gave_way_ = 0;
    sleep_ = kFirstSleep;
  }

  /// One CPU pause instruction (a hint to the core while spinning; a no-op elsewhere).
  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

 private:
  int step_ = 0;
  int gave_way_ = 0;
  std::chrono::microseconds sleep_ = kFirstSleep;
};

}  // namespace weft::detail
