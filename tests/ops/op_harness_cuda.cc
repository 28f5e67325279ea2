// The CUDA side of the op test harness: cudaMalloc'd buffers, copies on the harness's stream, and
// the process's pooled temporary allocator. Compiled to nothing in CPU-only builds.
#include "base/build_config.h"

#if WEFT_USE_CUDA

#include <cuda_runtime_api.h>

#include "devices/cuda_check.h"
#include "memory/pooled_allocator.h"
#include "tests/ops/op_harness_internal.h"

namespace weft::testing::detail {
namespace {

constexpr int kDevice = 0;

// One stream for every run: cuBLAS/cuDNN handles are per stream and slow to create. Never
// destroyed, so that no CUDA call runs during static destruction.
const Stream& harness_stream() {
  static const Stream* stream = [] {
    DeviceAPI* api = DeviceAPI::get(DeviceType::kCUDA);
    api->set_device(Device::cuda(kDevice));
    return new Stream(api->create_stream(Device::cuda(kDevice)));
  }();
  return *stream;
}

cudaStream_t raw(const Stream& s) { return static_cast<cudaStream_t>(s.handle); }

}  // namespace

bool cuda_device_present() {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  return api != nullptr && api->device_count() > 0;
}

CudaScratch::CudaScratch() {
  WEFT_CUDA_CALL(cudaSetDevice(kDevice), kDevice);
  harness_stream();
}

CudaScratch::~CudaScratch() {
  // The stream has been synchronized by the run (or the run failed): nothing uses the buffers.
  cudaStreamSynchronize(raw(harness_stream()));
  for (void* p : buffers_) cudaFree(p);
  cudaGetLastError();
}

void* CudaScratch::alloc(size_t bytes) {
  void* p = nullptr;
  const size_t n = bytes == 0 ? 1 : bytes;
  WEFT_CUDA_CALL(cudaMalloc(&p, n), kDevice);
  buffers_.push_back(p);
  WEFT_CUDA_CALL(cudaMemsetAsync(p, 0, n, raw(stream())), kDevice);
  return p;
}

void CudaScratch::upload(void* device_ptr, const void* host, size_t bytes) {
  if (bytes == 0) return;
  WEFT_CUDA_CALL(cudaMemcpyAsync(device_ptr, host, bytes, cudaMemcpyHostToDevice, raw(stream())),
                 kDevice);
  // The host staging buffer may go away before the stream runs: finish the copy now.
  WEFT_CUDA_CALL(cudaStreamSynchronize(raw(stream())), kDevice);
}

void CudaScratch::download(void* host, const void* device_ptr, size_t bytes) {
  if (bytes == 0) return;
  WEFT_CUDA_CALL(cudaMemcpyAsync(host, device_ptr, bytes, cudaMemcpyDeviceToHost, raw(stream())),
                 kDevice);
  WEFT_CUDA_CALL(cudaStreamSynchronize(raw(stream())), kDevice);
}

void CudaScratch::synchronize() {
  WEFT_CUDA_CALL(cudaStreamSynchronize(raw(stream())), kDevice);
  WEFT_CUDA_CALL(cudaGetLastError(), kDevice);
}

const Stream& CudaScratch::stream() const { return harness_stream(); }

Allocator* CudaScratch::temp_allocator() const {
  static PooledAllocator* pool = new PooledAllocator(make_cuda_allocator(kDevice));
  return pool;
}

}  // namespace weft::testing::detail

#endif  // WEFT_USE_CUDA
