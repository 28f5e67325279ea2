// SimGpu: a simulated CUDA DeviceAPI for the engine tests, with streams that run their work in
// order on threads of their own, so that the engine's GPU paths run on machines without a GPU.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "devices/device_api.h"

namespace weft::testing {

// Note [Simulated streams]
// Each stream is a FIFO of work items run in order by the stream's own thread, as a device runs
// a CUDA stream: kernels (test functions, optionally after a delay, so that the device runs
// behind the host), copies and memsets (plain memcpy/memset: "device" memory is host memory
// here), host functions, and waits for events. A stream counts the items queued on it and the
// items completed; an event recorded on a stream is the count queued at that moment, and it is
// complete once as many items have completed there (an event never recorded is complete). A
// stream waiting for an event blocks its thread on the other stream's condition variable until
// the event completes. Every hand-over goes through a stream's mutex, so a thread that sees an
// item complete (the stream's next item, an event query or wait, synchronize) also sees what
// the item wrote; ThreadSanitizer sees the same order the engine relies on with a real device.
// The null stream is not simulated: work for it is refused with an Error.
//
// Note [Simulated capture]
// begin_capture makes a stream record instead of queue: its work items (kernels, copies,
// memsets, host functions) are appended to a recording, in submission order. An event recorded
// on a capturing stream is a point of that recording; a stream that waits for it joins the
// capture, as CUDA streams do. One list in submission order is a valid order for every
// dependency the capture saw, since a wait is always submitted before the work behind it.
// end_capture on the origin stream ends the capture for every joined stream and returns the
// recording as a graph; launch_graph queues one item that runs the whole list. What CUDA refuses
// during capture breaks the recording, and end_capture then throws naming it: synchronizing a
// capturing stream, querying or waiting on the host for a captured event, and a capturing stream
// waiting for an event recorded outside the capture.

/// A simulated CUDA device API (DeviceType::kCUDA) with `devices` devices. Register it with
/// register_device_api(DeviceType::kCUDA, &sim) before creating engines that use cuda:N, and
/// keep it alive for as long as any stream or event it made exists. Thread-safe.
class SimGpu final : public DeviceAPI {
 public:
  explicit SimGpu(int devices = 1);
  /// Destroys the streams still alive (waiting for their work) and joins their threads.
  ~SimGpu() override;
  SimGpu(const SimGpu&) = delete;
  SimGpu& operator=(const SimGpu&) = delete;

  int device_count() override { return devices_; }
  int64_t attribute(Device device, DeviceAttribute attribute) override;
  Stream create_stream(Device device) override;
  Stream create_stream(Device device, int priority) override;
  /// Waits for the stream's queued work, then joins its thread.
  void destroy_stream(const Stream& stream) override;
  void synchronize(const Stream& stream) override;
  std::pair<int, int> stream_priority_range(Device) override { return {0, -1}; }
  Event create_event(Device device) override;
  /// Copies when the stream reaches the copy (every device's memory is host memory here).
  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
            const Stream& stream) override;
  void memset(void* dst, int value, size_t bytes, const Stream& stream) override;
  /// Calls `fn(arg)` on the stream's thread when the stream reaches it.
  void launch_host_func(const Stream& stream, void (*fn)(void*), void* arg) override;
  void set_device(Device device) override;
  int current_device() override;

  /// Stream capture (Note [Simulated capture]).
  bool can_capture() override { return true; }
  void begin_capture(const Stream& stream) override;
  void* end_capture(const Stream& stream) override;
  void launch_graph(void* graph, const Stream& stream) override;
  void destroy_graph(Device device, void* graph) override;

  /// Queues `kernel` on `stream`: the stream's thread sleeps `delay` when it reaches it, then
  /// calls it. A kernel must not throw (a test's bug: the process aborts).
  void launch(const Stream& stream, std::function<void()> kernel,
              std::chrono::microseconds delay = std::chrono::microseconds(0));

  /// Streams created and not yet destroyed.
  int live_streams() const;
  /// Work items queued on live streams and not yet completed.
  int64_t unfinished_work() const;
  /// Items that made one stream wait for an event recorded on another stream, since creation.
  int64_t cross_stream_waits() const;

 protected:
  void destroy_event(Device device, void* handle) override;
  void record_event(void* handle, const Stream& stream) override;
  bool query_event(Device device, void* handle) override;
  void synchronize_event(Device device, void* handle) override;
  void stream_wait_event(const Stream& stream, void* handle) override;

 private:
  struct SimStream;
  struct Recording;
  /// A recorded event: a position in a stream's work (Note [Simulated streams]), or a point in
  /// a capture when recorded on a capturing stream.
  struct EventState {
    std::shared_ptr<SimStream> stream;  ///< null: never recorded (complete)
    uint64_t position = 0;
    std::shared_ptr<Recording> captured;  ///< recorded during this capture
  };
  std::shared_ptr<Recording> capture_of(const Stream& stream) const;
  void invalidate(const std::shared_ptr<Recording>& recording, const std::string& why);
  std::shared_ptr<SimStream> find(const Stream& stream, const char* what) const;
  void enqueue(const Stream& stream, const char* what, std::function<void()> work,
               std::chrono::microseconds delay, EventState wait);
  EventState snapshot(void* handle) const;
  static void run_stream(SimStream* stream);
  static bool complete(const EventState& event);
  static void wait(const EventState& event);

  const int devices_;
  mutable std::mutex mutex_;                             // guards streams_ and event states
  std::map<void*, std::shared_ptr<SimStream>> streams_;  // by handle
  int64_t cross_stream_waits_ = 0;                       // guarded by mutex_
};

}  // namespace weft::testing
