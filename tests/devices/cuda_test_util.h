// Helpers of the CUDA tests (devices, memory): whether a device is usable, and a gate that holds
// a stream's work back until the test opens it (a host function that waits on a flag), so that
// "not yet complete" is a certainty rather than a race with a timer.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "devices/device_api.h"

namespace weft::testing {

/// Whether this build has CUDA and the machine a CUDA device.
inline bool cuda_device_usable() {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  return api != nullptr && api->device_count() > 0;
}

/// Blocks a stream at the point where it is enqueued until open() (or a 20 s safety timeout, so
/// that a failed test never hangs the suite). Open and wait for the stream before destroying it;
/// the destructor opens it and waits for the host function to have finished.
class StreamGate {
 public:
  StreamGate() = default;
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  ~StreamGate() {
    open();
    while (enqueued_ && !finished_.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  /// Enqueues the gate on `stream`: work enqueued later waits until open().
  void enqueue(const Stream& stream) {
    enqueued_ = true;
    DeviceAPI::get(stream.device.type)->launch_host_func(stream, &StreamGate::wait, this);
  }
  void open() { open_.store(true); }
  /// Whether the stream has reached the gate.
  bool reached() const { return reached_.load(); }
  bool finished() const { return finished_.load(); }

 private:
  static void wait(void* self) {
    auto* gate = static_cast<StreamGate*>(self);
    gate->reached_.store(true);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!gate->open_.load() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    gate->finished_.store(true);
  }

  bool enqueued_ = false;
  std::atomic<bool> open_{false};
  std::atomic<bool> reached_{false};
  std::atomic<bool> finished_{false};
};

/// A host function that sets an atomic<int> to 1.
inline void set_flag(void* flag) { static_cast<std::atomic<int>*>(flag)->store(1); }

}  // namespace weft::testing
