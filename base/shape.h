// Shape: a small vector of int64 dimensions (inline up to 6, heap beyond), with -1 for an unknown
// dimension and an unknown rank for a shape not inferred yet.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "base/error.h"

namespace weft {

// Note [Checked sizes]
// Every shape -> element count -> byte count conversion goes through Shape::size()/prod() and
// shape_bytes() below, which reject negative dimensions and any product that would overflow, so
// a hostile file, attribute or command-line shape is a ShapeError naming the shape, never a
// wrapped size that later under-allocates. Callers add what the shape belongs to (array, node).
//
// The limit is on the product of the non-zero dimensions, not only on the element count: a
// (0, 2^40, 2^40) array holds nothing, but its strides would still overflow. So a shape within
// limits has every sub-product (a stride, a row, a GEMM dimension) at most kMaxElements, and
// code that multiplies dimensions of one such shape needs no overflow check of its own. Shape
// inference keeps every shape it produces within limits (ops/infer_util.cc and graph/infer.cc
// check them as they are produced); code that multiplies a dimension by an attribute or adds
// dimensions uses mul_dims()/add_dims().

/// The largest element count weft accepts for one array (2^56: far beyond any device, small
/// enough that count * 8-byte dtype and offsets computed in int64 cannot overflow).
inline constexpr int64_t kMaxElements = int64_t{1} << 56;

/// A tensor shape. `ndim() == -1` means the rank is unknown (nothing inferred yet); a dimension
/// of -1 is unknown. A 0-d shape (ndim 0) is a scalar with one element. A value type; not
/// thread-safe for concurrent mutation.
class Shape {
 public:
  static constexpr int kInline = 6;

  /// An unknown shape (unknown rank).
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) {
    assign(dims.data(), dims.data() + dims.size());
  }
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
  /// Product of the dimensions (1 for a scalar); -1 when not known(). Throws ShapeError when the
  /// shape is not within_limits() (see Note [Checked sizes]).
  int64_t size() const {
    if (!known()) return -1;
    return prod(0, ndim_);
  }
  /// Product of dimensions [begin, end). Throws ShapeError when a dimension in the range is
  /// unknown (negative) or the product of its non-zero dimensions exceeds kMaxElements.
  int64_t prod(int begin, int end) const {
    int64_t n = 1;
    bool zero = false;
    for (int i = begin; i < end; ++i) {
      const int64_t d = data()[i];
      if (d == 0) {
        zero = true;
      } else if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxElements) {
        overflow(begin, end);
      }
    }
    return zero ? 0 : n;
  }
  /// Whether the shape is within weft's limits: the product of its known non-zero dimensions is
  /// at most kMaxElements (unknown dimensions are skipped, so a partly inferred shape can be
  /// checked). Never throws.
  bool within_limits() const {
    int64_t n = 1;
    for (int i = 0; i < std::max(ndim_, 0); ++i) {
      const int64_t d = data()[i];
      if (d <= 0) continue;
      if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements) return false;
    }
    return true;
  }
  /// Throws ShapeError "<what>: shape S has more than 2^56 elements ..." unless within_limits().
  void check_limits(const std::string& what) const {
    if (!within_limits()) {
      WEFT_THROW(ShapeError) << what << ": shape " << to_string()
                             << " is too large (the product of its dimensions exceeds 2^56, "
                                "weft's limit for one array)";
    }
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
  [[noreturn]] void overflow(int begin, int end) const {
    WEFT_THROW(ShapeError) << "shape " << to_string() << ": dimensions [" << begin << ", " << end
                           << ") include an unknown one or multiply to more than 2^56 elements";
  }
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

/// Bytes of a known shape of `element_size`-byte elements; throws ShapeError (naming `what` and
/// the shape) when the shape is not known, not within limits, or the count overflows. The one
/// shape -> bytes path (see Note [Checked sizes]). Thread-safe.
inline size_t shape_bytes(const Shape& shape, size_t element_size, const std::string& what) {
  if (!shape.known()) {
    WEFT_THROW(ShapeError) << what << ": shape " << shape.to_string() << " is not fully known";
  }
  shape.check_limits(what);
  int64_t bytes = 0;
  if (element_size > static_cast<size_t>(INT64_MAX) ||
      __builtin_mul_overflow(shape.size(), static_cast<int64_t>(element_size), &bytes)) {
    WEFT_THROW(ShapeError) << what << ": shape " << shape.to_string() << " of " << element_size
                           << "-byte elements overflows a 64-bit byte count";
  }
  return static_cast<size_t>(bytes);
}

/// a * b for two dimensions (or a dimension and an attribute such as a scale factor), both
/// >= 0; throws ShapeError naming both when the product exceeds kMaxElements. Thread-safe.
inline int64_t mul_dims(int64_t a, int64_t b) {
  int64_t n = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &n) || n > kMaxElements) {
    WEFT_THROW(ShapeError) << "dimension " << a << " x " << b
                           << " is negative or exceeds 2^56, weft's limit for one array";
  }
  return n;
}

/// a + b for two dimensions, both >= 0; throws ShapeError naming both when the sum exceeds
/// kMaxElements. Thread-safe.
inline int64_t add_dims(int64_t a, int64_t b) {
  if (a < 0 || b < 0 || a > kMaxElements - b) {
    WEFT_THROW(ShapeError) << "dimension " << a << " + " << b
                           << " is negative or exceeds 2^56, weft's limit for one array";
  }
  return a + b;
}

inline std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

}  // namespace weft
