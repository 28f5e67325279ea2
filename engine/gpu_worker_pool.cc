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
thread_local const Stream* t_gpu_stream = nullptr;
}  // namespace

const GpuWorkerPool* current_gpu_pool() { return t_gpu_pool; }
const Stream* current_gpu_stream() { return t_gpu_stream; }

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

void GpuWorkerPool::synchronize() {
  for (auto& w : workers_) api_->synchronize(w->stream);
}

void GpuWorkerPool::submit(OprBlock* op) { choose(op).queue->push(op); }

// Note [GPU stream choice]
// Copies go to their direction's stream. Other work goes to the compute stream that last wrote
// one of the variables the operation writes, when there is one: a chain of operations on the
// same data then stays on one stream and needs no cross-stream event. Otherwise the compute
// streams take turns, so independent work can overlap on the device. A successor made ready by
// a completing operation runs inline on the same worker (the engine's rule for every pool), so
// dependent chains keep their stream without this lookup.
GpuWorkerPool::Worker& GpuWorkerPool::choose(OprBlock* op) {
  if (op->property == FnProperty::kCopyToDevice) return *workers_[static_cast<size_t>(compute_)];
  if (op->property == FnProperty::kCopyFromDevice) {
    return *workers_[static_cast<size_t>(compute_) + 1];
  }
  if (compute_ > 1) {
    for (uint32_t i = 0; i < op->num_slots; ++i) {
      const VarSlot& slot = op->slots[i];
      if (!slot.write) continue;
      void* stream = nullptr;
      {
        std::lock_guard<SpinLock> lock(slot.var->lock);
        if (slot.var->gpu) stream = slot.var->gpu->writer.stream;
      }
      if (stream == nullptr) continue;
      for (int w = 0; w < compute_; ++w) {
        if (workers_[static_cast<size_t>(w)]->stream.handle == stream) {
          return *workers_[static_cast<size_t>(w)];
        }
      }
    }
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
  t_gpu_stream = &worker->stream;
  CurrentStreamScope current(worker->stream);  // allocations and frees in ops use this stream
  std::function<void(bool)> on_idle = [this](bool sleep) { runner_->worker_idle(sleep); };
  while (OprBlock* op = worker->queue->pop(on_idle)) runner_->run(op, context);
  t_gpu_stream = nullptr;
  t_gpu_pool = nullptr;
}

// ---- event bookkeeping (Note [GPU var events]) -----------------------------------------------

void gpu_before_run(OprBlock* op, const Stream& stream) {
  std::shared_ptr<Event> waits[8];
  std::vector<std::shared_ptr<Event>> more;
  int n = 0;
  auto add = [&](const detail::StreamEvent& e) {
    if (!e.event || e.stream == stream.handle) return;  // same stream: ordered already
    if (n < 8) {
      waits[n++] = e.event;
    } else {
      more.push_back(e.event);
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
  for (int i = 0; i < n; ++i) waits[i]->block(stream);
  for (const auto& e : more) e->block(stream);
}

void gpu_after_run(OprBlock* op, const Stream& stream) {
  auto event =
      std::make_shared<Event>(DeviceAPI::get(stream.device.type)->create_event(stream.device));
  event->record(stream);
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
      sync.writer = StreamEvent{event, stream.handle};
      sync.readers.clear();  // this write waited for them (gpu_before_run)
    } else {
      auto same = std::find_if(sync.readers.begin(), sync.readers.end(),
                               [&](const StreamEvent& r) { return r.stream == stream.handle; });
      if (same != sync.readers.end()) {
        same->event = event;  // the newer event on a stream covers the older
      } else {
        sync.readers.push_back(StreamEvent{event, stream.handle});
      }
    }
  }
}

std::vector<std::shared_ptr<Event>> gpu_pending_events(OprBlock* op, bool query) {
  std::vector<std::shared_ptr<Event>> pending;
  for (uint32_t i = 0; i < op->num_slots; ++i) {
    const VarSlot& slot = op->slots[i];
    Var* var = slot.var;
    if (!var->gpu_touched.load(std::memory_order_acquire)) continue;
    std::vector<std::shared_ptr<Event>> events;
    {
      std::lock_guard<SpinLock> lock(var->lock);
      if (!var->gpu) continue;
      if (var->gpu->writer.event) events.push_back(var->gpu->writer.event);
      if (slot.write) {
        for (const auto& r : var->gpu->readers) events.push_back(r.event);
        // A writer holds the variable alone: no operation can hang new events on it before this
        // one has run, and this one runs only once these have completed (now, or when the
        // poller has seen them). So it may forget them here, and finds none when it comes back.
        var->gpu->writer = StreamEvent{};
        var->gpu->readers.clear();
      }
    }
    for (auto& e : events) {
      if (!query || !e->query()) pending.push_back(std::move(e));
    }
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

void EventPoller::defer(OprBlock* op, std::vector<std::shared_ptr<Event>> events) {
  bool sleeping;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_.push_back(Held{op, std::move(events)});
    sleeping = sleeping_;
  }
  // While it holds operations the poller polls on its own; a futex wake is a few microseconds
  // on the deferring thread (every delete_var of a GPU array comes here).
  if (sleeping) wake_.notify_one();
}

void EventPoller::main() {
  Profiler::global().set_thread_lane("gpu event poller");
  std::vector<Held> ready;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_ = true;
      wake_.wait(lock, [&] { return stopping_ || !held_.empty(); });
      sleeping_ = false;
      if (stopping_ && held_.empty()) return;
      // Query under the lock: cudaEventQuery is a fraction of a microsecond, and defer() is
      // rare next to the polls.
      for (auto it = held_.begin(); it != held_.end();) {
        auto& events = it->events;
        events.erase(std::remove_if(events.begin(), events.end(),
                                    [](const std::shared_ptr<Event>& e) {
                                      try {
                                        return e->query();
                                      } catch (const std::exception&) {
                                        return true;  // a faulted device: let the op see it
                                      }
                                    }),
                     events.end());
        if (events.empty()) {
          ready.push_back(std::move(*it));
          it = held_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Held& h : ready) dispatch_(h.op);
    const bool idle = ready.empty();
    ready.clear();
    if (idle) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace weft::detail
