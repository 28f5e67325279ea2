// DeviceAPI for the CPU: one trivially ordered stream; events complete when recorded.
#include <unistd.h>

#include <cstring>

#include "base/error.h"
#include "devices/device_api.h"

namespace weft {

namespace {

class CpuDeviceAPI final : public DeviceAPI {
 public:
  int device_count() override { return 1; }

  int64_t attribute(Device device, DeviceAttribute attribute) override {
    check(device);
    switch (attribute) {
      case DeviceAttribute::kExists:
        return 1;
      case DeviceAttribute::kComputeUnits:
        return cpu_core_count();
      case DeviceAttribute::kTotalMemory: {
        // Physical memory does not change while we run; sysconf(_SC_PHYS_PAGES) is a system
        // call, and allocators ask on every allocation (device_memory_capacity).
        static const int64_t total = [] {
          const long pages = sysconf(_SC_PHYS_PAGES);
          const long page_size = sysconf(_SC_PAGE_SIZE);
          return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
        }();
        return total;
      }
    }
    return 0;
  }

  // Work on the CPU stream runs on the calling thread, so it is complete when submitted.
  Stream create_stream(Device device) override {
    check(device);
    return Stream{device, nullptr};
  }
  void destroy_stream(const Stream&) override {}
  void synchronize(const Stream&) override {}

  Event create_event(Device device) override {
    check(device);
    // A null handle: every CPU event is already complete; no vendor object is needed.
    return Event(device, nullptr, this);
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
            const Stream&) override {
    check_host(dst_device);
    check_host(src_device);
    if (bytes != 0) std::memcpy(dst, src, bytes);
  }
  void memset(void* dst, int value, size_t bytes, const Stream&) override {
    if (bytes != 0) std::memset(dst, value, bytes);
  }
  void launch_host_func(const Stream&, void (*fn)(void*), void* arg) override { fn(arg); }

 protected:
  void destroy_event(Device, void*) override {}
  void record_event(void*, const Stream&) override {}
  bool query_event(Device, void*) override { return true; }
  void synchronize_event(Device, void*) override {}
  void stream_wait_event(const Stream&, void*) override {}

 private:
  // The CPU copies between host memories: its own and page-locked (cuda_host) memory.
  static void check_host(Device device) {
    WEFT_CHECK(device.type == DeviceType::kCPU || device.type == DeviceType::kCUDAHost)
        << "the CPU device API cannot copy to or from '" << to_string(device)
        << "': use that device's API";
  }
  static void check(Device device) {
    WEFT_CHECK(device.type == DeviceType::kCPU && device.id == 0)
        << "the CPU device API was asked about '" << to_string(device) << "'; only cpu:0 exists";
  }
};

}  // namespace

DeviceAPI* cpu_device_api() {
  static CpuDeviceAPI api;
  return &api;
}

}  // namespace weft
