// DataPtr: an owning handle to device memory (pointer, size, device, deleter).
#pragma once

#include <cstddef>
#include <utility>

#include "base/device.h"

namespace weft {

/// Owns a piece of memory and knows how to give it back: pointer, size in bytes, device, and a
/// deleter with its context (in the spirit of PyTorch's DataPtr). Move-only. Destroying it runs
/// the deleter. Not thread-safe: one owner at a time (move it between threads freely).
///
/// Lifetime: the deleter and its context must stay valid for as long as the DataPtr lives. The
/// allocators in memory/ keep that promise even when the allocator object is destroyed first:
/// a PooledAllocator orphans the shards its blocks point to (docs/LIFETIMES.md).
class DataPtr {
 public:
  /// Gives the memory back; `context` is whatever the allocator stored. Must not throw.
  using Deleter = void (*)(void* context, void* ptr, size_t size) noexcept;

  DataPtr() = default;
  DataPtr(void* ptr, size_t size, Device device, void* context, Deleter deleter)
      : ptr_(ptr), size_(size), device_(device), context_(context), deleter_(deleter) {}
  DataPtr(DataPtr&& other) noexcept { swap(other); }
  DataPtr& operator=(DataPtr&& other) noexcept {
    if (this != &other) {
      reset();
      swap(other);
    }
    return *this;
  }
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { reset(); }

  void* get() const { return ptr_; }
  /// Bytes usable at get() (at least what was requested).
  size_t size() const { return size_; }
  Device device() const { return device_; }
  void* context() const { return context_; }
  /// The function that gives the memory back (identifies the allocator that made it).
  Deleter deleter() const { return deleter_; }
  explicit operator bool() const { return ptr_ != nullptr; }

  /// Runs the deleter now and leaves this handle empty.
  void reset() noexcept {
    if (deleter_ != nullptr) deleter_(context_, ptr_, size_);
    ptr_ = nullptr;
    size_ = 0;
    context_ = nullptr;
    deleter_ = nullptr;
  }

  void swap(DataPtr& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(size_, other.size_);
    std::swap(device_, other.device_);
    std::swap(context_, other.context_);
    std::swap(deleter_, other.deleter_);
  }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  Device device_;
  void* context_ = nullptr;
  Deleter deleter_ = nullptr;
};

}  // namespace weft
