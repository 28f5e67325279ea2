// DeviceAPI for CUDA devices: streams and events through the CUDA runtime.
#include <cuda_runtime_api.h>

#include "base/error.h"
#include "devices/cuda_guard.h"
#include "devices/device_api.h"

namespace weft {

namespace {

void check_cuda(cudaError_t status, const char* what, Device device) {
  if (status != cudaSuccess) {
    cudaGetLastError();
    WEFT_THROW(Error) << what << " on " << to_string(device) << " failed: " << cudaGetErrorString(status);
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
    if (device.id < 0 || device.id >= device_count()) return 0;
    switch (attribute) {
      case DeviceAttribute::kExists: return 1;
      case DeviceAttribute::kComputeUnits: {
        int value = 0;
        check_cuda(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device.id),
                   "cudaDeviceGetAttribute", device);
        return value;
      }
      case DeviceAttribute::kTotalMemory: {
        cudaDeviceProp props{};
        check_cuda(cudaGetDeviceProperties(&props, device.id), "cudaGetDeviceProperties", device);
        return static_cast<int64_t>(props.totalGlobalMem);
      }
    }
    return 0;
  }

  Stream create_stream(Device device) override {
    CudaDeviceGuard scope(device.id);
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate", device);
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
  void destroy_event(Device, void* handle) override { cudaEventDestroy(static_cast<cudaEvent_t>(handle)); }
  void record_event(void* handle, const Stream& stream) override {
    check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(handle), static_cast<cudaStream_t>(stream.handle)),
               "cudaEventRecord", stream.device);
  }
  bool query_event(Device device, void* handle) override {
    cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(handle));
    if (status == cudaErrorNotReady) return false;
    check_cuda(status, "cudaEventQuery", device);
    return true;
  }
  void synchronize_event(Device device, void* handle) override {
    check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(handle)), "cudaEventSynchronize", device);
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
