// LayerNorm (normalisation along one axis, outputs out/mean/std) and LRN (local response
// normalisation across channels), with their backward ops. LRN's float32 4-D forward uses oneDNN.
#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/norm_kernels.h"
#include "ops/defs/norm_common.h"
#include "ops/defs/norm_params.h"

namespace weft::detail {
namespace {

using norm::AxisSplit;
using norm::split_at;
using norm::store;

// ---- LayerNorm ----------------------------------------------------------------------------------

// in: data, gamma, beta (or for backward: out_grad, data, gamma, mean, std); out: out, mean, std
// (or data/gamma/beta gradients). `data` is input `di`; vectors (D,) at `vec_in`, `vec_out`; the
// reduced (axis = 1) shapes at `red_in`, `red_out`.
bool ln_infer(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out, int di,
              std::vector<int> same_in, std::vector<int> same_out, std::vector<int> vec_in,
              std::vector<int> vec_out, std::vector<int> red_in, std::vector<int> red_out) {
  Shape d = in[di];
  for (int i : same_in) merge_shape(&d, in[i]);
  for (int i : same_out) merge_shape(&d, out[i]);
  if (!d.rank_known()) return false;
  for (int i : same_in) assign_input_shape(attrs, in, i, d);
  for (int i : same_out) assign_output_shape(attrs, out, i, d);
  assign_input_shape(attrs, in, di, d);
  d = in[di];
  const int ndim = d.ndim();
  WEFT_CHECK_AS(ShapeError, ndim >= 1)
      << attrs.where() << ": data must have at least one dimension";
  const int axis = normalize_axis(attrs, attrs.params<LayerNormParam>().axis, ndim);
  Shape v{d[axis]};
  for (int k = 0; k < 2; ++k) {
    for (int i : vec_in) {
      assign_input_shape(attrs, in, i, v);
      v = in[i];
    }
    for (int i : vec_out) {
      assign_output_shape(attrs, out, i, v);
      v = out[i];
    }
  }
  Shape dd = Shape::filled(ndim, -1);
  dd[axis] = v[0];
  assign_input_shape(attrs, in, di, dd);
  d = in[di];
  for (int i : same_in) assign_input_shape(attrs, in, i, d);
  for (int i : same_out) assign_output_shape(attrs, out, i, d);
  Shape red = d;
  red[axis] = 1;
  for (int i : red_in) assign_input_shape(attrs, in, i, red);
  for (int i : red_out) assign_output_shape(attrs, out, i, red);
  return all_known(in) && all_known(out);
}

bool ln_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  return ln_infer(attrs, in, out, 0, {}, {0}, {1, 2}, {}, {}, {1, 2});
}
bool ln_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  return ln_infer(attrs, in, out, 1, {0}, {0}, {2}, {1, 2}, {3, 4}, {});
}

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

struct LRNParam {
  double alpha = 1e-4;
  double beta = 0.75;
  double knorm = 2;
  int64_t nsize = 1;
  static void declare(ParamSchema<LRNParam>& s) {
    s.field("alpha", &LRNParam::alpha).set_default(1e-4).describe("variance scaling");
    s.field("beta", &LRNParam::beta).set_default(0.75).describe("power");
    s.field("knorm", &LRNParam::knorm).set_default(2.0).describe("additive constant k");
    s.field("nsize", &LRNParam::nsize).lower_bound(1).describe("channels in the window (odd)");
    s.check([](LRNParam& p) {
      WEFT_CHECK(p.nsize % 2 == 1) << "LRN nsize must be odd, got " << p.nsize;
    });
  }
};

bool lrn_check_rank(const OpAttrs& attrs, const Shape& s) {
  if (!s.rank_known()) return false;
  WEFT_CHECK_AS(ShapeError, s.ndim() >= 2)
      << attrs.where() << ": data must be at least 2-D (N, C, ...), got " << s.to_string();
  return true;
}

bool lrn_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const bool ok = infer_same_shape(attrs, in, out);
  for (const auto& s : in) lrn_check_rank(attrs, s);
  return ok;
}

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

void register_layer_norm_ops(OpRegistry& r) {
  r.register_op("LayerNorm")
      .describe(
          "Layer normalization along `axis`: out = (x - mean) / std * gamma + beta with std = "
          "sqrt(var + eps); gamma and beta have shape (data.shape[axis],). Outputs out, mean, std "
          "(mean and std have data's shape with the axis set to 1; visible with output_mean_var).")
      .set_params<LayerNormParam>()
      .set_input_names({"data", "gamma", "beta"})
      .set_output_names({"output", "mean", "std"})
      .set_attr<FNumVisibleOutputs>(
          [](const OpAttrs& a) { return a.params<LayerNormParam>().output_mean_var ? 3 : 1; })
      .set_attr<FInferShape>(ln_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, ln_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        auto g = b.emit_with_forward_attrs(
            "_backward_LayerNorm",
            {b.out_grad(0), b.input(0), b.input(1), b.output(1), b.output(2)});
        return std::vector<GradEntry>{g.at(0), g.at(1), g.at(2)};
      });
  r.register_op("_backward_LayerNorm")
      .describe("Gradient of LayerNorm with respect to data, gamma and beta.")
      .set_params<LayerNormParam>()
      .set_input_names({"out_grad", "data", "gamma", "mean", "std"})
      .set_output_names({"data_grad", "gamma_grad", "beta_grad"})
      .set_attr<FInferShape>(ln_backward_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, ln_backward);

  r.register_op("LRN")
      .describe(
          "Local response normalization across channels (axis 1): out = x * (knorm + alpha/nsize * "
          "sum of x^2 over the nsize channels centred on c)^-beta. A hidden second output holds "
          "the "
          "normaliser.")
      .set_params<LRNParam>()
      .set_input_names({"data"})
      .set_output_names({"output", "tmp_norm"})
      .set_attr<FNumVisibleOutputs>([](const OpAttrs&) { return 1; })
      .set_attr<FInferShape>(lrn_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, lrn_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_LRN", {b.out_grad(0), b.input(0), b.output(1)})
                .at(0)};
      });
  r.register_op("_backward_LRN")
      .describe("Gradient of LRN with respect to data.")
      .set_params<LRNParam>()
      .set_input_names({"out_grad", "data", "tmp_norm"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(lrn_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, lrn_backward);
}

}  // namespace weft::detail
