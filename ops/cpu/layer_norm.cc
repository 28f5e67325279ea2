// The CPU kernels of LayerNorm and LRN with their backward ops (definitions in
// ops/defs/layer_norm.cc). LRN's float32 4-D forward uses oneDNN.
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/norm_kernels.h"
#include "ops/defs/norm_params.h"

namespace weft::cpu {
namespace {

using namespace weft::detail;  // the param structs
using norm::AxisSplit;
using norm::split_at;
using norm::store;

// ---- LayerNorm ----------------------------------------------------------------------------------

template <typename DT>
void ln_forward_typed(const LayerNormParam& p, const OpContext& ctx, int axis,
                      std::span<const TensorView> in, std::span<const OpReq> req,
                      std::span<const TensorView> out) {
  const AxisSplit s = split_at(in[0], axis);
  const DT* x = in[0].ptr<DT>();
  const DT* gamma = in[1].ptr<DT>();
  const DT* beta = in[2].ptr<DT>();
  DT* y = out[0].ptr<DT>();
  DT* mean_out = out[1].ptr<DT>();
  DT* std_out = out[2].ptr<DT>();
  const int64_t D = s.dim, inner = s.inner;
  parallel_for(s.outer * inner, norm::row_grain(D), ctx.num_threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * D * inner + i;
      double sum = 0;
      for (int64_t d = 0; d < D; ++d) sum += x[base + d * inner];
      const double mu = sum / static_cast<double>(D);
      double sq = 0;
      for (int64_t d = 0; d < D; ++d) {
        const double t = x[base + d * inner] - mu;
        sq += t * t;
      }
      const double sd = std::sqrt(sq / static_cast<double>(D) + p.eps);
      const double is = 1.0 / sd;
      if (req[0] != OpReq::kNull) {
        for (int64_t d = 0; d < D; ++d) {
          store(y + base + d * inner, req[0], (x[base + d * inner] - mu) * is * gamma[d] + beta[d]);
        }
      }
      store(mean_out + r, req[1], mu);
      store(std_out + r, req[2], sd);
    }
  });
}

void ln_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LayerNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[0].ndim);
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    ln_forward_typed<DT>(p, ctx, axis, in, req, out));
}

// in: out_grad, data, gamma, mean, std. out: data, gamma, beta gradients.
template <typename DT>
void ln_backward_typed(const OpContext& ctx, int axis, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const AxisSplit s = split_at(in[1], axis);
  const DT* dy = in[0].ptr<DT>();
  const DT* x = in[1].ptr<DT>();
  const DT* gamma = in[2].ptr<DT>();
  const DT* mean = in[3].ptr<DT>();
  const DT* sd = in[4].ptr<DT>();
  const int64_t D = s.dim, inner = s.inner, rows = s.outer * s.inner;
  if (req[0] != OpReq::kNull) {
    DT* dx = out[0].ptr<DT>();
    parallel_for(rows, norm::row_grain(D), ctx.num_threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r / inner, i = r % inner;
        const int64_t base = o * D * inner + i;
        const double mu = mean[r], is = 1.0 / static_cast<double>(sd[r]);
        double sg = 0, sgx = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double g = static_cast<double>(dy[base + d * inner]) * gamma[d];
          sg += g;
          sgx += g * (x[base + d * inner] - mu) * is;
        }
        sg /= static_cast<double>(D);
        sgx /= static_cast<double>(D);
        for (int64_t d = 0; d < D; ++d) {
          const double g = static_cast<double>(dy[base + d * inner]) * gamma[d];
          const double xhat = (x[base + d * inner] - mu) * is;
          store(dx + base + d * inner, req[0], is * (g - sg - xhat * sgx));
        }
      }
    });
  }
  if (req[1] == OpReq::kNull && req[2] == OpReq::kNull) return;
  DT* dgamma = out[1].ptr<DT>();
  DT* dbeta = out[2].ptr<DT>();
  parallel_for(D, std::max<int64_t>(1, 16384 / std::max<int64_t>(rows, 1)), ctx.num_threads,
               [&](int64_t d0, int64_t d1) {
                 for (int64_t d = d0; d < d1; ++d) {
                   double sg = 0, sb = 0;
                   for (int64_t r = 0; r < rows; ++r) {
                     const int64_t idx = (r / inner) * D * inner + d * inner + r % inner;
                     sb += dy[idx];
                     sg += static_cast<double>(dy[idx]) * (x[idx] - mean[r]) / sd[r];
                   }
                   store(dgamma + d, req[1], sg);
                   store(dbeta + d, req[2], sb);
                 }
               });
}

void ln_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const int axis = normalize_axis(attrs, attrs.params<LayerNormParam>().axis, in[1].ndim);
  WEFT_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(),
                    ln_backward_typed<DT>(ctx, axis, in, req, out));
}

// ---- LRN ----------------------------------------------------------------------------------------
// out = x * norm^-beta with norm[c] = knorm + alpha/nsize * sum_{|j-c| <= nsize/2} x[j]^2 over the
// channel axis 1 (the second output holds norm).

// Sum of squares over the channel window for every (n, c, inner) position, written to norm.
template <typename DT>
void lrn_norm(const LRNParam& p, const OpContext& ctx, const AxisSplit& s, const DT* x, OpReq req,
              DT* norm) {
  const int64_t C = s.dim, inner = s.inner, half = p.nsize / 2;
  const double salpha = p.alpha / static_cast<double>(p.nsize);
  parallel_for(s.outer * C, norm::row_grain(inner * p.nsize), ctx.num_threads,
               [&](int64_t q0, int64_t q1) {
                 for (int64_t q = q0; q < q1; ++q) {
                   const int64_t n = q / C, c = q % C;
                   const int64_t lo = std::max<int64_t>(0, c - half),
                                 hi = std::min<int64_t>(C - 1, c + half);
                   DT* nr = norm + q * inner;
                   for (int64_t i = 0; i < inner; ++i) {
                     double sq = 0;
                     for (int64_t j = lo; j <= hi; ++j) {
                       const double v = x[(n * C + j) * inner + i];
                       sq += v * v;
                     }
                     store(nr + i, req, p.knorm + salpha * sq);
                   }
                 }
               });
}

template <typename DT>
void lrn_forward_typed(const LRNParam& p, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out, bool out_done) {
  const AxisSplit s = split_at(in[0], 1);
  const DT* x = in[0].ptr<DT>();
  if (out_done) {
    if (req[1] != OpReq::kNull) lrn_norm(p, ctx, s, x, req[1], out[1].ptr<DT>());
    return;
  }
  // The norm goes to output 1 (written plainly) or is recomputed on the fly.
  const int64_t C = s.dim, inner = s.inner, half = p.nsize / 2;
  const double salpha = p.alpha / static_cast<double>(p.nsize);
  DT* y = out[0].ptr<DT>();
  if (req[1] != OpReq::kNull) lrn_norm(p, ctx, s, x, req[1], out[1].ptr<DT>());
  if (req[0] == OpReq::kNull) return;
  parallel_for(s.outer * C, norm::row_grain(inner * p.nsize), ctx.num_threads,
               [&](int64_t q0, int64_t q1) {
                 for (int64_t q = q0; q < q1; ++q) {
                   const int64_t n = q / C, c = q % C;
                   const int64_t lo = std::max<int64_t>(0, c - half),
                                 hi = std::min<int64_t>(C - 1, c + half);
                   for (int64_t i = 0; i < inner; ++i) {
                     double sq = 0;
                     for (int64_t j = lo; j <= hi; ++j) {
                       const double v = x[(n * C + j) * inner + i];
                       sq += v * v;
                     }
                     store(y + q * inner + i, req[0],
                           x[q * inner + i] * std::pow(p.knorm + salpha * sq, -p.beta));
                   }
                 }
               });
}

#if WEFT_USE_ONEDNN
bool lrn_forward_dnnl(const LRNParam& p, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  if (in[0].dtype() != DType::kFloat32 || in[0].ndim != 4 || in[0].size() == 0) return false;
  if (req[0] != OpReq::kWrite) return false;  // oneDNN LRN is not in-place safe for every layout
  using namespace dnnl_util;
  const auto dims = to_dims(in[0]);
  std::string key = "LRN|" + std::to_string(p.nsize) + "|" + norm::exact_key(p.alpha) + "|" +
                    norm::exact_key(p.beta) + "|" + norm::exact_key(p.knorm);
  for (auto d : dims) key += "," + std::to_string(d);
  auto& prim = cached<dnnl::lrn_forward>(key, [&] {
    const auto md = plain_desc(dims, DType::kFloat32);
    dnnl::lrn_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels, md, p.nsize,
        static_cast<float>(p.alpha), static_cast<float>(p.beta), static_cast<float>(p.knorm));
    return dnnl::lrn_forward(dnnl::lrn_forward::primitive_desc(desc, cpu_engine()));
  });
  ScopedThreads threads(ctx.num_threads);
  execute(prim, {{DNNL_ARG_SRC, wrap(in[0])}, {DNNL_ARG_DST, wrap(out[0])}});
  return true;
}
#endif

void lrn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LRNParam>();
  bool done = false;
#if WEFT_USE_ONEDNN
  done = lrn_forward_dnnl(p, ctx, in, req, out);
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    lrn_forward_typed<DT>(p, ctx, in, req, out, done));
}

// in: out_grad, data, norm. out: data gradient.
// dx[c] = dy[c]*norm[c]^-b - 2*a*b/n * x[c] * sum_{j in win(c)} dy[j]*x[j]*norm[j]^(-b-1)
template <typename DT>
void lrn_backward_typed(const LRNParam& p, const OpContext& ctx, std::span<const TensorView> in,
                        OpReq req, const TensorView& out) {
  const AxisSplit s = split_at(in[1], 1);
  const DT* dy = in[0].ptr<DT>();
  const DT* x = in[1].ptr<DT>();
  const DT* nm = in[2].ptr<DT>();
  DT* dx = out.ptr<DT>();
  const int64_t C = s.dim, inner = s.inner, half = p.nsize / 2;
  const double coef = 2.0 * p.alpha * p.beta / static_cast<double>(p.nsize);
  parallel_for(
      s.outer * C, norm::row_grain(inner * p.nsize), ctx.num_threads, [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t n = q / C, c = q % C;
          const int64_t lo = std::max<int64_t>(0, c - half),
                        hi = std::min<int64_t>(C - 1, c + half);
          for (int64_t i = 0; i < inner; ++i) {
            double acc = 0;
            for (int64_t j = lo; j <= hi; ++j) {
              const int64_t idx = (n * C + j) * inner + i;
              acc += static_cast<double>(dy[idx]) * x[idx] *
                     std::pow(static_cast<double>(nm[idx]), -p.beta - 1);
            }
            const int64_t idx = q * inner + i;
            store(dx + idx, req,
                  dy[idx] * std::pow(static_cast<double>(nm[idx]), -p.beta) - coef * x[idx] * acc);
          }
        }
      });
}

void lrn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<LRNParam>();
  WEFT_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(),
                    lrn_backward_typed<DT>(p, ctx, in, req[0], out[0]));
}

}  // namespace

void register_layer_norm_kernels(OpRegistry& r) {
  r.kernels("LayerNorm").set_attr<FCompute>(DeviceType::kCPU, ln_forward);
  r.kernels("_backward_LayerNorm").set_attr<FCompute>(DeviceType::kCPU, ln_backward);
  r.kernels("LRN").set_attr<FCompute>(DeviceType::kCPU, lrn_forward);
  r.kernels("_backward_LRN").set_attr<FCompute>(DeviceType::kCPU, lrn_backward);
}

}  // namespace weft::cpu
