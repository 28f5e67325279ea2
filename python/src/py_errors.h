// An exception raised by a Python operator's function on an engine worker, carried as a weft
// Error to the wait that observes it and raised there as the same Python exception type.
#pragma once

#include <Python.h>

#include <string>

#include "base/error.h"

namespace weft::py {

class PythonOpError : public Error {
 public:
  /// `type`: the Python exception class (a new reference is kept; may be null: WeftError).
  PythonOpError(const std::string& message, PyObject* type);
  PyObject* type() const;

 private:
  PyObject* type_;
};

}  // namespace weft::py
