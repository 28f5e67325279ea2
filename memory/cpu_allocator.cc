// The CPU allocator and the helpers shared by allocators.
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "base/build_config.h"
#include "base/error.h"
#include "memory/allocator.h"

namespace weft {

namespace detail {

size_t checked_alignment(size_t alignment) {
  WEFT_CHECK(alignment != 0 && (alignment & (alignment - 1)) == 0)
      << "allocation alignment must be a power of two, got " << alignment;
  WEFT_CHECK(alignment <= (size_t{1} << 21))
      << "allocation alignment " << alignment << " exceeds the 2 MiB maximum";
  return alignment < kDefaultAlignment ? kDefaultAlignment : alignment;
}

size_t round_up(size_t value, size_t multiple) {
  if (value > std::numeric_limits<size_t>::max() - (multiple - 1)) {
    WEFT_THROW(OutOfMemory) << "allocation of " << value << " bytes is too large to represent";
  }
  return (value + multiple - 1) & ~(multiple - 1);
}

std::string format_bytes(size_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(buf, sizeof(buf), "%zu B", bytes);
  } else if (bytes < (size_t{1} << 20)) {
    std::snprintf(buf, sizeof(buf), "%.2f KiB", b / 1024.0);
  } else if (bytes < (size_t{1} << 30)) {
    std::snprintf(buf, sizeof(buf), "%.2f MiB", b / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
  }
  return buf;
}

}  // namespace detail

void check_fits_device(size_t bytes, Device device, const std::string& what) {
  const size_t capacity = device_memory_capacity(device);
  if (capacity == 0 || bytes <= capacity) return;
  WEFT_THROW(OutOfMemory) << what << ": " << bytes << " bytes (" << detail::format_bytes(bytes)
                          << ") do not fit in " << to_string(device) << ", which has " << capacity
                          << " bytes (" << detail::format_bytes(capacity) << ") in total";
}

namespace {

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t bytes, size_t alignment) override {
    size_t align = detail::effective_alignment(alignment);
    check_fits_device(bytes, Device::cpu(), "cpu allocator");
    size_t size = detail::round_up(bytes == 0 ? 1 : bytes, align);
    void* ptr = std::aligned_alloc(align, size);
    if (ptr == nullptr) {
      WEFT_THROW(OutOfMemory) << "cpu allocator: out of memory allocating "
                              << detail::format_bytes(bytes) << " (" << bytes << " bytes)";
    }
    return DataPtr(ptr, size, Device::cpu(), nullptr,
                   [](void*, void* p, size_t) noexcept { std::free(p); });
  }
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "cpu"; }
};

}  // namespace

std::shared_ptr<Allocator> cpu_allocator() {
  static std::shared_ptr<Allocator> allocator = std::make_shared<CpuAllocator>();
  return allocator;
}

#if !WEFT_USE_CUDA
std::shared_ptr<Allocator> make_pinned_allocator() {
  WEFT_THROW(NotImplemented) << "pinned host memory needs a build with CUDA (WEFT_USE_CUDA=ON)";
}
std::shared_ptr<Allocator> make_cuda_allocator(int ordinal) {
  WEFT_THROW(NotImplemented) << "CUDA device memory (cuda:" << ordinal
                             << ") needs a build with CUDA (WEFT_USE_CUDA=ON)";
}
#endif

}  // namespace weft
