// Conversions shared by the module, and the runtime functions: devices, waitall, seeding, the
// profiler, plugins and engine facts.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include <cctype>
#include <sstream>

#include "base/build_config.h"
#include "base/profiler.h"
#include "capi/plugin.h"
#include "devices/device_api.h"
#include "ndarray/runtime.h"
#include "py_common.h"

namespace weft::py {

Shape to_shape(nb::handle obj, const char* what) {
  if (PyLong_Check(obj.ptr())) return Shape{nb::cast<int64_t>(obj)};
  // Other integers (np.int64(3)): one dimension.
  if (PyIndex_Check(obj.ptr()) && !PySequence_Check(obj.ptr())) {
    return Shape{nb::cast<int64_t>(nb::int_(obj))};
  }
  if (!PySequence_Check(obj.ptr()) || PyUnicode_Check(obj.ptr())) {
    throw nb::type_error((std::string(what) + ": expected an int or a sequence of ints, got " +
                          nb::inst_name(obj).c_str())
                             .c_str());
  }
  std::vector<int64_t> dims;
  for (nb::handle d : nb::iter(obj)) {
    if (!PyLong_Check(d.ptr()) && !PyIndex_Check(d.ptr())) {
      throw nb::type_error(
          (std::string(what) + ": dimensions must be ints, got " + nb::inst_name(d).c_str())
              .c_str());
    }
    dims.push_back(nb::cast<int64_t>(nb::int_(d)));
  }
  return Shape(dims);
}

nb::tuple from_shape(const Shape& shape) {
  nb::list dims;
  for (int i = 0; i < shape.ndim(); ++i) dims.append(shape[i]);
  return nb::tuple(dims);
}

DType to_dtype(nb::handle obj, DType fallback) {
  if (obj.is_none()) return fallback;
  std::string name;
  if (PyUnicode_Check(obj.ptr())) {
    name = nb::cast<std::string>(obj);
  } else if (nb::hasattr(obj, "name") && !PyType_Check(obj.ptr())) {
    name = nb::cast<std::string>(nb::str(obj.attr("name")));  // numpy.dtype, weft dtype names
  } else if (PyType_Check(obj.ptr())) {
    if (obj.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return DType::kFloat32;
    if (obj.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::kInt64;
    if (obj.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::kBool;
    name = nb::cast<std::string>(nb::str(obj.attr("__name__")));  // numpy.float32
  } else {
    name = nb::cast<std::string>(nb::str(obj));
  }
  if (name == "bool_") name = "bool";
  if (name == "float") name = "float32";
  if (name == "int") name = "int64";
  return parse_dtype(name);
}

Device to_device(nb::handle obj) {
  if (obj.is_none()) return Device::cpu();
  if (nb::isinstance<Device>(obj)) return nb::cast<Device>(obj);
  if (PyUnicode_Check(obj.ptr())) return parse_device(nb::cast<std::string>(obj));
  throw nb::type_error(
      (std::string("device: expected a weft.Device or a string such as 'cpu' or 'cuda:0', got ") +
       nb::inst_name(obj).c_str())
          .c_str());
}

std::string attr_string(nb::handle value) {
  if (value.is_none()) return "None";
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True ? "True" : "False";
  if (PyUnicode_Check(value.ptr())) return nb::cast<std::string>(value);
  if (PyLong_Check(value.ptr())) return nb::cast<std::string>(nb::str(value));
  if (PyFloat_Check(value.ptr())) return nb::cast<std::string>(nb::repr(value));
  if (PyTuple_Check(value.ptr()) || PyList_Check(value.ptr())) {
    std::string s = "(";
    size_t n = 0;
    for (nb::handle item : nb::iter(value)) {
      if (n++ > 0) s += ", ";
      s += attr_string(item);
    }
    if (n == 1) s += ",";
    return s + ")";
  }
  if (!PyType_Check(value.ptr()) && nb::hasattr(value, "dtype") && nb::hasattr(value, "item")) {
    // A NumPy scalar (np.int64(3), np.float32(0.5), np.bool_(True)) or 0-d array is a value,
    // not a dtype: written as its Python equivalent.
    return attr_string(value.attr("item")());
  }
  if (PyType_Check(value.ptr()) || nb::hasattr(value, "dtype") || nb::hasattr(value, "itemsize")) {
    return dtype_name(to_dtype(value));  // numpy dtypes and scalar types
  }
  return nb::cast<std::string>(nb::str(value));
}

void init_runtime(nb::module_& m) {
  nb::enum_<DeviceType>(m, "DeviceType")
      .value("cpu", DeviceType::kCPU)
      .value("cuda", DeviceType::kCUDA)
      .value("cuda_host", DeviceType::kCUDAHost);
  nb::class_<Device>(m, "Device", "A device: the CPU or a CUDA GPU, e.g. weft.Device('cuda:0').")
      .def(nb::init<>())
      .def("__init__",
           [](Device* self, const std::string& text) { new (self) Device(parse_device(text)); })
      .def_ro("type", &Device::type)
      .def_ro("id", &Device::id)
      .def("__str__", [](const Device& d) { return to_string(d); })
      .def("__repr__", [](const Device& d) { return "Device('" + to_string(d) + "')"; })
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; })
      .def("__hash__", [](const Device& d) { return std::hash<Device>()(d); });
  m.def(
      "cpu", []() { return Device::cpu(); }, "The CPU device.");
  m.def(
      "cuda", [](int id) { return Device::cuda(id); }, nb::arg("id") = 0, "CUDA device `id`.");
  m.def(
      "cuda_available",
      []() {
        DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
        return api != nullptr && api->device_count() > 0;
      },
      "Whether this build has CUDA and a GPU is present.");

  m.def(
      "waitall",
      []() {
        nb::gil_scoped_release release;
        waitall();
      },
      "Waits for every pushed operation. Raises the first error of operations that failed since "
      "the last waitall (EngineError), once.");
  m.def(
      "seed", [](uint64_t s) { random_seed(s); }, nb::arg("seed"),
      "Seeds the random generators of every device (ordered after draws already pushed).");
  m.def("_engine_info", []() {
    Runtime& rt = Runtime::get();
    nb::dict d;
    d["kind"] = static_cast<int>(rt.engine().kind());
    d["cpu_workers"] = rt.engine().num_workers(Device::cpu());
    return d;
  });

  m.def("_profiler_start", []() { Profiler::global().start(); });
  m.def("_profiler_stop", []() { Profiler::global().stop(); });
  m.def("_profiler_clear", []() { Profiler::global().clear(); });
  m.def("_profiler_dump", [](const std::string& path) {
    nb::gil_scoped_release release;
    waitall();
    Profiler::global().write_chrome_trace(path);
  });
  m.def("_profiler_event_count", []() { return Profiler::global().event_count(); });

  m.def(
      "load_plugin",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        try {
          load_plugin(path);
        } catch (const std::exception& e) {
          // Every failure to load is the caller's path or library: ValueError, as documented.
          throw ValueError(e.what());
        }
      },
      nb::arg("path"),
      "Loads a plugin (a shared library exporting weft_plugin_init) and registers its operators; "
      "they appear in weft.op at once. See docs/C_API.md.");
  m.def("version", []() { return std::string(WEFT_VERSION_STRING); });
}

}  // namespace weft::py
