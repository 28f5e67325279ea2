// TensorView: the non-owning view kernels see, laid out exactly like DLPack's DLTensor.
#pragma once

#include <cstdint>

#include "base/device.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/shape.h"

namespace weft {

/// A non-owning view of a tensor: data pointer, device, rank, dtype, shape, strides (null =
/// compact row-major) and byte offset. Field for field the layout of DLPack's `DLTensor`, so a
/// `TensorView*` converts to a `DLTensor*` by a cast. The shape (and strides) arrays belong to the
/// caller and must outlive the view. Kernels receive compact views (strides == nullptr).
struct TensorView {
  void* data = nullptr;
  Device device;
  int32_t ndim = 0;
  DLDataTypeCompat dl_dtype;
  const int64_t* shape = nullptr;
  const int64_t* strides = nullptr;
  uint64_t byte_offset = 0;

  TensorView() = default;
  /// A compact view of `s` (which must outlive the view) at `ptr`.
  TensorView(void* ptr, Device dev, DType type, const Shape& s)
      : data(ptr), device(dev), ndim(s.ndim()), dl_dtype(to_dlpack(type)), shape(s.data()) {}

  DType dtype() const { return from_dlpack(dl_dtype); }
  /// Number of elements (1 for a 0-d view).
  int64_t size() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  /// Dimension `i`; negative counts from the end.
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  Shape shape_of() const { return Shape(shape, shape + ndim); }
  /// The first element, typed. Checks the dtype in debug builds.
  template <typename T>
  T* ptr() const {
    WEFT_DCHECK(DTypeOf<T>::value == dtype()) << "TensorView::ptr: dtype " << dtype_name(dtype());
    return reinterpret_cast<T*>(static_cast<char*>(data) + byte_offset);
  }
  void* raw() const { return static_cast<char*>(data) + byte_offset; }
  size_t bytes() const { return static_cast<size_t>(size()) * dtype_size(dtype()); }
};

}  // namespace weft
