// WorkerPool: the interface through which an engine hands ready operations to the threads (and,
// for GPUs, streams) of one device; the CPU pool implements it, GPU pools plug in beside it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/spin_lock.h"
#include "engine/var.h"

namespace weft::detail {

/// Runs a ready operation (and any successor it may run inline) on the calling worker.
/// Implemented by the engine; called by pools from their worker threads.
class OperationRunner {
 public:
  virtual ~OperationRunner() = default;
  virtual void run(OprBlock* op, const RunContext& context) = 0;
  /// Called by a worker that found nothing to do: now and then while it spins, and with
  /// `about_to_sleep` before it sleeps.
  virtual void worker_idle(bool about_to_sleep) = 0;
};

/// A set of workers for one device (and property class). Thread-safe.
class WorkerPool {
 public:
  virtual ~WorkerPool() = default;
  /// Hands over a ready operation; some worker will run it.
  virtual void submit(OprBlock* op) = 0;
  /// Number of worker threads.
  virtual int num_workers() const = 0;
  /// Stops and joins the workers. Call only once every submitted operation has completed.
  virtual void shutdown() = 0;
  /// Whether the calling thread is one of this pool's workers (so it may run a successor inline).
  virtual bool is_current_thread_worker() const = 0;
  /// Whether the calling thread may run `op`, made ready by an operation it just completed,
  /// inline: it is one of this pool's workers, and one that `op` may run on (a GPU operation
  /// pinned to a stream runs on that stream's worker only).
  virtual bool may_run_inline(const OprBlock& op) const {
    (void)op;
    return is_current_thread_worker();
  }
};

/// Ready operations of one pool: FIFO for priority 0, ordered by priority (highest first, FIFO
/// among equals) otherwise; priority > 0 runs before the FIFO, priority < 0 after it.
/// Thread-safe.
///
/// Note [Ready queue]: the FIFO is an intrusive multi-producer queue (Vyukov's): a push is one
/// atomic exchange and one store, so pushing threads never take a lock or wait for a worker.
/// Workers take from it under a small spin lock of their own. Operations with a priority go to
/// a mutex-protected heap (the rare case).
///
/// Note [Spinning and wake-ups]: a worker with nothing to do spins (pause instructions, never
/// yields) for at most kSpinTime before it sleeps on a condition variable, and does not spin at
/// all while other processes use the process's cores (spin_for_work). A push wakes a sleeper
/// only when no worker is spinning (a futex wake costs microseconds, more than most
/// operations). A sleeper counts itself in `sleepers_` and then looks at the queue once more; a
/// pusher publishes its operation and then reads `sleepers_` (both sequentially consistent), so
/// one of them always sees the other. A worker that takes an operation while more are queued
/// wakes another sleeper if nobody spins, so queued work is never stranded.
///
/// Note [Link in flight]: a push is two steps, the tail exchange and the link store. A producer
/// preempted between them leaves the queue non-empty (has_work()) but with nothing a consumer can
/// take. Consumers then back off (Backoff: growing pause runs, then giving the core away: a few
/// yields, then short sleeps) instead of retrying in a tight loop, which on a loaded machine
/// would keep the preempted producer from running at all. `stalled_waits()` counts the steps
/// that gave the core away.
class ReadyQueue {
 public:
  /// `budget`: the thread budget of the pool's engine; workers do not spin while other
  /// processes leave fewer cores of it free (0: spin regardless).
  explicit ReadyQueue(int budget = 0);
  void push(OprBlock* op);
  /// Returns the next operation, blocking while empty; null once shut down and drained.
  /// `on_idle(about_to_sleep)` runs while the queue is empty: every few spins, and before sleeping.
  OprBlock* pop(const std::function<void(bool)>& on_idle);
  void shutdown();
  /// Times a consumer gave its core away (yielded or slept) while waiting for an in-flight link
  /// (Note [Link in flight]). Thread-safe; for tests and statistics.
  int64_t stalled_waits() const { return stalled_waits_.load(std::memory_order_relaxed); }

 private:
  friend class ReadyQueueTestPeer;  // tests stop a producer between the push's two steps
  struct Prioritised {
    int32_t priority;
    uint64_t sequence;
    OprBlock* op;
  };
  OprBlock* try_take();
  OprBlock* try_pop_fifo();  // requires consumer_lock_
  void push_node(OprBlock* node);
  OprBlock* exchange_tail(OprBlock* node);               // first step of a push
  static void link(OprBlock* previous, OprBlock* node);  // second step
  bool has_work() const;
  void wake_one();
  // Spins for work (Note [Spinning and wake-ups]); true when some arrived.
  bool spin_for_work(const std::function<void(bool)>& on_idle);
  static constexpr std::chrono::microseconds kSpinTime{50};

  const int budget_;

  // FIFO (Note [Ready queue]).
  alignas(64) std::atomic<OprBlock*> tail_;
  alignas(64) detail::SpinLock consumer_lock_;
  // Written under consumer_lock_; read without it by has_work() (Note [Ready queue]).
  std::atomic<OprBlock*> head_;
  std::unique_ptr<OprBlock> stub_;
  // Prioritised operations.
  alignas(64) std::mutex heap_mutex_;
  std::vector<Prioritised> heap_;  // guarded by heap_mutex_
  uint64_t sequence_ = 0;          // guarded by heap_mutex_
  std::atomic<int> heap_size_{0};
  // Sleeping (Note [Spinning and wake-ups]).
  alignas(64) std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  std::atomic<int> spinning_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> stalled_waits_{0};
};

/// Index of the calling thread within its CPU worker pool; -1 on a thread that is no worker.
int current_worker_index();

/// CPU workers: `num_threads` threads sharing one ReadyQueue.
class CpuWorkerPool final : public WorkerPool {
 public:
  /// `budget`: the engine's thread budget (ReadyQueue).
  CpuWorkerPool(OperationRunner* runner, int num_threads, std::string lane_prefix, int budget = 0);
  ~CpuWorkerPool() override;
  void submit(OprBlock* op) override { queue_.push(op); }
  int num_workers() const override { return static_cast<int>(threads_.size()); }
  void shutdown() override;
  bool is_current_thread_worker() const override;

 private:
  void worker_main(int index);

  OperationRunner* runner_;
  std::string lane_prefix_;
  ReadyQueue queue_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace weft::detail
