// The CPU kernels of the connectionist temporal classification loss (_contrib_CTCLoss; definitions
// in ops/defs/ctc_loss.cc): the alpha-beta recursion in log space over the softmax of the
// activations; the forward pass also yields the gradient.
#include <limits>

#include "ops/cpu/norm_kernels.h"
#include "ops/defs/ctc_params.h"

namespace weft::cpu {
namespace {

using namespace weft::detail;  // the param structs
using norm::store;

inline double log_add(double a, double b) {
  if (a == -std::numeric_limits<double>::infinity()) return b;
  if (b == -std::numeric_limits<double>::infinity()) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

template <typename DT>
void ctc_forward_typed(const OpAttrs& attrs, const CTCLossParam& p, const OpContext& ctx,
                       std::span<const TensorView> in, std::span<const OpReq> req,
                       std::span<const TensorView> out) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const int64_t T = in[0].shape[0], N = in[0].shape[1], A = in[0].shape[2], L = in[1].shape[1];
  const int64_t S = 2 * L + 1;
  WEFT_ICHECK(ctx.workspace_bytes >= ctc_workspace_doubles(T, N, A, L) * sizeof(double))
      << attrs.where() << ": workspace too small";
  double* lp = static_cast<double*>(ctx.workspace);
  double* alpha_all = lp + T * N * A;
  double* beta_all = alpha_all + N * T * S;
  const DT* x = in[0].ptr<DT>();
  const int64_t blank = p.blank_label == BlankLabel::kFirst ? 0 : A - 1;
  const double pad = p.blank_label == BlankLabel::kFirst ? 0.0 : -1.0;
  // Lengths and labels (small: N and N*L values).
  std::vector<int64_t> tlen(N, T), llen(N, 0);
  std::vector<int64_t> labels(static_cast<size_t>(N * L));
  for (int64_t k = 0; k < N * L; ++k)
    labels[k] = static_cast<int64_t>(norm::read_as_double(in[1], k));
  int next = 2;
  if (p.use_data_lengths) {
    for (int64_t n = 0; n < N; ++n)
      tlen[n] = std::clamp<int64_t>(static_cast<int64_t>(norm::read_as_double(in[next], n)), 0, T);
    ++next;
  }
  for (int64_t n = 0; n < N; ++n) {
    if (p.use_label_lengths) {
      llen[n] = std::clamp<int64_t>(static_cast<int64_t>(norm::read_as_double(in[next], n)), 0, L);
    } else {
      int64_t l = 0;
      while (l < L && static_cast<double>(labels[n * L + l]) != pad) ++l;
      llen[n] = l;
    }
    for (int64_t l = 0; l < llen[n]; ++l) {
      const int64_t c = labels[n * L + l];
      WEFT_CHECK(c >= 0 && c < A && c != blank)
          << attrs.where() << ": label " << c << " of sequence " << n
          << " is not a valid non-blank class in [0, " << A << ")";
    }
  }
  const bool want_grad = req[1] != OpReq::kNull;
  DT* grad = out[1].ptr<DT>();
  parallel_for(N, 1, ctx.num_threads, [&](int64_t n0, int64_t n1) {
    std::vector<double> occ(static_cast<size_t>(A));
    for (int64_t n = n0; n < n1; ++n) {
      const int64_t Tn = tlen[n], Ln = llen[n], Sn = 2 * Ln + 1;
      auto ext = [&](int64_t s) { return s % 2 == 0 ? blank : labels[n * L + s / 2]; };
      // log-softmax over the alphabet at each valid time step
      for (int64_t t = 0; t < Tn; ++t) {
        const DT* row = x + (t * N + n) * A;
        double* lr = lp + (t * N + n) * A;
        double mx = kNegInf;
        for (int64_t a = 0; a < A; ++a) mx = std::max(mx, static_cast<double>(row[a]));
        double sum = 0;
        for (int64_t a = 0; a < A; ++a) sum += std::exp(row[a] - mx);
        const double lse = mx + std::log(sum);
        for (int64_t a = 0; a < A; ++a) lr[a] = row[a] - lse;
      }
      auto LP = [&](int64_t t, int64_t c) { return lp[(t * N + n) * A + c]; };
      double* alpha = alpha_all + n * T * S;
      double* beta = beta_all + n * T * S;
      double logp = Ln == 0 ? 0.0 : kNegInf;
      if (Tn > 0) {
        for (int64_t s = 0; s < Sn; ++s) alpha[s] = kNegInf;
        alpha[0] = LP(0, blank);
        if (Sn > 1) alpha[1] = LP(0, ext(1));
        for (int64_t t = 1; t < Tn; ++t) {
          const double* prev = alpha + (t - 1) * S;
          double* cur = alpha + t * S;
          for (int64_t s = 0; s < Sn; ++s) {
            double v = prev[s];
            if (s >= 1) v = log_add(v, prev[s - 1]);
            if (s >= 2 && ext(s) != blank && ext(s) != ext(s - 2)) v = log_add(v, prev[s - 2]);
            cur[s] = v + LP(t, ext(s));
          }
        }
        const double* last = alpha + (Tn - 1) * S;
        logp = Sn > 1 ? log_add(last[Sn - 1], last[Sn - 2]) : last[0];
      }
      store(out[0].ptr<DT>() + n, req[0], -logp);
      if (!want_grad) continue;
      for (int64_t t = 0; t < T; ++t) {
        DT* g = grad + (t * N + n) * A;
        for (int64_t a = 0; a < A; ++a) store(g + a, req[1], 0.0);
      }
      if (Tn == 0 || logp == kNegInf) continue;  // infeasible: no gradient
      // beta[t][s]: log-probability of emitting the rest after time t, given state s at time t.
      for (int64_t s = 0; s < Sn; ++s) beta[(Tn - 1) * S + s] = kNegInf;
      beta[(Tn - 1) * S + Sn - 1] = 0;
      if (Sn > 1) beta[(Tn - 1) * S + Sn - 2] = 0;
      for (int64_t t = Tn - 2; t >= 0; --t) {
        const double* nxt = beta + (t + 1) * S;
        double* cur = beta + t * S;
        for (int64_t s = 0; s < Sn; ++s) {
          double v = nxt[s] + LP(t + 1, ext(s));
          if (s + 1 < Sn) v = log_add(v, nxt[s + 1] + LP(t + 1, ext(s + 1)));
          if (s + 2 < Sn && ext(s + 2) != blank && ext(s + 2) != ext(s))
            v = log_add(v, nxt[s + 2] + LP(t + 1, ext(s + 2)));
          cur[s] = v;
        }
      }
      for (int64_t t = 0; t < Tn; ++t) {
        std::fill(occ.begin(), occ.end(), kNegInf);
        for (int64_t s = 0; s < Sn; ++s) {
          const int64_t c = ext(s);
          occ[c] = log_add(occ[c], alpha[t * S + s] + beta[t * S + s]);
        }
        DT* g = grad + (t * N + n) * A;
        for (int64_t a = 0; a < A; ++a) {
          const double v = std::exp(LP(t, a)) - std::exp(occ[a] - logp);
          if (req[1] == OpReq::kAdd) {
            g[a] = static_cast<DT>(g[a] + v);
          } else {
            g[a] = static_cast<DT>(v);
          }
        }
      }
    }
  });
}

void ctc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<CTCLossParam>();
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    ctc_forward_typed<DT>(attrs, p, ctx, in, req, out));
}

// in: loss gradient (N,), hidden grad (T, N, A). out: data gradient = grad * dloss[n].
void ctc_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(), {
    const DT* dl = in[0].ptr<DT>();
    const DT* g = in[1].ptr<DT>();
    DT* dx = out[0].ptr<DT>();
    const int64_t T = in[1].shape[0], N = in[1].shape[1], A = in[1].shape[2];
    parallel_for(T * N, norm::row_grain(A), ctx.num_threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const DT s = dl[r % N];
        for (int64_t a = 0; a < A; ++a) store(dx + r * A + a, req[0], g[r * A + a] * s);
      }
    });
  });
}

}  // namespace

void register_ctc_loss_kernels(OpRegistry& r) {
  r.kernels("_contrib_CTCLoss").set_attr<FCompute>(DeviceType::kCPU, ctc_forward);
  r.kernels("_backward_CTCLoss").set_attr<FCompute>(DeviceType::kCPU, ctc_backward);
}

}  // namespace weft::cpu
