// The axis rule of pick, shared by its definition (ops/defs/pick.cc) and its CPU kernels
// (ops/cpu/pick.cc).
#pragma once

#include "ops/defs/indexing_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

// The picked axis in [0, ndim), or -1 when the whole array is flattened (axis None). MXNet's
// rule (ReduceAxisShapeImpl): a 1-d input is treated like the flattened case.
inline int pick_axis(const OpAttrs& attrs, int ndim) {
  const auto& p = attrs.params<PickParam>();
  if (!p.axis) return -1;
  if (*p.axis < -ndim || *p.axis >= ndim) {
    WEFT_THROW(ValueError) << attrs.where() << ": axis " << *p.axis << " is out of range for "
                           << ndim << "-d data";
  }
  return normalize_axis(attrs, *p.axis, ndim);
}

}  // namespace weft::detail
