// DLPack exchange of NDArrays, zero-copy both ways (DLManagedTensor of DLPack 0.6 and the
// versioned DLManagedTensorVersioned of DLPack 1.x): the C++ entry points that the C ABI's
// weft_array_{to,from}_dlpack*, the Python package and embedders call. See docs/C_API.md, "DLPack".
#include "ndarray/dlpack.h"

#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "base/build_config.h"
#include "ndarray/runtime.h"

namespace weft {
namespace {

// ---- export ------------------------------------------------------------------------------------

// What an exported tensor keeps alive: the array (its storage) and the shape the tensor points at.
template <typename Managed>
struct Exported {
  NDArray array;
  std::vector<int64_t> shape;
  Managed managed{};
};

template <typename Managed>
Managed* export_array(const NDArray& array) {
  // Every earlier write and read must be done: the consumer may read and write the memory at once.
  array.wait_to_write();
  auto* e = new Exported<Managed>();
  e->array = array;
  e->shape.assign(array.shape().data(), array.shape().data() + array.ndim());
  DLTensor& t = e->managed.dl_tensor;
  t.data = array.raw_data();
  t.device.device_type = static_cast<DLDeviceType>(array.device().type);
  t.device.device_id = array.device().id;
  t.ndim = array.ndim();
  const DLDataTypeCompat dt = to_dlpack(array.dtype());
  t.dtype.code = dt.code;
  t.dtype.bits = dt.bits;
  t.dtype.lanes = dt.lanes;
  t.shape = e->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;    // `data` already points at the first element
  e->managed.manager_ctx = e;
  e->managed.deleter = [](Managed* self) {
    if (self != nullptr) delete static_cast<Exported<Managed>*>(self->manager_ctx);
  };
  return &e->managed;
}

// ---- import ------------------------------------------------------------------------------------

// Checks a foreign tensor and returns its shape, dtype and device; names what is wrong.
void check_tensor(const DLTensor& t, Shape& shape, DType& dtype, Device& device) {
  WEFT_CHECK_AS(ValueError, t.ndim >= 0 && t.ndim <= 32)
      << "the tensor's ndim " << t.ndim << " is out of range (0 to 32)";
  WEFT_CHECK_AS(ValueError, t.ndim == 0 || t.shape != nullptr) << "the tensor's shape is NULL";
  shape = Shape(t.shape, t.shape + t.ndim);
  for (int i = 0; i < t.ndim; ++i) {
    WEFT_CHECK_AS(ShapeError, t.shape[i] >= 0)
        << "argument 'dl_tensor.shape': dimension " << i << " is " << t.shape[i];
  }
  (void)shape.size();  // checked product: throws ShapeError past kMaxElements
  WEFT_CHECK_AS(ValueError, t.dtype.lanes == 1)
      << "the tensor has " << t.dtype.lanes << " lanes per element; weft takes 1";
  dtype = from_dlpack(DLDataTypeCompat{t.dtype.code, t.dtype.bits, t.dtype.lanes});
  // The producer may have stored any integer in the enum field: read it as one (a value outside
  // DLDeviceType's enumerators is not a valid enum value in C++).
  int32_t device_type = 0;
  static_assert(sizeof(t.device.device_type) == sizeof(device_type));
  std::memcpy(&device_type, &t.device.device_type, sizeof device_type);
  if (device_type == kDLCPU) {
    WEFT_CHECK_AS(ValueError, t.device.device_id == 0)
        << "a CPU tensor with device_id " << t.device.device_id;
    device = Device::cpu();
  } else if (device_type == kDLCUDA && WEFT_USE_CUDA) {
    WEFT_CHECK_AS(ValueError, t.device.device_id >= 0)
        << "a CUDA tensor with device_id " << t.device.device_id;
    device = Device::cuda(t.device.device_id);
  } else if (device_type == kDLCUDA) {
    WEFT_THROW(NotImplemented) << "a CUDA tensor: this weft was built without CUDA";
  } else {
    WEFT_THROW(NotImplemented) << "the tensor's device type " << device_type
                               << " is not supported (kDLCPU = 1"
                               << (WEFT_USE_CUDA ? ", kDLCUDA = 2" : "") << ")";
  }
  // Strides: NULL means compact; otherwise they must be the compact ones (a dimension of extent
  // 1 may have any stride).
  // An empty tensor has no elements to lay out: any strides describe it (PyTorch gives empty
  // tensors non-compact ones).
  if (t.strides != nullptr && shape.size() != 0) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      WEFT_CHECK_AS(ValueError, t.shape[i] == 1 || t.strides[i] == expected)
          << "the tensor is strided (dimension " << i << " has stride " << t.strides[i]
          << ", compact would be " << expected
          << "); weft imports compact row-major tensors only: make it contiguous first";
      expected *= t.shape[i];
    }
  }
  const size_t bytes = shape_bytes(shape, dtype_size(dtype), "the DLPack tensor");
  WEFT_CHECK_AS(ValueError, bytes == 0 || t.data != nullptr) << "the tensor's data is NULL";
  // data + byte_offset + the extent (compact: `bytes`) must stay inside the address space; each
  // sum is checked before it is made, so nothing wraps around.
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  constexpr uintptr_t kTop = std::numeric_limits<uintptr_t>::max();
  WEFT_CHECK_AS(ValueError, t.byte_offset <= kTop - base)
      << "the tensor's byte_offset " << t.byte_offset << " added to its data pointer 0x" << std::hex
      << base << std::dec << " wraps around the address space";
  const uintptr_t address = base + static_cast<uintptr_t>(t.byte_offset);
  WEFT_CHECK_AS(ValueError, bytes <= kTop - address)
      << "the tensor's " << bytes << " bytes (shape " << shape << ", " << dtype_name(dtype)
      << ") at data 0x" << std::hex << base << std::dec << " + byte_offset " << t.byte_offset
      << " extend past the end of the address space";
  WEFT_CHECK_AS(ValueError, address % dtype_size(dtype) == 0)
      << "the tensor's data (with byte_offset " << t.byte_offset << ") is not aligned to its "
      << dtype_size(dtype) << "-byte elements";
}

template <typename Managed>
NDArray import_tensor(Managed* managed, bool read_only) {
  const DLTensor& t = managed->dl_tensor;
  Shape shape;
  DType dtype = DType::kFloat32;
  Device device;
  check_tensor(t, shape, dtype, device);
  const size_t bytes = shape_bytes(shape, dtype_size(dtype), "the DLPack tensor");
  Runtime& rt = Runtime::get();
  auto s = std::make_shared<detail::Storage>();
  s->engine = &rt.engine();
  s->var = s->engine->new_var();
  s->device = device;
  s->bytes = bytes;
  s->id = rt.next_storage_id();
  s->generation = rt.generation();
  s->read_only = read_only;
  // From here on weft owns `managed`: the DataPtr's deleter hands it back to its producer once
  // every operation on the storage has completed.
  // An empty tensor may have NULL data: no offset is applied to a null pointer.
  void* first = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
  s->data = DataPtr(first, bytes, device, managed, [](void* context, void*, size_t) noexcept {
    auto* m = static_cast<Managed*>(context);
    if (m->deleter != nullptr) m->deleter(m);
  });
  return NDArray(std::move(s), std::move(shape), dtype);
}

}  // namespace

DLManagedTensor* to_dlpack(const NDArray& array) {
  WEFT_CHECK_AS(ValueError, !array.is_none()) << "to_dlpack: the array is none";
  return export_array<DLManagedTensor>(array);
}

DLManagedTensorVersioned* to_dlpack_versioned(const NDArray& array) {
  WEFT_CHECK_AS(ValueError, !array.is_none()) << "to_dlpack_versioned: the array is none";
  DLManagedTensorVersioned* m = export_array<DLManagedTensorVersioned>(array);
  m->version.major = 1;
  m->version.minor = 0;
  m->flags = array.storage()->read_only ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  return m;
}

NDArray from_dlpack(DLManagedTensor* tensor) {
  WEFT_CHECK_AS(ValueError, tensor != nullptr) << "from_dlpack: the tensor is NULL";
  return import_tensor(tensor, false);
}

NDArray from_dlpack_versioned(DLManagedTensorVersioned* tensor) {
  WEFT_CHECK_AS(ValueError, tensor != nullptr) << "from_dlpack_versioned: the tensor is NULL";
  WEFT_CHECK_AS(ValueError, tensor->version.major == 1)
      << "DLPack version " << tensor->version.major << "." << tensor->version.minor
      << ": weft reads major version 1";
  return import_tensor(tensor, (tensor->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
}

}  // namespace weft
