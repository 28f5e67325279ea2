// The axis rules of the reductions (sum, mean, max, min; MXNet's axis / keepdims / exclude), shared
// by their definitions (ops/defs/reduce.cc) and CPU kernels (ops/cpu/reduce.cc).
#pragma once

#include <vector>

#include "ops/defs/reduce_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

/// Per input dim: whether it is reduced. Throws ValueError for an axis out of range or repeated.
inline std::vector<char> reduced_mask(const OpAttrs& attrs, const ReduceAxesParam& p, int ndim) {
  if (!p.axis || p.axis->ndim() <= 0) return std::vector<char>(static_cast<size_t>(ndim), 1);
  std::vector<char> listed(static_cast<size_t>(ndim), 0);
  for (int64_t a : *p.axis) {
    WEFT_CHECK(a >= -ndim && a < ndim) << attrs.where() << ": reduction axis " << a
                                       << " is out of range for a " << ndim << "-d input";
    const int d = static_cast<int>(a < 0 ? a + ndim : a);
    WEFT_CHECK(!listed[d]) << attrs.where()
                           << ": reduction axes have duplicates: " << p.axis->to_string();
    listed[d] = 1;
  }
  if (p.exclude) {
    for (auto& m : listed) m = !m;
  }
  return listed;
}

/// The output shape with every dim kept (reduced ones 1): the layout the kernels index with.
inline Shape keepdims_shape(const Shape& in, const std::vector<char>& mask) {
  Shape s = in;
  for (int d = 0; d < in.ndim(); ++d)
    if (mask[d]) s[d] = 1;
  return s;
}

/// MXNet's output shape: reduced dims dropped (or 1 with keepdims); (1,) when nothing is left.
inline Shape reduced_shape(const Shape& in, const std::vector<char>& mask, bool keepdims) {
  if (keepdims) return keepdims_shape(in, mask);
  Shape s = Shape::filled(0, 0);
  for (int d = 0; d < in.ndim(); ++d)
    if (!mask[d]) s.push_back(in[d]);
  if (s.ndim() == 0) s.push_back(1);
  return s;
}

}  // namespace weft::detail
