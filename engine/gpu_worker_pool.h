// GpuWorkerPool: the workers of one GPU. K compute workers and one worker per copy direction,
// each owning one stream; GPU event bookkeeping for the variables (Note [GPU var events] in
// engine/var.h) and the poller that releases operations waiting for GPU work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/spin_lock.h"
#include "devices/device_api.h"
#include "engine/var.h"
#include "engine/worker_pool.h"

namespace weft::detail {

/// The sequence of operations queued on one stream (Note [Lazy stream marks] in engine/var.h).
/// `issue` and `after_issue` are called by the stream's owner only; the rest is thread-safe.
struct StreamClock {
  StreamClock(Stream s, DeviceAPI* a) : stream(s), api(a) {}
  StreamClock(const StreamClock&) = delete;
  StreamClock& operator=(const StreamClock&) = delete;

  /// Counts one more operation whose work is queued on the stream; returns its mark.
  uint64_t issue() { return issued.fetch_add(1, std::memory_order_acq_rel) + 1; }
  /// After an operation's mark is published: records an event now when none was recorded for
  /// kEagerInterval (Note [Eager events]).
  void after_issue();
  /// The operations queued so far.
  uint64_t issued_now() const { return issued.load(std::memory_order_acquire); }
  /// The earliest recorded event that completes only after the work of `mark` (one is
  /// recorded now when none covers it), and the mark it covers.
  std::pair<std::shared_ptr<Event>, uint64_t> event_covering(uint64_t mark);
  /// Whether the work of `mark` has completed; with `query` false only what is already known
  /// (no event is recorded or queried). Throws Error when the device reports a fault.
  bool done(uint64_t mark, bool query = true);

  const Stream stream;
  DeviceAPI* const api;

  /// Note [Eager events]: the owner records an event at most this often on its own.
  static constexpr int64_t kEagerIntervalNs = 20'000;
  /// Events kept per stream, oldest first; older ones are forgotten (their marks then map to a
  /// newer event, which completes later: never too early).
  static constexpr size_t kKeptEvents = 32;

 private:
  struct Recorded {
    uint64_t mark;
    std::shared_ptr<Event> event;
  };
  /// Records an event covering every mark issued so far; requires `lock`.
  void record_locked();

  std::atomic<uint64_t> issued{0};
  std::atomic<uint64_t> completed{0};  ///< every mark up to this one has completed
  SpinLock lock;                       ///< guards events
  std::deque<Recorded> events;         ///< by mark, oldest first
  int64_t last_record_ns = 0;          ///< the owner's clock of the newest record; owner only
};

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
  bool may_run_inline(const OprBlock& op) const override;
  /// Blocks until all work queued on the pool's streams has completed; throws Error when the
  /// device reports a fault.
  void synchronize();
  Device device() const { return device_; }
  const OperationRunner* runner() const { return runner_; }

 private:
  struct Worker {
    std::unique_ptr<ReadyQueue> queue;
    Stream stream;
    std::unique_ptr<StreamClock> clock;
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

/// The GPU pool whose worker is the calling thread, or null; and that worker's stream clock.
const GpuWorkerPool* current_gpu_pool();
StreamClock* current_gpu_clock();

/// Mark bookkeeping of GPU operations (Note [GPU var events], Note [Lazy stream marks]).
/// Before a GPU operation's body, on the worker that owns `clock`: makes the stream wait for the
/// marks on the operation's variables that belong to other streams.
void gpu_before_run(OprBlock* op, StreamClock& clock);
/// After a GPU operation's body: counts it on `clock` and hangs its mark on the variables.
void gpu_after_run(OprBlock* op, StreamClock& clock);
/// For an operation not run on a GPU stream: the marks on its variables still pending (empty when
/// it may run now). With `query` false, only marks already known complete are dropped (no event
/// is recorded or queried): for deleters, which need not run soon, on a worker's hot path.
std::vector<StreamMark> gpu_pending_marks(OprBlock* op, bool query = true);

/// A thread that holds operations until GPU marks complete, then hands them to `dispatch`.
/// Polls with short sleeps while it holds any (a few tens of microseconds late at most), and
/// sleeps on a condition variable otherwise. Thread-safe.
class EventPoller {
 public:
  using Dispatch = std::function<void(OprBlock*)>;
  explicit EventPoller(Dispatch dispatch);
  ~EventPoller();
  /// Holds `op` until every mark in `marks` has completed.
  void defer(OprBlock* op, std::vector<StreamMark> marks);
  /// Stops the thread. Call only when nothing is held.
  void shutdown();

 private:
  struct Held {
    OprBlock* op;
    std::vector<StreamMark> marks;
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
