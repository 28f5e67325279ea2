// DeviceAPI for CUDA devices: streams and events through the CUDA runtime.
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>

#include "base/error.h"
#include "devices/cuda_guard.h"
#include "devices/device_api.h"

namespace weft {

namespace {

void check_cuda(cudaError_t status, const char* what, Device device) {
  if (status != cudaSuccess) {
    cudaGetLastError();
    WEFT_THROW(Error) << what << " on " << to_string(device)
                      << " failed: " << cudaGetErrorString(status);
  }
}

class CudaDeviceAPI final : public DeviceAPI {
 public:
  int device_count() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;  // no driver or no device: a CPU-only machine
    }
    return count;
  }

  int64_t attribute(Device device, DeviceAttribute attribute) override {
    if (device.id < 0) return 0;
    if (attribute == DeviceAttribute::kTotalMemory) return total_memory(device);  // cached
    if (device.id >= device_count()) return 0;
    switch (attribute) {
      case DeviceAttribute::kExists:
        return 1;
      case DeviceAttribute::kComputeUnits: {
        int value = 0;
        check_cuda(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device.id),
                   "cudaDeviceGetAttribute", device);
        return value;
      }
      case DeviceAttribute::kTotalMemory:
        break;  // answered above
    }
    return 0;
  }

  // Total memory of a device (cudaMemGetInfo), cached per ordinal: allocators ask on every
  // allocation (device_memory_capacity) and the total does not change. 0 when unknown.
  int64_t total_memory(Device device) {
    constexpr int kCached = 64;
    static std::array<std::atomic<int64_t>, kCached> cache{};  // 0: not asked yet
    if (device.id >= kCached) return 0;
    std::atomic<int64_t>& slot = cache[static_cast<size_t>(device.id)];
    // Relaxed is enough: the value is a plain number, the same whichever thread stores it.
    int64_t total = slot.load(std::memory_order_relaxed);
    if (total != 0) return total;
    if (device.id >= device_count()) return 0;
    CudaDeviceGuard scope(device.id);
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    total = static_cast<int64_t>(total_bytes);
    slot.store(total, std::memory_order_relaxed);
    return total;
  }

  Stream create_stream(Device device) override {
    CudaDeviceGuard scope(device.id);
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate",
               device);
    return Stream{device, stream};
  }
  void destroy_stream(const Stream& stream) override {
    if (stream.handle != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream.handle));
  }
  void synchronize(const Stream& stream) override {
    CudaDeviceGuard scope(stream.device.id);
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)),
               "cudaStreamSynchronize", stream.device);
  }

  Event create_event(Device device) override {
    CudaDeviceGuard scope(device.id);
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate", device);
    return Event(device, event, this);
  }

 protected:
  void destroy_event(Device, void* handle) override {
    cudaEventDestroy(static_cast<cudaEvent_t>(handle));
  }
  void record_event(void* handle, const Stream& stream) override {
    check_cuda(
        cudaEventRecord(static_cast<cudaEvent_t>(handle), static_cast<cudaStream_t>(stream.handle)),
        "cudaEventRecord", stream.device);
  }
  bool query_event(Device device, void* handle) override {
    cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(handle));
    if (status == cudaErrorNotReady) return false;
    check_cuda(status, "cudaEventQuery", device);
    return true;
  }
  void synchronize_event(Device device, void* handle) override {
    check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(handle)), "cudaEventSynchronize",
               device);
  }
  void stream_wait_event(const Stream& stream, void* handle) override {
    check_cuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle),
                                   static_cast<cudaEvent_t>(handle), 0),
               "cudaStreamWaitEvent", stream.device);
  }
};

}  // namespace

DeviceAPI* cuda_device_api() {
  static CudaDeviceAPI api;
  return &api;
}

}  // namespace weft
