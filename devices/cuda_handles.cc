// Per-stream cuBLAS, cuBLASLt and cuDNN handles.
#include "devices/cuda_handles.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <unordered_map>

#include "base/error.h"
#include "devices/cuda_check.h"
#include "devices/cuda_guard.h"

namespace weft::cuda {

void check(cublasStatus_t status, const char* call, int device) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  WEFT_THROW(Error) << call << " on cuda:" << device << " failed: " << cublasGetStatusName(status)
                    << " (" << cublasGetStatusString(status) << ")";
}

void check(cudnnStatus_t status, const char* call, int device) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char message[512] = {0};
  cudnnGetLastErrorString(message, sizeof(message));
  WEFT_THROW(Error) << call << " on cuda:" << device << " failed: " << cudnnGetErrorString(status)
                    << (message[0] != 0 ? std::string(": ") + message : std::string());
}

namespace {

// cuBLAS wants at least 4 MiB per handle on Hopper for its fastest kernels; 32 MiB is what
// cuBLASLt's heuristics are tuned for.
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

struct HandleTable {
  std::mutex mutex;
  std::unordered_map<void*, std::unique_ptr<StreamHandles>> by_stream;
};

HandleTable& table() {
  static auto* t = new HandleTable;  // never destroyed: handles may be asked for at exit
  return *t;
}

std::unique_ptr<StreamHandles> create(const Stream& stream) {
  const int dev = stream.device.id;
  CudaDeviceGuard scope(dev);
  auto s = static_cast<cudaStream_t>(stream.handle);
  auto h = std::make_unique<StreamHandles>();
  WEFT_CUDA_CALL(cublasCreate(&h->cublas), dev);
  WEFT_CUDA_CALL(cublasSetStream(h->cublas, s), dev);
  WEFT_CUDA_CALL(cudaMalloc(&h->blas_workspace, kBlasWorkspaceBytes), dev);
  h->blas_workspace_bytes = kBlasWorkspaceBytes;
  WEFT_CUDA_CALL(cublasSetWorkspace(h->cublas, h->blas_workspace, kBlasWorkspaceBytes), dev);
  WEFT_CUDA_CALL(cublasLtCreate(&h->cublas_lt), dev);
  WEFT_CUDA_CALL(cudnnCreate(&h->cudnn), dev);
  WEFT_CUDA_CALL(cudnnSetStream(h->cudnn, s), dev);
  return h;
}

void destroy(StreamHandles& h, int dev) {
  CudaDeviceGuard scope(dev);
  if (h.cudnn) cudnnDestroy(h.cudnn);
  if (h.cublas_lt) cublasLtDestroy(h.cublas_lt);
  if (h.cublas) cublasDestroy(h.cublas);
  if (h.blas_workspace) cudaFree(h.blas_workspace);
}

}  // namespace

StreamHandles& handles_for(const Stream& stream) {
  WEFT_CHECK(stream.device.type == DeviceType::kCUDA)
      << "cuBLAS/cuDNN handles were asked for a stream of '" << to_string(stream.device) << "'";
  HandleTable& t = table();
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.by_stream.find(stream.handle);
    if (it != t.by_stream.end()) return *it->second;
  }
  // Created outside the lock (cudnnCreate takes tens of milliseconds); a racing creator for the
  // same stream loses and destroys its copy.
  std::unique_ptr<StreamHandles> fresh = create(stream);
  std::lock_guard<std::mutex> lock(t.mutex);
  auto [it, inserted] = t.by_stream.try_emplace(stream.handle, std::move(fresh));
  if (!inserted) destroy(*fresh, stream.device.id);
  return *it->second;
}

void release_handles(const Stream& stream) {
  std::unique_ptr<StreamHandles> h;
  {
    HandleTable& t = table();
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.by_stream.find(stream.handle);
    if (it == t.by_stream.end()) return;
    h = std::move(it->second);
    t.by_stream.erase(it);
  }
  destroy(*h, stream.device.id);
}

}  // namespace weft::cuda
