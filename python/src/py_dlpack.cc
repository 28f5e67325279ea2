// The DLPack protocol: NDArray.__dlpack__ / __dlpack_device__ (versioned 1.x capsules when the
// consumer passes max_version >= (1, 0), the 0.6 DLManagedTensor otherwise) and
// weft.from_dlpack(x), zero-copy both ways.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

#include <memory>
#include <vector>

#include "ndarray/dlpack.h"
#include "py_common.h"

namespace weft::py {
namespace {

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kUsedLegacyName = "used_dltensor";
constexpr const char* kUsedVersionedName = "used_dltensor_versioned";

// A capsule nobody consumed still owns its tensor: give it back to weft (the protocol's rule).
void legacy_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kLegacyName) != 0) {
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kLegacyName));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
  PyErr_Clear();
}

void versioned_capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kVersionedName) != 0) {
    auto* t = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
    if (t != nullptr && t->deleter != nullptr) t->deleter(t);
  }
  PyErr_Clear();
}

nb::object dlpack(const NDArray& x, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                  nb::handle copy) {
  if (x.is_none()) throw nb::buffer_error("__dlpack__: the array is none");
  if (!dl_device.is_none()) {
    auto [type, id] = nb::cast<std::tuple<int, int>>(dl_device);
    const Device d = x.device();
    if (type != static_cast<int>(d.type) || id != d.id) {
      // No copy across devices here, even with copy=True: the caller copies with copyto first.
      throw nb::buffer_error(("__dlpack__: the array is on " + to_string(d) +
                              "; dl_device asks for device type " + std::to_string(type) + " id " +
                              std::to_string(id) +
                              " (exports do not copy across devices: copyto that device first)")
                                 .c_str());
    }
  }
  if (!stream.is_none() && x.device().type == DeviceType::kCPU) {
    // The array API allows None only for CPU arrays; -1 ("no synchronisation") is tolerated.
    if (!PyLong_Check(stream.ptr()) || nb::cast<int64_t>(stream) != -1) {
      throw nb::value_error("__dlpack__: stream must be None for a CPU array");
    }
  }
  NDArray source = x;
  if (!copy.is_none() && nb::cast<bool>(copy)) source = x.copy();
  bool versioned = false;
  if (!max_version.is_none()) {
    auto [major, minor] = nb::cast<std::tuple<int, int>>(max_version);
    (void)minor;
    versioned = major >= 1;
  }
  if (versioned) {
    DLManagedTensorVersioned* t = nullptr;
    {
      nb::gil_scoped_release release;  // export waits for pending reads and writes
      t = to_dlpack_versioned(source);
    }
    PyObject* c = PyCapsule_New(t, kVersionedName, versioned_capsule_destructor);
    if (c == nullptr) {
      t->deleter(t);
      throw nb::python_error();
    }
    return nb::steal(c);
  }
  if (source.storage()->read_only) {
    throw nb::buffer_error(
        "__dlpack__: the array is read-only and a DLPack 0.x capsule cannot say so; the consumer "
        "must pass max_version=(1, 0)");
  }
  DLManagedTensor* t = nullptr;
  {
    nb::gil_scoped_release release;
    t = to_dlpack(source);
  }
  PyObject* c = PyCapsule_New(t, kLegacyName, legacy_capsule_destructor);
  if (c == nullptr) {
    t->deleter(t);
    throw nb::python_error();
  }
  return nb::steal(c);
}

// Imports a capsule (either kind); renames it "used_..." once weft owns the tensor.
NDArray from_capsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, kVersionedName) != 0) {
    auto* t = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, kVersionedName));
    NDArray a = from_dlpack_versioned(t);  // throws without taking ownership
    PyCapsule_SetName(c, kUsedVersionedName);
    return a;
  }
  if (PyCapsule_IsValid(c, kLegacyName) != 0) {
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacyName));
    NDArray a = from_dlpack(t);
    PyCapsule_SetName(c, kUsedLegacyName);
    return a;
  }
  PyErr_Clear();
  if (PyCapsule_CheckExact(c) != 0) {
    const char* name = PyCapsule_GetName(c);
    throw nb::value_error(("from_dlpack: a capsule named '" + std::string(name ? name : "") +
                           "' (already consumed, or not a DLPack tensor)")
                              .c_str());
  }
  throw nb::type_error("from_dlpack: expected an object with __dlpack__ or a DLPack capsule");
}

// NumPy before 2.1 cannot export a read-only array through DLPack (a 0.x capsule cannot say
// read-only), and np.from_dlpack gives read-only arrays, so weft.from_dlpack(np.from_dlpack(x))
// would fail. Such an array is imported through the buffer protocol instead: zero-copy and
// read-only (DLPack 1.x's flag), holding a reference to the NumPy array until weft releases
// the memory.
using ReadOnlyHost = nb::ndarray<nb::ro, nb::device::cpu>;

struct BorrowedBuffer {
  DLManagedTensorVersioned managed{};
  std::vector<int64_t> shape, strides;
  ReadOnlyHost array;  // the reference to the NumPy array
};

void borrowed_buffer_deleter(DLManagedTensorVersioned* self) {
  // Run by whichever thread releases the memory last, an engine worker included: dropping the
  // reference needs the GIL. After the interpreter has gone, there is nothing left to release.
  if (Py_IsInitialized() == 0) return;
  const PyGILState_STATE state = PyGILState_Ensure();
  delete static_cast<BorrowedBuffer*>(self->manager_ctx);
  PyGILState_Release(state);
}

bool is_read_only_numpy(nb::handle obj) {
  nb::object np = nb::module_::import_("numpy");
  return nb::isinstance(obj, np.attr("ndarray")) &&
         !nb::cast<bool>(obj.attr("flags").attr("writeable"));
}

NDArray from_read_only_numpy(nb::handle obj) {
  auto b = std::make_unique<BorrowedBuffer>();
  b->array = nb::cast<ReadOnlyHost>(obj);  // the buffer protocol: no copy
  const size_t ndim = b->array.ndim();
  for (size_t i = 0; i < ndim; ++i) {
    b->shape.push_back(static_cast<int64_t>(b->array.shape(i)));
    b->strides.push_back(static_cast<int64_t>(b->array.stride(i)));
  }
  DLTensor& t = b->managed.dl_tensor;
  t.data = const_cast<void*>(b->array.data());
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = static_cast<int32_t>(ndim);
  t.dtype.code = b->array.dtype().code;
  t.dtype.bits = b->array.dtype().bits;
  t.dtype.lanes = b->array.dtype().lanes;
  t.shape = b->shape.data();
  t.strides = b->strides.data();
  t.byte_offset = 0;
  b->managed.version = {1, 0};
  b->managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  b->managed.manager_ctx = b.get();
  b->managed.deleter = borrowed_buffer_deleter;
  NDArray a = from_dlpack_versioned(&b->managed);  // throws (strided, ...) without taking it
  b.release();                                     // weft calls the deleter now
  return a;
}

NDArray from_object(nb::handle obj) {
  if (PyCapsule_CheckExact(obj.ptr()) != 0) return from_capsule(obj);
  if (!nb::hasattr(obj, "__dlpack__")) {
    throw nb::type_error(
        ("from_dlpack: " + std::string(nb::inst_name(obj).c_str()) + " has no __dlpack__ method")
            .c_str());
  }
  if (nb::hasattr(obj, "__dlpack_device__")) {
    auto [type, id] = nb::cast<std::tuple<int, int>>(obj.attr("__dlpack_device__")());
    if (type != static_cast<int>(DeviceType::kCPU) && type != static_cast<int>(DeviceType::kCUDA)) {
      throw nb::value_error(("from_dlpack: the producer's device type " + std::to_string(type) +
                             " is not supported (CPU = 1, CUDA = 2)")
                                .c_str());
    }
    (void)id;
  }
  nb::object capsule;
  try {
    capsule = obj.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    // Producers older than the versioned protocol (NumPy < 2.1, PyTorch < 2.4) take no
    // max_version: ask again without it.
    if (!e.matches(PyExc_TypeError)) throw;
    try {
      capsule = obj.attr("__dlpack__")();
    } catch (nb::python_error& e2) {
      if (!e2.matches(PyExc_BufferError) || !is_read_only_numpy(obj)) throw;
      return from_read_only_numpy(obj);
    }
  }
  return from_capsule(capsule);
}

}  // namespace

void init_dlpack(nb::module_& m, nb::class_<NDArray>& c) {
  c.def("__dlpack__", &dlpack, nb::kw_only(), nb::arg("stream") = nb::none(),
        nb::arg("max_version") = nb::none(), nb::arg("dl_device") = nb::none(),
        nb::arg("copy") = nb::none(),
        "Exports the array as a DLPack capsule without copying (waits for pending work first).");
  c.def("__dlpack_device__", [](const NDArray& x) {
    const Device d = x.device();
    return std::make_tuple(static_cast<int>(d.type), static_cast<int>(d.id));
  });
  m.def("from_dlpack", &from_object, nb::arg("x"),
        "An array sharing memory with `x` (any object with __dlpack__, or a DLPack capsule). "
        "Only compact row-major CPU (and, with CUDA, GPU) tensors are accepted.");
}

}  // namespace weft::py
