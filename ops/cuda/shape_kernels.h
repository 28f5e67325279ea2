// Host entry points shared by the reduce, shape and indexing CUDA families (ops/cuda/reduce.cu,
// shape.cu, indexing_ops.cu). Everything is queued on the op's stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "ops/defs/block_moves.h"
#include "ops/op.h"

namespace weft::cuda {

/// dst[i] = src[i] (or += when `add`) over the index space `shape` (ndim dims) with per-dim
/// element strides for each side (0 on the source broadcasts). Destination positions must be
/// distinct (sums over repeated destinations go through reduce_axes). Writing copies bytes of
/// any dtype; adding needs a numeric one.
void strided_copy(const OpContext& ctx, void* dst, const int64_t* dst_strides, const void* src,
                  const int64_t* src_strides, const int64_t* shape, int ndim, DType dtype,
                  bool add);
/// Zeroes `bytes` bytes at `dst`.
void zero_fill(const OpContext& ctx, void* dst, size_t bytes);
/// CUDA's half of BlockMoves (ops/defs/block_moves.h): strided_copy and zero_fill on the
/// kernel's stream.
struct CudaCopier {
  const OpContext* ctx = nullptr;
  void copy(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
            const int64_t* shape, int ndim, DType dtype, bool add) const {
    strided_copy(*ctx, dst, dst_strides, src, src_strides, shape, ndim, dtype, add);
  }
  void zero(void* dst, size_t bytes) const { zero_fill(*ctx, dst, bytes); }
};
/// The block moves of a CUDA kernel call.
inline detail::BlockMoves<CudaCopier> cuda_moves(const OpContext& ctx) {
  return detail::BlockMoves<CudaCopier>(CudaCopier{&ctx});
}
/// out = in (or += with kAdd) for equal sizes; nothing when writing onto the same memory.
void copy_whole(const OpContext& ctx, const TensorView& in, OpReq req, const TensorView& out);

enum class ReduceKind { kSum, kMean, kMax, kMin };
/// out, compact in the layout of `shape` with the masked dims set to 1, gets the reduction of the
/// compact `x` (shape `shape`) over the masked dims, written as `req` says (kNull: nothing).
void reduce_axes(const OpContext& ctx, const void* x, const std::vector<int64_t>& shape,
                 const std::vector<char>& mask, DType dtype, ReduceKind kind, OpReq req, void* out,
                 const char* what);

}  // namespace weft::cuda
