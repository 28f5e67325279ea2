// A small test-and-test-and-set spin lock for short critical sections (engine variables, pool
// arenas).
#pragma once

#include <atomic>
#include <thread>

namespace weft::detail {

/// Protects a handful of pointer updates; never held across user code or another blocking call.
/// Satisfies Lockable. Thread-safe.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0;; ++spins) {
      // acquire: the critical section sees everything the previous holder wrote before unlock.
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (spins++ > 64) std::this_thread::yield();
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_acquire); }
  // release: publishes the critical section's writes to the next holder.
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace weft::detail
