// CUDA kernels: softmax, log_softmax (axis, temperature, dtype, length masking) and
// SoftmaxActivation, with their backward ops (part of the reduce family, ops/cuda/register.h).
#include <type_traits>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/reduce_common.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/softmax_params.h"
#include "ops/infer_util.h"

namespace weft::cuda {

void register_softmax_kernels(OpRegistry& r);

namespace {

using detail::SoftmaxActivationParam;
using detail::SoftmaxActMode;
using detail::SoftmaxParam;

template <typename A, typename B>
using CalcT =
    std::conditional_t<std::is_same_v<A, double> || std::is_same_v<B, double>, double, float>;

template <typename C>
__device__ __forceinline__ C exp_c(C v) {
  if constexpr (std::is_same_v<C, float>)
    return __expf(v);
  else
    return exp(v);
}

template <typename T, typename C>
__device__ __forceinline__ void store_c(T* dst, bool add, C v) {
  if (add) v = static_cast<C>(to_acc(*dst)) + v;
  *dst = from_acc<T>(static_cast<acc_t<T>>(v));
}

/// Rows of the softmax: (outer, dim, inner) with row r = o * inner + i at o*dim*inner + i.
struct Rows {
  int64_t outer, dim, inner;
};

__device__ __forceinline__ int64_t row_len(const int64_t* lengths, int64_t r, int64_t D) {
  if (lengths == nullptr) return D;
  const int64_t l = lengths[r];
  return l < 0 ? 0 : l > D ? D : l;
}

// Note [Softmax kernels]
// inner == 1 (the axis is innermost): one block per row, three passes over the row in global
// memory (max, sum of exponentials, write), each pass reduced through warp shuffles and shared
// memory. inner > 1: one thread per (o, i) column, walking the axis with stride inner, so
// neighbouring threads read neighbouring addresses. The backward has the same two shapes with
// one reduction pass (sum of dy*y, or of dy for log_softmax).

template <typename DI, typename DO>
__global__ void softmax_rows_kernel(const DI* __restrict__ x, DO* y, Rows s, double temp, bool log,
                                    const int64_t* lengths, bool add) {
  using C = CalcT<DI, DO>;
  const C inv_t = static_cast<C>(1.0 / temp);
  const int64_t D = s.dim;
  for (int64_t r = blockIdx.x; r < s.outer; r += gridDim.x) {
    const DI* xr = x + r * D;
    DO* yr = y + r * D;
    const int64_t len = row_len(lengths, r, D);
    C mx = -std::numeric_limits<C>::infinity();
    for (int64_t d = threadIdx.x; d < len; d += blockDim.x)
      mx = max(mx, static_cast<C>(to_acc(xr[d])));
    mx = block_reduce<MaxOp>(mx);
    C sum = 0;
    for (int64_t d = threadIdx.x; d < len; d += blockDim.x)
      sum += exp_c((static_cast<C>(to_acc(xr[d])) - mx) * inv_t);
    sum = block_reduce<SumOp>(sum);
    const C lse = log ? static_cast<C>(::log(sum)) : C(0), inv = C(1) / sum;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      C v = 0;
      if (d < len) {
        const C z = (static_cast<C>(to_acc(xr[d])) - mx) * inv_t;
        v = log ? z - lse : exp_c(z) * inv;
      }
      store_c(yr + d, add, v);
    }
  }
}

template <typename DI, typename DO>
__global__ void softmax_cols_kernel(const DI* __restrict__ x, DO* y, Rows s, double temp, bool log,
                                    const int64_t* lengths, bool add) {
  using C = CalcT<DI, DO>;
  const C inv_t = static_cast<C>(1.0 / temp);
  const int64_t D = s.dim, inner = s.inner;
  WEFT_CUDA_KERNEL_LOOP(r, s.outer * inner) {
    const int64_t o = r / inner, i = r - o * inner;
    const int64_t base = o * D * inner + i;
    const int64_t len = row_len(lengths, r, D);
    C mx = -std::numeric_limits<C>::infinity();
    for (int64_t d = 0; d < len; ++d) mx = max(mx, static_cast<C>(to_acc(x[base + d * inner])));
    C sum = 0;
    for (int64_t d = 0; d < len; ++d)
      sum += exp_c((static_cast<C>(to_acc(x[base + d * inner])) - mx) * inv_t);
    const C lse = log ? static_cast<C>(::log(sum)) : C(0), inv = C(1) / sum;
    for (int64_t d = 0; d < D; ++d) {
      C v = 0;
      if (d < len) {
        const C z = (static_cast<C>(to_acc(x[base + d * inner])) - mx) * inv_t;
        v = log ? z - lse : exp_c(z) * inv;
      }
      store_c(y + base + d * inner, add, v);
    }
  }
}

// dx from dy and y: softmax (dy - sum(dy*y)) * y / T; log_softmax (dy - exp(y) * sum(dy)) / T.
template <typename DI, typename DO>
__global__ void softmax_bwd_rows_kernel(const DO* __restrict__ dy, const DO* __restrict__ y, DI* dx,
                                        Rows s, double temp, bool log, const int64_t* lengths,
                                        bool add) {
  using C = CalcT<DI, DO>;
  const C inv_t = static_cast<C>(1.0 / temp);
  const int64_t D = s.dim;
  for (int64_t r = blockIdx.x; r < s.outer; r += gridDim.x) {
    const int64_t b = r * D;
    const int64_t len = row_len(lengths, r, D);
    C acc = 0;
    for (int64_t d = threadIdx.x; d < len; d += blockDim.x) {
      const C g = static_cast<C>(to_acc(dy[b + d]));
      acc += log ? g : g * static_cast<C>(to_acc(y[b + d]));
    }
    acc = block_reduce<SumOp>(acc);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      C v = 0;
      if (d < len) {
        const C g = static_cast<C>(to_acc(dy[b + d])), yv = static_cast<C>(to_acc(y[b + d]));
        v = log ? (g - exp(yv) * acc) * inv_t : (g - acc) * yv * inv_t;
      }
      store_c(dx + b + d, add, v);
    }
  }
}

template <typename DI, typename DO>
__global__ void softmax_bwd_cols_kernel(const DO* __restrict__ dy, const DO* __restrict__ y, DI* dx,
                                        Rows s, double temp, bool log, const int64_t* lengths,
                                        bool add) {
  using C = CalcT<DI, DO>;
  const C inv_t = static_cast<C>(1.0 / temp);
  const int64_t D = s.dim, inner = s.inner;
  WEFT_CUDA_KERNEL_LOOP(r, s.outer * inner) {
    const int64_t o = r / inner, i = r - o * inner;
    const int64_t base = o * D * inner + i;
    const int64_t len = row_len(lengths, r, D);
    C acc = 0;
    for (int64_t d = 0; d < len; ++d) {
      const C g = static_cast<C>(to_acc(dy[base + d * inner]));
      acc += log ? g : g * static_cast<C>(to_acc(y[base + d * inner]));
    }
    for (int64_t d = 0; d < D; ++d) {
      const int64_t k = base + d * inner;
      C v = 0;
      if (d < len) {
        const C g = static_cast<C>(to_acc(dy[k])), yv = static_cast<C>(to_acc(y[k]));
        v = log ? (g - exp(yv) * acc) * inv_t : (g - acc) * yv * inv_t;
      }
      store_c(dx + k, add, v);
    }
  }
}

template <typename L>
__global__ void lengths_kernel(const L* __restrict__ in, int64_t* out, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { out[i] = static_cast<int64_t>(to_acc(in[i])); }
}

/// The rows' lengths as int64 in scratch memory (null without lengths).
struct Lengths {
  Lengths(const OpContext& ctx, const TensorView* v)
      : scratch(ctx, v ? static_cast<size_t>(v->size()) * sizeof(int64_t) : 0) {
    if (v == nullptr || v->size() == 0) return;
    ptr = scratch.as<int64_t>();
    WEFT_CUDA_ALL_SWITCH(v->dtype(), L, "softmax length", {
      lengths_kernel<L><<<grid_for(v->size()), kBlockSize, 0, stream_of(ctx)>>>(
          static_cast<const L*>(v->raw()), ptr, v->size());
    });
    check_launch("softmax lengths", ctx);
  }
  Scratch scratch;
  int64_t* ptr = nullptr;
};

Rows rows_at(const TensorView& v, int axis) {
  Rows s{1, v.ndim > 0 ? v.shape[axis] : 1, 1};
  for (int d = 0; d < axis; ++d) s.outer *= v.shape[d];
  for (int d = axis + 1; d < v.ndim; ++d) s.inner *= v.shape[d];
  return s;
}

void softmax_any(const OpContext& ctx, const char* what, int axis, double temp, bool log,
                 const int64_t* lengths, const TensorView& x, OpReq req, const TensorView& y) {
  if (req == OpReq::kNull || x.size() == 0) return;
  const Rows s = rows_at(x, axis);
  const bool add = req == OpReq::kAdd;
  cudaStream_t st = stream_of(ctx);
  WEFT_CUDA_FLOAT_SWITCH(x.dtype(), DI, what, {
    WEFT_CUDA_FLOAT_SWITCH(y.dtype(), DO, what, {
      if (s.inner == 1) {
        softmax_rows_kernel<DI, DO><<<grid_for(s.outer, 1), row_block(s.dim), 0, st>>>(
            dptr<DI>(x), dptr<DO>(y), s, temp, log, lengths, add);
      } else {
        softmax_cols_kernel<DI, DO><<<grid_for(s.outer * s.inner), kBlockSize, 0, st>>>(
            dptr<DI>(x), dptr<DO>(y), s, temp, log, lengths, add);
      }
    });
  });
  check_launch("softmax", ctx);
}

// dy, y of type DO (the output's); dx of type DI (the data's).
void softmax_backward_any(const OpContext& ctx, const char* what, int axis, double temp, bool log,
                          const int64_t* lengths, const TensorView& dy, const TensorView& y,
                          OpReq req, const TensorView& dx) {
  if (req == OpReq::kNull || dx.size() == 0) return;
  const Rows s = rows_at(y, axis);
  const bool add = req == OpReq::kAdd;
  cudaStream_t st = stream_of(ctx);
  WEFT_CUDA_FLOAT_SWITCH(dx.dtype(), DI, what, {
    WEFT_CUDA_FLOAT_SWITCH(y.dtype(), DO, what, {
      if (s.inner == 1) {
        softmax_bwd_rows_kernel<DI, DO><<<grid_for(s.outer, 1), row_block(s.dim), 0, st>>>(
            dptr<DO>(dy), dptr<DO>(y), dptr<DI>(dx), s, temp, log, lengths, add);
      } else {
        softmax_bwd_cols_kernel<DI, DO><<<grid_for(s.outer * s.inner), kBlockSize, 0, st>>>(
            dptr<DO>(dy), dptr<DO>(y), dptr<DI>(dx), s, temp, log, lengths, add);
      }
    });
  });
  check_launch("softmax backward", ctx);
}

template <typename T>
__global__ void fill_kernel(T* y, acc_t<T> v, bool add) {
  *y = from_acc<T>(add ? static_cast<acc_t<T>>(to_acc(*y) + v) : v);
}

// A 0-d tensor: softmax 1, log_softmax 0, gradient 0.
void scalar_fill(const OpContext& ctx, const TensorView& y, OpReq req, double v) {
  if (req == OpReq::kNull) return;
  WEFT_CUDA_FLOAT_SWITCH(y.dtype(), T, "softmax", {
    fill_kernel<T>
        <<<1, 1, 0, stream_of(ctx)>>>(dptr<T>(y), static_cast<acc_t<T>>(v), req == OpReq::kAdd);
  });
  check_launch("softmax", ctx);
}

template <bool kLog>
void softmax_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (in[0].ndim == 0) return scalar_fill(ctx, out[0], req[0], kLog ? 0.0 : 1.0);
  const Lengths len(ctx, p.has_length() ? &in[1] : nullptr);
  softmax_any(ctx, attrs.where().c_str(), normalize_axis(attrs, p.axis, in[0].ndim), p.temp(), kLog,
              len.ptr, in[0], req[0], out[0]);
}

template <bool kLog>
void softmax_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (req[0] == OpReq::kNull) return;
  if (in[2].ndim == 0) return scalar_fill(ctx, out[0], req[0], 0.0);
  const Lengths len(ctx, p.has_length() ? &in[3] : nullptr);
  softmax_backward_any(ctx, attrs.where().c_str(), normalize_axis(attrs, p.axis, in[2].ndim),
                       p.temp(), kLog, len.ptr, in[0], in[2], req[0], out[0]);
}

int act_axis(const OpAttrs& attrs, int ndim) {
  return attrs.params<SoftmaxActivationParam>().mode == SoftmaxActMode::kChannel ? 1 : ndim - 1;
}

void softmax_act_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  softmax_any(ctx, attrs.where().c_str(), act_axis(attrs, in[0].ndim), 1.0, false, nullptr, in[0],
              req[0], out[0]);
}

// in: out_grad, output.
void softmax_act_backward(const OpAttrs& attrs, const OpContext& ctx,
                          std::span<const TensorView> in, std::span<const OpReq> req,
                          std::span<const TensorView> out) {
  softmax_backward_any(ctx, attrs.where().c_str(), act_axis(attrs, in[1].ndim), 1.0, false, nullptr,
                       in[0], in[1], req[0], out[0]);
}

}  // namespace

void register_softmax_kernels(OpRegistry& r) {
  auto reg = [&r](const char* name, FCompute f) {
    r.kernels(name).set_attr(DeviceType::kCUDA, std::move(f));
  };
  reg("softmax", softmax_forward<false>);
  reg("log_softmax", softmax_forward<true>);
  reg("_backward_softmax", softmax_backward<false>);
  reg("_backward_log_softmax", softmax_backward<true>);
  reg("SoftmaxActivation", softmax_act_forward);
  reg("_backward_SoftmaxActivation", softmax_act_backward);
}

}  // namespace weft::cuda
