// The CPU kernels of BatchNorm and its backward op (definitions in ops/defs/batch_norm.cc). oneDNN
// runs the float32 forward along axis 1; a plain C++ path handles float64, other axes and
// accumulation.
#include <cstring>
#include <optional>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/norm_kernels.h"
#include "ops/defs/norm_params.h"

namespace weft::cpu {
namespace {

using namespace weft::detail;  // the param structs
using norm::AxisSplit;
using norm::split_at;
using norm::store;

// Note [BatchNorm statistics]
// Forward outputs (out, mean, var): `mean` is the per-channel batch mean and `var` the *biased*
// batch variance (sum (x-mean)^2 / m), both (C,). (MXNet's CPU kernel stores 1/sqrt(var + eps)
// in its third output instead; weft stores the variance itself, as OPS.md describes.) When the
// moving statistics are used (inference, or use_global_stats) the outputs hold copies of
// moving_mean and moving_var. Training without use_global_stats updates, in place and during the
// forward pass (FMutateInputs {3, 4}):
//   moving_mean = moving_mean * momentum + mean * (1 - momentum)
//   moving_var  = moving_var  * momentum + var  * (1 - momentum)      (biased var, as MXNet CPU)
// MXNet's CPU kernel performs the same update (with the same biased variance) in its backward
// pass; doing it in the forward pass updates the statistics even when no backward pass runs.

// Per-channel statistics of x viewed as (outer, C, inner); biased variance. Parallel over C.
template <typename DT>
void channel_stats(const DT* x, const AxisSplit& s, int threads, double* mean, double* var) {
  const int64_t m = s.outer * s.inner;
  parallel_for(s.dim, std::max<int64_t>(1, 65536 / std::max<int64_t>(m, 1)), threads,
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) {
                   double sum = 0;
                   for (int64_t o = 0; o < s.outer; ++o) {
                     const DT* row = x + (o * s.dim + c) * s.inner;
                     for (int64_t i = 0; i < s.inner; ++i) sum += row[i];
                   }
                   const double mu = sum / static_cast<double>(m);
                   double sq = 0;
                   for (int64_t o = 0; o < s.outer; ++o) {
                     const DT* row = x + (o * s.dim + c) * s.inner;
                     for (int64_t i = 0; i < s.inner; ++i) {
                       const double d = row[i] - mu;
                       sq += d * d;
                     }
                   }
                   mean[c] = mu;
                   var[c] = sq / static_cast<double>(m);
                 }
               });
}

// See Note [BatchNorm statistics].
template <typename DT>
void bn_forward_typed(const BatchNormParam& p, const OpContext& ctx, int axis, bool use_batch,
                      std::span<const TensorView> in, std::span<const OpReq> req,
                      std::span<const TensorView> out) {
  const AxisSplit s = split_at(in[0], axis);
  const int64_t C = s.dim;
  std::vector<double> mean(C), var(C);
  const DT* x = in[0].ptr<DT>();
  if (use_batch) {
    channel_stats(x, s, ctx.num_threads, mean.data(), var.data());
  } else {
    for (int64_t c = 0; c < C; ++c) {
      mean[c] = in[3].ptr<DT>()[c];
      var[c] = in[4].ptr<DT>()[c];
    }
  }
  // y = x * scale[c] + shift[c]
  std::vector<DT> scale(C), shift(C);
  const DT* gamma = in[1].ptr<DT>();
  const DT* beta = in[2].ptr<DT>();
  for (int64_t c = 0; c < C; ++c) {
    const double g = p.fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
    const double invstd = 1.0 / std::sqrt(var[c] + p.eps);
    scale[c] = static_cast<DT>(g * invstd);
    shift[c] = static_cast<DT>(beta[c] - mean[c] * g * invstd);
  }
  if (req[0] != OpReq::kNull) {
    DT* y = out[0].ptr<DT>();
    const bool add = req[0] == OpReq::kAdd;
    parallel_for(s.outer * C, norm::row_grain(s.inner), ctx.num_threads,
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const int64_t c = r % C;
                     const DT a = scale[c], b = shift[c];
                     const DT* xr = x + r * s.inner;
                     DT* yr = y + r * s.inner;
                     if (add) {
                       for (int64_t i = 0; i < s.inner; ++i) yr[i] += xr[i] * a + b;
                     } else {
                       for (int64_t i = 0; i < s.inner; ++i) yr[i] = xr[i] * a + b;
                     }
                   }
                 });
  }
  for (int64_t c = 0; c < C; ++c) {
    store(out[1].ptr<DT>() + c, req[1], mean[c]);
    store(out[2].ptr<DT>() + c, req[2], var[c]);
  }
  if (use_batch) {
    DT* mm = in[3].ptr<DT>();
    DT* mv = in[4].ptr<DT>();
    for (int64_t c = 0; c < C; ++c) {
      mm[c] = static_cast<DT>(mm[c] * p.momentum + mean[c] * (1 - p.momentum));
      mv[c] = static_cast<DT>(mv[c] * p.momentum + var[c] * (1 - p.momentum));
    }
  }
}

#if WEFT_USE_ONEDNN
// float32 forward along axis 1 through oneDNN. Returns false when the case is not covered.
bool bn_forward_dnnl(const BatchNormParam& p, const OpContext& ctx, int axis, bool use_batch,
                     std::span<const TensorView> in, std::span<const OpReq> req,
                     std::span<const TensorView> out) {
  if (in[0].dtype() != DType::kFloat32 || axis != 1 || in[0].ndim < 2 || in[0].ndim > 5)
    return false;
  if (req[0] != OpReq::kWrite && req[0] != OpReq::kInplace) return false;
  if (in[0].size() == 0) return false;
  using dnnl::normalization_flags;
  using namespace dnnl_util;
  normalization_flags flags = normalization_flags::use_shift;
  if (!p.fix_gamma) flags = flags | normalization_flags::use_scale;
  if (!use_batch) flags = flags | normalization_flags::use_global_stats;
  const auto prop =
      use_batch ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const auto dims = to_dims(in[0]);
  std::string key = "BatchNorm|" + std::to_string(static_cast<unsigned>(flags)) + "|" +
                    norm::exact_key(p.eps) + "|" + std::to_string(use_batch);
  for (auto d : dims) key += "," + std::to_string(d);
  using Entry = std::pair<dnnl::batch_normalization_forward::primitive_desc,
                          dnnl::batch_normalization_forward>;
  // Data in another layout (Note [Layout propagation]) keeps its descriptor; output likewise.
  const dnnl::memory::desc src = input_desc(ctx, 0, in[0]);
  const dnnl::memory::desc dst = output_desc(ctx, 0, out[0]);
  if (ctx.input_layout(0)) key += "|" + desc_key(src);
  Entry& e = cached<Entry>(key, [&] {
    dnnl::batch_normalization_forward::desc desc(prop, src, static_cast<float>(p.eps), flags);
    dnnl::batch_normalization_forward::primitive_desc pd(desc, cpu_engine());
    return Entry(pd, dnnl::batch_normalization_forward(pd));
  });
  ScopedThreads threads(ctx.num_threads);
  const int64_t C = dims[1];
  const dnnl::memory::desc vec = plain_desc({C}, DType::kFloat32);
  // Mean/var land in the outputs when written plainly, else in small per-call vectors.
  std::vector<float> mean_buf, var_buf;
  float* mean = out[1].ptr<float>();
  float* var = out[2].ptr<float>();
  if (!use_batch) {
    mean = in[3].ptr<float>();
    var = in[4].ptr<float>();
  } else {
    if (req[1] != OpReq::kWrite && req[1] != OpReq::kInplace) {
      mean_buf.resize(C);
      mean = mean_buf.data();
    }
    if (req[2] != OpReq::kWrite && req[2] != OpReq::kInplace) {
      var_buf.resize(C);
      var = var_buf.data();
    }
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, wrap(src, in[0].raw())},   {DNNL_ARG_DST, wrap(dst, out[0].raw())},
      {DNNL_ARG_SHIFT, wrap(vec, in[2].raw())}, {DNNL_ARG_MEAN, wrap(vec, mean)},
      {DNNL_ARG_VARIANCE, wrap(vec, var)},
  };
  if (!p.fix_gamma) args.emplace(DNNL_ARG_SCALE, wrap(vec, in[1].raw()));
  execute(e.second, args);
  if (use_batch) {
    if (!mean_buf.empty())
      for (int64_t c = 0; c < C; ++c) store(out[1].ptr<float>() + c, req[1], mean[c]);
    if (!var_buf.empty())
      for (int64_t c = 0; c < C; ++c) store(out[2].ptr<float>() + c, req[2], var[c]);
    float* mm = in[3].ptr<float>();
    float* mv = in[4].ptr<float>();
    const float mo = static_cast<float>(p.momentum);
    for (int64_t c = 0; c < C; ++c) {
      mm[c] = mm[c] * mo + mean[c] * (1 - mo);
      mv[c] = mv[c] * mo + var[c] * (1 - mo);
    }
  } else {
    for (int64_t c = 0; c < C; ++c) {
      store(out[1].ptr<float>() + c, req[1], mean[c]);
      store(out[2].ptr<float>() + c, req[2], var[c]);
    }
  }
  return true;
}

// Channel-axis float32 batch norm keeps its data's layout (statistics and parameters are plain).
bool bn_infer_layout(const OpAttrs& attrs, const LayoutQuery& q, std::vector<LayoutRef>& in,
                     std::vector<LayoutRef>& out) {
  const int nd = q.in_shapes[0].ndim();
  if (!in[0] || q.in_types[0] != DType::kFloat32 || nd < 2 || nd > 5 ||
      normalize_axis(attrs, attrs.params<BatchNormParam>().axis, nd) != 1 ||
      q.in_shapes[0].size() == 0)
    return false;
  for (size_t i = 1; i < in.size(); ++i) in[i] = nullptr;
  out.assign(out.size(), nullptr);
  out[0] = in[0];
  return true;
}
#endif

void bn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<BatchNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[0].ndim);
  const bool use_batch = ctx.is_train && !p.use_global_stats;
#if WEFT_USE_ONEDNN
  if (bn_forward_dnnl(p, ctx, axis, use_batch, in, req, out)) return;
  WEFT_ICHECK(!ctx.input_layout(0)) << attrs.where() << ": no kernel for this call's layout";
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    bn_forward_typed<DT>(p, ctx, axis, use_batch, in, req, out));
}

// ---- backward ----------------------------------------------------------------------------------
// Inputs: out_grad, data, gamma, mean, var, moving_mean, moving_var (the forward's outputs 1 and 2
// are the batch statistics). Outputs: data, gamma, beta gradients.

template <typename DT>
void bn_backward_typed(const BatchNormParam& p, const OpContext& ctx, int axis, bool use_batch,
                       std::span<const TensorView> in, std::span<const OpReq> req,
                       std::span<const TensorView> out) {
  const AxisSplit s = split_at(in[1], axis);
  const int64_t C = s.dim;
  const int64_t m = s.outer * s.inner;
  const DT* dy = in[0].ptr<DT>();
  const DT* x = in[1].ptr<DT>();
  const DT* gamma = in[2].ptr<DT>();
  const DT* mean_src = use_batch ? in[3].ptr<DT>() : in[5].ptr<DT>();
  const DT* var_src = use_batch ? in[4].ptr<DT>() : in[6].ptr<DT>();
  std::vector<double> sum_dy(C), sum_dy_xhat(C), invstd(C);
  parallel_for(C, std::max<int64_t>(1, 65536 / std::max<int64_t>(m, 1)), ctx.num_threads,
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) {
                   const double mu = mean_src[c];
                   const double is = 1.0 / std::sqrt(static_cast<double>(var_src[c]) + p.eps);
                   double sd = 0, sdx = 0;
                   for (int64_t o = 0; o < s.outer; ++o) {
                     const int64_t base = (o * C + c) * s.inner;
                     for (int64_t i = 0; i < s.inner; ++i) {
                       sd += dy[base + i];
                       sdx += dy[base + i] * (x[base + i] - mu);
                     }
                   }
                   invstd[c] = is;
                   sum_dy[c] = sd;
                   sum_dy_xhat[c] = sdx * is;
                 }
               });
  if (req[0] != OpReq::kNull) {
    DT* dx = out[0].ptr<DT>();
    const OpReq r0 = req[0];
    parallel_for(s.outer * C, norm::row_grain(s.inner), ctx.num_threads,
                 [&](int64_t q0, int64_t q1) {
                   for (int64_t q = q0; q < q1; ++q) {
                     const int64_t c = q % C;
                     const double g = p.fix_gamma ? 1.0 : static_cast<double>(gamma[c]);
                     const double is = invstd[c];
                     const double mu = mean_src[c];
                     const int64_t base = q * s.inner;
                     if (use_batch) {
                       // dx = g*invstd*(dy - mean(dy) - xhat*mean(dy*xhat))
                       const double mdy = sum_dy[c] / static_cast<double>(m);
                       const double mdx = sum_dy_xhat[c] / static_cast<double>(m);
                       for (int64_t i = 0; i < s.inner; ++i) {
                         const double xhat = (x[base + i] - mu) * is;
                         store(dx + base + i, r0, g * is * (dy[base + i] - mdy - xhat * mdx));
                       }
                     } else {
                       for (int64_t i = 0; i < s.inner; ++i)
                         store(dx + base + i, r0, g * is * dy[base + i]);
                     }
                   }
                 });
  }
  for (int64_t c = 0; c < C; ++c) {
    store(out[1].ptr<DT>() + c, req[1], p.fix_gamma ? 0.0 : sum_dy_xhat[c]);
    store(out[2].ptr<DT>() + c, req[2], sum_dy[c]);
  }
}

void bn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<BatchNormParam>();
  const int axis = normalize_axis(attrs, p.axis, in[1].ndim);
  const bool use_batch = ctx.is_train && !p.use_global_stats;
  WEFT_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(),
                    bn_backward_typed<DT>(p, ctx, axis, use_batch, in, req, out));
}

}  // namespace

void register_batch_norm_kernels(OpRegistry& r) {
  r.kernels("BatchNorm").set_attr<FCompute>(DeviceType::kCPU, bn_forward);
#if WEFT_USE_ONEDNN
  r.kernels("BatchNorm").set_attr<FInferLayout>(bn_infer_layout);
#endif
  r.kernels("_backward_BatchNorm").set_attr<FCompute>(DeviceType::kCPU, bn_backward);
}

}  // namespace weft::cpu
