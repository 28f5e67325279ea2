// weft.NDArray: creation, properties, views, arithmetic (pushed at once), waiting, conversion to
// NumPy. Indexing beyond views and the NumPy-style conveniences are in weft/ndarray.py.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>

#include <cstring>
#include <sstream>

#include "ndarray/autograd.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"
#include "ops/params.h"
#include "py_common.h"

namespace weft::py {

// An in-place write (x += y, x[...] = y, copyto, out=) is not recorded onto `target`: the
// record's result would be a copy of the target object, so gradients through it would be lost
// silently, and values backward reads may be overwritten. Refused while recording when it
// matters, as MXNet refuses it ("cannot use inplace operations inside a record section").
void check_inplace_write(const NDArray& target, const std::vector<NDArray>& inputs,
                         const char* what) {
  if (!autograd::is_recording()) return;
  bool involved = target.requires_grad();
  for (const NDArray& in : inputs) involved = involved || in.requires_grad();
  if (involved) {
    throw ValueError(std::string(what) +
                     ": in-place writes to or from arrays that autograd tracks cannot be recorded "
                     "(gradients would be lost); inside autograd.record() write y = x + z "
                     "instead of x += z or x[...] = z");
  }
}

namespace {

nb::dlpack::dtype to_nb_dtype(DType t) {
  const DLDataTypeCompat d = to_dlpack(t);
  nb::dlpack::dtype out;
  out.code = d.code;
  out.bits = d.bits;
  out.lanes = d.lanes;
  return out;
}

DType from_nb_dtype(nb::dlpack::dtype t) {
  return from_dlpack(DLDataTypeCompat{t.code, t.bits, t.lanes});
}

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

NDArray from_numpy(HostArray a, nb::handle device) {
  Shape shape;
  std::vector<int64_t> dims(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) dims[i] = static_cast<int64_t>(a.shape(i));
  shape = Shape(dims);
  const DType dtype = from_nb_dtype(a.dtype());
  // from_host copies before returning, so the NumPy buffer may change afterwards.
  return NDArray::from_host(a.data(), shape, dtype, to_device(device));
}

nb::object to_numpy(const NDArray& x) {
  if (x.is_none()) throw ValueError("asnumpy: the array is none");
  const size_t bytes = x.nbytes();
  auto* buffer = new uint8_t[bytes > 0 ? bytes : 1];
  nb::capsule owner(buffer, [](void* p) noexcept { delete[] static_cast<uint8_t*>(p); });
  {
    nb::gil_scoped_release release;
    x.copy_to_host(buffer, bytes);
  }
  std::vector<size_t> shape(static_cast<size_t>(x.ndim()));
  for (int i = 0; i < x.ndim(); ++i) shape[i] = static_cast<size_t>(x.shape()[i]);
  nb::ndarray<nb::numpy> out(buffer, shape.size(), shape.data(), owner, nullptr,
                             to_nb_dtype(x.dtype()));
  return out.cast();
}

nb::object item(const NDArray& x) {
  if (x.size() != 1) {
    throw ValueError("item(): the array has " + std::to_string(x.size()) +
                     " elements; only one-element arrays convert to a Python scalar");
  }
  double v = 0;
  {
    nb::gil_scoped_release release;
    v = x.item();
  }
  switch (x.dtype()) {
    case DType::kBool:
      return nb::bool_(v != 0);
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
      return nb::int_(static_cast<int64_t>(v));
    default:
      return nb::float_(v);
  }
}

GradReq to_grad_req(const std::string& s) {
  if (s == "write") return GradReq::kWrite;
  if (s == "add") return GradReq::kAdd;
  if (s == "null") return GradReq::kNull;
  throw ValueError("grad_req '" + s + "': expected 'write', 'add' or 'null'");
}

// Views (reshape, x[i], x[a:b]) share storage but carry no autograd history. While recording,
// a view of an array that requires grad is recorded as the operator that computes it, as MXNet
// does (ReshapeWithRecord, SliceWithRecord), so that gradients flow through it; the result is
// still the view.
NDArray record_view(const NDArray& x, NDArray view, const char* op, const AttrMap& attrs) {
  if (!autograd::is_recording() || !x.requires_grad()) return view;
  std::vector<NDArray> outs{std::move(view)};
  detail::maybe_record(make_op_attrs(op, attrs), {x}, outs);
  return outs[0];
}

NDArray reshape_view(const NDArray& x, const Shape& shape) {
  NDArray v = x.reshape(shape);
  return record_view(x, v, "Reshape", {{"shape", format_shape_attr(v.shape())}});
}

NDArray slice_view(const NDArray& x, int64_t begin, int64_t end) {
  return record_view(
      x, x.slice(begin, end), "slice_axis",
      {{"axis", "0"}, {"begin", std::to_string(begin)}, {"end", std::to_string(end)}});
}

NDArray at_view(const NDArray& x, int64_t i) {
  if (x.ndim() < 1) throw nb::index_error("too many indices for a 0-d array");
  if (i < 0 || i >= x.shape()[0]) {
    throw nb::index_error(("index " + std::to_string(i) +
                           " is out of bounds for axis 0 with size " + std::to_string(x.shape()[0]))
                              .c_str());
  }
  const NDArray row = slice_view(x, i, i + 1);
  return reshape_view(row, Shape(x.shape().begin() + 1, x.shape().end()));
}

// a op= b: elemwise_* for equal shapes, broadcast_* otherwise (b broadcast to a's shape).
NDArray& inplace(NDArray& a, const NDArray& b, const char* same, const char* broadcast) {
  check_inplace_write(a, {b}, "in-place arithmetic");
  InvokeOptions o;
  o.outputs = {a};
  invoke(a.shape() == b.shape() ? same : broadcast, {a, b}, {}, std::move(o));
  return a;
}

NDArray& inplace_scalar(NDArray& a, double s, const char* op) {
  check_inplace_write(a, {}, "in-place arithmetic");
  InvokeOptions o;
  o.outputs = {a};
  std::ostringstream text;
  text.precision(17);
  text << s;
  invoke(op, {a}, {{"scalar", text.str()}}, std::move(o));
  return a;
}

enum class Arith { kAdd, kSub, kMul, kDiv };
constexpr const char* kArithNames[] = {"add", "sub", "mul", "truediv"};

// weft.ndarray._binary_fallback(name, self, other, reflected): converts `other` and applies the
// operator (set at import; leaked, as it lives as long as the interpreter).
PyObject*& binary_fallback() {
  static PyObject* fn = nullptr;
  return fn;
}

bool as_number(nb::handle h, double& out) {
  PyObject* p = h.ptr();
  if (PyFloat_CheckExact(p)) {
    out = PyFloat_AS_DOUBLE(p);
    return true;
  }
  if (PyLong_CheckExact(p) || PyBool_Check(p)) {
    out = PyLong_AsDouble(p);
    return !(out == -1.0 && PyErr_Occurred());
  }
  return false;
}

template <Arith A, bool kReflected>
nb::object binary(const NDArray& a, nb::handle other) {
  double s = 0;
  if (nb::isinstance<NDArray>(other)) {
    const NDArray& b = nb::cast<const NDArray&>(other);
    const NDArray& l = kReflected ? b : a;
    const NDArray& r = kReflected ? a : b;
    switch (A) {
      case Arith::kAdd:
        return nb::cast(l + r);
      case Arith::kSub:
        return nb::cast(l - r);
      case Arith::kMul:
        return nb::cast(l * r);
      case Arith::kDiv:
        return nb::cast(l / r);
    }
  } else if (as_number(other, s)) {
    switch (A) {
      case Arith::kAdd:
        return nb::cast(a + s);
      case Arith::kSub:
        return nb::cast(kReflected ? s - a : a - s);
      case Arith::kMul:
        return nb::cast(a * s);
      case Arith::kDiv:
        return nb::cast(kReflected ? s / a : a / s);
    }
  }
  PyErr_Clear();
  if (binary_fallback() == nullptr) return nb::borrow(Py_NotImplemented);
  return nb::borrow(binary_fallback())(kArithNames[static_cast<int>(A)], nb::cast(a), other,
                                       kReflected);
}

template <Arith A>
NDArray& inplace_op(NDArray& a, nb::handle other) {
  static constexpr const char* kSame[] = {"elemwise_add", "elemwise_sub", "elemwise_mul",
                                          "elemwise_div"};
  static constexpr const char* kBroadcast[] = {"broadcast_add", "broadcast_sub", "broadcast_mul",
                                               "broadcast_div"};
  static constexpr const char* kScalar[] = {"_plus_scalar", "_minus_scalar", "_mul_scalar",
                                            "_div_scalar"};
  const int i = static_cast<int>(A);
  double s = 0;
  if (nb::isinstance<NDArray>(other)) {
    return inplace(a, nb::cast<const NDArray&>(other), kSame[i], kBroadcast[i]);
  }
  if (as_number(other, s)) return inplace_scalar(a, s, kScalar[i]);
  PyErr_Clear();
  nb::object converted = nb::module_::import_("weft.ndarray").attr("_coerce")(other, nb::cast(a));
  return inplace(a, nb::cast<const NDArray&>(converted), kSame[i], kBroadcast[i]);
}

}  // namespace

void init_ndarray(nb::module_& m) {
  auto cls = nb::class_<NDArray>(
      m, "NDArray",
      "An n-dimensional array on a device. Operations push work onto the engine and return at "
      "once; asnumpy(), item() and wait_to_read() wait for it. Copies share storage.");
  cls.def_prop_ro("shape", [](const NDArray& x) { return from_shape(x.shape()); })
      .def_prop_ro("ndim", &NDArray::ndim)
      .def_prop_ro("size", &NDArray::size)
      .def_prop_ro("nbytes", &NDArray::nbytes)
      .def_prop_ro("_dtype_name",
                   [](const NDArray& x) { return std::string(dtype_name(x.dtype())); })
      .def_prop_ro("device", &NDArray::device)
      .def_prop_ro("context", &NDArray::device, "MXNet's name for device.")
      .def_prop_ro("is_none", &NDArray::is_none)
      .def_prop_ro("_version", &NDArray::version, "Completed writes to the storage so far.")
      .def_prop_ro("_storage_id", &NDArray::storage_id)
      .def_prop_ro("_read_only",
                   [](const NDArray& x) { return x.storage() && x.storage()->read_only; })
      .def("_data_ptr", [](const NDArray& x) { return reinterpret_cast<uintptr_t>(x.raw_data()); })
      .def("shares_storage_with", &NDArray::shares_storage_with, nb::arg("other"))
      .def("__len__",
           [](const NDArray& x) -> int64_t {
             if (x.ndim() == 0) throw nb::type_error("len() of a 0-d array");
             return x.shape()[0];
           })
      .def("_view", [](const NDArray& x,
                       nb::handle shape) { return reshape_view(x, to_shape(shape, "reshape")); })
      .def("_at", &at_view, nb::arg("i"))
      .def("_slice", &slice_view, nb::arg("begin"), nb::arg("end"))
      // The _copy operator, not NDArray::copy, so that a copy taken while recording is recorded.
      .def(
          "copy", [](const NDArray& x) { return invoke1("_copy", {x}); },
          "A new array with a copy of the values (asynchronous).")
      .def("_copy_to_device",
           [](const NDArray& x, nb::handle d) { return x.copy_to(to_device(d)); })
      .def("_copy_into",
           [](const NDArray& x, NDArray& dst) {
             check_inplace_write(dst, {x}, "copyto / assignment");
             x.copy_to(dst);
           })
      .def(
          "wait_to_read",
          [](const NDArray& x) {
            nb::gil_scoped_release release;
            x.wait_to_read();
          },
          "Waits for pending writes; raises a kernel's error once.")
      .def("wait_to_write",
           [](const NDArray& x) {
             nb::gil_scoped_release release;
             x.wait_to_write();
           })
      .def("asnumpy", &to_numpy, "Waits, then copies the values into a new NumPy array.")
      .def("item", &item, "Waits, then returns the value of a one-element array.")
      .def("__repr__",
           [](const NDArray& x) {
             if (x.is_none()) return std::string("NDArray(none)");
             nb::gil_scoped_release release;
             return x.to_string();
           })
      // autograd
      .def(
          "attach_grad",
          [](NDArray& x, const std::string& req) { x.attach_grad(to_grad_req(req)); },
          nb::arg("grad_req") = "write",
          "Makes this array a leaf that receives a gradient in backward() ('write' or 'add').")
      .def_prop_ro("grad",
                   [](const NDArray& x) -> std::optional<NDArray> {
                     NDArray g = x.grad();
                     if (g.is_none()) return std::nullopt;
                     return g;
                   })
      .def(
          "backward",
          [](const NDArray& x, std::optional<NDArray> out_grad, bool retain_graph,
             bool train_mode) {
            x.backward(out_grad ? *out_grad : NDArray(), retain_graph, train_mode);
          },
          nb::arg("out_grad") = nb::none(), nb::arg("retain_graph") = false,
          nb::arg("train_mode") = true,
          "Computes gradients of this array with respect to every leaf it depends on.")
      .def("detach", &NDArray::detach)
      .def_prop_ro("requires_grad", &NDArray::requires_grad)
      // arithmetic: arrays (broadcasting) and Python numbers natively; anything else (NumPy
      // arrays, lists) through weft.ndarray's fallback, which converts and retries.
      .def("__add__", binary<Arith::kAdd, false>, nb::is_operator())
      .def("__radd__", binary<Arith::kAdd, true>, nb::is_operator())
      .def("__sub__", binary<Arith::kSub, false>, nb::is_operator())
      .def("__rsub__", binary<Arith::kSub, true>, nb::is_operator())
      .def("__mul__", binary<Arith::kMul, false>, nb::is_operator())
      .def("__rmul__", binary<Arith::kMul, true>, nb::is_operator())
      .def("__truediv__", binary<Arith::kDiv, false>, nb::is_operator())
      .def("__rtruediv__", binary<Arith::kDiv, true>, nb::is_operator())
      .def("__iadd__", inplace_op<Arith::kAdd>, nb::is_operator(), nb::rv_policy::none)
      .def("__isub__", inplace_op<Arith::kSub>, nb::is_operator(), nb::rv_policy::none)
      .def("__imul__", inplace_op<Arith::kMul>, nb::is_operator(), nb::rv_policy::none)
      .def("__itruediv__", inplace_op<Arith::kDiv>, nb::is_operator(), nb::rv_policy::none)
      .def("__neg__", [](const NDArray& a) { return -a; })
      .def("__pos__", [](const NDArray& a) { return a; });
  m.def("_set_binary_fallback", [](nb::object fn) { binary_fallback() = fn.release().ptr(); });

  init_dlpack(m, cls);

  m.def(
      "empty",
      [](nb::handle shape, nb::handle dtype, nb::handle device) {
        return NDArray::empty(to_shape(shape, "empty"), to_dtype(dtype), to_device(device));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "An array of `shape` with uninitialised values.");
  m.def(
      "zeros",
      [](nb::handle shape, nb::handle dtype, nb::handle device) {
        return NDArray::zeros(to_shape(shape, "zeros"), to_dtype(dtype), to_device(device));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "An array of zeros (float32 unless `dtype`).");
  m.def(
      "ones",
      [](nb::handle shape, nb::handle dtype, nb::handle device) {
        return NDArray::ones(to_shape(shape, "ones"), to_dtype(dtype), to_device(device));
      },
      nb::arg("shape"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "An array of ones (float32 unless `dtype`).");
  m.def(
      "full",
      [](nb::handle shape, double value, nb::handle dtype, nb::handle device) {
        return NDArray::full(to_shape(shape, "full"), value, to_dtype(dtype), to_device(device));
      },
      nb::arg("shape"), nb::arg("fill_value"), nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none(), "An array filled with `fill_value`.");
  m.def(
      "arange",
      [](double start, std::optional<double> stop, double step, nb::handle dtype,
         nb::handle device) {
        if (!stop) return NDArray::arange(0, start, step, to_dtype(dtype), to_device(device));
        return NDArray::arange(start, *stop, step, to_dtype(dtype), to_device(device));
      },
      nb::arg("start"), nb::arg("stop") = nb::none(), nb::arg("step") = 1.0,
      nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none(),
      "Evenly spaced values in [start, stop) (arange(n): 0 .. n-1).");
  // Named arguments with None defaults: nanobind refuses None for an argument unless told.
  m.def(
      "_uniform",
      [](double low, double high, nb::handle shape, nb::handle dtype, nb::handle device) {
        return NDArray::uniform(to_shape(shape, "uniform"), low, high, to_dtype(dtype),
                                to_device(device));
      },
      nb::arg("low"), nb::arg("high"), nb::arg("shape"), nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none());
  m.def(
      "_normal",
      [](double loc, double scale, nb::handle shape, nb::handle dtype, nb::handle device) {
        return NDArray::normal(to_shape(shape, "normal"), loc, scale, to_dtype(dtype),
                               to_device(device));
      },
      nb::arg("loc"), nb::arg("scale"), nb::arg("shape"), nb::arg("dtype") = nb::none(),
      nb::arg("device") = nb::none());
  m.def("_from_numpy", &from_numpy, nb::arg("array"), nb::arg("device") = nb::none());
  m.def("_none", []() { return NDArray(); });
}

}  // namespace weft::py
