// The CPU kernels of Activation (relu, sigmoid, tanh, softrelu, softsign) and LeakyReLU (leaky,
// prelu, elu, selu, gelu, rrelu) with their backward ops (definitions in ops/defs/activation.cc).
// float32 Activation forward uses oneDNN eltwise; its FInferLayout keeps oneDNN layouts.
#include <random>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/norm_kernels.h"
#include "ops/defs/activation_params.h"

namespace weft::cpu {
namespace {

using namespace weft::detail;  // the param structs
using norm::AxisSplit;
using norm::split_at;
using norm::store;

// ---- Activation
// ----------------------------------------------------------------------------------

template <typename DT>
inline DT act_value(ActType t, DT x) {
  switch (t) {
    case ActType::kReLU:
      return x > DT(0) ? x : DT(0);
    case ActType::kSigmoid:
      return DT(1) / (DT(1) + std::exp(-x));
    case ActType::kTanh:
      return std::tanh(x);
    case ActType::kSoftReLU:
      return x > DT(20) ? x : std::log1p(std::exp(x));
    case ActType::kSoftSign:
      return x / (DT(1) + std::abs(x));
  }
  return x;
}

// dy * f'(x), given x and y = f(x).
template <typename DT>
inline DT act_grad(ActType t, DT x, DT y, DT dy) {
  switch (t) {
    case ActType::kReLU:
      return x > DT(0) ? dy : DT(0);
    case ActType::kSigmoid:
      return dy * y * (DT(1) - y);
    case ActType::kTanh:
      return dy * (DT(1) - y * y);
    case ActType::kSoftReLU:
      return dy / (DT(1) + std::exp(-x));
    case ActType::kSoftSign: {
      const DT d = DT(1) + std::abs(x);
      return dy / (d * d);
    }
  }
  return dy;
}

// Applies `f` elementwise with a loop per activation type so each loop inlines its function.
template <typename DT, typename F>
void map_act(ActType t, int64_t n, int threads, F&& f) {
  parallel_for(n, 16384, threads, [&](int64_t a, int64_t b) {
    switch (t) {
      case ActType::kReLU:
        f(std::integral_constant<ActType, ActType::kReLU>{}, a, b);
        break;
      case ActType::kSigmoid:
        f(std::integral_constant<ActType, ActType::kSigmoid>{}, a, b);
        break;
      case ActType::kTanh:
        f(std::integral_constant<ActType, ActType::kTanh>{}, a, b);
        break;
      case ActType::kSoftReLU:
        f(std::integral_constant<ActType, ActType::kSoftReLU>{}, a, b);
        break;
      case ActType::kSoftSign:
        f(std::integral_constant<ActType, ActType::kSoftSign>{}, a, b);
        break;
    }
  });
}

#if WEFT_USE_ONEDNN
// oneDNN's algorithm for an activation; false when it has none.
bool act_algorithm(ActType t, dnnl::algorithm* alg) {
  switch (t) {
    case ActType::kReLU:
      *alg = dnnl::algorithm::eltwise_relu;
      return true;
    case ActType::kSigmoid:
      *alg = dnnl::algorithm::eltwise_logistic;
      return true;
    case ActType::kTanh:
      *alg = dnnl::algorithm::eltwise_tanh;
      return true;
    case ActType::kSoftReLU:
      *alg = dnnl::algorithm::eltwise_soft_relu;
      return true;
    default:
      return false;
  }
}

bool act_forward_dnnl(ActType t, const OpContext& ctx, const TensorView& x, OpReq req,
                      const TensorView& y) {
  if (x.dtype() != DType::kFloat32 || (req != OpReq::kWrite && req != OpReq::kInplace) ||
      x.size() == 0)
    return false;
  dnnl::algorithm alg;
  if (!act_algorithm(t, &alg)) return false;
  using namespace dnnl_util;
  // Plain data is viewed 1-D (eltwise does not care about the shape); data in another layout
  // (Note [Layout propagation]) keeps its descriptor, whose padding oneDNN keeps zero.
  const dnnl::memory::desc* layout = desc_of(ctx.input_layout(0));
  const dnnl::memory::desc md =
      layout ? *layout : plain_desc(dnnl::memory::dims{x.size()}, DType::kFloat32);
  const std::string key = "Activation|" + std::to_string(static_cast<int>(t)) + "|" +
                          (layout ? desc_key(md) : std::to_string(x.size()));
  auto& prim = cached<dnnl::eltwise_forward>(key, [&] {
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, alg, md, 0.f, 0.f);
    return dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(desc, cpu_engine()));
  });
  ScopedThreads threads(ctx.num_threads);
  execute(prim, {{DNNL_ARG_SRC, wrap(md, x.raw())}, {DNNL_ARG_DST, wrap(md, y.raw())}});
  return true;
}

// Activations oneDNN computes keep their input's layout.
bool act_infer_layout(const OpAttrs& attrs, const LayoutQuery& q, std::vector<LayoutRef>& in,
                      std::vector<LayoutRef>& out) {
  dnnl::algorithm alg;
  if (!in[0] || q.in_types[0] != DType::kFloat32 ||
      !act_algorithm(attrs.params<ActivationParam>().act_type, &alg))
    return false;
  out[0] = in[0];
  return true;
}
#endif

void act_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const ActType t = attrs.params<ActivationParam>().act_type;
#if WEFT_USE_ONEDNN
  if (act_forward_dnnl(t, ctx, in[0], req[0], out[0])) return;
  WEFT_ICHECK(!ctx.input_layout(0)) << attrs.where() << ": no kernel for this call's layout";
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const DT* x = in[0].ptr<DT>();
    DT* y = out[0].ptr<DT>();
    const OpReq r = req[0];
    map_act<DT>(t, in[0].size(), ctx.num_threads, [&](auto kind, int64_t a, int64_t b) {
      if (r == OpReq::kAdd) {
        for (int64_t k = a; k < b; ++k) y[k] += act_value<DT>(kind.value, x[k]);
      } else {
        for (int64_t k = a; k < b; ++k) y[k] = act_value<DT>(kind.value, x[k]);
      }
    });
  });
}

// in: out_grad, data, output.
void act_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const ActType t = attrs.params<ActivationParam>().act_type;
  WEFT_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(), {
    const DT* dy = in[0].ptr<DT>();
    const DT* x = in[1].ptr<DT>();
    const DT* y = in[2].ptr<DT>();
    DT* dx = out[0].ptr<DT>();
    const OpReq r = req[0];
    map_act<DT>(t, in[1].size(), ctx.num_threads, [&](auto kind, int64_t a, int64_t b) {
      if (r == OpReq::kAdd) {
        for (int64_t k = a; k < b; ++k) dx[k] += act_grad<DT>(kind.value, x[k], y[k], dy[k]);
      } else {
        for (int64_t k = a; k < b; ++k) dx[k] = act_grad<DT>(kind.value, x[k], y[k], dy[k]);
      }
    });
  });
}

// ---- LeakyReLU
// -----------------------------------------------------------------------------------

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluLambda = 1.0507009873554804934193349852946;

template <typename DT>
inline double leaky_value(LeakyType t, double slope, double x) {
  switch (t) {
    case LeakyType::kLeaky:
      return x > 0 ? x : slope * x;
    case LeakyType::kELU:
      return x > 0 ? x : slope * std::expm1(x);
    case LeakyType::kSELU:
      return kSeluLambda * (x > 0 ? x : kSeluAlpha * std::expm1(x));
    case LeakyType::kGELU:
      return 0.5 * x * (1 + std::erf(x * M_SQRT1_2));
    default:
      return x > 0 ? x : slope * x;  // prelu / rrelu with a per-element slope
  }
}

// f'(x); for prelu/rrelu `slope` is the element's slope.
inline double leaky_deriv(LeakyType t, double slope, double x) {
  switch (t) {
    case LeakyType::kELU:
      return x > 0 ? 1 : slope * std::exp(x);
    case LeakyType::kSELU:
      return kSeluLambda * (x > 0 ? 1 : kSeluAlpha * std::exp(x));
    case LeakyType::kGELU:  // Phi(x) + x * phi(x)
      return 0.5 * (1 + std::erf(x * M_SQRT1_2)) +
             x * std::exp(-0.5 * x * x) * 0.5 * M_2_SQRTPI * M_SQRT1_2;
    default:
      return x > 0 ? 1 : slope;
  }
}

template <typename DT>
void leaky_forward_typed(const LeakyReLUParam& p, const OpContext& ctx,
                         std::span<const TensorView> in, std::span<const OpReq> req,
                         std::span<const TensorView> out) {
  const DT* x = in[0].ptr<DT>();
  DT* y = out[0].ptr<DT>();
  const int64_t n = in[0].size();
  const LeakyType t = p.act_type;
  if (t == LeakyType::kPReLU) {
    const DT* g = in[1].ptr<DT>();
    const bool shared = in[1].size() == 1;
    const AxisSplit s = in[0].ndim >= 2 ? split_at(in[0], 1) : AxisSplit{1, 1, n};
    parallel_for(s.outer * s.dim, norm::row_grain(s.inner), ctx.num_threads,
                 [&](int64_t q0, int64_t q1) {
                   for (int64_t q = q0; q < q1; ++q) {
                     const DT a = shared ? g[0] : g[q % s.dim];
                     for (int64_t i = 0; i < s.inner; ++i) {
                       const DT v = x[q * s.inner + i];
                       store(y + q * s.inner + i, req[0], v > DT(0) ? v : a * v);
                     }
                   }
                 });
    return;
  }
  if (t == LeakyType::kRReLU) {
    // out[1] is the per-element slope: random in training, (lower + upper) / 2 at inference.
    DT* mask = out[1].ptr<DT>();
    const bool train = ctx.is_train;
    if (train) {
      WEFT_ICHECK(ctx.random != nullptr) << "LeakyReLU(rrelu): no random resource";
      std::uniform_real_distribution<double> dist(p.lower_bound, p.upper_bound);
      for (int64_t k = 0; k < n; ++k) {
        mask[k] = static_cast<DT>(p.lower_bound == p.upper_bound ? p.lower_bound
                                                                 : dist(ctx.random->engine));
      }
    } else {
      const DT mid = static_cast<DT>((p.lower_bound + p.upper_bound) / 2);
      for (int64_t k = 0; k < n; ++k) mask[k] = mid;
    }
    for (int64_t k = 0; k < n; ++k) store(y + k, req[0], x[k] > DT(0) ? x[k] : mask[k] * x[k]);
    return;
  }
  parallel_for(n, 16384, ctx.num_threads, [&](int64_t a, int64_t b) {
    for (int64_t k = a; k < b; ++k) store(y + k, req[0], leaky_value<DT>(t, p.slope, x[k]));
  });
}

void leaky_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LeakyReLUParam>();
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    leaky_forward_typed<DT>(p, ctx, in, req, out));
}

// in: out_grad, data, then gamma (prelu) or mask (rrelu). out: data gradient, gamma gradient
// (prelu).
template <typename DT>
void leaky_backward_typed(const LeakyReLUParam& p, const OpContext& ctx,
                          std::span<const TensorView> in, std::span<const OpReq> req,
                          std::span<const TensorView> out) {
  const DT* dy = in[0].ptr<DT>();
  const DT* x = in[1].ptr<DT>();
  const int64_t n = in[1].size();
  const LeakyType t = p.act_type;
  DT* dx = out[0].ptr<DT>();
  if (t == LeakyType::kPReLU) {
    const DT* g = in[2].ptr<DT>();
    const bool shared = in[2].size() == 1;
    const AxisSplit s = in[1].ndim >= 2 ? split_at(in[1], 1) : AxisSplit{1, 1, n};
    if (req[0] != OpReq::kNull) {
      parallel_for(s.outer * s.dim, norm::row_grain(s.inner), ctx.num_threads,
                   [&](int64_t q0, int64_t q1) {
                     for (int64_t q = q0; q < q1; ++q) {
                       const DT a = shared ? g[0] : g[q % s.dim];
                       for (int64_t i = 0; i < s.inner; ++i) {
                         const int64_t k = q * s.inner + i;
                         store(dx + k, req[0], x[k] > DT(0) ? dy[k] : a * dy[k]);
                       }
                     }
                   });
    }
    if (req[1] != OpReq::kNull) {
      std::vector<double> acc(static_cast<size_t>(s.dim), 0.0);
      for (int64_t q = 0; q < s.outer * s.dim; ++q) {
        double sum = 0;
        for (int64_t i = 0; i < s.inner; ++i) {
          const int64_t k = q * s.inner + i;
          if (!(x[k] > DT(0))) sum += static_cast<double>(dy[k]) * x[k];
        }
        acc[q % s.dim] += sum;
      }
      DT* dg = out[1].ptr<DT>();
      if (shared) {
        double total = 0;
        for (double v : acc) total += v;
        store(dg, req[1], total);
      } else {
        for (int64_t c = 0; c < s.dim; ++c) store(dg + c, req[1], acc[c]);
      }
    }
    return;
  }
  if (req[0] == OpReq::kNull) return;
  if (t == LeakyType::kRReLU) {
    const DT* mask = in[2].ptr<DT>();
    parallel_for(n, 16384, ctx.num_threads, [&](int64_t a, int64_t b) {
      for (int64_t k = a; k < b; ++k) store(dx + k, req[0], x[k] > DT(0) ? dy[k] : mask[k] * dy[k]);
    });
    return;
  }
  parallel_for(n, 16384, ctx.num_threads, [&](int64_t a, int64_t b) {
    for (int64_t k = a; k < b; ++k) store(dx + k, req[0], dy[k] * leaky_deriv(t, p.slope, x[k]));
  });
}

void leaky_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LeakyReLUParam>();
  WEFT_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(),
                    leaky_backward_typed<DT>(p, ctx, in, req, out));
}

}  // namespace

void register_activation_kernels(OpRegistry& r) {
  r.kernels("Activation").set_attr<FCompute>(DeviceType::kCPU, act_forward);
#if WEFT_USE_ONEDNN
  r.kernels("Activation").set_attr<FInferLayout>(act_infer_layout);
#endif
  r.kernels("_backward_Activation").set_attr<FCompute>(DeviceType::kCPU, act_backward);
  r.kernels("LeakyReLU").set_attr<FCompute>(DeviceType::kCPU, leaky_forward);
  r.kernels("_backward_LeakyReLU").set_attr<FCompute>(DeviceType::kCPU, leaky_backward);
}

}  // namespace weft::cpu
