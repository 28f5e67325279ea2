// CUDA kernels: the shape family (see ops/cuda/register.h): the strided copy every shape op
// shares, Reshape, Flatten, expand_dims, squeeze, transpose, Concat, stack, SliceChannel, Crop,
// _layout_reorder and their backward ops. slice, slice_axis, tile and broadcast_to are in
// indexing_ops.cu.
#include <algorithm>
#include <vector>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/reduce_common.cuh"
#include "ops/cuda/register.h"
#include "ops/cuda/shape_kernels.h"
#include "ops/defs/shape_ops_params.h"

namespace weft::cuda {

namespace {

// ---- the strided copy -----------------------------------------------------------------------

/// An index space with a stride per dim on each side, after merging.
struct CopyPlan {
  int n = 0;
  int64_t size[kMaxDims];
  int64_t dst[kMaxDims];
  int64_t src[kMaxDims];
};

template <typename T, bool kAdd>
__global__ void strided_copy_kernel(T* dst, const T* __restrict__ src, CopyPlan p, int64_t total) {
  WEFT_CUDA_KERNEL_LOOP(i, total) {
    int64_t r = i, d = 0, s = 0;
    for (int k = p.n - 1; k > 0; --k) {
      const int64_t q = r / p.size[k];
      const int64_t c = r - q * p.size[k];
      d += c * p.dst[k];
      s += c * p.src[k];
      r = q;
    }
    d += r * p.dst[0];
    s += r * p.src[0];
    if constexpr (kAdd) {
      dst[d] = from_acc<T>(static_cast<acc_t<T>>(to_acc(dst[d]) + to_acc(src[s])));
    } else {
      dst[d] = src[s];
    }
  }
}

constexpr int kTile = 32, kTileRows = 8;

// Note [Tiled transpose]
// A batch of (Q, P) -> (P, Q) transposes: a block stages a 32x32 tile in shared memory (padded
// by one column against bank conflicts), reading rows of the source and writing rows of the
// destination, so both sides are coalesced.
template <typename T, bool kAdd>
__global__ void transpose_tiled_kernel(T* dst, const T* __restrict__ src, int64_t P, int64_t Q) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t b = blockIdx.z;
  const T* s = src + b * P * Q;
  T* d = dst + b * P * Q;
  const int64_t p0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t q = q0 + k, p = p0 + threadIdx.x;
    if (q < Q && p < P) tile[k][threadIdx.x] = s[q * P + p];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int64_t p = p0 + k, q = q0 + threadIdx.x;
    if (p < P && q < Q) {
      const T v = tile[threadIdx.x][k];
      if constexpr (kAdd) {
        d[p * Q + q] = from_acc<T>(static_cast<acc_t<T>>(to_acc(d[p * Q + q]) + to_acc(v)));
      } else {
        d[p * Q + q] = v;
      }
    }
  }
}

template <typename T, bool kAdd>
void launch_copy(const OpContext& ctx, void* dst, const void* src, const CopyPlan& p,
                 int64_t total) {
  cudaStream_t st = stream_of(ctx);
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  // (B,) P, Q with a compact destination and a source compact in (B,) Q, P: a transpose.
  const int n = p.n;
  if (n >= 2 && n <= 3) {
    const int64_t P = p.size[n - 2], Q = p.size[n - 1];
    const int64_t B = n == 3 ? p.size[0] : 1;
    const bool batch_ok = n == 2 || (p.dst[0] == P * Q && p.src[0] == P * Q);
    if (batch_ok && p.dst[n - 1] == 1 && p.dst[n - 2] == Q && p.src[n - 2] == 1 &&
        p.src[n - 1] == P && B <= 65535 && (Q + kTile - 1) / kTile <= 65535 &&
        (P + kTile - 1) / kTile <= (int64_t{1} << 31) - 1) {
      const dim3 grid(static_cast<unsigned>((P + kTile - 1) / kTile),
                      static_cast<unsigned>((Q + kTile - 1) / kTile), static_cast<unsigned>(B));
      transpose_tiled_kernel<T, kAdd><<<grid, dim3(kTile, kTileRows), 0, st>>>(d, s, P, Q);
      check_launch("transpose", ctx);
      return;
    }
  }
  strided_copy_kernel<T, kAdd><<<grid_for(total), kBlockSize, 0, st>>>(d, s, p, total);
  check_launch("strided copy", ctx);
}

}  // namespace

void strided_copy(const OpContext& ctx, void* dst, const int64_t* dst_strides, const void* src,
                  const int64_t* src_strides, const int64_t* shape, int ndim, DType dtype,
                  bool add) {
  int64_t total = 1;
  for (int k = 0; k < ndim; ++k) total *= shape[k];
  if (total == 0) return;
  // Drop size-1 dims, then merge neighbours that are contiguous on both sides.
  std::vector<int64_t> sz, ds, ss;
  for (int k = 0; k < ndim; ++k) {
    if (shape[k] == 1) continue;
    if (!sz.empty() && ds.back() == dst_strides[k] * shape[k] &&
        ss.back() == src_strides[k] * shape[k]) {
      sz.back() *= shape[k];
      ds.back() = dst_strides[k];
      ss.back() = src_strides[k];
      continue;
    }
    sz.push_back(shape[k]);
    ds.push_back(dst_strides[k]);
    ss.push_back(src_strides[k]);
  }
  if (sz.empty()) {
    sz.push_back(1);
    ds.push_back(1);
    ss.push_back(1);
  }
  WEFT_CHECK_AS(NotImplemented, sz.size() <= static_cast<size_t>(kMaxDims))
      << "CUDA strided copy over more than " << kMaxDims << " dims";
  const size_t esize = dtype_size(dtype);
  if (!add && sz.size() == 1 && ds[0] == 1 && ss[0] == 1) {
    copy_on_stream(ctx, dst, src, static_cast<size_t>(total) * esize);
    return;
  }
  CopyPlan p;
  p.n = static_cast<int>(sz.size());
  for (int k = 0; k < p.n; ++k) {
    p.size[k] = sz[k];
    p.dst[k] = ds[k];
    p.src[k] = ss[k];
  }
  if (add) {
    WEFT_CUDA_ALL_SWITCH(dtype, DT, "strided copy (add)",
                         launch_copy<DT, true>(ctx, dst, src, p, total));
    return;
  }
  switch (esize) {
    case 1:
      launch_copy<uint8_t, false>(ctx, dst, src, p, total);
      break;
    case 2:
      launch_copy<uint16_t, false>(ctx, dst, src, p, total);
      break;
    case 4:
      launch_copy<uint32_t, false>(ctx, dst, src, p, total);
      break;
    case 8:
      launch_copy<uint64_t, false>(ctx, dst, src, p, total);
      break;
    default:
      WEFT_THROW(NotImplemented) << "strided copy: element size " << esize;
  }
}

void zero_fill(const OpContext& ctx, void* dst, size_t bytes) {
  if (bytes == 0) return;
  memset_on_stream(ctx, dst, 0, bytes);
}

void copy_whole(const OpContext& ctx, const TensorView& in, OpReq req, const TensorView& out) {
  if (req == OpReq::kNull) return;
  if (req != OpReq::kAdd && in.raw() == out.raw()) return;
  const int64_t n = out.size(), one = 1;
  strided_copy(ctx, out.raw(), &one, in.raw(), &one, &n, 1, out.dtype(), req == OpReq::kAdd);
}

namespace {

// The reshape-like ops and their backward ops: (data | out_grad, data) -> same bytes.
void copy_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  copy_whole(ctx, in[0], req[0], out[0]);
}

void transpose_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).transpose_forward(attrs, in[0], out[0], req[0]);
}

void concat_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).concat_forward(attrs, in, req, out);
}
void concat_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).concat_backward(attrs, in, req, out);
}
void stack_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).stack_forward(attrs, in, req, out);
}
void stack_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).stack_backward(attrs, in, req, out);
}
void slice_channel_forward(const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  cuda_moves(ctx).slice_channel_forward(attrs, in, req, out);
}
void crop_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).crop_copy(attrs, in[0], out[0], req[0], false);
}
void crop_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  cuda_moves(ctx).crop_copy(attrs, out[0], in[0], req[0], true);
}

// On CUDA every tensor is plain, so a reorder is a copy.
void reorder_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  copy_whole(ctx, in[0], req[0], out[0]);
}

}  // namespace

void register_shape_kernels(OpRegistry& r) {
  auto reg = [&r](const char* name, FCompute f) {
    r.kernels(name).set_attr(DeviceType::kCUDA, std::move(f));
  };
  for (const char* name : {"Reshape", "_backward_Reshape", "Flatten", "_backward_Flatten",
                           "expand_dims", "_backward_expand_dims", "squeeze", "_backward_squeeze"})
    reg(name, copy_forward);
  reg("transpose", transpose_forward);
  reg("Concat", concat_forward);
  reg("_backward_Concat", concat_backward);
  reg("stack", stack_forward);
  reg("_backward_stack", stack_backward);
  reg("SliceChannel", slice_channel_forward);
  reg("Crop", crop_forward);
  reg("_backward_Crop", crop_backward);
  reg("_layout_reorder", reorder_forward);
}

}  // namespace weft::cuda
