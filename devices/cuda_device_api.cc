// DeviceAPI for CUDA devices: streams, pooled events, copies, memset and host functions through
// the CUDA runtime.
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "base/error.h"
#include "devices/cuda_check.h"
#include "devices/cuda_guard.h"
#include "devices/cuda_handles.h"
#include "devices/device_api.h"

namespace weft {

namespace cuda {

void check(cudaError_t status, const char* call, int device) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear the (non-sticky) error so the thread's next call starts clean
  WEFT_THROW(Error) << call << " on cuda:" << device << " failed: " << cudaGetErrorName(status)
                    << " (" << cudaGetErrorString(status) << ")";
}

}  // namespace cuda

namespace {

void check_cuda(cudaError_t status, const char* what, Device device) {
  cuda::check(status, what, device.id);
}

// Events of one device kept for reuse. A freed event goes back here instead of to
// cudaEventDestroy: the engine records one per GPU operation, and creating and destroying a CUDA
// event costs microseconds each.
struct EventPool {
  std::mutex mutex;
  std::vector<cudaEvent_t> free;
};

constexpr int kMaxDevices = 64;

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
    static std::array<std::atomic<int64_t>, kMaxDevices> cache{};  // 0: not asked yet
    if (device.id >= kMaxDevices) return 0;
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

  Stream create_stream(Device device) override { return create_stream(device, 0); }
  Stream create_stream(Device device, int priority) override {
    check_ordinal(device);
    CudaDeviceGuard scope(device.id);
    int least = 0, greatest = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest),
               "cudaDeviceGetStreamPriorityRange", device);
    // Lower numbers are higher priorities: clamp into [greatest, least].
    priority = priority > least ? least : (priority < greatest ? greatest : priority);
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority),
               "cudaStreamCreateWithPriority", device);
    return Stream{device, stream};
  }
  std::pair<int, int> stream_priority_range(Device device) override {
    CudaDeviceGuard scope(device.id);
    int least = 0, greatest = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest),
               "cudaDeviceGetStreamPriorityRange", device);
    return {least, greatest};
  }
  void destroy_stream(const Stream& stream) override {
    if (stream.handle != nullptr) {
      cuda::release_handles(stream);  // cuBLAS/cuDNN handles bound to it go first
      CudaDeviceGuard scope(stream.device.id);
      cudaStreamDestroy(static_cast<cudaStream_t>(stream.handle));
    }
  }
  void synchronize(const Stream& stream) override {
    CudaDeviceGuard scope(stream.device.id);
    check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream.handle)),
               "cudaStreamSynchronize", stream.device);
  }

  Event create_event(Device device) override {
    check_ordinal(device);
    EventPool& pool = pools_[static_cast<size_t>(device.id)];
    {
      std::lock_guard<std::mutex> lock(pool.mutex);
      if (!pool.free.empty()) {
        cudaEvent_t event = pool.free.back();
        pool.free.pop_back();
        return Event(device, event, this);
      }
    }
    CudaDeviceGuard scope(device.id);
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate", device);
    return Event(device, event, this);
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
            const Stream& stream) override {
    if (bytes == 0) return;
    auto s = static_cast<cudaStream_t>(stream.handle);
    CudaDeviceGuard scope(stream.device.id);
    if (dst_device.type == DeviceType::kCUDA && src_device.type == DeviceType::kCUDA &&
        dst_device.id != src_device.id) {
      check_cuda(cudaMemcpyPeerAsync(dst, dst_device.id, src, src_device.id, bytes, s),
                 "cudaMemcpyPeerAsync", stream.device);
      return;
    }
    // Unified addressing: the runtime knows from the pointers which way the copy goes.
    check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s),
               copy_name(dst_device, src_device), stream.device);
  }
  void memset(void* dst, int value, size_t bytes, const Stream& stream) override {
    if (bytes == 0) return;
    CudaDeviceGuard scope(stream.device.id);
    check_cuda(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream.handle)),
               "cudaMemsetAsync", stream.device);
  }
  void launch_host_func(const Stream& stream, void (*fn)(void*), void* arg) override {
    CudaDeviceGuard scope(stream.device.id);
    check_cuda(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream.handle), fn, arg),
               "cudaLaunchHostFunc", stream.device);
  }
  void* alloc_data(Device device, size_t bytes, std::string* reason) override {
    void* ptr = nullptr;
    cudaError_t status = cudaSuccess;
    if (device.type == DeviceType::kCUDAHost) {
      status = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
    } else {
      CudaDeviceGuard scope(device.id);
      status = cudaMalloc(&ptr, bytes);
    }
    if (status == cudaSuccess) return ptr;
    cudaGetLastError();  // clear the sticky error state of this thread
    if (reason != nullptr) *reason = cudaGetErrorString(status);
    return nullptr;
  }
  void free_data(Device device, void* ptr) noexcept override {
    if (device.type == DeviceType::kCUDAHost) {
      cudaFreeHost(ptr);
      return;
    }
    CudaDeviceGuard scope(device.id);
    cudaFree(ptr);
  }
  void set_device(Device device) override {
    check_cuda(cudaSetDevice(device.id), "cudaSetDevice", device);
  }
  int current_device() override {
    int ordinal = 0;
    check_cuda(cudaGetDevice(&ordinal), "cudaGetDevice", Device::cuda(0));
    return ordinal;
  }

  // Capture in thread-local mode: a call this thread makes that is unsafe during capture
  // (cudaMalloc, a synchronisation, an event query) breaks the capture; other threads (the
  // engine's other workers) go on as before.
  bool can_capture() override { return true; }
  void begin_capture(const Stream& stream) override {
    CudaDeviceGuard scope(stream.device.id);
    check_cuda(cudaStreamBeginCapture(static_cast<cudaStream_t>(stream.handle),
                                      cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture", stream.device);
  }
  void* end_capture(const Stream& stream) override {
    CudaDeviceGuard scope(stream.device.id);
    cudaGraph_t graph = nullptr;
    const cudaError_t status =
        cudaStreamEndCapture(static_cast<cudaStream_t>(stream.handle), &graph);
    if (status != cudaSuccess || graph == nullptr) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaGetLastError();  // capture errors are not sticky: clear the last error
      check_cuda(status == cudaSuccess ? cudaErrorStreamCaptureInvalidated : status,
                 "cudaStreamEndCapture", stream.device);
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check_cuda(made, "cudaGraphInstantiateWithFlags", stream.device);
    return exec;
  }
  void launch_graph(void* graph, const Stream& stream) override {
    CudaDeviceGuard scope(stream.device.id);
    check_cuda(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph),
                               static_cast<cudaStream_t>(stream.handle)),
               "cudaGraphLaunch", stream.device);
  }
  void destroy_graph(Device device, void* graph) override {
    if (graph == nullptr) return;
    CudaDeviceGuard scope(device.id);
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }

 protected:
  void destroy_event(Device device, void* handle) override {
    if (handle == nullptr) return;
    if (device.id < 0 || device.id >= kMaxDevices) {
      cudaEventDestroy(static_cast<cudaEvent_t>(handle));
      return;
    }
    EventPool& pool = pools_[static_cast<size_t>(device.id)];
    std::lock_guard<std::mutex> lock(pool.mutex);
    pool.free.push_back(static_cast<cudaEvent_t>(handle));
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

 private:
  static const char* copy_name(Device dst, Device src) {
    bool dst_dev = dst.type == DeviceType::kCUDA, src_dev = src.type == DeviceType::kCUDA;
    if (dst_dev && src_dev) return "cudaMemcpyAsync (device to device)";
    if (dst_dev) return "cudaMemcpyAsync (host to device)";
    if (src_dev) return "cudaMemcpyAsync (device to host)";
    return "cudaMemcpyAsync (host to host)";
  }
  void check_ordinal(Device device) {
    WEFT_CHECK(device.type == DeviceType::kCUDA && device.id >= 0 && device.id < kMaxDevices)
        << "the CUDA device API was asked about '" << to_string(device) << "'";
    static const int count = device_count();  // devices do not come and go while we run
    WEFT_CHECK(device.id < count) << "'" << to_string(device)
                                  << "' does not exist: this machine has " << count
                                  << " CUDA device" << (count == 1 ? "" : "s");
  }

  std::array<EventPool, kMaxDevices> pools_;
};

}  // namespace

DeviceAPI* cuda_device_api() {
  static CudaDeviceAPI api;
  return &api;
}

}  // namespace weft
