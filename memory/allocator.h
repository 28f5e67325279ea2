// The Allocator contract and the device allocators (CPU; pinned host and CUDA when built).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "base/device.h"
#include "devices/device_api.h"
#include "memory/data_ptr.h"

namespace weft {

/// Default alignment of every weft allocation: a cache line, and enough for any SIMD load.
inline constexpr size_t kDefaultAlignment = 64;

/// Hands out owning DataPtrs on one device. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;

  /// Allocates at least `bytes` bytes aligned to `alignment` (a power of two; at least
  /// kDefaultAlignment is used). Zero bytes yields a valid, unique, non-null pointer. Throws
  /// OutOfMemory naming the size (and, for pools, the pool's state), ValueError for a bad
  /// alignment. Thread-safe.
  virtual DataPtr allocate(size_t bytes, size_t alignment = kDefaultAlignment) = 0;

  /// Allocates for use on `stream`. Allocators without per-stream state ignore the stream.
  virtual DataPtr allocate_on(size_t bytes, const Stream& stream,
                              size_t alignment = kDefaultAlignment) {
    return allocate(bytes, alignment);
  }

  /// The device the memory lives on.
  virtual Device device() const = 0;
  /// A short name for messages and traces ("cpu", "pooled(cpu)", ...).
  virtual std::string name() const = 0;
};

/// The process's CPU allocator (64-byte aligned, from the C library). Never null; thread-safe.
std::shared_ptr<Allocator> cpu_allocator();

/// Page-locked host memory for fast host↔device copies (cudaHostAlloc). Throws NotImplemented
/// in a build without CUDA; allocate() throws OutOfMemory when no CUDA device is usable.
std::shared_ptr<Allocator> make_pinned_allocator();

/// Device memory of CUDA device `ordinal` (cudaMalloc). Throws NotImplemented in a build
/// without CUDA; allocate() throws OutOfMemory when the device is absent or full.
std::shared_ptr<Allocator> make_cuda_allocator(int ordinal);

/// Throws OutOfMemory "<what>: <bytes> do not fit in <device>, which has <capacity> in total"
/// when `bytes` exceeds device_memory_capacity(device); checks nothing when the capacity is
/// unknown (0). Allocators call it before asking the system, and callers that know what the
/// bytes are for (an array's shape, a graph node) call it first with a better `what`, so that
/// an impossible request is a clear error instead of a failed, or under a sanitizer aborting,
/// allocation. Thread-safe.
void check_fits_device(size_t bytes, Device device, const std::string& what);

namespace detail {
/// Validates an alignment and returns the effective one (>= kDefaultAlignment).
size_t checked_alignment(size_t alignment);
inline size_t effective_alignment(size_t alignment) {
  return alignment == kDefaultAlignment ? kDefaultAlignment : checked_alignment(alignment);
}
/// Rounds `value` up to a multiple of `multiple` (a power of two), throwing on overflow.
size_t round_up(size_t value, size_t multiple);
/// "1.50 MiB"
std::string format_bytes(size_t bytes);
}  // namespace detail

}  // namespace weft
