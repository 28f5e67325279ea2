// The simulated CUDA device of the engine tests (Note [Simulated streams] in sim_gpu.h).
#include "tests/engine/sim_gpu.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "base/error.h"

namespace weft::testing {

/// One simulated stream: its queue and thread. Fields other than `device` and `thread` are
/// guarded by `mutex`; `changed` is notified whenever work is queued or completes.
struct SimGpu::SimStream {
  struct Item {
    std::function<void()> work;       ///< may be empty (a pure wait)
    std::chrono::microseconds delay;  ///< slept before `work`
    EventState wait;                  ///< waited for before `work`
  };
  explicit SimStream(Device d) : device(d) {}

  const Device device;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Item> queue;
  uint64_t queued = 0;     ///< items ever queued
  uint64_t completed = 0;  ///< items completed, in queue order
  bool stopping = false;
  std::shared_ptr<Recording> capture;  ///< set while the stream captures
  std::thread thread;
};

/// A capture in progress or a captured graph (Note [Simulated capture]). Appended to by the
/// capturing thread only; read by a stream thread once launched.
struct SimGpu::Recording {
  std::mutex mutex;
  std::vector<std::function<void()>> work;
  std::vector<std::shared_ptr<SimStream>> joined;
  bool broken = false;
  bool ended = false;  ///< end_capture ran: its events cannot be waited for any more
  std::string why;
};

namespace {
thread_local int t_current_device = 0;
}  // namespace

SimGpu::SimGpu(int devices) : devices_(devices) {}

SimGpu::~SimGpu() {
  std::map<void*, std::shared_ptr<SimStream>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(streams_);
  }
  for (auto& [handle, stream] : left) {
    {
      std::lock_guard<std::mutex> lock(stream->mutex);
      stream->stopping = true;
    }
    stream->changed.notify_all();
    stream->thread.join();
  }
}

int64_t SimGpu::attribute(Device device, DeviceAttribute attribute) {
  if (device.id < 0 || device.id >= devices_) return 0;
  switch (attribute) {
    case DeviceAttribute::kExists:
      return 1;
    case DeviceAttribute::kComputeUnits:
      return 1;
    case DeviceAttribute::kTotalMemory:
      return int64_t{1} << 30;
  }
  return 0;
}

Stream SimGpu::create_stream(Device device) {
  WEFT_CHECK(device.type == DeviceType::kCUDA && device.id >= 0 && device.id < devices_)
      << "SimGpu::create_stream: no simulated device '" << to_string(device) << "'";
  auto stream = std::make_shared<SimStream>(device);
  SimStream* raw = stream.get();
  stream->thread = std::thread([raw] { run_stream(raw); });
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.emplace(static_cast<void*>(raw), std::move(stream));
  return Stream{device, raw};
}

Stream SimGpu::create_stream(Device device, int) { return create_stream(device); }

void SimGpu::destroy_stream(const Stream& stream) {
  std::shared_ptr<SimStream> s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(stream.handle);
    WEFT_CHECK(it != streams_.end()) << "SimGpu::destroy_stream: unknown stream";
    s = std::move(it->second);
    streams_.erase(it);
  }
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->stopping = true;
  }
  s->changed.notify_all();
  s->thread.join();  // the thread drains the queue first
}

void SimGpu::synchronize(const Stream& stream) {
  if (auto rec = capture_of(stream)) invalidate(rec, "synchronize of a capturing stream");
  std::shared_ptr<SimStream> s = find(stream, "synchronize");
  std::unique_lock<std::mutex> lock(s->mutex);
  s->changed.wait(lock, [&] { return s->completed == s->queued; });
}

Event SimGpu::create_event(Device device) {
  WEFT_CHECK(device.type == DeviceType::kCUDA && device.id >= 0 && device.id < devices_)
      << "SimGpu::create_event: no simulated device '" << to_string(device) << "'";
  return Event(device, new EventState(), this);
}

void SimGpu::destroy_event(Device, void* handle) {
  std::lock_guard<std::mutex> lock(mutex_);  // a query may still be reading it
  delete static_cast<EventState*>(handle);
}

void SimGpu::record_event(void* handle, const Stream& stream) {
  std::shared_ptr<SimStream> s = find(stream, "record_event");
  uint64_t position;
  std::shared_ptr<Recording> capture;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    position = s->queued;
    capture = s->capture;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto* event = static_cast<EventState*>(handle);
  if (capture) {
    event->stream = nullptr;
    event->captured = std::move(capture);
    return;
  }
  event->stream = std::move(s);
  event->position = position;
  event->captured = nullptr;
}

SimGpu::EventState SimGpu::snapshot(void* handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return *static_cast<const EventState*>(handle);
}

bool SimGpu::complete(const EventState& event) {
  if (!event.stream) return true;
  std::lock_guard<std::mutex> lock(event.stream->mutex);
  return event.stream->completed >= event.position;
}

void SimGpu::wait(const EventState& event) {
  if (!event.stream) return;
  SimStream& s = *event.stream;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.changed.wait(lock, [&] { return s.completed >= event.position; });
}

bool SimGpu::query_event(Device, void* handle) {
  EventState event = snapshot(handle);
  if (event.captured) invalidate(event.captured, "query of a captured event");
  return complete(event);
}

void SimGpu::synchronize_event(Device, void* handle) {
  EventState event = snapshot(handle);
  if (event.captured) invalidate(event.captured, "host wait for a captured event");
  wait(event);
}

void SimGpu::stream_wait_event(const Stream& stream, void* handle) {
  EventState event = snapshot(handle);
  if (event.captured) {  // the waiting stream joins the capture
    {
      std::lock_guard<std::mutex> lock(event.captured->mutex);
      WEFT_CHECK(!event.captured->ended)
          << "SimGpu::stream_wait_event: the event was last recorded in a capture that ended";
    }
    std::shared_ptr<SimStream> s = find(stream, "stream_wait_event");
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->capture) {
      s->capture = event.captured;
      std::lock_guard<std::mutex> rec_lock(event.captured->mutex);
      event.captured->joined.push_back(s);
    }
    return;
  }
  if (!event.stream) return;  // never recorded: complete
  if (event.stream.get() != stream.handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++cross_stream_waits_;
  }
  enqueue(stream, "stream_wait_event", nullptr, std::chrono::microseconds(0), std::move(event));
}

void SimGpu::copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                  const Stream& stream) {
  WEFT_CHECK(dst_device.type != DeviceType::kCUDA || dst_device.id < devices_)
      << "SimGpu::copy: no simulated device '" << to_string(dst_device) << "'";
  WEFT_CHECK(src_device.type != DeviceType::kCUDA || src_device.id < devices_)
      << "SimGpu::copy: no simulated device '" << to_string(src_device) << "'";
  enqueue(stream, "copy", [dst, src, bytes] { std::memcpy(dst, src, bytes); }, {}, {});
}

void SimGpu::memset(void* dst, int value, size_t bytes, const Stream& stream) {
  enqueue(stream, "memset", [dst, value, bytes] { std::memset(dst, value, bytes); }, {}, {});
}

void SimGpu::launch_host_func(const Stream& stream, void (*fn)(void*), void* arg) {
  enqueue(stream, "launch_host_func", [fn, arg] { fn(arg); }, {}, {});
}

void SimGpu::set_device(Device device) {
  WEFT_CHECK(device.id >= 0 && device.id < devices_)
      << "SimGpu::set_device: no simulated device '" << to_string(device) << "'";
  t_current_device = device.id;
}

int SimGpu::current_device() { return t_current_device; }

void SimGpu::launch(const Stream& stream, std::function<void()> kernel,
                    std::chrono::microseconds delay) {
  enqueue(stream, "launch", std::move(kernel), delay, {});
}

int SimGpu::live_streams() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(streams_.size());
}

int64_t SimGpu::unfinished_work() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const auto& [handle, s] : streams_) {
    std::lock_guard<std::mutex> stream_lock(s->mutex);
    n += static_cast<int64_t>(s->queued - s->completed);
  }
  return n;
}

int64_t SimGpu::cross_stream_waits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cross_stream_waits_;
}

std::shared_ptr<SimGpu::SimStream> SimGpu::find(const Stream& stream, const char* what) const {
  WEFT_CHECK(stream.handle != nullptr)
      << "SimGpu::" << what << ": the null stream of '" << to_string(stream.device)
      << "' is not simulated; use a stream from create_stream";
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = streams_.find(stream.handle);
  WEFT_CHECK(it != streams_.end()) << "SimGpu::" << what << ": unknown or destroyed stream";
  return it->second;
}

void SimGpu::enqueue(const Stream& stream, const char* what, std::function<void()> work,
                     std::chrono::microseconds delay, EventState wait) {
  std::shared_ptr<SimStream> s = find(stream, what);
  if (std::shared_ptr<Recording> rec = capture_of(stream)) {
    std::lock_guard<std::mutex> lock(rec->mutex);
    if (wait.stream) {
      rec->broken = true;
      if (rec->why.empty()) rec->why = "a capturing stream waits for an event outside the capture";
    }
    rec->work.push_back(std::move(work));  // the delay only mattered to expose missing waits
    return;
  }
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->queue.push_back(SimStream::Item{std::move(work), delay, std::move(wait)});
    ++s->queued;
  }
  s->changed.notify_all();
}

void SimGpu::run_stream(SimStream* stream) {
  for (;;) {
    SimStream::Item item;
    {
      std::unique_lock<std::mutex> lock(stream->mutex);
      stream->changed.wait(lock, [&] { return stream->stopping || !stream->queue.empty(); });
      if (stream->queue.empty()) return;  // stopping and drained
      item = std::move(stream->queue.front());
      stream->queue.pop_front();
    }
    wait(item.wait);
    if (item.delay.count() > 0) std::this_thread::sleep_for(item.delay);
    if (item.work) {
      try {
        item.work();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "SimGpu: a kernel threw: %s\n", e.what());
        std::abort();
      }
    }
    item = SimStream::Item{};  // what the work captured goes before the item counts as done
    {
      std::lock_guard<std::mutex> lock(stream->mutex);
      ++stream->completed;
    }
    stream->changed.notify_all();
  }
}

std::shared_ptr<SimGpu::Recording> SimGpu::capture_of(const Stream& stream) const {
  std::shared_ptr<SimStream> s = find(stream, "capture");
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->capture;
}

void SimGpu::invalidate(const std::shared_ptr<Recording>& recording, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(recording->mutex);
    recording->broken = true;
    if (recording->why.empty()) recording->why = why;
  }
  WEFT_THROW(Error) << "SimGpu: " << why << " during stream capture";
}

void SimGpu::begin_capture(const Stream& stream) {
  std::shared_ptr<SimStream> s = find(stream, "begin_capture");
  auto rec = std::make_shared<Recording>();
  rec->joined.push_back(s);
  std::lock_guard<std::mutex> lock(s->mutex);
  WEFT_CHECK(!s->capture) << "SimGpu::begin_capture: the stream already captures";
  s->capture = std::move(rec);
}

void* SimGpu::end_capture(const Stream& stream) {
  std::shared_ptr<Recording> rec = capture_of(stream);
  WEFT_CHECK(rec != nullptr) << "SimGpu::end_capture: the stream does not capture";
  std::vector<std::shared_ptr<SimStream>> joined;
  {
    std::lock_guard<std::mutex> lock(rec->mutex);
    joined = rec->joined;
  }
  for (const auto& s : joined) {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->capture = nullptr;
  }
  std::lock_guard<std::mutex> lock(rec->mutex);
  rec->ended = true;
  WEFT_CHECK(!rec->broken) << "SimGpu::end_capture: the capture is invalid: " << rec->why;
  return new std::shared_ptr<Recording>(std::move(rec));
}

void SimGpu::launch_graph(void* graph, const Stream& stream) {
  std::shared_ptr<Recording> rec = *static_cast<std::shared_ptr<Recording>*>(graph);
  enqueue(stream, "launch_graph",
          [rec] {
            for (const std::function<void()>& w : rec->work) {
              if (w) w();
            }
          },
          {}, {});
}

void SimGpu::destroy_graph(Device, void* graph) {
  delete static_cast<std::shared_ptr<Recording>*>(graph);
}

}  // namespace weft::testing
