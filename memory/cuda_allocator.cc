// Pinned host memory (cudaHostAlloc) and CUDA device memory (cudaMalloc) allocators.
#include <cuda_runtime_api.h>

#include "base/error.h"
#include "devices/cuda_guard.h"
#include "memory/allocator.h"

namespace weft {

namespace {

class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t bytes, size_t alignment) override {
    size_t align = detail::effective_alignment(alignment);
    size_t size = detail::round_up(bytes == 0 ? 1 : bytes, align);
    void* ptr = nullptr;
    // cudaHostAlloc returns page-aligned memory, which satisfies every allowed alignment
    // up to the page size; larger alignments are rejected below.
    WEFT_CHECK(align <= 4096) << "pinned allocator: alignment " << align
                              << " exceeds the page size";
    check_fits_device(bytes, Device{DeviceType::kCUDAHost, 0}, "pinned allocator");
    cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    if (status != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error state of this thread
      WEFT_THROW(OutOfMemory) << "pinned allocator: cudaHostAlloc of "
                              << detail::format_bytes(bytes) << " (" << bytes
                              << " bytes) failed: " << cudaGetErrorString(status);
    }
    return DataPtr(ptr, size, Device{DeviceType::kCUDAHost, 0}, nullptr,
                   [](void*, void* p, size_t) noexcept { cudaFreeHost(p); });
  }
  Device device() const override { return Device{DeviceType::kCUDAHost, 0}; }
  std::string name() const override { return "cuda_host"; }
};

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int ordinal) : ordinal_(ordinal) {}

  DataPtr allocate(size_t bytes, size_t alignment) override {
    size_t align = detail::effective_alignment(alignment);
    WEFT_CHECK(align <= 256 * 1024) << "cuda allocator: alignment " << align << " is not supported";
    check_fits_device(bytes, Device::cuda(ordinal_), "cuda allocator");
    size_t size = detail::round_up(bytes == 0 ? 1 : bytes, align);
    CudaDeviceGuard guard(ordinal_);
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, size);  // 256-byte aligned or better
    if (status != cudaSuccess) {
      cudaGetLastError();
      WEFT_THROW(OutOfMemory) << "cuda allocator: cudaMalloc of " << detail::format_bytes(bytes)
                              << " (" << bytes << " bytes) on cuda:" << ordinal_
                              << " failed: " << cudaGetErrorString(status);
    }
    auto* context = reinterpret_cast<void*>(static_cast<intptr_t>(ordinal_));
    return DataPtr(ptr, size, Device::cuda(ordinal_), context,
                   [](void* ctx, void* p, size_t) noexcept {
                     CudaDeviceGuard g(static_cast<int>(reinterpret_cast<intptr_t>(ctx)));
                     cudaFree(p);
                   });
  }
  Device device() const override { return Device::cuda(ordinal_); }
  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }

 private:
  int ordinal_;
};

}  // namespace

std::shared_ptr<Allocator> make_pinned_allocator() { return std::make_shared<PinnedAllocator>(); }

std::shared_ptr<Allocator> make_cuda_allocator(int ordinal) {
  WEFT_CHECK(ordinal >= 0) << "cuda allocator: negative device ordinal " << ordinal;
  return std::make_shared<CudaAllocator>(ordinal);
}

}  // namespace weft
