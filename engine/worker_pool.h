// WorkerPool: the interface through which an engine hands ready operations to the threads (and,
// for GPUs, streams) of one device; the CPU pool implements it, GPU pools plug in beside it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/var.h"

namespace weft::detail {

/// Runs a ready operation (and any successor it may run inline) on the calling worker.
/// Implemented by the engine; called by pools from their worker threads.
class OperationRunner {
 public:
  virtual ~OperationRunner() = default;
  virtual void run(OprBlock* op, const RunContext& context) = 0;
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
};

/// Ready operations of one pool: FIFO for priority 0, ordered by priority (highest first, FIFO
/// among equals) otherwise; priority > 0 runs before the FIFO, priority < 0 after it.
/// Sleeping workers are woken only when one is asleep. Thread-safe.
class ReadyQueue {
 public:
  void push(OprBlock* op);
  /// Returns the next operation, blocking while empty; null once shut down and drained.
  OprBlock* pop();
  void shutdown();

 private:
  struct Prioritised {
    int32_t priority;
    uint64_t sequence;
    OprBlock* op;
  };
  bool take(OprBlock** out);  // requires mutex_
  OprBlock* take_and_propagate();
  static constexpr int kPauseRounds = 64;
  static constexpr int kSpinRounds = 2048;

  // Note [Spinning and wake-ups]: a worker with nothing to do spins for a while before it
  // sleeps. While one spins, pushes wake nobody (a futex wake costs microseconds, more than most
  // operations); a spinner that finds work stops spinning first, and wakes a sleeper if work is
  // left, so queued work is never stranded while a worker sleeps.
  std::mutex mutex_;
  std::condition_variable wake_;
  OprBlock* fifo_head_ = nullptr;
  OprBlock* fifo_tail_ = nullptr;
  std::vector<Prioritised> heap_;
  uint64_t sequence_ = 0;
  int sleepers_ = 0;  // guarded by mutex_
  bool stopping_ = false;
  alignas(64) std::atomic<int64_t> size_{0};   // a hint for spinning workers
  alignas(64) std::atomic<int> spinning_{0};   // workers in their spin phase
};

/// CPU workers: `num_threads` threads sharing one ReadyQueue.
class CpuWorkerPool final : public WorkerPool {
 public:
  CpuWorkerPool(OperationRunner* runner, int num_threads, std::string lane_prefix);
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
