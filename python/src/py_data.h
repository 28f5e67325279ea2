// Shared pieces of weft.data's native part (py_data.cc, py_data_transforms.cc): references to
// Python objects that C++ threads may hold, calls into Python from pipeline threads, conversions
// between elements and Python values, and the map-function objects (transforms).
//
// Note [Python functions in pipelines]
// Map functions, filter predicates, generators and interleave functions written in Python run on
// pipeline threads: a map's own pool (MapExecutor::kThreadPool, never the engine's workers, which
// must not block on the GIL), the prefetch producer, or the consumer's thread. Each call takes
// the GIL only around itself (with_gil). The consumer releases the GIL for the whole of next()
// and an iterator is closed (its threads joined) with the GIL released, so a pipeline thread
// waiting for the GIL never waits on a thread that waits for the pipeline. Python objects are
// held through PyRef, whose last owner may be any thread: it takes the GIL to drop the reference.
// A Python exception becomes a weft::Error whose message has the exception's type, its message
// and the innermost traceback lines; the pipeline wraps it in a DataError naming the element.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "py_common.h"

namespace weft::py {

/// A strong reference to a Python object that may be copied and released on any thread
/// (Note [Python functions in pipelines]). Make it holding the GIL.
class PyRef {
 public:
  explicit PyRef(nb::handle object) : object_(object.inc_ref().ptr()) {}
  ~PyRef();
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  nb::handle get() const { return object_; }

 private:
  PyObject* object_;
};
using SharedPyRef = std::shared_ptr<const PyRef>;
/// A Python function (or iterator) held by a pipeline. Holding the GIL.
SharedPyRef share_ref(nb::handle object);

/// The message of a Python exception raised in a pipeline stage: "Type: message" and the
/// innermost traceback lines. GIL held.
std::string format_python_error(nb::python_error& e);

/// Runs `fn` holding the GIL from any thread; a Python exception raised inside becomes a
/// weft::Error with format_python_error's message (a data::PipelineInterrupt for exceptions that
/// are not Exceptions: KeyboardInterrupt, SystemExit). Fails (weft::Error) instead of waiting
/// forever when the interpreter is shutting down.
template <typename F>
auto with_gil(const char* what, F&& fn) {
  if (!Py_IsInitialized() || interpreter_finalizing()) {
    throw Error(std::string(what) + ": the Python interpreter is shutting down");
  }
  nb::gil_scoped_acquire gil;
  try {
    return fn();
  } catch (nb::python_error& e) {
    // KeyboardInterrupt, SystemExit: not an element's failure but the user's or the program's
    // wish to stop; it passes through the stages and is raised again at the consumer.
    if (!e.matches(PyExc_Exception)) throw data::PipelineInterrupt(format_python_error(e));
    throw Error(format_python_error(e));
  }
}

/// An element's arrays as Python positional arguments (a tuple of NDArrays). GIL held.
nb::tuple arrays_to_args(const std::vector<NDArray>& arrays);
/// An element as the consumer sees it: one NDArray when it has one array, else a tuple. GIL held.
nb::object arrays_to_python(const std::vector<NDArray>& arrays);
/// One CPU array with no pending work from an NDArray (waited for with the GIL released, copied
/// to the CPU), a NumPy array (copied) or anything numpy.asarray takes (NumPy's dtype). GIL held.
NDArray python_to_array(nb::handle value, const char* what);
/// A Python result as an element's arrays: a tuple gives one array per item, anything else one
/// array. GIL held.
std::vector<NDArray> python_to_arrays(nb::handle value, const char* what);

/// A map function with its name, usable in Dataset.map and callable directly. `uses_python`:
/// it calls Python, so a map runs it on its own threads (MapExecutor::kThreadPool).
struct Transform {
  data::MapFn fn;
  std::string name;
  bool uses_python = false;
};

/// A transform calling a Python function (fn(*arrays), with `rng=` a numpy.random.Generator
/// seeded from the element's generator when `pass_rng`). GIL held.
Transform python_transform(nb::object fn, std::string name, bool pass_rng);

/// weft.data's transforms, image codecs and RecordIOWriter (py_data_transforms.cc).
void init_data_transforms(nb::module_& m);

}  // namespace weft::py
