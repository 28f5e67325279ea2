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

// Per channel c of x viewed as (outer, C, inner): mean and biased variance, in double.
template <typename DT>
__global__ void bn_stats_kernel(const DT* __restrict__ x, int64_t outer, int64_t C, int64_t inner,
                                double* __restrict__ mean, double* __restrict__ var) {
  __shared__ double shm[32];
  const int64_t c = blockIdx.x;
  const int64_t m = outer * inner;
  double s = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t o = j / inner, i = j - o * inner;
    s += static_cast<double>(x[(o * C + c) * inner + i]);
  }
  const double mu = block_sum(s, shm) / static_cast<double>(m);
  double q = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t o = j / inner, i = j - o * inner;
    const double d = static_cast<double>(x[(o * C + c) * inner + i]) - mu;
    q += d * d;
  }
  q = block_sum(q, shm);
  if (threadIdx.x == 0) {
    mean[c] = mu;
    var[c] = q / static_cast<double>(m);
  }
}

// Per channel: scale/shift for the elementwise pass, the mean/var outputs, the moving update.
template <typename DT>
__global__ void bn_finalize_kernel(int64_t C, const double* bmean, const double* bvar,
                                   const DT* gamma, const DT* beta, DT* moving_mean, DT* moving_var,
                                   DT* mean_out, int req_mean, DT* var_out, int req_var, DT* scale,
                                   DT* shift, bool use_batch, bool fix_gamma, double eps,
                                   double momentum) {
  WEFT_CUDA_KERNEL_LOOP(c, C) {
    const double mu = use_batch ? bmean[c] : static_cast<double>(moving_mean[c]);
    const double v = use_batch ? bvar[c] : static_cast<double>(moving_var[c]);
    const double g = fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    const double is = 1.0 / sqrt(v + eps);
    scale[c] = static_cast<DT>(g * is);
    shift[c] = static_cast<DT>(static_cast<double>(beta[c]) - mu * g * is);
    store_req(mean_out + c, req_mean, mu);
    store_req(var_out + c, req_var, v);
    if (use_batch) {
      moving_mean[c] = static_cast<DT>(moving_mean[c] * momentum + mu * (1 - momentum));
      moving_var[c] = static_cast<DT>(moving_var[c] * momentum + v * (1 - momentum));
    }
  }
}

template <typename DT, int kReq>
__global__ void bn_apply_kernel(const DT* __restrict__ x, DT* y, int64_t n, int64_t C,
                                int64_t inner, const DT* __restrict__ scale,
                                const DT* __restrict__ shift) {
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    const int64_t c = (k / inner) % C;
    const DT v = x[k] * scale[c] + shift[c];
    if constexpr (kReq == kReqAdd) {
      y[k] = y[k] + v;
    } else {
      y[k] = v;
    }
  }
}

template <typename DT>
void bn_forward_typed(const BatchNormParam& p, const OpContext& ctx, int axis, bool use_batch,
                      std::span<const TensorView> in, std::span<const OpReq> req,
                      std::span<const TensorView> out) {
  const Split3 s = split3(in[0].shape, in[0].ndim, axis);
  const int64_t C = s.dim, n = in[0].size();
  if (C == 0) return;
  cudaStream_t st = stream_of(ctx);
  // Scratch: batch mean, var (double), then scale, shift (DT).
  Scratch scratch(ctx, C * (2 * sizeof(double) + 2 * sizeof(DT)));
  double* bmean = scratch.as<double>();
  double* bvar = bmean + C;
  DT* scale = reinterpret_cast<DT*>(bvar + C);
  DT* shift = scale + C;
  if (use_batch) {
    // An empty batch gives 0/0 = NaN statistics, as on the CPU.
    bn_stats_kernel<DT><<<static_cast<unsigned>(C), kReduceBlock, 0, st>>>(
        typed<const DT>(in[0]), s.outer, C, s.inner, bmean, bvar);
    check_launch("bn_stats_kernel", ctx);
  }
  bn_finalize_kernel<DT><<<grid_for(C), kBlockSize, 0, st>>>(
      C, bmean, bvar, typed<const DT>(in[1]), typed<const DT>(in[2]), typed<DT>(in[3]),
      typed<DT>(in[4]), typed<DT>(out[1]), req_code(req[1]), typed<DT>(out[2]), req_code(req[2]),
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
  WEFT_CUDA_F32_F64_SWITCH(in[0].dtype(), DT, attrs.where(),
                           bn_forward_typed<DT>(p, ctx, axis, use_batch, in, req, out));
}

// Per channel: sum(dy), sum(dy * xhat) and invstd, and the gamma/beta gradients.
template <typename DT>
__global__ void bn_backward_reduce_kernel(const DT* __restrict__ dy, const DT* __restrict__ x,
                                          int64_t outer, int64_t C, int64_t inner, const DT* mean,
                                          const DT* var, double eps, bool fix_gamma, double* coef,
                                          DT* dgamma, int req_g, DT* dbeta, int req_b) {
  __shared__ double shm[32];
  const int64_t c = blockIdx.x;
  const int64_t m = outer * inner;
  const double mu = static_cast<double>(mean[c]);
  const double is = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
  double sd = 0, sdx = 0;
  for (int64_t j = threadIdx.x; j < m; j += blockDim.x) {
    const int64_t o = j / inner, i = j - o * inner;
    const int64_t k = (o * C + c) * inner + i;
    const double g = static_cast<double>(dy[k]);
    sd += g;
    sdx += g * (static_cast<double>(x[k]) - mu);
  }
  sd = block_sum(sd, shm);
  sdx = block_sum(sdx, shm) * is;
  if (threadIdx.x == 0) {
    coef[3 * c] = is;
    coef[3 * c + 1] = sd;
    coef[3 * c + 2] = sdx;
    store_req(dgamma + c, req_g, fix_gamma ? 0.0 : sdx);
    store_req(dbeta + c, req_b, sd);
  }
}

template <typename DT>
__global__ void bn_backward_data_kernel(const DT* __restrict__ dy, const DT* __restrict__ x, DT* dx,
                                        int req, int64_t n, int64_t C, int64_t inner, int64_t m,
                                        const DT* gamma, const DT* mean, const double* coef,
                                        bool fix_gamma, bool use_batch) {
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    const int64_t c = (k / inner) % C;
    const double g = fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    const double is = coef[3 * c];
    double v;
    if (use_batch) {
      const double mdy = coef[3 * c + 1] / static_cast<double>(m);
      const double mdx = coef[3 * c + 2] / static_cast<double>(m);
      const double xhat = (static_cast<double>(x[k]) - static_cast<double>(mean[c])) * is;
      v = g * is * (static_cast<double>(dy[k]) - mdy - xhat * mdx);
    } else {
      v = g * is * static_cast<double>(dy[k]);
    }
    store_req(dx + k, req, v);
  }
}

// in: out_grad, data, gamma, mean, var, moving_mean, moving_var. out: data, gamma, beta grads.
template <typename DT>
void bn_backward_typed(const BatchNormParam& p, const OpContext& ctx, int axis, bool use_batch,
                       std::span<const TensorView> in, std::span<const OpReq> req,
                       std::span<const TensorView> out) {
  const Split3 s = split3(in[1].shape, in[1].ndim, axis);
  const int64_t C = s.dim, n = in[1].size(), m = s.outer * s.inner;
  if (C == 0) return;
  cudaStream_t st = stream_of(ctx);
  const DT* mean = use_batch ? typed<const DT>(in[3]) : typed<const DT>(in[5]);
  const DT* var = use_batch ? typed<const DT>(in[4]) : typed<const DT>(in[6]);
  Scratch scratch(ctx, 3 * C * sizeof(double));
  double* coef = scratch.as<double>();
  bn_backward_reduce_kernel<DT><<<static_cast<unsigned>(C), kReduceBlock, 0, st>>>(
      typed<const DT>(in[0]), typed<const DT>(in[1]), s.outer, C, s.inner, mean, var, p.eps,
      p.fix_gamma, coef, typed<DT>(out[1]), req_code(req[1]), typed<DT>(out[2]), req_code(req[2]));
  check_launch("bn_backward_reduce_kernel", ctx);
  if (req[0] == OpReq::kNull || n == 0) return;
  bn_backward_data_kernel<DT><<<grid_for(n), kBlockSize, 0, st>>>(
      typed<const DT>(in[0]), typed<const DT>(in[1]), typed<DT>(out[0]), req_code(req[0]), n, C,
      s.inner, m, typed<const DT>(in[2]), mean, coef, p.fix_gamma, use_batch);
  check_launch("bn_backward_data_kernel", ctx);
}

void bn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<BatchNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[1].ndim);
  const bool use_batch = ctx.is_train && !p.use_global_stats;
  WEFT_CUDA_F32_F64_SWITCH(in[1].dtype(), DT, attrs.where(),
                           bn_backward_typed<DT>(p, ctx, axis, use_batch, in, req, out));
}

// ---- LayerNorm: one block per row (o, i) of x viewed as (outer, D, inner) ----------------------

constexpr int kRowBlock = 256;

template <typename DT>
__global__ void ln_forward_kernel(const DT* __restrict__ x, const DT* __restrict__ gamma,
                                  const DT* __restrict__ beta, DT* y, int req_y, DT* mean_out,
                                  int req_m, DT* std_out, int req_s, int64_t D, int64_t inner,
                                  double eps) {
  __shared__ double shm[32];
  const int64_t r = blockIdx.x;
  const int64_t o = r / inner, i = r - o * inner;
  const int64_t base = o * D * inner + i;
  double s = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
    s += static_cast<double>(x[base + d * inner]);
  const double mu = block_sum(s, shm) / static_cast<double>(D);
  double q = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const double t = static_cast<double>(x[base + d * inner]) - mu;
    q += t * t;
  }
  const double sd = sqrt(block_sum(q, shm) / static_cast<double>(D) + eps);
  const double is = 1.0 / sd;
  if (req_y != kReqNull) {
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const int64_t k = base + d * inner;
      store_req(y + k, req_y,
                (static_cast<double>(x[k]) - mu) * is * static_cast<double>(gamma[d]) +
                    static_cast<double>(beta[d]));
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
  __shared__ double shm[32];
  const int64_t r = blockIdx.x;
  const int64_t o = r / inner, i = r - o * inner;
  const int64_t base = o * D * inner + i;
  const double mu = static_cast<double>(mean[r]);
  const double is = 1.0 / static_cast<double>(sdev[r]);
  double sg = 0, sgx = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const int64_t k = base + d * inner;
    const double g = static_cast<double>(dy[k]) * static_cast<double>(gamma[d]);
    sg += g;
    sgx += g * (static_cast<double>(x[k]) - mu) * is;
  }
  sg = block_sum(sg, shm) / static_cast<double>(D);
  sgx = block_sum(sgx, shm) / static_cast<double>(D);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const int64_t k = base + d * inner;
    const double g = static_cast<double>(dy[k]) * static_cast<double>(gamma[d]);
    const double xhat = (static_cast<double>(x[k]) - mu) * is;
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
  __shared__ double sg_sh[16][33];
  __shared__ double sb_sh[16][33];
  const int64_t d = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  double sg = 0, sb = 0;
  if (d < D) {
    for (int64_t r = threadIdx.y; r < rows; r += blockDim.y) {
      const int64_t k = (r / inner) * D * inner + d * inner + r % inner;
      const double g = static_cast<double>(dy[k]);
      sb += g;
      sg += g * (static_cast<double>(x[k]) - static_cast<double>(mean[r])) /
            static_cast<double>(sdev[r]);
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
  WEFT_CUDA_F32_F64_SWITCH(in[0].dtype(), DT, attrs.where(), {
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
  WEFT_CUDA_F32_F64_SWITCH(in[1].dtype(), DT, attrs.where(), {
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
  r.register_op("BatchNorm").set_attr(DeviceType::kCUDA, FCompute(bn_forward), "cuda");
  r.register_op("_backward_BatchNorm").set_attr(DeviceType::kCUDA, FCompute(bn_backward), "cuda");
  r.register_op("LayerNorm").set_attr(DeviceType::kCUDA, FCompute(ln_forward), "cuda");
  r.register_op("_backward_LayerNorm").set_attr(DeviceType::kCUDA, FCompute(ln_backward), "cuda");
  register_norm_loss_kernels(r);
}

}  // namespace weft::cuda
