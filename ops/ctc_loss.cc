// Connectionist temporal classification loss (_contrib_CTCLoss): the alpha-beta recursion in log
// space over the softmax of the activations; the forward pass also yields the gradient.
#include <limits>

#include "ops/cpu/norm_kernels.h"
#include "ops/defs/ctc_params.h"
#include "ops/defs/norm_common.h"

namespace weft::detail {
namespace {

using norm::store;

std::vector<std::string> ctc_input_names(const OpAttrs& a) {
  const auto& p = a.params<CTCLossParam>();
  std::vector<std::string> names{"data", "label"};
  if (p.use_data_lengths) names.push_back("data_lengths");
  if (p.use_label_lengths) names.push_back("label_lengths");
  return names;
}

bool ctc_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<CTCLossParam>();
  if (out[1].rank_known()) assign_input_shape(attrs, in, 0, out[1]);
  if (in[0].rank_known()) {
    WEFT_CHECK_AS(ShapeError, in[0].ndim() == 3)
        << attrs.where() << ": data must be (T, N, alphabet), got " << in[0].to_string();
  }
  if (in[1].rank_known()) {
    WEFT_CHECK_AS(ShapeError, in[1].ndim() == 2)
        << attrs.where() << ": label must be (N, L), got " << in[1].to_string();
  }
  // N is shared by data[1], label[0], the lengths and the loss.
  Shape n{-1};
  if (in[0].rank_known()) merge_shape(&n, Shape{in[0][1]});
  if (in[1].rank_known()) merge_shape(&n, Shape{in[1][0]});
  for (int i = 2; i < p.num_inputs(); ++i) {
    assign_input_shape(attrs, in, i, n);
    n = in[i];
  }
  assign_output_shape(attrs, out, 0, n);
  n = out[0];
  if (in[0].rank_known()) {
    assign_input_shape(attrs, in, 0, Shape{-1, n[0], -1});
    assign_output_shape(attrs, out, 1, in[0]);
  }
  if (in[1].rank_known()) assign_input_shape(attrs, in, 1, Shape{n[0], -1});
  for (int i = 2; i < p.num_inputs(); ++i) assign_input_shape(attrs, in, i, n);
  return all_known(in) && all_known(out);
}

bool ctc_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[0]);
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[1]);
  norm::check_float_type(attrs, in[0], "CTCLoss data");
  assign_output_type(attrs, out, 0, in[0]);
  assign_output_type(attrs, out, 1, in[0]);
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] == DType::kUnknown) in[i] = in[0];
  return in[0] != DType::kUnknown;
}

// Workspace: log-probabilities (T*N*A) and alpha, beta (N*T*S each), as doubles.
size_t ctc_workspace_doubles(int64_t T, int64_t N, int64_t A, int64_t L) {
  const int64_t S = 2 * L + 1;
  return static_cast<size_t>(T * N * A + 2 * N * T * S);
}

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

bool ctc_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                              std::vector<Shape>& out) {
  if (!in[1].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 1, out[0]);
  if (!in[1].rank_known()) return false;
  WEFT_CHECK_AS(ShapeError, in[1].ndim() == 3)
      << attrs.where() << ": grad must be (T, N, alphabet)";
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 0, Shape{in[1][1]});
  return all_known(in) && all_known(out);
}

}  // namespace

void register_ctc_loss_ops(OpRegistry& r) {
  r.register_op("_contrib_CTCLoss")
      .describe(
          "CTC loss of data (T, N, alphabet) of un-normalised activations (softmax taken over the "
          "alphabet) against label (N, L): loss (N,) = -log p(label | data). blank_label=first: "
          "channel "
          "0 is blank and label value 0 pads; last: the last channel is blank and -1 pads. "
          "Optional "
          "data_lengths / label_lengths (N,). A hidden second output holds d loss / d data, "
          "computed in "
          "the forward pass (zero for infeasible sequences, whose loss is inf).")
      .set_params<CTCLossParam>()
      .set_attr<FNumInputs>([](const OpAttrs& a) { return a.params<CTCLossParam>().num_inputs(); })
      .set_attr<FListInputNames>(ctc_input_names)
      .set_output_names({"loss", "grad"})
      .set_attr<FNumVisibleOutputs>([](const OpAttrs&) { return 1; })
      .set_attr<FInferShape>(ctc_infer_shape)
      .set_attr<FInferType>(ctc_infer_type)
      .set_attr<FResourceRequest>(
          [](const OpAttrs&, const std::vector<Shape>& in, const std::vector<Shape>&) {
            const size_t n = ctc_workspace_doubles(in[0][0], in[0][1], in[0][2], in[1][1]);
            return std::vector<ResourceRequest>{
                {ResourceRequest::Kind::kWorkspace, n * sizeof(double)}};
          })
      .set_attr<FCompute>(DeviceType::kCPU, ctc_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        std::vector<GradEntry> g{
            b.emit_with_forward_attrs("_backward_CTCLoss", {b.out_grad(0), b.output(1)}).at(0)};
        const int n = b.attrs().params<CTCLossParam>().num_inputs();
        for (int i = 1; i < n; ++i) g.push_back(GradBuilder::none());
        return g;
      });
  r.add_alias("CTCLoss", "_contrib_CTCLoss");
  r.add_alias("ctc_loss", "_contrib_CTCLoss");
  r.add_alias("_contrib_ctc_loss", "_contrib_CTCLoss");
  r.register_op("_backward_CTCLoss")
      .describe(
          "Gradient of CTCLoss: the hidden gradient scaled by the loss gradient of each sequence.")
      .set_params<CTCLossParam>()
      .set_input_names({"loss_grad", "grad"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(ctc_backward_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, ctc_backward);
}

}  // namespace weft::detail
