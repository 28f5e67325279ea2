// CPU kernels of the reshape-like ops (Reshape, Flatten, expand_dims, squeeze: a copy, or nothing
// in place) and transpose, and register_shape_kernels (which adds the rest of the group from
// ops/cpu/shape_ops_concat.cc and ops/cpu/indexing_ops.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "ops/cpu/register.h"
#include "ops/cpu/strided_copy.h"
#include "ops/defs/shape_ops_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// ---- small helpers -------------------------------------------------------------------------

bool accumulates(OpReq r) { return r == OpReq::kAdd; }

// Copies (or adds) `in` into the same-sized `out`; a no-op when the output is the input's memory.
void copy_whole(const OpContext& ctx, const TensorView& in, OpReq req, const TensorView& out) {
  if (req == OpReq::kNull) return;
  if (req != OpReq::kAdd && in.raw() == out.raw()) return;
  const int64_t n = out.size(), one = 1;
  shape_ops_strided_copy(out.raw(), &one, in.raw(), &one, &n, 1, out.dtype(), accumulates(req),
                         ctx.num_threads);
}

void copy_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  copy_whole(ctx, in[0], req[0], out[0]);
}

void transpose_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  cpu_moves(ctx).transpose_forward(attrs, in[0], out[0], req[0]);
}

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_shape_concat_kernels(OpRegistry& r);  // ops/cpu/shape_ops_concat.cc
void register_indexing_kernels(OpRegistry& r);      // ops/cpu/indexing_ops.cc

void register_shape_kernels(OpRegistry& r) {
  using detail::copy_forward;
  for (const char* name : {"Reshape", "_backward_Reshape", "Flatten", "_backward_Flatten",
                           "expand_dims", "_backward_expand_dims", "squeeze", "_backward_squeeze"})
    r.kernels(name).set_attr<FCompute>(DeviceType::kCPU, copy_forward);
  r.kernels("transpose").set_attr<FCompute>(DeviceType::kCPU, detail::transpose_forward);

  register_shape_concat_kernels(r);
  register_indexing_kernels(r);
}

}  // namespace weft::cpu
