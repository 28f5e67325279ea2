// Placeholder: registration of this op group (filled in by its implementation).
#include "ops/builtin_ops.h"
#include "ops/op.h"

namespace weft::detail {
void register_rnn_ops(OpRegistry& r) {}
}  // namespace weft::detail
