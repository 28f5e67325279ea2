// Pinned host memory and CUDA device memory allocators, on the CUDA DeviceAPI (Note [DeviceAPI
// owns the runtime] in devices/device_api.h).
#include <cstdint>
#include <string>

#include "base/error.h"
#include "devices/device_api.h"
#include "memory/allocator.h"

namespace weft {

namespace {

// Frees through the CUDA API registered now: the one that allocated, unless a test swapped it
// while the memory was alive (then there is no right owner left to ask).
void free_cuda_memory(Device device, void* ptr) noexcept {
  if (DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA)) api->free_data(device, ptr);
}

class PinnedAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t bytes, size_t alignment) override {
    size_t align = detail::effective_alignment(alignment);
    size_t size = detail::round_up(bytes == 0 ? 1 : bytes, align);
    // Pinned memory is page-aligned, which satisfies every allowed alignment up to the page
    // size; larger alignments are rejected below.
    WEFT_CHECK(align <= 4096) << "pinned allocator: alignment " << align
                              << " exceeds the page size";
    const Device device{DeviceType::kCUDAHost, 0};
    check_fits_device(bytes, device, "pinned allocator");
    std::string reason;
    void* ptr = DeviceAPI::get(DeviceType::kCUDA)->alloc_data(device, size, &reason);
    if (ptr == nullptr) {
      WEFT_THROW(OutOfMemory) << "pinned allocator: cudaHostAlloc of "
                              << detail::format_bytes(bytes) << " (" << bytes
                              << " bytes) failed: " << reason;
    }
    return DataPtr(ptr, size, device, nullptr, [](void*, void* p, size_t) noexcept {
      free_cuda_memory(Device{DeviceType::kCUDAHost, 0}, p);
    });
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
    std::string reason;
    // 256-byte aligned or better.
    void* ptr =
        DeviceAPI::get(DeviceType::kCUDA)->alloc_data(Device::cuda(ordinal_), size, &reason);
    if (ptr == nullptr) {
      WEFT_THROW(OutOfMemory) << "cuda allocator: cudaMalloc of " << detail::format_bytes(bytes)
                              << " (" << bytes << " bytes) on cuda:" << ordinal_
                              << " failed: " << reason;
    }
    auto* context = reinterpret_cast<void*>(static_cast<intptr_t>(ordinal_));
    return DataPtr(
        ptr, size, Device::cuda(ordinal_), context, [](void* ctx, void* p, size_t) noexcept {
          free_cuda_memory(Device::cuda(static_cast<int>(reinterpret_cast<intptr_t>(ctx))), p);
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
