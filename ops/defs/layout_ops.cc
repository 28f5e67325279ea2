// `_layout_reorder`, the op the layout pass inserts (Note [Layout propagation] in graph/layout.cc);
// its CPU kernel and the layout kernels of other ops are in ops/cpu/layout_ops.cc.
#include "ops/defs/elemwise.h"
#include "ops/infer_util.h"

namespace weft::detail {

void register_layout_ops(OpRegistry& r) {
  r.define_op("_layout_reorder")
      .describe(
          "Copies a tensor from its producer's memory layout into the layout its consumers read "
          "(inserted by the executor's layout propagation; the layouts travel in the kernel's "
          "context, the hidden attribute __layout__ names the target for listings).")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape);
}

}  // namespace weft::detail
