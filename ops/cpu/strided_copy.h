// The byte-level strided copy and zero fill shared by the CPU kernels of the shape operators
// (ops/cpu/shape_ops.cc, ops/cpu/shape_ops_concat.cc, ops/cpu/indexing_ops.cc); defined in
// ops/cpu/strided_copy.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "ops/defs/block_moves.h"
#include "ops/op.h"

namespace weft::detail {

/// dst[i] = src[i] (or dst[i] += src[i] when `accumulate`) over the index space `shape` (ndim
/// dims; ndim 0 is one element), with per-dim element strides for each side (0 broadcasts; a
/// 0 dst stride with `accumulate` sums into one element, which is race-free). Writing copies raw
/// bytes (any dtype); accumulating needs a dtype WEFT_DTYPE_SWITCH knows. Call from one thread;
/// uses up to `num_threads` OpenMP threads.
void shape_ops_strided_copy(void* dst, const int64_t* dst_strides, const void* src,
                            const int64_t* src_strides, const int64_t* shape, int ndim, DType dtype,
                            bool accumulate, int num_threads);
/// Sets `bytes` bytes at `dst` to zero (all-zero bytes are 0 in every dtype).
void shape_ops_zero(void* dst, size_t bytes, int num_threads);

/// The CPU's half of BlockMoves (ops/defs/block_moves.h): the strided copy above, with the
/// kernel's threads.
struct CpuCopier {
  int threads = 1;
  void copy(void* dst, const int64_t* dst_strides, const void* src, const int64_t* src_strides,
            const int64_t* shape, int ndim, DType dtype, bool add) const {
    shape_ops_strided_copy(dst, dst_strides, src, src_strides, shape, ndim, dtype, add, threads);
  }
  void zero(void* dst, size_t bytes) const { shape_ops_zero(dst, bytes, threads); }
};
/// The block moves of a CPU kernel call.
inline BlockMoves<CpuCopier> cpu_moves(const OpContext& ctx) {
  return BlockMoves<CpuCopier>(CpuCopier{ctx.num_threads});
}

}  // namespace weft::detail
