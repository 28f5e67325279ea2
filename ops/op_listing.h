// Human-readable listing of the operator registry: names, aliases, inputs, outputs, parameters
// with types and defaults, kernels per device type, and whether a gradient is defined.
#pragma once

#include <string>

#include "ops/op.h"

namespace weft {

/// Describes one op; `verbose` adds its parameters and description.
std::string describe_op(const Op& op, bool verbose = true);
/// Describes every registered op (sorted); hidden `_backward_*` ops only with `include_backward`.
std::string describe_registry(bool verbose = true, bool include_backward = false);

}  // namespace weft
