// Placeholder, replaced by the Python-operator implementation.
#include "py_common.h"

namespace weft::py {
void init_register_op(nb::module_& m) {}
}  // namespace weft::py
