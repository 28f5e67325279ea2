// Arena: one allocation per device carved at planned byte offsets (the graph executor's static
// memory plan).
#pragma once

#include <cstddef>
#include <memory>

#include "memory/allocator.h"

namespace weft {

/// Owns one block of `capacity` bytes from an allocator; a memory plan hands out
/// [offset, offset + bytes) ranges inside it. Offsets must be multiples of kDefaultAlignment so
/// every range is as aligned as a fresh allocation. Not thread-safe for reserve(); pointer()
/// may be called from any thread.
class Arena {
 public:
  /// An empty arena that allocates from `allocator` on reserve().
  explicit Arena(std::shared_ptr<Allocator> allocator);
  /// An arena of `capacity` bytes.
  Arena(std::shared_ptr<Allocator> allocator, size_t capacity);

  /// Ensures at least `capacity` bytes. Keeps the current block when it is large enough
  /// (returns false: existing pointers stay valid), else replaces it (returns true: pointers
  /// taken before are invalid). Throws OutOfMemory when `capacity` exceeds the device's total
  /// memory (check_fits_device; the current block is kept) or from the allocator.
  bool reserve(size_t capacity);

  /// The address of the range [offset, offset + bytes). Throws ValueError naming the range and
  /// the capacity when it does not fit, or when the offset is misaligned.
  void* pointer(size_t offset, size_t bytes) const;

  size_t capacity() const { return capacity_; }
  Device device() const { return allocator_->device(); }
  void* base() const { return block_.get(); }

 private:
  std::shared_ptr<Allocator> allocator_;
  DataPtr block_;
  size_t capacity_ = 0;
};

}  // namespace weft
