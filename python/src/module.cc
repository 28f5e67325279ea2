// The extension module weft._weft: error translation, conversions, and the init functions of each
// part (arrays, DLPack, autograd, operators, graphs, runtime, data, nn, dist). The Python package
// `weft` wraps it.
#include <nanobind/nanobind.h>

#include <exception>

#include "base/error.h"
#include "engine/engine.h"
#include "py_common.h"
#include "py_errors.h"

namespace weft::py {
namespace {

PyObject* weft_error = nullptr;    // weft.WeftError(RuntimeError)
PyObject* shape_error = nullptr;   // weft.ShapeError(ValueError)
PyObject* engine_error = nullptr;  // weft.EngineError(WeftError)

void set_python_error(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const PythonOpError& e) {
    PyErr_SetString(e.type(), e.what());
  } catch (const ShapeError& e) {
    PyErr_SetString(shape_error, e.what());
  } catch (const ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const OutOfMemory& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
  } catch (const NotImplemented& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  } catch (const EngineError& e) {
    PyErr_SetString(engine_error, e.what());
  } catch (const Error& e) {
    PyErr_SetString(weft_error, e.what());
  }
}

}  // namespace

PythonOpError::PythonOpError(const std::string& message, PyObject* type)
    : Error(message), type_(type) {
  // Exception classes live as long as the interpreter; the reference is kept so that the error
  // can be raised on another thread later without touching reference counts off the GIL.
  Py_XINCREF(type_);
}

PyObject* PythonOpError::type() const { return type_ != nullptr ? type_ : weft_error; }

}  // namespace weft::py

NB_MODULE(_weft, m) {
  using namespace weft::py;  // NOLINT(google-build-using-namespace)
  m.doc() = "weft's native module; import the `weft` package instead.";
  weft_error = PyErr_NewExceptionWithDoc(
      "weft.WeftError", "An error raised by weft (a failed check, an engine or kernel failure).",
      PyExc_RuntimeError, nullptr);
  m.attr("WeftError") = nb::handle(weft_error);
  shape_error = PyErr_NewExceptionWithDoc("weft.ShapeError", "Shapes or dtypes do not agree.",
                                          PyExc_ValueError, nullptr);
  m.attr("ShapeError") = nb::handle(shape_error);
  engine_error = PyErr_NewExceptionWithDoc(
      "weft.EngineError", "weft.waitall(): operations failed since the last waitall.", weft_error,
      nullptr);
  m.attr("EngineError") = nb::handle(engine_error);
  nb::register_exception_translator(
      [](const std::exception_ptr& p, void*) { set_python_error(p); });

  init_runtime(m);
  init_ndarray(m);
  init_autograd(m);
  init_ops(m);
  init_graph(m);
  init_data(m);
  init_nn(m);
  init_dist(m);
}
