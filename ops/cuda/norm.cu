// CUDA kernels: the norm family (see ops/cuda/register.h). This file: BatchNorm, LayerNorm and
// their backward ops; norm_loss.cu: SoftmaxOutput and the regression heads.
//
// Note [CUDA BatchNorm]
// The semantics are the CPU kernel's (Note [BatchNorm statistics] in ops/cpu/batch_norm.cc): batch
// mean and *biased* variance in the outputs, the moving statistics updated in place during the
// forward pass, fix_gamma meaning gamma = 1 and a zero gamma gradient. Statistics are reduced in
// double (as the CPU does) by one block per channel with a two-pass mean/variance, which keeps
// the variance exact for data far from zero; a per-channel kernel then folds them into
// scale/shift rounded to the data type, as the CPU does, before the elementwise pass.
// float16/bfloat16 data (CUDA only; the CPU kernels refuse it) is mixed precision as in MXNet:
// gamma, beta, the moving statistics and the mean/var outputs are float32
// (batch_norm_param_type), and everything is computed and reduced in float32 (wide_t), the data
// rounded to the 16-bit type only when stored. LayerNorm keeps one type for all its tensors, as
// MXNet does, and computes 16-bit data in float32 too.
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/norm_util.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/norm_params.h"
#include "ops/infer_util.h"

namespace weft::cuda {

void register_norm_loss_kernels(OpRegistry& r);  // norm_loss.cu

namespace {

using detail::BatchNormParam;
using detail::LayerNormParam;

constexpr int kReduceBlock = 512;

// Per channel c of x viewed as (outer, C, inner): mean and biased variance, in wide_t<DT>.
template <typename DT>
__global__ void bn_stats_kernel(const DT* __restrict__ x, int64_t outer, int64_t C, int64_t inner,
                                wide_t<DT>* __restrict__ mean, wide_t<DT>* __restrict__ var) {
  using W = wide_t<DT>;
  __shared__ W shm[32];
  const int64_t c = blockIdx.x;
  const int64_t m = outer * inner;
  W s = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t o = j / inner, i = j - o * inner;
    s += widen(x[(o * C + c) * inner + i]);
  }
  const W mu = block_sum(s, shm) / static_cast<W>(m);
  W q = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t o = j / inner, i = j - o * inner;
    const W d = widen(x[(o * C + c) * inner + i]) - mu;
    q += d * d;
  }
  q = block_sum(q, shm);
  if (threadIdx.x == 0) {
    mean[c] = mu;
    var[c] = q / static_cast<W>(m);
  }
}

// Per channel: scale/shift for the elementwise pass, the mean/var outputs, the moving update.
// PT (acc_t<DT>) is the parameter type: DT for float32/float64, float for the 16-bit types.
template <typename DT, typename PT = acc_t<DT>>
__global__ void bn_finalize_kernel(int64_t C, const wide_t<DT>* bmean, const wide_t<DT>* bvar,
                                   const PT* gamma, const PT* beta, PT* moving_mean, PT* moving_var,
                                   PT* mean_out, int req_mean, PT* var_out, int req_var, PT* scale,
                                   PT* shift, bool use_batch, bool fix_gamma, double eps,
                                   double momentum) {
  using W = wide_t<DT>;
  const W mom = static_cast<W>(momentum);
  WEFT_CUDA_KERNEL_LOOP(c, C) {
    const W mu = use_batch ? bmean[c] : static_cast<W>(moving_mean[c]);
    const W v = use_batch ? bvar[c] : static_cast<W>(moving_var[c]);
    const W g = fix_gamma ? W(1) : static_cast<W>(gamma[c]);
    const W is = W(1) / sqrt(v + static_cast<W>(eps));
    scale[c] = static_cast<PT>(g * is);
    shift[c] = static_cast<PT>(static_cast<W>(beta[c]) - mu * g * is);
    store_req(mean_out + c, req_mean, mu);
    store_req(var_out + c, req_var, v);
    if (use_batch) {
      moving_mean[c] = static_cast<PT>(static_cast<W>(moving_mean[c]) * mom + mu * (W(1) - mom));
      moving_var[c] = static_cast<PT>(static_cast<W>(moving_var[c]) * mom + v * (W(1) - mom));
    }
  }
}

template <typename DT, int kReq>
__global__ void bn_apply_kernel(const DT* __restrict__ x, DT* y, int64_t n, int64_t C,
                                int64_t inner, const acc_t<DT>* __restrict__ scale,
                                const acc_t<DT>* __restrict__ shift) {
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    const int64_t c = (k / inner) % C;
    const acc_t<DT> v = to_acc(x[k]) * scale[c] + shift[c];
    if constexpr (kReq == kReqAdd) {
      y[k] = from_acc<DT>(to_acc(y[k]) + v);
    } else {
      y[k] = from_acc<DT>(v);
    }
  }
}

// Throws ValueError naming the op unless inputs first..last-1 and outputs 1, 2 have the parameter
// type of `data` (batch_norm_param_type): a kernel reading them as another type would run past
// their ends.
void check_bn_param_types(const OpAttrs& attrs, DType data, std::span<const TensorView> in,
                          size_t first, std::span<const TensorView> out) {
  const DType pt = detail::batch_norm_param_type(data);
  for (size_t i = first; i < in.size(); ++i) {
    WEFT_CHECK(in[i].dtype() == pt)
        << attrs.where() << ": input " << i << " has dtype " << dtype_name(in[i].dtype()) << ", "
        << dtype_name(data) << " data needs " << dtype_name(pt);
  }
  for (size_t o = 1; o < out.size(); ++o) {
    WEFT_CHECK(out[o].dtype() == pt)
        << attrs.where() << ": output " << o << " has dtype " << dtype_name(out[o].dtype()) << ", "
        << dtype_name(data) << " data needs " << dtype_name(pt);
  }
}

template <typename DT>
void bn_forward_typed(const BatchNormParam& p, const OpContext& ctx, int axis, bool use_batch,
                      std::span<const TensorView> in, std::span<const OpReq> req,
                      std::span<const TensorView> out) {
  using W = wide_t<DT>;
  using PT = acc_t<DT>;
  const Split3 s = split3(in[0].shape, in[0].ndim, axis);
  const int64_t C = s.dim, n = in[0].size();
  if (C == 0) return;
  cudaStream_t st = stream_of(ctx);
  // Scratch: batch mean, var (W), then scale, shift (PT; sizeof(PT) <= sizeof(W) keeps them
  // aligned).
  Scratch scratch(ctx, C * (2 * sizeof(W) + 2 * sizeof(PT)));
  W* bmean = scratch.as<W>();
  W* bvar = bmean + C;
  PT* scale = reinterpret_cast<PT*>(bvar + C);
  PT* shift = scale + C;
  if (use_batch) {
    // An empty batch gives 0/0 = NaN statistics, as on the CPU.
    bn_stats_kernel<DT><<<static_cast<unsigned>(C), kReduceBlock, 0, st>>>(
        typed<const DT>(in[0]), s.outer, C, s.inner, bmean, bvar);
    check_launch("bn_stats_kernel", ctx);
  }
  bn_finalize_kernel<DT><<<grid_for(C), kBlockSize, 0, st>>>(
      C, bmean, bvar, typed<const PT>(in[1]), typed<const PT>(in[2]), typed<PT>(in[3]),
      typed<PT>(in[4]), typed<PT>(out[1]), req_code(req[1]), typed<PT>(out[2]), req_code(req[2]),
      scale, shift, use_batch, p.fix_gamma, p.eps, p.momentum);
  check_launch("bn_finalize_kernel", ctx);
  if (req[0] == OpReq::kNull || n == 0) return;
  if (req[0] == OpReq::kAdd) {
    bn_apply_kernel<DT, kReqAdd><<<grid_for(n), kBlockSize, 0, st>>>(
        typed<const DT>(in[0]), typed<DT>(out[0]), n, C, s.inner, scale, shift);
  } else {
    bn_apply_kernel<DT, kReqWrite><<<grid_for(n), kBlockSize, 0, st>>>(
        typed<const DT>(in[0]), typed<DT>(out[0]), n, C, s.inner, scale, shift);
  }
  check_launch("bn_apply_kernel", ctx);
}

void bn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<BatchNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[0].ndim);
  const bool use_batch = ctx.is_train && !p.use_global_stats;
  WEFT_CHECK(out[0].dtype() == in[0].dtype())
      << attrs.where() << ": output and data must share a dtype";
  check_bn_param_types(attrs, in[0].dtype(), in, 1, out);
  WEFT_CUDA_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                         bn_forward_typed<DT>(p, ctx, axis, use_batch, in, req, out));
}

// Per channel: sum(dy), sum(dy * xhat) and invstd, and the gamma/beta gradients.
template <typename DT, typename PT = acc_t<DT>>
__global__ void bn_backward_reduce_kernel(const DT* __restrict__ dy, const DT* __restrict__ x,
                                          int64_t outer, int64_t C, int64_t inner, const PT* mean,
                                          const PT* var, double eps, bool fix_gamma,
                                          wide_t<DT>* coef, PT* dgamma, int req_g, PT* dbeta,
                                          int req_b) {
  using W = wide_t<DT>;
  __shared__ W shm[32];
  const int64_t c = blockIdx.x;
  const int64_t m = outer * inner;
  const W mu = static_cast<W>(mean[c]);
  const W is = W(1) / sqrt(static_cast<W>(var[c]) + static_cast<W>(eps));
  W sd = 0, sdx = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t o = j / inner, i = j - o * inner;
    const int64_t k = (o * C + c) * inner + i;
    const W g = widen(dy[k]);
    sd += g;
    sdx += g * (widen(x[k]) - mu);
  }
  sd = block_sum(sd, shm);
  sdx = block_sum(sdx, shm) * is;
  if (threadIdx.x == 0) {
    coef[3 * c] = is;
    coef[3 * c + 1] = sd;
    coef[3 * c + 2] = sdx;
    store_req(dgamma + c, req_g, fix_gamma ? W(0) : sdx);
    store_req(dbeta + c, req_b, sd);
  }
}

template <typename DT, typename PT = acc_t<DT>>
__global__ void bn_backward_data_kernel(const DT* __restrict__ dy, const DT* __restrict__ x, DT* dx,
                                        int req, int64_t n, int64_t C, int64_t inner, int64_t m,
                                        const PT* gamma, const PT* mean, const wide_t<DT>* coef,
                                        bool fix_gamma, bool use_batch) {
  using W = wide_t<DT>;
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    const int64_t c = (k / inner) % C;
    const W g = fix_gamma ? W(1) : static_cast<W>(gamma[c]);
    const W is = coef[3 * c];
    W v;
    if (use_batch) {
      const W mdy = coef[3 * c + 1] / static_cast<W>(m);
      const W mdx = coef[3 * c + 2] / static_cast<W>(m);
      const W xhat = (widen(x[k]) - static_cast<W>(mean[c])) * is;
      v = g * is * (widen(dy[k]) - mdy - xhat * mdx);
    } else {
      v = g * is * widen(dy[k]);
    }
    store_req(dx + k, req, v);
  }
}

// in: out_grad, data, gamma, mean, var, moving_mean, moving_var. out: data, gamma, beta grads.
template <typename DT>
void bn_backward_typed(const BatchNormParam& p, const OpContext& ctx, int axis, bool use_batch,
                       std::span<const TensorView> in, std::span<const OpReq> req,
                       std::span<const TensorView> out) {
  using W = wide_t<DT>;
  using PT = acc_t<DT>;
  const Split3 s = split3(in[1].shape, in[1].ndim, axis);
  const int64_t C = s.dim, n = in[1].size(), m = s.outer * s.inner;
  if (C == 0) return;
  cudaStream_t st = stream_of(ctx);
  const PT* mean = use_batch ? typed<const PT>(in[3]) : typed<const PT>(in[5]);
  const PT* var = use_batch ? typed<const PT>(in[4]) : typed<const PT>(in[6]);
  Scratch scratch(ctx, 3 * C * sizeof(W));
  W* coef = scratch.as<W>();
  bn_backward_reduce_kernel<DT><<<static_cast<unsigned>(C), kReduceBlock, 0, st>>>(
      typed<const DT>(in[0]), typed<const DT>(in[1]), s.outer, C, s.inner, mean, var, p.eps,
      p.fix_gamma, coef, typed<PT>(out[1]), req_code(req[1]), typed<PT>(out[2]), req_code(req[2]));
  check_launch("bn_backward_reduce_kernel", ctx);
  if (req[0] == OpReq::kNull || n == 0) return;
  bn_backward_data_kernel<DT><<<grid_for(n), kBlockSize, 0, st>>>(
      typed<const DT>(in[0]), typed<const DT>(in[1]), typed<DT>(out[0]), req_code(req[0]), n, C,
      s.inner, m, typed<const PT>(in[2]), mean, coef, p.fix_gamma, use_batch);
  check_launch("bn_backward_data_kernel", ctx);
}

void bn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<BatchNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[1].ndim);
  const bool use_batch = ctx.is_train && !p.use_global_stats;
  WEFT_CHECK(in[0].dtype() == in[1].dtype() && out[0].dtype() == in[1].dtype())
      << attrs.where() << ": out_grad, data and data_grad must share a dtype";
  check_bn_param_types(attrs, in[1].dtype(), in, 2, out);
  WEFT_CUDA_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(),
                         bn_backward_typed<DT>(p, ctx, axis, use_batch, in, req, out));
}

// ---- LayerNorm: one block per row (o, i) of x viewed as (outer, D, inner) ----------------------

constexpr int kRowBlock = 256;

template <typename DT>
__global__ void ln_forward_kernel(const DT* __restrict__ x, const DT* __restrict__ gamma,
                                  const DT* __restrict__ beta, DT* y, int req_y, DT* mean_out,
                                  int req_m, DT* std_out, int req_s, int64_t D, int64_t inner,
                                  double eps) {
  using W = wide_t<DT>;
  __shared__ W shm[32];
  const int64_t r = blockIdx.x;
  const int64_t o = r / inner, i = r - o * inner;
  const int64_t base = o * D * inner + i;
  W s = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) s += widen(x[base + d * inner]);
  const W mu = block_sum(s, shm) / static_cast<W>(D);
  W q = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const W t = widen(x[base + d * inner]) - mu;
    q += t * t;
  }
  const W sd = sqrt(block_sum(q, shm) / static_cast<W>(D) + static_cast<W>(eps));
  const W is = W(1) / sd;
  if (req_y != kReqNull) {
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const int64_t k = base + d * inner;
      store_req(y + k, req_y, (widen(x[k]) - mu) * is * widen(gamma[d]) + widen(beta[d]));
    }
  }
  if (threadIdx.x == 0) {
    store_req(mean_out + r, req_m, mu);
    store_req(std_out + r, req_s, sd);
  }
}

template <typename DT>
__global__ void ln_backward_data_kernel(const DT* __restrict__ dy, const DT* __restrict__ x,
                                        const DT* __restrict__ gamma, const DT* mean,
                                        const DT* sdev, DT* dx, int req, int64_t D, int64_t inner) {
  using W = wide_t<DT>;
  __shared__ W shm[32];
  const int64_t r = blockIdx.x;
  const int64_t o = r / inner, i = r - o * inner;
  const int64_t base = o * D * inner + i;
  const W mu = widen(mean[r]);
  const W is = W(1) / widen(sdev[r]);
  W sg = 0, sgx = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const int64_t k = base + d * inner;
    const W g = widen(dy[k]) * widen(gamma[d]);
    sg += g;
    sgx += g * (widen(x[k]) - mu) * is;
  }
  sg = block_sum(sg, shm) / static_cast<W>(D);
  sgx = block_sum(sgx, shm) / static_cast<W>(D);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const int64_t k = base + d * inner;
    const W g = widen(dy[k]) * widen(gamma[d]);
    const W xhat = (widen(x[k]) - mu) * is;
    store_req(dx + k, req, is * (g - sg - xhat * sgx));
  }
}

// Gamma/beta gradients: a block covers 32 columns d (threadIdx.x) and walks the rows in steps
// of blockDim.y, then folds the partial sums in shared memory.
template <typename DT>
__global__ void ln_backward_param_kernel(const DT* __restrict__ dy, const DT* __restrict__ x,
                                         const DT* mean, const DT* sdev, DT* dgamma, int req_g,
                                         DT* dbeta, int req_b, int64_t rows, int64_t D,
                                         int64_t inner) {
  using W = wide_t<DT>;
  __shared__ W sg_sh[16][33];
  __shared__ W sb_sh[16][33];
  const int64_t d = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  W sg = 0, sb = 0;
  if (d < D) {
    for (int64_t r = threadIdx.y; r < rows; r += blockDim.y) {
      const int64_t k = (r / inner) * D * inner + d * inner + r % inner;
      const W g = widen(dy[k]);
      sb += g;
      sg += g * (widen(x[k]) - widen(mean[r])) / widen(sdev[r]);
    }
  }
  sg_sh[threadIdx.y][threadIdx.x] = sg;
  sb_sh[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && d < D) {
    for (int t = 1; t < static_cast<int>(blockDim.y); ++t) {
      sg += sg_sh[t][threadIdx.x];
      sb += sb_sh[t][threadIdx.x];
    }
    store_req(dgamma + d, req_g, sg);
    store_req(dbeta + d, req_b, sb);
  }
}

void ln_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LayerNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[0].ndim);
  const Split3 s = split3(in[0].shape, in[0].ndim, axis);
  const int64_t rows = s.outer * s.inner;
  if (rows == 0) return;
  WEFT_CUDA_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    ln_forward_kernel<DT><<<static_cast<unsigned>(rows), kRowBlock, 0, stream_of(ctx)>>>(
        typed<const DT>(in[0]), typed<const DT>(in[1]), typed<const DT>(in[2]), typed<DT>(out[0]),
        req_code(req[0]), typed<DT>(out[1]), req_code(req[1]), typed<DT>(out[2]), req_code(req[2]),
        s.dim, s.inner, p.eps);
    check_launch("ln_forward_kernel", ctx);
  });
}

// in: out_grad, data, gamma, mean, std. out: data, gamma, beta gradients.
void ln_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LayerNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[1].ndim);
  const Split3 s = split3(in[1].shape, in[1].ndim, axis);
  const int64_t rows = s.outer * s.inner;
  cudaStream_t st = stream_of(ctx);
  WEFT_CUDA_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(), {
    if (req[0] != OpReq::kNull && rows > 0) {
      ln_backward_data_kernel<DT><<<static_cast<unsigned>(rows), kRowBlock, 0, st>>>(
          typed<const DT>(in[0]), typed<const DT>(in[1]), typed<const DT>(in[2]),
          typed<const DT>(in[3]), typed<const DT>(in[4]), typed<DT>(out[0]), req_code(req[0]),
          s.dim, s.inner);
      check_launch("ln_backward_data_kernel", ctx);
    }
    if ((req[1] != OpReq::kNull || req[2] != OpReq::kNull) && s.dim > 0) {
      const dim3 block(32, 16);
      const unsigned grid = static_cast<unsigned>((s.dim + 31) / 32);
      ln_backward_param_kernel<DT><<<grid, block, 0, st>>>(
          typed<const DT>(in[0]), typed<const DT>(in[1]), typed<const DT>(in[3]),
          typed<const DT>(in[4]), typed<DT>(out[1]), req_code(req[1]), typed<DT>(out[2]),
          req_code(req[2]), rows, s.dim, s.inner);
      check_launch("ln_backward_param_kernel", ctx);
    }
  });
}

}  // namespace

void register_norm_kernels(OpRegistry& r) {
  r.kernels("BatchNorm").set_attr(DeviceType::kCUDA, FCompute(bn_forward));
  r.kernels("_backward_BatchNorm").set_attr(DeviceType::kCUDA, FCompute(bn_backward));
  r.kernels("LayerNorm").set_attr(DeviceType::kCUDA, FCompute(ln_forward));
  r.kernels("_backward_LayerNorm").set_attr(DeviceType::kCUDA, FCompute(ln_backward));
  register_norm_loss_kernels(r);
}

}  // namespace weft::cuda
