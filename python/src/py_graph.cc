// Placeholder, replaced by the graph bindings.
#include "py_common.h"

namespace weft::py {
void init_graph(nb::module_& m) {}
}  // namespace weft::py
