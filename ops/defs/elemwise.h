// Device-neutral pieces of the elementwise group: the registration entry points of its definition
// files, the NumPy broadcast shape rule, and the broadcast iteration plan that the CPU and CUDA
// kernels of broadcast ops walk.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

void register_elemwise_binary_ops(OpRegistry& r);  // ops/defs/elemwise_binary.cc
void register_elemwise_unary_ops(OpRegistry& r);   // ops/defs/elemwise_unary.cc
void register_elemwise_scalar_ops(OpRegistry& r);  // ops/defs/elemwise_scalar.cc
/// Registers `_layout_reorder`, the op the layout pass inserts (ops/defs/layout_ops.cc).
void register_layout_ops(OpRegistry& r);

/// How to walk a "big" shape while reading two operands broadcast against it: the big shape
/// with size-1 dims dropped and adjacent dims of the same broadcast pattern merged, and per
/// operand the element strides (0 on the dims where it is broadcast). Always >= 1 dim.
struct BroadcastPlan {
  static constexpr int kMaxDims = 16;
  int ndim = 1;
  int64_t size = 1;
  int64_t shape[kMaxDims] = {1};
  int64_t lstride[kMaxDims] = {0};
  int64_t rstride[kMaxDims] = {0};

  int64_t inner() const { return shape[ndim - 1]; }
  int64_t rows() const { return size / shape[ndim - 1]; }
};

/// Builds the plan of `big` against `l` and `r` (right-aligned; each operand dim equals the big
/// dim or is 1). Throws NotImplemented for a pattern needing more than kMaxDims dims.
inline BroadcastPlan make_broadcast_plan(const int64_t* big, int nbig, const int64_t* l, int nl,
                                         const int64_t* r, int nr) {
  BroadcastPlan p;
  bool lb[BroadcastPlan::kMaxDims] = {}, rb[BroadcastPlan::kMaxDims] = {};
  int n = 0;
  for (int d = 0; d < nbig; ++d) {
    const int64_t o = big[d];
    if (o == 1) continue;
    const int li = d - (nbig - nl), ri = d - (nbig - nr);
    const bool lbc = li < 0 || l[li] == 1;
    const bool rbc = ri < 0 || r[ri] == 1;
    if (n > 0 && lb[n - 1] == lbc && rb[n - 1] == rbc) {
      p.shape[n - 1] *= o;
      continue;
    }
    WEFT_CHECK_AS(NotImplemented, n < BroadcastPlan::kMaxDims)
        << "broadcast pattern with more than " << BroadcastPlan::kMaxDims << " alternating dims";
    p.shape[n] = o;
    lb[n] = lbc;
    rb[n] = rbc;
    ++n;
  }
  if (n == 0) {
    p.ndim = 1;
    p.shape[0] = 1;
    p.lstride[0] = p.rstride[0] = 0;
    p.size = 1;
    return p;
  }
  p.ndim = n;
  int64_t la = 1, ra = 1, size = 1;
  for (int d = n - 1; d >= 0; --d) {
    p.lstride[d] = lb[d] ? 0 : la;
    p.rstride[d] = rb[d] ? 0 : ra;
    if (!lb[d]) la *= p.shape[d];
    if (!rb[d]) ra *= p.shape[d];
    size *= p.shape[d];
  }
  p.size = size;
  return p;
}

/// Right-aligned NumPy broadcast of two shapes whose ranks are known (dims may be -1). Returns
/// false when two known dims differ and neither is 1.
inline bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  const int n = std::max(a.ndim(), b.ndim());
  Shape o = Shape::filled(n, -1);
  for (int d = 0; d < n; ++d) {
    const int ai = d - (n - a.ndim()), bi = d - (n - b.ndim());
    const int64_t x = ai < 0 ? 1 : a[ai];
    const int64_t y = bi < 0 ? 1 : b[bi];
    if (x == 1) {
      o[d] = y;
    } else if (y == 1) {
      o[d] = x;
    } else if (x < 0) {
      o[d] = y;  // may be -1 too
    } else if (y < 0 || x == y) {
      o[d] = x;
    } else {
      return false;
    }
  }
  *out = std::move(o);
  return true;
}

}  // namespace weft::detail
