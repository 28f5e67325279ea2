// Kernels on layouts other than plain (Note [Layout propagation] in graph/layout.cc) for ops whose
// plain kernels live elsewhere: the reorder op the pass inserts, elementwise add / multiply and
// channel concat on oneDNN formats.
#pragma once

#include "ops/op.h"

namespace weft::detail {

/// Adds the CPU kernel of `_layout_reorder` (defined in ops/defs/layout_ops.cc) and gives
/// elemwise_add, broadcast_add and broadcast_mul their layout support (both operands in one
/// layout; broadcast_mul and broadcast_add also a plain per-channel right operand). Called by
/// cpu::register_elemwise_kernels after the binary ops' plain kernels exist.
void register_layout_kernels(OpRegistry& r);

/// Concat along `axis` of inputs in any layouts (FInferLayout of Concat): float32 channel
/// concatenation of 3- to 5-d inputs of which at least one is not plain; the output takes the
/// format oneDNN's concat chooses.
bool concat_infer_layout(int axis, const LayoutQuery& q, std::vector<LayoutRef>& in,
                         std::vector<LayoutRef>& out);
/// The kernel of a Concat call with layouts; `axis` is normalised.
void concat_layout_forward(int axis, const OpContext& ctx, std::span<const TensorView> in,
                           std::span<const OpReq> req, std::span<const TensorView> out);

/// Whether a call has any input or output in a layout other than plain.
bool has_layouts(const OpContext& ctx, size_t num_in, size_t num_out);

}  // namespace weft::detail
