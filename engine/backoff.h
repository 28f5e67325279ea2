// Bounded exponential backoff for spin-waits on another thread's progress.
#pragma once

#include <thread>

namespace weft::detail {

/// Backs off a thread that waits for another thread to finish a few instructions (a producer
/// between the two stores of a queue push, a lock holder). Each pause() waits longer: 1, 2, 4,
/// ... 2^kPauseDoublings CPU pause instructions, then it yields the time slice on every call,
/// so a waiter never keeps a core from a preempted thread it waits for. Call from one thread.
class Backoff {
 public:
  /// Pause steps before yielding: 1 + 2 + ... + 64 pauses in all.
  static constexpr int kPauseDoublings = 6;

  /// One waiting step.
  void pause() {
    if (step_ <= kPauseDoublings) {
      for (int i = 0, n = 1 << step_; i < n; ++i) cpu_relax();
      ++step_;
    } else {
      std::this_thread::yield();
      ++yields_;
    }
  }
  /// Whether the next pause() yields the time slice.
  bool yielding() const { return step_ > kPauseDoublings; }
  /// Yields since the last reset.
  int yields() const { return yields_; }
  /// Starts over (after the awaited progress happened).
  void reset() {
    step_ = 0;
    yields_ = 0;
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
  int yields_ = 0;
};

}  // namespace weft::detail
