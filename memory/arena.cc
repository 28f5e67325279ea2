// The static-plan arena.
#include "memory/arena.h"

#include "base/error.h"

namespace weft {

Arena::Arena(std::shared_ptr<Allocator> allocator) : allocator_(std::move(allocator)) {
  WEFT_CHECK(allocator_ != nullptr) << "Arena: null allocator";
}

Arena::Arena(std::shared_ptr<Allocator> allocator, size_t capacity) : Arena(std::move(allocator)) {
  reserve(capacity);
}

bool Arena::reserve(size_t capacity) {
  if (block_ && capacity <= capacity_) return false;
  // An arena that cannot fit on the device at all fails here, before anything is given back.
  check_fits_device(capacity, device(), "arena (a graph's static memory plan)");
  DataPtr grown;
  try {
    grown = allocator_->allocate(capacity, kDefaultAlignment);
  } catch (const OutOfMemory&) {
    if (!block_) throw;
    // Both blocks do not fit together: give the old one back and try once more. If that fails
    // too the arena is left empty (capacity 0), never half-valid.
    block_.reset();
    capacity_ = 0;
    grown = allocator_->allocate(capacity, kDefaultAlignment);
  }
  block_ = std::move(grown);
  capacity_ = capacity;
  return true;
}

void* Arena::pointer(size_t offset, size_t bytes) const {
  WEFT_CHECK(offset % kDefaultAlignment == 0)
      << "Arena: offset " << offset << " is not a multiple of " << kDefaultAlignment;
  WEFT_CHECK(offset <= capacity_ && bytes <= capacity_ - offset)
      << "Arena: range [" << offset << ", " << offset + bytes << ") exceeds the capacity of "
      << capacity_ << " bytes on " << to_string(device());
  return static_cast<char*>(block_.get()) + offset;
}

}  // namespace weft
