// Shape: a small vector of int64 dimensions (inline up to 6, heap beyond), with -1 for an unknown
// dimension and an unknown rank for a shape not inferred yet.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace weft {

/// A tensor shape. `ndim() == -1` means the rank is unknown (nothing inferred yet); a dimension
/// of -1 is unknown. A 0-d shape (ndim 0) is a scalar with one element. A value type; not
/// thread-safe for concurrent mutation.
class Shape {
 public:
  static constexpr int kInline = 6;

  /// An unknown shape (unknown rank).
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.data() + dims.size()); }
  template <typename It>
  Shape(It first, It last) {
    std::vector<int64_t> tmp(first, last);
    assign(tmp.data(), tmp.data() + tmp.size());
  }
  /// A shape of `ndim` dimensions all equal to `value` (-1: unknown dimensions).
  static Shape filled(int ndim, int64_t value) {
    Shape s;
    s.resize(ndim, value);
    return s;
  }

  Shape(const Shape& o) { assign(o.data(), o.data() + std::max(o.ndim_, 0)), ndim_ = o.ndim_; }
  Shape& operator=(const Shape& o) {
    if (this != &o) {
      assign(o.data(), o.data() + std::max(o.ndim_, 0));
      ndim_ = o.ndim_;
    }
    return *this;
  }
  Shape(Shape&& o) noexcept { *this = std::move(o); }
  Shape& operator=(Shape&& o) noexcept {
    if (this != &o) {
      heap_ = std::move(o.heap_);
      capacity_ = o.capacity_;
      ndim_ = o.ndim_;
      std::copy(o.inline_, o.inline_ + kInline, inline_);
      o.capacity_ = kInline;
      o.ndim_ = -1;
    }
    return *this;
  }

  /// Number of dimensions, or -1 when the rank is unknown.
  int ndim() const { return ndim_; }
  /// The rank is known.
  bool rank_known() const { return ndim_ >= 0; }
  /// The rank and every dimension are known.
  bool known() const {
    if (ndim_ < 0) return false;
    for (int i = 0; i < ndim_; ++i)
      if (data()[i] < 0) return false;
    return true;
  }
  /// Product of the dimensions (1 for a scalar); -1 when not known().
  int64_t size() const {
    if (!known()) return -1;
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= data()[i];
    return n;
  }
  /// Product of dimensions [begin, end).
  int64_t prod(int begin, int end) const {
    int64_t n = 1;
    for (int i = begin; i < end; ++i) n *= data()[i];
    return n;
  }

  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t& operator[](int i) { return data()[i]; }
  int64_t operator[](int i) const { return data()[i]; }
  /// Dimension `i` counted from the end when negative (-1 = last).
  int64_t back(int i = 1) const { return data()[ndim_ - i]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + std::max(ndim_, 0); }
  int64_t* begin() { return data(); }
  int64_t* end() { return data() + std::max(ndim_, 0); }
  std::vector<int64_t> to_vector() const { return std::vector<int64_t>(begin(), end()); }

  /// Sets the rank to `ndim`; new dimensions get `value`.
  void resize(int ndim, int64_t value = -1) {
    const int old = std::max(ndim_, 0);
    reserve(ndim);
    for (int i = old; i < ndim; ++i) data()[i] = value;
    ndim_ = ndim;
  }
  void push_back(int64_t d) {
    const int n = std::max(ndim_, 0);
    reserve(n + 1);
    data()[n] = d;
    ndim_ = n + 1;
  }

  /// "(2, 3)", "()" for a scalar, "?" for an unknown rank, "-1" printed for unknown dims.
  std::string to_string() const {
    if (ndim_ < 0) return "?";
    std::string s = "(";
    for (int i = 0; i < ndim_; ++i) {
      if (i) s += ", ";
      s += std::to_string(data()[i]);
    }
    if (ndim_ == 1) s += ",";
    return s + ")";
  }

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.ndim_ == b.ndim_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  void reserve(int n) {
    if (n <= capacity_) return;
    auto grown = std::make_unique<int64_t[]>(n);
    std::copy(data(), data() + std::max(ndim_, 0), grown.get());
    heap_ = std::move(grown);
    capacity_ = n;
  }
  void assign(const int64_t* first, const int64_t* last) {
    const int n = static_cast<int>(last - first);
    if (n > capacity_) {
      heap_ = std::make_unique<int64_t[]>(n);
      capacity_ = n;
    }
    std::copy(first, last, data());
    ndim_ = n;
  }

  int64_t inline_[kInline] = {};
  std::unique_ptr<int64_t[]> heap_;
  int capacity_ = kInline;
  int ndim_ = -1;
};

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

}  // namespace weft
