// weft.data's native part: the Dataset (every transform, Python map functions, filters and
// interleave functions), its sources (arrays, range, Python generators, .npy files, RecordIO,
// image folders), iteration with the GIL released, and weft.data.DataError. The Python package
// (weft/data.py) wraps these in the documented API.
#include "py_data.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/unique_ptr.h>

#include <mutex>
#include <optional>

#include "data/sources.h"

namespace weft::py {

// ---- Python references and calls (Note [Python functions in pipelines]) -----------------------

PyRef::~PyRef() {
  if (PyGILState_Check() != 0) {
    Py_DECREF(object_);
    return;
  }
  // Another thread (a map's pool, a prefetcher) dropped the last owner. After the interpreter has
  // begun to shut down a thread can no longer take the GIL: the reference is left behind then.
  if (Py_IsInitialized() == 0 || interpreter_finalizing()) return;
  const PyGILState_STATE state = PyGILState_Ensure();
  Py_DECREF(object_);
  PyGILState_Release(state);
}

SharedPyRef share_ref(nb::handle object) {
  // A function that refers to its dataset (through its module's globals, say) makes a cycle
  // through C++ that Python's garbage collector cannot see, so such datasets live until exit;
  // nanobind's exit-time leak report would list them (and everything they hold) as leaks.
  nb::set_leak_warnings(false);
  return std::make_shared<const PyRef>(object);
}

std::string format_python_error(nb::python_error& e) {
  try {
    // weft.data formats it: "Type: message" and the innermost frames of its traceback.
    nb::object format = nb::module_::import_("weft.data").attr("_format_exception");
    return nb::cast<std::string>(format(e.type(), e.value(), e.traceback()));
  } catch (const std::exception&) {
    PyErr_Clear();
    return e.what();
  }
}

nb::tuple arrays_to_args(const std::vector<NDArray>& arrays) {
  nb::list items;
  for (const NDArray& a : arrays) items.append(nb::cast(a));
  return nb::tuple(items);
}

nb::object arrays_to_python(const std::vector<NDArray>& arrays) {
  if (arrays.size() == 1) return nb::cast(arrays[0]);
  return arrays_to_args(arrays);
}

namespace {

using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// numpy, imported once and kept for the life of the process (never released: a static object's
// destructor would run after the interpreter has gone).
nb::handle numpy_module() {
  static PyObject* numpy = nb::module_::import_("numpy").release().ptr();
  return numpy;
}

}  // namespace

NDArray python_to_array(nb::handle value, const char* what) {
  if (nb::isinstance<NDArray>(value)) {
    NDArray a = nb::cast<NDArray>(value);
    if (a.is_none()) throw ValueError(std::string(what) + ": gave an array that is none");
    // Results of weft operations may still be computed by the engine, whose workers may need the
    // GIL (Python operators): wait without it.
    nb::gil_scoped_release release;
    if (a.device().type != DeviceType::kCPU) a = a.copy_to(Device::cpu());
    a.wait_to_read();
    return a;
  }
  nb::handle np = numpy_module();
  nb::object array = np.attr("asarray")(value);
  nb::object dtype = array.attr("dtype");
  if (nb::cast<std::string>(dtype.attr("kind")) == "O") {
    throw ValueError(std::string(what) + ": gave a " + nb::inst_name(value).c_str() +
                     " that is not an array (numpy.asarray makes an object array of it)");
  }
  if (!nb::cast<bool>(dtype.attr("isnative"))) {
    array = array.attr("astype")(dtype.attr("newbyteorder")("="));
  }
  // Not numpy.ascontiguousarray: it turns a 0-d array into shape (1,).
  array = np.attr("require")(array, nb::arg("requirements") = "C");
  const HostArray host = nb::cast<HostArray>(array);
  std::vector<int64_t> dims(host.ndim());
  for (size_t i = 0; i < host.ndim(); ++i) dims[i] = static_cast<int64_t>(host.shape(i));
  const DType dtype_code =
      from_dlpack(DLDataTypeCompat{host.dtype().code, host.dtype().bits, host.dtype().lanes});
  return NDArray::from_host(host.data(), Shape(dims), dtype_code);
}

std::vector<NDArray> python_to_arrays(nb::handle value, const char* what) {
  std::vector<NDArray> arrays;
  if (nb::isinstance<nb::tuple>(value)) {
    for (nb::handle item : value) arrays.push_back(python_to_array(item, what));
  } else {
    arrays.push_back(python_to_array(value, what));
  }
  return arrays;
}

namespace {

// ---- DataError --------------------------------------------------------------------------------

// Raises again what interrupted a pipeline inside a Python function: KeyboardInterrupt and
// SystemExit by name (the message starts with the type), anything else as BaseException.
void set_interrupt(const data::PipelineInterrupt& e) {
  const std::string what = e.what();
  PyObject* type = PyExc_BaseException;
  if (what.rfind("KeyboardInterrupt", 0) == 0) type = PyExc_KeyboardInterrupt;
  if (what.rfind("SystemExit", 0) == 0) type = PyExc_SystemExit;
  PyErr_SetString(type, what.c_str());
}

PyObject* data_error = nullptr;  // weft.data.DataError(ValueError)

// Sets weft.data.DataError(message) with .index and .origin as the current Python error.
void set_data_error(const data::DataError& e) {
  nb::str message(e.what());
  PyObject* error = PyObject_CallOneArg(data_error, message.ptr());
  if (error == nullptr) return;  // the failure to build it is the error raised
  nb::object owned = nb::steal(error);
  owned.attr("index") = nb::int_(e.index());
  owned.attr("origin") = nb::str(e.origin().c_str(), e.origin().size());
  PyErr_SetObject(data_error, error);
}

// ---- iteration --------------------------------------------------------------------------------

// A pass over a dataset, as Python's iterator protocol wants it. next() runs the pipeline with
// the GIL released; closing joins the pipeline's threads with the GIL released (Note [Python
// functions in pipelines]). Thread-safe: calls from several Python threads take turns.
class PyDataIterator {
 public:
  explicit PyDataIterator(std::unique_ptr<data::Iterator> it) : it_(std::move(it)) {}
  ~PyDataIterator() { close(); }
  PyDataIterator(const PyDataIterator&) = delete;
  PyDataIterator& operator=(const PyDataIterator&) = delete;

  // GIL held.
  nb::object next() {
    std::optional<data::Element> element;
    try {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      if (it_ != nullptr) {
        element = it_->next();
        if (!element) close_locked();  // the end: stop the stages' threads now
      }
    } catch (const data::DataError& e) {
      set_data_error(e);
      throw nb::python_error();
    } catch (const data::PipelineInterrupt& e) {
      set_interrupt(e);
      throw nb::python_error();
    }
    if (!element) throw nb::stop_iteration();
    return arrays_to_python(element->arrays);
  }

  // GIL held.
  data::IteratorStats stats() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return it_ != nullptr ? it_->stats() : final_stats_;
  }

  bool closed() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return it_ == nullptr;
  }

  // Any thread, GIL held or not.
  void close() {
    if (PyGILState_Check() != 0) {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      close_locked();
    } else {
      std::lock_guard<std::mutex> lock(mutex_);
      close_locked();
    }
  }

 private:
  void close_locked() {
    if (it_ == nullptr) return;
    final_stats_ = it_->stats();
    it_.reset();  // joins the stages' threads
  }

  std::mutex mutex_;
  std::unique_ptr<data::Iterator> it_;  // null once closed
  data::IteratorStats final_stats_;
};

nb::dict stats_dict(const data::IteratorStats& s) {
  nb::dict d;
  d["elements"] = s.elements;
  d["skipped_errors"] = s.skipped_errors;
  d["consumer_wait_ns"] = s.consumer_wait_ns;
  d["buffered"] = s.buffered;
  return d;
}

// ---- Python functions as pipeline functions ---------------------------------------------------

// Calls `fn(*arrays)`. GIL held.
nb::object call_with_arrays(const SharedPyRef& fn, const std::vector<NDArray>& arrays) {
  nb::tuple args = arrays_to_args(arrays);
  PyObject* result = PyObject_CallObject(fn->get().ptr(), args.ptr());
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

data::FilterFn python_filter(nb::object pred) {
  return [fn = share_ref(pred)](const std::vector<NDArray>& arrays) {
    return with_gil("filter", [&] {
      nb::object keep = call_with_arrays(fn, arrays);
      // bool(NDArray) waits for the value with the GIL released (weft/ndarray.py).
      const int truth = PyObject_IsTrue(keep.ptr());
      if (truth < 0) throw nb::python_error();
      return truth != 0;
    });
  };
}

data::Dataset from_generator(nb::object make_iterable, std::string name) {
  auto make_generator = [fn = share_ref(make_iterable)]() -> data::GeneratorFn {
    // One Python iterator per pass, made on the thread that starts the pass.
    SharedPyRef it = with_gil("from_generator", [&] {
      PyObject* iterable = PyObject_CallNoArgs(fn->get().ptr());
      if (iterable == nullptr) throw nb::python_error();
      nb::object owned = nb::steal(iterable);
      PyObject* iterator = PyObject_GetIter(iterable);
      if (iterator == nullptr) throw nb::python_error();
      return share_ref(nb::steal(iterator));
    });
    return [it]() -> std::optional<std::vector<NDArray>> {
      return with_gil("from_generator", [&]() -> std::optional<std::vector<NDArray>> {
        PyObject* item = PyIter_Next(it->get().ptr());
        if (item == nullptr) {
          if (PyErr_Occurred() != nullptr) throw nb::python_error();
          return std::nullopt;
        }
        return python_to_arrays(nb::steal(item), "from_generator");
      });
    };
  };
  return data::from_generator(std::move(make_generator), std::move(name));
}

data::Dataset interleave(const data::Dataset& ds, nb::object fn, int64_t cycle_length,
                         int64_t block_length) {
  auto open = [f = share_ref(fn)](const data::Element& e) {
    return with_gil("interleave", [&] {
      nb::object result = call_with_arrays(f, e.arrays);
      if (!nb::isinstance<data::Dataset>(result)) {
        throw ValueError(std::string("interleave: the function gave a ") +
                         nb::inst_name(result).c_str() + ", not a Dataset");
      }
      return nb::cast<data::Dataset>(result);
    });
  };
  return ds.interleave(std::move(open), cycle_length, block_length);
}

data::Dataset map(const data::Dataset& ds, const Transform& t, int num_parallel, bool deterministic,
                  std::optional<uint64_t> seed) {
  data::MapOptions options;
  options.num_parallel = num_parallel;
  options.deterministic = deterministic;
  options.seed = seed;
  // A function that takes the GIL must not hold an engine worker while it waits for it.
  options.executor = t.uses_python ? data::MapExecutor::kThreadPool : data::MapExecutor::kEngine;
  options.name = t.name;
  return ds.map(t.fn, std::move(options));
}

std::optional<uint64_t> to_seed(nb::handle seed) {
  if (seed.is_none()) return std::nullopt;
  return nb::cast<uint64_t>(seed);
}

void init_dataset(nb::module_& m) {
  nb::class_<data::Dataset>(m, "_Dataset", "A lazy input pipeline (use weft.data.Dataset).")
      .def("map", &map, nb::arg("transform"), nb::arg("num_parallel"), nb::arg("deterministic"),
           nb::arg("seed").none())
      .def(
          "filter",
          [](const data::Dataset& ds, nb::object pred, std::string name) {
            return ds.filter(python_filter(std::move(pred)), std::move(name));
          },
          nb::arg("pred"), nb::arg("name"))
      .def(
          "shuffle",
          [](const data::Dataset& ds, int64_t buffer, nb::handle seed, bool reshuffle) {
            return ds.shuffle(buffer, to_seed(seed), reshuffle);
          },
          nb::arg("buffer"), nb::arg("seed").none(), nb::arg("reshuffle_each_iteration"))
      .def("batch", &data::Dataset::batch, nb::arg("size"), nb::arg("drop_remainder"),
           nb::arg("num_parallel"))
      .def("padded_batch", &data::Dataset::padded_batch, nb::arg("size"), nb::arg("padded_shapes"),
           nb::arg("padding_value"), nb::arg("drop_remainder"))
      .def("repeat", &data::Dataset::repeat, nb::arg("count"))
      .def("take", &data::Dataset::take, nb::arg("n"))
      .def("skip", &data::Dataset::skip, nb::arg("n"))
      .def("shard", &data::Dataset::shard, nb::arg("num"), nb::arg("index"))
      .def("interleave", &interleave, nb::arg("fn"), nb::arg("cycle_length"),
           nb::arg("block_length"))
      .def("cache", &data::Dataset::cache, nb::arg("path"))
      .def(
          "prefetch",
          [](const data::Dataset& ds, int buffer, nb::handle device) {
            data::PrefetchOptions options;
            options.buffer = buffer;
            if (!device.is_none()) options.device = to_device(device);
            return ds.prefetch(options);
          },
          nb::arg("buffer"), nb::arg("device").none())
      .def("ignore_errors", &data::Dataset::ignore_errors)
      .def("describe", &data::Dataset::describe)
      .def("cardinality", &data::Dataset::cardinality)
      .def(
          "iterate",
          [](const data::Dataset& ds) {
            // Starting may wait for the engine (pending writes of from_arrays' arrays).
            nb::gil_scoped_release release;
            return std::make_unique<PyDataIterator>(ds.iterate());
          },
          "Starts a pass over the data.");

  nb::class_<PyDataIterator>(m, "_DataIterator", "A pass over a dataset (weft.data.Iterator).")
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &PyDataIterator::next,
           "The next element (the GIL is released while the pipeline runs).")
      .def("stats", [](PyDataIterator& it) { return stats_dict(it.stats()); })
      .def("close", &PyDataIterator::close, "Stops the pipeline's threads; the end of iteration.")
      .def_prop_ro("closed", &PyDataIterator::closed);
}

// ---- sources ----------------------------------------------------------------------------------

void init_sources(nb::module_& m) {
  m.def("_data_from_arrays", &data::from_arrays, nb::arg("arrays"), nb::arg("name"));
  m.def("_data_range", &data::range, nb::arg("start"), nb::arg("stop"), nb::arg("step"));
  m.def("_data_from_generator", &from_generator, nb::arg("make_iterable"), nb::arg("name"));
  // The file sources read headers, indexes or folder listings when the dataset is made.
  m.def("_data_npy_files", &data::npy_files, nb::arg("shards"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "_data_recordio",
      [](const std::string& rec_path, const std::string& idx_path, bool image_records) {
        data::RecordIOOptions options;
        options.idx_path = idx_path;
        options.image_records = image_records;
        return data::recordio(rec_path, options);
      },
      nb::arg("rec_path"), nb::arg("idx_path"), nb::arg("image_records"),
      nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "_data_image_folder",
      [](const std::string& root, std::optional<std::vector<std::string>> extensions) {
        data::ImageFolderOptions options;
        if (extensions) options.extensions = *extensions;
        return data::image_folder(root, options);
      },
      nb::arg("root"), nb::arg("extensions").none(), nb::call_guard<nb::gil_scoped_release>());
  m.def("_data_image_folder_classes", &data::image_folder_classes, nb::arg("root"),
        nb::call_guard<nb::gil_scoped_release>());
  m.attr("_DATA_INFINITE") = data::kInfiniteCardinality;
  m.attr("_DATA_UNKNOWN") = data::kUnknownCardinality;
}

}  // namespace

void init_data(nb::module_& m) {
  data_error = PyErr_NewExceptionWithDoc(
      "weft.data.DataError",
      "A pipeline stage failed on one element: the message names the stage, the element's index "
      "and origin, and the original error (for a Python function, its exception type, message "
      "and innermost traceback lines). Attributes: index, origin.",
      PyExc_ValueError, nullptr);
  m.attr("DataError") = nb::handle(data_error);
  // Tried before the module's general translator (a DataError is a ValueError there).
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const data::DataError& e) {
      set_data_error(e);
    }
  });
  init_dataset(m);
  init_sources(m);
  init_data_transforms(m);
}

}  // namespace weft::py
