// The workers of one GPU, the event bookkeeping of GPU operations and the event poller.
#include "engine/gpu_worker_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/error.h"
#include "base/profiler.h"
#include "engine/var.h"

namespace weft::detail {

namespace {
thread_local const GpuWorkerPool* t_gpu_pool = nullptr;
thread_local StreamClock* t_gpu_clock = nullptr;
}  // namespace

const GpuWorkerPool* current_gpu_pool() { return t_gpu_pool; }
StreamClock* current_gpu_clock() { return t_gpu_clock; }

// ---- StreamClock (Note [Lazy stream marks]) ----------------------------------------------------

// Note [Eager events]
// Events recorded only on demand (Note [Lazy stream marks]) cover everything queued before the
// moment somebody asks, which can be far more than the mark asked about: a deleter held by the
// poller behind a convolution's mark would wait for every later convolution already queued on
// that stream, and the memory it frees could not serve the next allocation. So the owner also
// records an event after an operation when it has recorded none for kEagerIntervalNs, and the
// clock keeps its last kKeptEvents events: a mark maps to the earliest event recorded after it.
// Operations launched faster than the interval (tiny kernels) share an event; a long kernel
// usually gets its own. The cost is a clock read per operation and at most one cudaEventRecord
// per interval and stream.

void StreamClock::record_locked() {
  const uint64_t now = issued.load(std::memory_order_acquire);
  if (!events.empty() && events.back().mark == now) return;  // nothing queued since
  auto fresh = std::make_shared<Event>(api->create_event(stream.device));
  // Every mark up to `now` was published after its work was queued: the event follows it all.
  fresh->record(stream);
  events.push_back(Recorded{now, std::move(fresh)});
  if (events.size() > kKeptEvents) events.pop_front();
}

void StreamClock::after_issue() {
  const int64_t now = Profiler::now_ns();
  if (now - last_record_ns < kEagerIntervalNs) return;
  last_record_ns = now;
  std::lock_guard<SpinLock> guard(lock);
  record_locked();
}

std::pair<std::shared_ptr<Event>, uint64_t> StreamClock::event_covering(uint64_t mark) {
  std::lock_guard<SpinLock> guard(lock);
  auto it = std::lower_bound(events.begin(), events.end(), mark,
                             [](const Recorded& r, uint64_t m) { return r.mark < m; });
  if (it == events.end()) {
    record_locked();
    return {events.back().event, events.back().mark};
  }
  return {it->event, it->mark};
}

bool StreamClock::done(uint64_t mark, bool query) {
  if (completed.load(std::memory_order_acquire) >= mark) return true;
  if (!query) return false;
  auto [e, covered] = event_covering(mark);
  if (!e->query()) return false;
  uint64_t known = completed.load(std::memory_order_relaxed);
  // release: pairs with the acquire above; a thread that sees the mark complete may touch what
  // the work wrote (the device finished it before the query said so).
  while (known < covered &&
         !completed.compare_exchange_weak(known, covered, std::memory_order_acq_rel,
                                          std::memory_order_relaxed)) {
  }
  return true;
}

GpuWorkerPool::GpuWorkerPool(OperationRunner* runner, Device device, int compute_streams)
    : runner_(runner), device_(device), api_(DeviceAPI::get(device.type)) {
  const int count = api_->device_count();
  WEFT_CHECK_AS(NotImplemented, device.id >= 0 && device.id < count)
      << "no worker pool for '" << to_string(device) << "': this machine has " << count
      << " CUDA device" << (count == 1 ? "" : "s");
  compute_ = std::max(1, compute_streams);
  // Copy streams get the highest priority: a transfer that feeds the device should not queue
  // behind long kernels (lower numbers run first).
  const int high = api_->stream_priority_range(device).second;
  for (int i = 0; i < compute_ + 2; ++i) {
    auto worker = std::make_unique<Worker>();
    worker->queue = std::make_unique<ReadyQueue>();
    worker->stream = api_->create_stream(device, i < compute_ ? 0 : high);
    worker->clock = std::make_unique<StreamClock>(worker->stream, api_);
    worker->lane = to_string(device) + (i < compute_    ? " compute " + std::to_string(i)
                                        : i == compute_ ? " copy h2d"
                                                        : " copy d2h");
    workers_.push_back(std::move(worker));
  }
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    Worker* w = workers_[static_cast<size_t>(i)].get();
    w->thread = std::thread([this, w, i] { worker_main(w, i); });
  }
}

GpuWorkerPool::~GpuWorkerPool() {
  shutdown();
  for (auto& w : workers_) {
    try {
      api_->synchronize(w->stream);
    } catch (const std::exception&) {
      // A device fault was reported to whoever waited; nothing more to do at teardown.
    }
    api_->destroy_stream(w->stream);
  }
}

void GpuWorkerPool::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& w : workers_) w->queue->shutdown();
  for (auto& w : workers_) w->thread.join();
}

bool GpuWorkerPool::is_current_thread_worker() const { return t_gpu_pool == this; }

// A successor pinned to a stream (Note [Stream plans]) runs inline only on that stream's worker,
// so that a stream plan is a guarantee, not a preference, and a copy only on its direction's
// copy worker (where choose() sends it); unpinned compute work keeps the engine's rule.
bool GpuWorkerPool::may_run_inline(const OprBlock& op) const {
  if (t_gpu_pool != this) return false;
  size_t worker;
  if (op.property == FnProperty::kCopyToDevice) {
    worker = static_cast<size_t>(compute_);
  } else if (op.property == FnProperty::kCopyFromDevice) {
    worker = static_cast<size_t>(compute_) + 1;
  } else if (op.stream_hint >= 0) {
    worker = static_cast<size_t>(op.stream_hint % compute_);
  } else {
    return true;
  }
  return workers_[worker]->clock.get() == t_gpu_clock;
}

void GpuWorkerPool::synchronize() {
  for (auto& w : workers_) api_->synchronize(w->stream);
}

void GpuWorkerPool::submit(OprBlock* op) { choose(op).queue->push(op); }

// Note [GPU stream choice]
// Copies go to their direction's stream. Other work goes to the compute stream that last wrote
// one of the variables the operation writes, when there is one, else to the stream that wrote
// one of its inputs among the last kAffinity operations there: a chain of operations on the
// same data then stays on one stream and needs no cross-stream event, also when each link
// writes a new array (`a = a + 1`). Otherwise the compute streams take turns, so independent
// work (readers of an array computed long ago, say) can overlap on the device. A successor made
// ready by a completing operation runs inline on the same worker (the engine's rule for every
// pool), so dependent chains keep their stream without this lookup; one pinned to another stream
// is submitted to that stream's worker instead (may_run_inline).
GpuWorkerPool::Worker& GpuWorkerPool::choose(OprBlock* op) {
  if (op->property == FnProperty::kCopyToDevice) return *workers_[static_cast<size_t>(compute_)];
  if (op->property == FnProperty::kCopyFromDevice) {
    return *workers_[static_cast<size_t>(compute_) + 1];
  }
  if (op->stream_hint >= 0) {  // pinned by the pusher (Note [Stream plans])
    return *workers_[static_cast<size_t>(op->stream_hint % compute_)];
  }
  if (compute_ > 1) {
    constexpr uint64_t kAffinity = 4;
    Worker* recent_reader_stream = nullptr;
    for (uint32_t i = 0; i < op->num_slots; ++i) {
      const VarSlot& slot = op->slots[i];
      if (!slot.var->gpu_touched.load(std::memory_order_acquire)) continue;
      StreamMark writer;
      {
        std::lock_guard<SpinLock> lock(slot.var->lock);
        if (slot.var->gpu) writer = slot.var->gpu->writer;
      }
      if (!writer) continue;
      Worker* owner = nullptr;
      for (int w = 0; w < compute_; ++w) {
        if (workers_[static_cast<size_t>(w)]->clock.get() == writer.clock) {
          owner = workers_[static_cast<size_t>(w)].get();
        }
      }
      if (owner == nullptr) continue;  // written by a copy stream
      if (slot.write) return *owner;
      if (recent_reader_stream == nullptr && writer.clock->issued_now() - writer.mark < kAffinity) {
        recent_reader_stream = owner;
      }
    }
    if (recent_reader_stream != nullptr) return *recent_reader_stream;
  }
  const uint32_t turn = next_.fetch_add(1, std::memory_order_relaxed);
  return *workers_[turn % static_cast<uint32_t>(compute_)];
}

void GpuWorkerPool::worker_main(Worker* worker, int index) {
  t_gpu_pool = this;
  Profiler::global().set_thread_lane(worker->lane);
  try {
    api_->set_device(device_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: %s worker: %s\n", worker->lane.c_str(), e.what());
  }
  RunContext context{device_, worker->stream, index};
  t_gpu_clock = worker->clock.get();
  CurrentStreamScope current(worker->stream);  // allocations and frees in ops use this stream
  std::function<void(bool)> on_idle = [this](bool sleep) { runner_->worker_idle(sleep); };
  while (OprBlock* op = worker->queue->pop(on_idle)) runner_->run(op, context);
  t_gpu_clock = nullptr;
  t_gpu_pool = nullptr;
}

// ---- mark bookkeeping (Note [GPU var events], Note [Lazy stream marks]) ----------------------

namespace {
/// How far a stream already waits for other streams (its owner's thread only; the few clocks a
/// device has make a list enough).
struct Waited {
  const StreamClock* waiter = nullptr;
  std::vector<StreamMark> upto;
};
thread_local Waited t_waited;
}  // namespace

void gpu_before_run(OprBlock* op, StreamClock& clock) {
  StreamMark needs[8];
  std::vector<StreamMark> more;
  int n = 0;
  auto add = [&](const StreamMark& m) {
    if (!m || m.clock == &clock) return;  // same stream: ordered already
    for (int i = 0; i < n; ++i) {
      if (needs[i].clock == m.clock) {
        needs[i].mark = std::max(needs[i].mark, m.mark);
        return;
      }
    }
    if (n < 8) {
      needs[n++] = m;
    } else {
      more.push_back(m);
    }
  };
  for (uint32_t i = 0; i < op->num_slots; ++i) {
    const VarSlot& slot = op->slots[i];
    if (!slot.var->gpu_touched.load(std::memory_order_acquire)) continue;
    std::lock_guard<SpinLock> lock(slot.var->lock);
    if (!slot.var->gpu) continue;
    add(slot.var->gpu->writer);
    if (slot.write) {
      for (const auto& r : slot.var->gpu->readers) add(r);
    }
  }
  if (n == 0) return;
  Waited& waited = t_waited;
  if (waited.waiter != &clock) {  // a worker owns one stream; reset if that ever changes
    waited.waiter = &clock;
    waited.upto.clear();
  }
  auto wait_for = [&](const StreamMark& m) {
    auto it = std::find_if(waited.upto.begin(), waited.upto.end(),
                           [&](const StreamMark& w) { return w.clock == m.clock; });
    if (it != waited.upto.end() && it->mark >= m.mark) return;  // waits for it already
    if (m.clock->done(m.mark, /*query=*/false)) return;         // completed already
    auto [event, covered] = m.clock->event_covering(m.mark);
    event->block(clock.stream);
    if (it != waited.upto.end()) {
      it->mark = covered;
    } else {
      waited.upto.push_back(StreamMark{m.clock, covered});
    }
  };
  for (int i = 0; i < n; ++i) wait_for(needs[i]);
  for (const auto& m : more) wait_for(m);
}

void gpu_after_run(OprBlock* op, StreamClock& clock) {
  const StreamMark mark{&clock, clock.issue()};
  clock.after_issue();
  for (uint32_t i = 0; i < op->num_slots; ++i) {
    VarSlot& slot = op->slots[i];
    Var* var = slot.var;
    std::lock_guard<SpinLock> lock(var->lock);
    if (!var->gpu) {
      var->gpu = std::make_unique<GpuSync>();
      var->gpu_touched.store(true, std::memory_order_release);
    }
    GpuSync& sync = *var->gpu;
    if (slot.write) {
      sync.writer = mark;
      sync.readers.clear();  // this write waited for them (gpu_before_run)
    } else {
      auto same = std::find_if(sync.readers.begin(), sync.readers.end(),
                               [&](const StreamMark& r) { return r.clock == &clock; });
      if (same != sync.readers.end()) {
        same->mark = mark.mark;  // the newer mark on a stream covers the older
      } else {
        sync.readers.push_back(mark);
      }
    }
  }
}

std::vector<StreamMark> gpu_pending_marks(OprBlock* op, bool query) {
  std::vector<StreamMark> pending;
  for (uint32_t i = 0; i < op->num_slots; ++i) {
    const VarSlot& slot = op->slots[i];
    Var* var = slot.var;
    if (!var->gpu_touched.load(std::memory_order_acquire)) continue;
    StreamMark marks[4];
    std::vector<StreamMark> more;
    int n = 0;
    {
      std::lock_guard<SpinLock> lock(var->lock);
      if (!var->gpu) continue;
      auto add = [&](const StreamMark& m) {
        if (!m) return;
        if (n < 4) {
          marks[n++] = m;
        } else {
          more.push_back(m);
        }
      };
      add(var->gpu->writer);
      if (slot.write) {
        for (const auto& r : var->gpu->readers) add(r);
        // A writer holds the variable alone: no operation can hang new marks on it before this
        // one has run, and this one runs only once these have completed (now, or when the
        // poller has seen them). So it may forget them here, and finds none when it comes back.
        var->gpu->writer = StreamMark{};
        var->gpu->readers.clear();
      }
    }
    auto keep = [&](const StreamMark& m) {
      bool complete;
      try {
        complete = m.clock->done(m.mark, query);
      } catch (const std::exception&) {
        complete = true;  // a faulted device: let the operation run and see it
      }
      if (!complete) pending.push_back(m);
    };
    for (int k = 0; k < n; ++k) keep(marks[k]);
    for (const auto& m : more) keep(m);
  }
  return pending;
}

// ---- EventPoller -------------------------------------------------------------------------------

EventPoller::EventPoller(Dispatch dispatch) : dispatch_(std::move(dispatch)) {
  thread_ = std::thread([this] { main(); });
}

EventPoller::~EventPoller() { shutdown(); }

void EventPoller::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void EventPoller::defer(OprBlock* op, std::vector<StreamMark> marks) {
  bool sleeping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.push_back(Held{op, std::move(marks)});
    sleeping = sleeping_;
  }
  // While it holds operations the poller polls on its own; a futex wake is a few microseconds
  // on the deferring thread (every delete_var of a GPU array comes here).
  if (sleeping) wake_.notify_one();
}

void EventPoller::main() {
  Profiler::global().set_thread_lane("gpu event poller");
  std::vector<Held> scan;
  std::vector<OprBlock*> ready;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // What the last scan left goes back first: it was deferred before anything in held_.
      if (!scan.empty()) {
        scan.insert(scan.end(), std::make_move_iterator(held_.begin()),
                    std::make_move_iterator(held_.end()));
        held_.swap(scan);
        scan.clear();
      }
      sleeping_ = true;
      wake_.wait(lock, [&] { return stopping_ || !held_.empty(); });
      sleeping_ = false;
      if (stopping_ && held_.empty()) return;
      held_.swap(scan);  // scanned outside the lock, so defer() never waits for a scan
    }
    for (Held& h : scan) {
      auto& marks = h.marks;
      marks.erase(std::remove_if(marks.begin(), marks.end(),
                                 [](const StreamMark& m) {
                                   try {
                                     return m.clock->done(m.mark);
                                   } catch (const std::exception&) {
                                     return true;  // a faulted device: let the op see it
                                   }
                                 }),
                  marks.end());
      if (marks.empty()) {
        ready.push_back(h.op);
        h.op = nullptr;
      }
    }
    if (!ready.empty()) {
      scan.erase(
          std::remove_if(scan.begin(), scan.end(), [](const Held& h) { return h.op == nullptr; }),
          scan.end());
    }
    for (OprBlock* op : ready) dispatch_(op);
    const bool idle = ready.empty();
    ready.clear();
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace weft::detail
