// GpuWorkerPool: the workers of one GPU. K compute workers and one worker per copy direction,
// each owning one stream; GPU event bookkeeping for the variables (Note [GPU var events] in
// engine/var.h) and the poller that releases operations waiting for GPU work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "devices/device_api.h"
#include "engine/worker_pool.h"

namespace weft::detail {

/// The workers of one GPU. Operations are routed by property: kCopyToDevice to the host-to-device
/// worker, kCopyFromDevice to the device-to-host worker, everything else to a compute worker
/// (Note [GPU stream choice] in engine/gpu_worker_pool.cc). A worker calls the operation with
/// its stream in the RunContext. Uses the device only through its DeviceAPI. Thread-safe.
class GpuWorkerPool final : public WorkerPool {
 public:
  /// Creates `compute_streams` compute streams and two copy streams on `device` and starts a
  /// worker for each. Throws Error when the device does not exist.
  GpuWorkerPool(OperationRunner* runner, Device device, int compute_streams);
  ~GpuWorkerPool() override;
  void submit(OprBlock* op) override;
  int num_workers() const override { return static_cast<int>(workers_.size()); }
  void shutdown() override;
  bool is_current_thread_worker() const override;
  /// Blocks until all work queued on the pool's streams has completed; throws Error when the
  /// device reports a fault.
  void synchronize();
  Device device() const { return device_; }
  const OperationRunner* runner() const { return runner_; }

 private:
  struct Worker {
    std::unique_ptr<ReadyQueue> queue;
    Stream stream;
    std::thread thread;
    std::string lane;
  };
  void worker_main(Worker* worker, int index);
  Worker& choose(OprBlock* op);

  OperationRunner* runner_;
  Device device_;
  DeviceAPI* api_;
  std::vector<std::unique_ptr<Worker>> workers_;  // compute workers, then h2d, then d2h
  int compute_ = 0;
  std::atomic<uint32_t> next_{0};
  bool stopped_ = false;
};

/// The GPU pool whose worker is the calling thread, or null; and that worker's stream.
const GpuWorkerPool* current_gpu_pool();
const Stream* current_gpu_stream();

/// Event bookkeeping of GPU operations (Note [GPU var events]).
/// Before a GPU operation's body: makes `stream` wait for the events on its variables that
/// belong to other streams.
void gpu_before_run(OprBlock* op, const Stream& stream);
/// After a GPU operation's body: records an event on `stream` and hangs it on the variables.
void gpu_after_run(OprBlock* op, const Stream& stream);
/// For an operation not run on a GPU stream: the events on its variables still pending (empty
/// when it may run now). Forgets the events found complete. Without `query`, every event counts
/// as pending (the poller asks): for deleters, which need not run soon, on a worker's hot path.
std::vector<std::shared_ptr<Event>> gpu_pending_events(OprBlock* op, bool query = true);

/// A thread that holds operations until GPU events complete, then hands them to `dispatch`.
/// Polls with short sleeps while it holds any (a few tens of microseconds late at most), and
/// sleeps on a condition variable otherwise. Thread-safe.
class EventPoller {
 public:
  using Dispatch = std::function<void(OprBlock*)>;
  explicit EventPoller(Dispatch dispatch);
  ~EventPoller();
  /// Holds `op` until every event in `events` has completed.
  void defer(OprBlock* op, std::vector<std::shared_ptr<Event>> events);
  /// Stops the thread. Call only when nothing is held.
  void shutdown();

 private:
  struct Held {
    OprBlock* op;
    std::vector<std::shared_ptr<Event>> events;
  };
  void main();

  Dispatch dispatch_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Held> held_;  // guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  bool sleeping_ = false;   // waiting on wake_; guarded by mutex_
  std::thread thread_;
};

}  // namespace weft::detail
