// Shared pieces of the Python extension: conversions between Python values and weft's shapes,
// dtypes and devices, and the init functions of each part of the module.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "ndarray/ndarray.h"

namespace weft::py {

namespace nb = nanobind;

/// A shape from a Python int or a sequence of ints. Throws ValueError naming `what`.
Shape to_shape(nb::handle obj, const char* what);
/// A tuple of ints.
nb::tuple from_shape(const Shape& shape);
/// A dtype from a name ("float32"), a NumPy dtype or scalar type, or None (`fallback`).
DType to_dtype(nb::handle obj, DType fallback = DType::kFloat32);
/// A device from a Device, "cpu", "cpu:0", "cuda:1", or None (the CPU).
Device to_device(nb::handle obj);
/// The attribute string MXNet's parsers read for a Python value: ints, floats, bools
/// ("True"/"False"), tuples/lists ("(3, 3)"), None ("None"), dtypes by name, strings as they are.
std::string attr_string(nb::handle value);

void init_ndarray(nb::module_& m);
/// Adds __dlpack__ / __dlpack_device__ to the NDArray class and weft.from_dlpack.
void init_dlpack(nb::module_& m, nb::class_<NDArray>& cls);
void init_autograd(nb::module_& m);
void init_ops(nb::module_& m);
/// weft.register_op: operators whose compute is a Python function (py_register_op.cc).
void init_register_op(nb::module_& m);
void init_graph(nb::module_& m);
/// weft.load / weft.save: `.params` and `.npy` files (py_io.cc).
void init_io(nb::module_& m);
/// An NDArray from an NDArray or anything weft.array takes, on `device`. `dtype` null: NumPy
/// arrays keep their dtype except float64, lists and scalars become float32 (MXNet's default);
/// otherwise the values are converted to `dtype`.
NDArray to_array(nb::handle value, Device device, const DType* dtype);
void init_runtime(nb::module_& m);
/// weft.data's native part: datasets, sources, transforms (py_data.cc).
void init_data(nb::module_& m);
/// weft.nn's native part: nn/'s initializers and layers (py_nn.cc).
void init_nn(nb::module_& m);
/// weft.dist's native part: the process group and collectives (py_dist.cc).
void init_dist(nb::module_& m);

/// Whether the interpreter is shutting down (a thread asking for the GIL then never gets it).
inline bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

}  // namespace weft::py
