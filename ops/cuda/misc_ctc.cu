// CUDA kernels of _contrib_CTCLoss and _backward_CTCLoss. Semantics: ops/cpu/ctc_loss.cc.
//
// Note [CUDA CTC loss]
// One block per sequence runs the CPU's computation step for step, in double and log space: the
// log-softmax over the alphabet at each valid time step, the alpha recursion forward and the
// beta recursion backward (threads over the extended-label states s, a barrier per time step),
// then the gradient softmax - occupancy / p. The occupancy of a class sums alpha + beta over the
// states that emit it; one thread per distinct class of the label sequence (and one for blank)
// does that sum, so the work per time step grows with the label length, not with the alphabet.
// Labels and lengths are first converted to int64 by small kernels, which keeps the main kernel
// templated on the data type only. A label outside [0, alphabet) or equal to blank (an error on
// the CPU, which can check it without waiting for the device) gives a NaN loss and a zero gradient.
#include <limits>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/norm_util.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/ctc_params.h"

namespace weft::cuda {
namespace {

using detail::BlankLabel;
using detail::CTCLossParam;

constexpr int kCtcBlock = 256;

template <typename T>
__global__ void to_i64_kernel(const T* __restrict__ src, int64_t* dst, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(k, n) dst[k] = static_cast<int64_t>(to_acc(src[k]));
}

void convert_to_i64(const OpContext& ctx, const TensorView& v, int64_t* dst) {
  const int64_t n = v.size();
  if (n == 0) return;
  WEFT_CUDA_ALL_SWITCH(v.dtype(), T, "CTCLoss labels/lengths", {
    to_i64_kernel<T><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(typed<const T>(v), dst, n);
    check_launch("to_i64_kernel", ctx);
  });
}

__device__ __forceinline__ double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double m = fmax(a, b);
  return m + log1p(exp(-fabs(a - b)));
}

struct CtcArgs {
  int64_t T, N, A, L;
  int64_t blank;
  int64_t pad;
  const int64_t* labels;  // (N, L)
  const int64_t* tlen;    // (N,) or null: T
  const int64_t* llen;    // (N,) or null: up to the first pad
  double* lp;             // (T, N, A)
  double* alpha;          // (N, T, S)
  double* beta;           // (N, T, S)
  int req_loss, req_grad;
};

template <typename DT>
__global__ void ctc_kernel(const DT* __restrict__ x, DT* loss, DT* grad, CtcArgs a) {
  __shared__ double shm[32];
  __shared__ int64_t sh_tn, sh_ln;
  __shared__ int sh_bad;
  const int64_t n = blockIdx.x;
  const int64_t T = a.T, N = a.N, A = a.A, L = a.L, S = 2 * L + 1;
  const int64_t* lab = a.labels + n * L;
  if (threadIdx.x == 0) {
    int64_t tn = T;
    if (a.tlen) tn = min(max(a.tlen[n], int64_t{0}), T);
    int64_t ln = 0;
    if (a.llen) {
      ln = min(max(a.llen[n], int64_t{0}), L);
    } else {
      while (ln < L && lab[ln] != a.pad) ++ln;
    }
    int bad = 0;
    for (int64_t l = 0; l < ln; ++l) bad |= lab[l] < 0 || lab[l] >= A || lab[l] == a.blank;
    sh_tn = tn;
    sh_ln = ln;
    sh_bad = bad;
  }
  __syncthreads();
  const int64_t Tn = sh_tn, Ln = sh_ln, Sn = 2 * Ln + 1;
  const bool want_grad = a.req_grad != kReqNull;
  if (sh_bad) {
    if (threadIdx.x == 0) store_req(loss + n, a.req_loss, NAN);
    if (want_grad) {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t c = threadIdx.x; c < A; c += blockDim.x)
          store_req(grad + (t * N + n) * A + c, a.req_grad, 0.0);
    }
    return;
  }
  auto ext = [&](int64_t s) { return (s & 1) == 0 ? a.blank : lab[s >> 1]; };
  for (int64_t t = 0; t < Tn; ++t) {
    const DT* row = x + (t * N + n) * A;
    double* lr = a.lp + (t * N + n) * A;
    double mx = -INFINITY;
    for (int64_t c = threadIdx.x; c < A; c += blockDim.x)
      mx = fmax(mx, static_cast<double>(row[c]));
    mx = block_max(mx, shm);
    double sum = 0;
    for (int64_t c = threadIdx.x; c < A; c += blockDim.x)
      sum += exp(static_cast<double>(row[c]) - mx);
    const double lse = mx + log(block_sum(sum, shm));
    for (int64_t c = threadIdx.x; c < A; c += blockDim.x) lr[c] = static_cast<double>(row[c]) - lse;
  }
  __syncthreads();
  auto LP = [&](int64_t t, int64_t c) { return a.lp[(t * N + n) * A + c]; };
  double* alpha = a.alpha + n * T * S;
  double* beta = a.beta + n * T * S;
  double logp = Ln == 0 ? 0.0 : -INFINITY;
  if (Tn > 0) {
    for (int64_t s = threadIdx.x; s < Sn; s += blockDim.x) {
      alpha[s] = s == 0 ? LP(0, a.blank) : (s == 1 ? LP(0, ext(1)) : -INFINITY);
    }
    __syncthreads();
    for (int64_t t = 1; t < Tn; ++t) {
      const double* prev = alpha + (t - 1) * S;
      double* cur = alpha + t * S;
      for (int64_t s = threadIdx.x; s < Sn; s += blockDim.x) {
        double v = prev[s];
        if (s >= 1) v = log_add(v, prev[s - 1]);
        if (s >= 2 && ext(s) != a.blank && ext(s) != ext(s - 2)) v = log_add(v, prev[s - 2]);
        cur[s] = v + LP(t, ext(s));
      }
      __syncthreads();
    }
    const double* last = alpha + (Tn - 1) * S;
    logp = Sn > 1 ? log_add(last[Sn - 1], last[Sn - 2]) : last[0];
  }
  if (threadIdx.x == 0) store_req(loss + n, a.req_loss, -logp);
  if (!want_grad) return;
  const bool feasible = Tn > 0 && logp != -INFINITY;
  // Steps past the sequence's length (all of them when infeasible) get a zero gradient.
  for (int64_t t = feasible ? Tn : 0; t < T; ++t)
    for (int64_t c = threadIdx.x; c < A; c += blockDim.x)
      store_req(grad + (t * N + n) * A + c, a.req_grad, 0.0);
  if (!feasible) return;
  for (int64_t s = threadIdx.x; s < Sn; s += blockDim.x)
    beta[(Tn - 1) * S + s] = s >= Sn - 2 ? 0.0 : -INFINITY;
  __syncthreads();
  for (int64_t t = Tn - 2; t >= 0; --t) {
    const double* nxt = beta + (t + 1) * S;
    double* cur = beta + t * S;
    for (int64_t s = threadIdx.x; s < Sn; s += blockDim.x) {
      double v = nxt[s] + LP(t + 1, ext(s));
      if (s + 1 < Sn) v = log_add(v, nxt[s + 1] + LP(t + 1, ext(s + 1)));
      if (s + 2 < Sn && ext(s + 2) != a.blank && ext(s + 2) != ext(s))
        v = log_add(v, nxt[s + 2] + LP(t + 1, ext(s + 2)));
      cur[s] = v;
    }
    __syncthreads();
  }
  for (int64_t t = 0; t < Tn; ++t) {
    // The log-probability row turns into the gradient row, in double, before the one store.
    double* row = a.lp + (t * N + n) * A;
    for (int64_t c = threadIdx.x; c < A; c += blockDim.x) row[c] = exp(row[c]);
    __syncthreads();
    // j = 0: blank (the even states); j >= 1: the class of state 2j-1 at its first occurrence.
    for (int64_t j = threadIdx.x; j <= Ln; j += blockDim.x) {
      int64_t cls = a.blank;
      if (j > 0) {
        cls = lab[j - 1];
        bool first = true;
        for (int64_t q = 0; q + 1 < j && first; ++q) first = lab[q] != cls;
        if (!first) continue;
      }
      double occ = -INFINITY;
      for (int64_t s = j > 0 ? 1 : 0; s < Sn; s += 2) {
        if (ext(s) == cls) occ = log_add(occ, alpha[t * S + s] + beta[t * S + s]);
      }
      row[cls] -= exp(occ - logp);
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < A; c += blockDim.x)
      store_req(grad + (t * N + n) * A + c, a.req_grad, row[c]);
  }
}

void ctc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<CTCLossParam>();
  const int64_t T = in[0].shape[0], N = in[0].shape[1], A = in[0].shape[2], L = in[1].shape[1];
  const int64_t S = 2 * L + 1;
  if (N == 0) return;
  const size_t doubles = static_cast<size_t>(T * N * A + 2 * N * T * S);
  const size_t ints = static_cast<size_t>(N * L + 2 * N);
  // One block: two Scratch objects could both be handed the op's workspace.
  Scratch work(ctx, doubles * sizeof(double) + ints * sizeof(int64_t));
  CtcArgs a{};
  a.T = T;
  a.N = N;
  a.A = A;
  a.L = L;
  a.blank = p.blank_label == BlankLabel::kFirst ? 0 : A - 1;
  a.pad = p.blank_label == BlankLabel::kFirst ? 0 : -1;
  a.lp = work.as<double>();
  a.alpha = a.lp + T * N * A;
  a.beta = a.alpha + N * T * S;
  int64_t* ibuf = reinterpret_cast<int64_t*>(a.lp + doubles);
  a.labels = ibuf;
  convert_to_i64(ctx, in[1], ibuf);
  int next = 2;
  if (p.use_data_lengths) {
    a.tlen = ibuf + N * L;
    convert_to_i64(ctx, in[next++], ibuf + N * L);
  }
  if (p.use_label_lengths) {
    a.llen = ibuf + N * L + N;
    convert_to_i64(ctx, in[next++], ibuf + N * L + N);
  }
  a.req_loss = req_code(req[0]);
  a.req_grad = req_code(req[1]);
  WEFT_CUDA_F32_F64_SWITCH(in[0].dtype(), DT, attrs.where(), {
    ctc_kernel<DT><<<static_cast<unsigned>(N), kCtcBlock, 0, stream_of(ctx)>>>(
        typed<const DT>(in[0]), typed<DT>(out[0]), typed<DT>(out[1]), a);
    check_launch("ctc_kernel", ctx);
  });
}

template <typename DT>
__global__ void ctc_backward_kernel(const DT* __restrict__ dl, const DT* __restrict__ g, DT* dx,
                                    int req, int64_t n, int64_t N, int64_t A) {
  WEFT_CUDA_KERNEL_LOOP(k, n) store_req(dx + k, req, g[k] * dl[(k / A) % N]);
}

// in: loss gradient (N,), hidden grad (T, N, A). out: data gradient.
void ctc_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t n = in[1].size();
  if (req[0] == OpReq::kNull || n == 0) return;
  WEFT_CUDA_F32_F64_SWITCH(in[1].dtype(), DT, attrs.where(), {
    ctc_backward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(
        typed<const DT>(in[0]), typed<const DT>(in[1]), typed<DT>(out[0]), req_code(req[0]), n,
        in[1].shape[1], in[1].shape[2]);
    check_launch("ctc_backward_kernel", ctx);
  });
}

}  // namespace

void register_misc_ctc_kernels(OpRegistry& r) {
  r.kernels("_contrib_CTCLoss").set_attr(DeviceType::kCUDA, FCompute(ctc_forward));
  r.kernels("_backward_CTCLoss").set_attr(DeviceType::kCUDA, FCompute(ctc_backward));
}

}  // namespace weft::cuda
