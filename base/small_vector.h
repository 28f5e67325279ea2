// SmallVector: a vector that keeps up to N elements inline and moves to the heap beyond, for the
// short per-operation lists (inputs, outputs, vars) on the invocation hot path.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

namespace weft {

/// Holds up to N elements without allocating; grows onto the heap beyond N. T must be default
/// constructible and movable. Not thread-safe.
template <typename T, size_t N>
class SmallVector {
 public:
  SmallVector() = default;
  void push_back(T value) {
    if (heap_.empty()) {
      if (size_ < N) {
        inline_[size_++] = std::move(value);
        return;
      }
      heap_.reserve(N * 2);
      for (size_t i = 0; i < size_; ++i) heap_.push_back(std::move(inline_[i]));
    }
    heap_.push_back(std::move(value));
    ++size_;
  }
  void reserve(size_t n) {
    if (n > N && heap_.empty()) {
      heap_.reserve(n);
      for (size_t i = 0; i < size_; ++i) heap_.push_back(std::move(inline_[i]));
    }
  }
  /// Resizes with default-constructed (or `value`) elements.
  void resize(size_t n, const T& value = T()) {
    while (size_ < n) push_back(value);
    if (n < size_) {
      if (!heap_.empty()) heap_.resize(n);
      size_ = n;
    }
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_.empty() ? inline_.data() : heap_.data(); }
  const T* data() const { return heap_.empty() ? inline_.data() : heap_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  size_t size_ = 0;
};

}  // namespace weft
