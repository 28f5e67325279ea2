// Arrays from Python values, and loading and saving arrays from Python: MXNet `.params` files
// (dicts and lists) and NumPy `.npy` files. Reading and writing release the GIL.
#include <nanobind/stl/string.h>

#include "ndarray/io.h"
#include "py_common.h"

namespace weft::py {

// An NDArray from an NDArray or anything weft.ndarray.array takes. `dtype` null: NumPy arrays
// keep their dtype except float64, and lists and scalars become float32 (MXNet's default type,
// which graphs are written for); otherwise the values are converted to `dtype`.
NDArray to_array(nb::handle value, Device device, const DType* dtype) {
  if (nb::isinstance<NDArray>(value)) {
    NDArray a = nb::cast<NDArray>(value);
    if ((dtype == nullptr || a.dtype() == *dtype) && a.device() == device) return a;
  }
  nb::object conv = nb::module_::import_("weft.ndarray").attr("array");
  nb::object dt = nb::none();
  if (dtype != nullptr) {
    dt = nb::str(dtype_name(*dtype));
  } else if (!nb::isinstance<NDArray>(value)) {
    const bool keep =
        nb::hasattr(value, "dtype") && !nb::str(value.attr("dtype")).equal(nb::str("float64"));
    if (!keep) dt = nb::str("float32");
  }
  return nb::cast<NDArray>(conv(value, dt, nb::cast(device)));
}

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// ---- files -----------------------------------------------------------------------------------

nb::object load(const std::string& path, nb::handle device) {
  const Device d = to_device(device);
  if (ends_with(path, ".npy")) {
    NDArray a;
    {
      nb::gil_scoped_release release;
      a = load_npy_array(path, d);
    }
    return nb::cast(a);
  }
  LoadedArrays loaded;
  {
    nb::gil_scoped_release release;
    loaded = load_arrays(path, d);
  }
  if (loaded.names.empty()) return nb::cast(loaded.arrays);
  nb::dict out;
  for (size_t i = 0; i < loaded.names.size(); ++i) out[loaded.names[i].c_str()] = loaded.arrays[i];
  return out;
}

void save(const std::string& path, nb::handle data) {
  if (nb::isinstance<NDArray>(data)) {
    NDArray a = nb::cast<NDArray>(data);
    nb::gil_scoped_release release;
    if (ends_with(path, ".npy")) {
      save_npy_array(path, a);
    } else {
      save_arrays(path, std::vector<NDArray>{a});  // MXNet saves a lone array as a list of one
    }
    return;
  }
  if (ends_with(path, ".npy")) {
    throw ValueError("save: " + path + " is a .npy file, which holds one array; got a " +
                     nb::inst_name(data).c_str());
  }
  if (nb::isinstance<nb::dict>(data)) {
    std::vector<std::pair<std::string, NDArray>> named;
    for (auto [k, v] : nb::cast<nb::dict>(data)) {
      named.emplace_back(nb::cast<std::string>(k), to_array(v, Device::cpu(), nullptr));
    }
    nb::gil_scoped_release release;
    save_arrays(path, named);
    return;
  }
  std::vector<NDArray> list;
  for (nb::handle v : nb::iter(data)) list.push_back(to_array(v, Device::cpu(), nullptr));
  nb::gil_scoped_release release;
  save_arrays(path, list);
}

}  // namespace

void init_io(nb::module_& m) {
  m.def("_load", &load, nb::arg("path"), nb::arg("device") = nb::none(),
        "Loads a .params file (a dict by name, or a list) or a .npy file (one array).");
  m.def("_save", &save, nb::arg("path"), nb::arg("data"),
        "Saves a dict or list of arrays as .params, or one array as .npy.");
}

}  // namespace weft::py
