// CUDA kernels: the shape family (see ops/cuda/register.h): the strided copy every shape op
// shares, Reshape, Flatten, expand_dims, squeeze, transpose, Concat, stack, SliceChannel, Crop,
// _layout_reorder and their backward ops. slice, slice_axis, tile and broadcast_to are in
// indexing.cu.
#include <algorithm>
#include <vector>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/reduce_common.cuh"
#include "ops/cuda/register.h"
#include "ops/cuda/shape_kernels.h"
#include "ops/defs/shape_ops_params.h"

namespace weft::cuda {

namespace {

using detail::ConcatParam;
using detail::CropParam;
using detail::SliceChannelParam;
using detail::StackParam;
using detail::TransposeParam;

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
    WEFT_CUDA_CALL(cudaMemcpyAsync(dst, src, static_cast<size_t>(total) * esize,
                                   cudaMemcpyDeviceToDevice, stream_of(ctx)),
                   device_of(ctx));
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
  WEFT_CUDA_CALL(cudaMemsetAsync(dst, 0, bytes, stream_of(ctx)), device_of(ctx));
}

void copy_whole(const OpContext& ctx, const TensorView& in, OpReq req, const TensorView& out) {
  if (req == OpReq::kNull) return;
  if (req != OpReq::kAdd && in.raw() == out.raw()) return;
  const int64_t n = out.size(), one = 1;
  strided_copy(ctx, out.raw(), &one, in.raw(), &one, &n, 1, out.dtype(), req == OpReq::kAdd);
}

namespace {

char* elem_ptr(const TensorView& v, int64_t offset) {
  return static_cast<char*>(v.raw()) + offset * static_cast<int64_t>(dtype_size(v.dtype()));
}

std::vector<int64_t> compact_strides(const TensorView& v) {
  std::vector<int64_t> s(static_cast<size_t>(std::max(v.ndim, 0)), 1);
  for (int k = v.ndim - 2; k >= 0; --k) s[k] = s[k + 1] * v.shape[k + 1];
  return s;
}

int norm_axis(int64_t axis, int ndim) { return static_cast<int>(axis < 0 ? axis + ndim : axis); }

int64_t prod(const TensorView& v, int b, int e) {
  int64_t n = 1;
  for (int k = b; k < e; ++k) n *= v.shape[k];
  return n;
}

// The reshape-like ops and their backward ops: (data | out_grad, data) -> same bytes.
void copy_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  copy_whole(ctx, in[0], req[0], out[0]);
}

void transpose_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const TensorView& x = in[0];
  const TensorView& y = out[0];
  const Shape& axes = attrs.params<TransposeParam>().axes;
  const std::vector<int64_t> xs = compact_strides(x), ys = compact_strides(y);
  std::vector<int64_t> src(static_cast<size_t>(x.ndim));
  for (int i = 0; i < x.ndim; ++i) {
    const int a = axes.ndim() == 0 ? x.ndim - 1 - i : norm_axis(axes[i], x.ndim);
    src[i] = xs[a];
  }
  strided_copy(ctx, y.raw(), ys.data(), x.raw(), src.data(), y.shape, y.ndim, y.dtype(),
               req[0] == OpReq::kAdd);
}

// Between a compact block `part` (outer, rows*inner) and rows [row0, row0+rows) of `whole`
// (outer, whole_rows*inner), as the CPU's block_copy.
void block_copy(const OpContext& ctx, const TensorView& whole, int64_t whole_rows,
                const TensorView& part, int64_t row0, int64_t rows, int64_t outer, int64_t inner,
                OpReq req, bool to_whole) {
  if (req == OpReq::kNull || outer * rows * inner == 0) return;
  const int64_t shape[2] = {outer, rows * inner};
  const int64_t ws[2] = {whole_rows * inner, 1}, ps[2] = {rows * inner, 1};
  char* w = elem_ptr(whole, row0 * inner);
  const bool add = req == OpReq::kAdd;
  if (to_whole) {
    strided_copy(ctx, w, ws, part.raw(), ps, shape, 2, whole.dtype(), add);
  } else {
    strided_copy(ctx, part.raw(), ps, w, ws, shape, 2, whole.dtype(), add);
  }
}

void concat_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const TensorView& y = out[0];
  const int axis = norm_axis(attrs.params<ConcatParam>().dim, y.ndim);
  const int64_t outer = prod(y, 0, axis), inner = prod(y, axis + 1, y.ndim);
  int64_t row = 0;
  for (const auto& x : in) {
    block_copy(ctx, y, y.shape[axis], x, row, x.shape[axis], outer, inner, req[0], true);
    row += x.shape[axis];
  }
}

void concat_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  const TensorView& og = in[0];
  const int axis = norm_axis(attrs.params<ConcatParam>().dim, og.ndim);
  const int64_t outer = prod(og, 0, axis), inner = prod(og, axis + 1, og.ndim);
  int64_t row = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    block_copy(ctx, og, og.shape[axis], out[i], row, out[i].shape[axis], outer, inner, req[i],
               false);
    row += out[i].shape[axis];
  }
}

int stack_axis(const OpAttrs& attrs, int in_ndim) {
  return static_cast<int>(norm_axis(attrs.params<StackParam>().axis, in_ndim + 1));
}

void stack_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  const TensorView& x0 = in[0];
  const int axis = stack_axis(attrs, x0.ndim);
  const int64_t outer = prod(x0, 0, axis), inner = prod(x0, axis, x0.ndim);
  const auto n = static_cast<int64_t>(in.size());
  for (int64_t i = 0; i < n; ++i)
    block_copy(ctx, out[0], n, in[i], i, 1, outer, inner, req[0], true);
}

void stack_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const TensorView& x0 = out[0];
  const int axis = stack_axis(attrs, x0.ndim);
  const int64_t outer = prod(x0, 0, axis), inner = prod(x0, axis, x0.ndim);
  const auto n = static_cast<int64_t>(out.size());
  for (int64_t i = 0; i < n; ++i)
    block_copy(ctx, in[0], n, out[i], i, 1, outer, inner, req[i], false);
}

void slice_channel_forward(const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  const auto& p = attrs.params<SliceChannelParam>();
  const TensorView& x = in[0];
  const int axis = norm_axis(p.axis, x.ndim);
  const int64_t n = p.num_outputs, part = x.shape[axis] / n;
  const int64_t outer = prod(x, 0, axis), inner = prod(x, axis + 1, x.ndim);
  for (int64_t i = 0; i < n; ++i)
    block_copy(ctx, x, x.shape[axis], out[i], i * part, part, outer, inner, req[i], false);
}

// Between the crop window of `data` (N, C, H, W) and the compact `part` (N, C, h, w); shape
// inference checked that the window fits.
void crop_copy(const OpAttrs& attrs, const OpContext& ctx, const TensorView& data,
               const TensorView& part, OpReq req, bool to_data) {
  if (req == OpReq::kNull) return;
  const auto& p = attrs.params<CropParam>();
  const int64_t H = data.shape[2], W = data.shape[3], h = part.shape[2], w = part.shape[3];
  const int64_t y0 = p.center_crop ? (H - h) / 2 : p.offset[0];
  const int64_t x0 = p.center_crop ? (W - w) / 2 : p.offset[1];
  const int64_t shape[3] = {data.shape[0] * data.shape[1], h, w};
  const int64_t ds[3] = {H * W, W, 1}, ps[3] = {h * w, w, 1};
  char* window = elem_ptr(data, y0 * W + x0);
  const bool add = req == OpReq::kAdd;
  if (to_data) {
    if (!add) zero_fill(ctx, data.raw(), data.bytes());
    strided_copy(ctx, window, ds, part.raw(), ps, shape, 3, data.dtype(), add);
  } else {
    strided_copy(ctx, part.raw(), ps, window, ds, shape, 3, data.dtype(), add);
  }
}

void crop_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  crop_copy(attrs, ctx, in[0], out[0], req[0], false);
}
void crop_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  crop_copy(attrs, ctx, out[0], in[0], req[0], true);
}

// On CUDA every tensor is plain, so a reorder is a copy.
void reorder_forward(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  copy_whole(ctx, in[0], req[0], out[0]);
}

}  // namespace

void register_shape_kernels(OpRegistry& r) {
  auto reg = [&r](const char* name, FCompute f) {
    r.register_op(name).set_attr(DeviceType::kCUDA, std::move(f), "cuda");
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
