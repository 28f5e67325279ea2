// Entry point of the normalisation group's CPU kernels (BatchNorm, LayerNorm, LRN, softmax family,
// Activation, LeakyReLU, Dropout, CTC loss: each part in its own file) and the CPU kernels of the
// loss heads: SoftmaxOutput and the Linear/Logistic/MAE regression outputs (definitions in
// ops/defs/nn_norm.cc).
#include "ops/cpu/norm_kernels.h"
#include "ops/cpu/register.h"
#include "ops/defs/norm_params.h"

namespace weft::cpu {
namespace {

using namespace weft::detail;  // the param structs
using norm::AxisSplit;
using norm::softmax_rows;
using norm::split_at;
using norm::store;

// ---- SoftmaxOutput
// -------------------------------------------------------------------------------

/// The (outer, dim, inner) view SoftmaxOutput's softmax runs over.
AxisSplit softmax_output_split(const SoftmaxOutputParam& p, const int64_t* shape, int ndim) {
  if (p.multi_output) return split_at(shape, ndim, std::min(1, ndim - 1));
  if (p.preserve_shape) return split_at(shape, ndim, ndim - 1);
  AxisSplit s;
  s.outer = ndim > 0 ? shape[0] : 1;
  for (int i = 1; i < ndim; ++i) s.dim *= shape[i];
  return s;
}

void softmax_output_forward(const OpAttrs& attrs, const OpContext& ctx,
                            std::span<const TensorView> in, std::span<const OpReq> req,
                            std::span<const TensorView> out) {
  const auto& p = attrs.params<SoftmaxOutputParam>();
  const AxisSplit s = softmax_output_split(p, in[0].shape, in[0].ndim);
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    softmax_rows<DT, DT>(in[0].ptr<DT>(), out[0].ptr<DT>(), s, 1.0, false, {},
                                         req[0], ctx.num_threads));
}

// in: out_grad, output, label. out: data gradient.
template <typename DT>
void softmax_output_backward_typed(const OpAttrs& attrs, const SoftmaxOutputParam& p,
                                   const OpContext& ctx, std::span<const TensorView> in, OpReq req,
                                   const TensorView& out) {
  const DT* dy = in[0].ptr<DT>();
  const DT* y = in[1].ptr<DT>();
  DT* dx = out.ptr<DT>();
  const int64_t n = out.size();
  if (in[2].size() == n && in[2].ndim == in[1].ndim && in[2].ndim > 1) {  // probability labels
    const std::vector<double> lab = [&] {
      std::vector<double> v(static_cast<size_t>(n));
      WEFT_DTYPE_SWITCH(in[2].dtype(), LT, attrs.where(), {
        for (int64_t k = 0; k < n; ++k) v[k] = static_cast<double>(in[2].ptr<LT>()[k]);
      });
      return v;
    }();
    parallel_for(n, 16384, ctx.num_threads, [&](int64_t a, int64_t b) {
      for (int64_t k = a; k < b; ++k) {
        double g = (y[k] - lab[k]) * p.grad_scale;
        if (p.out_grad) g *= dy[k];
        store(dx + k, req, g);
      }
    });
    return;
  }
  const AxisSplit s = softmax_output_split(p, in[1].shape, in[1].ndim);
  std::vector<double> labels(static_cast<size_t>(in[2].size()));
  WEFT_DTYPE_SWITCH(in[2].dtype(), LT, attrs.where(), {
    for (size_t k = 0; k < labels.size(); ++k) labels[k] = static_cast<double>(in[2].ptr<LT>()[k]);
  });
  WEFT_CHECK_AS(ShapeError, static_cast<int64_t>(labels.size()) == s.outer * s.inner)
      << attrs.where() << ": label has " << labels.size() << " elements, expected "
      << s.outer * s.inner;
  const int ignore = static_cast<int>(p.ignore_label);
  double valid = 1;
  if (p.normalization == LossNorm::kBatch) {
    valid = static_cast<double>(p.multi_output ? s.outer : s.outer * s.inner);
  } else if (p.normalization == LossNorm::kValid) {
    int64_t cnt = 0;
    for (double l : labels) cnt += static_cast<int>(l) != ignore;
    valid = static_cast<double>(std::max<int64_t>(cnt, 1));
  }
  double scale = p.grad_scale / std::max(valid, 1.0);
  // MXNet's multi_output gradient is also divided by the number of positions per sample unless
  // normalization is valid (softmax_output-inl.h: grad_scale / (valid ? 1 : s3[2]) / valid_cnt).
  if (p.multi_output && p.normalization != LossNorm::kValid) scale /= static_cast<double>(s.inner);
  const int64_t D = s.dim, inner = s.inner;
  for (double l : labels) {
    const int li = static_cast<int>(l);
    WEFT_CHECK((p.use_ignore && li == ignore) || (li >= 0 && li < D))
        << attrs.where() << ": label " << l << " is out of range [0, " << D << ")";
  }
  const double off =
      (p.smooth_alpha > 0 && D > 1) ? p.smooth_alpha / static_cast<double>(D - 1) : 0.0;
  const double on = 1.0 - p.smooth_alpha;
  parallel_for(s.outer * inner, norm::row_grain(D), ctx.num_threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t base = (r / inner) * D * inner + r % inner;
      const int li = static_cast<int>(labels[r]);
      const bool ignored = p.use_ignore && li == ignore;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t k = base + d * inner;
        double g = 0;
        if (!ignored) {
          g = (y[k] - (d == li ? on : off)) * scale;
          if (p.out_grad) g *= dy[k];
        }
        store(dx + k, req, g);
      }
    }
  });
}

void softmax_output_backward(const OpAttrs& attrs, const OpContext& ctx,
                             std::span<const TensorView> in, std::span<const OpReq> req,
                             std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<SoftmaxOutputParam>();
  WEFT_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(),
                    softmax_output_backward_typed<DT>(attrs, p, ctx, in, req[0], out[0]));
}

// ---- regression outputs
// --------------------------------------------------------------------------

enum class RegressionKind { kLinear, kLogistic, kMAE };

template <RegressionKind kKind>
void regression_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const DT* x = in[0].ptr<DT>();
    DT* y = out[0].ptr<DT>();
    parallel_for(in[0].size(), 16384, ctx.num_threads, [&](int64_t a, int64_t b) {
      for (int64_t k = a; k < b; ++k) {
        if constexpr (kKind == RegressionKind::kLogistic) {
          store(y + k, req[0], DT(1) / (DT(1) + std::exp(-x[k])));
        } else {
          store(y + k, req[0], x[k]);
        }
      }
    });
  });
}

// in: output, label. out: data gradient = grad_scale / (label.size / label.shape[0]) * f(out,
// label).
template <RegressionKind kKind>
void regression_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const double grad_scale = attrs.params<RegressionParam>().grad_scale;
  const int64_t lsize = in[1].size();
  const int64_t lead = in[1].ndim > 0 ? in[1].shape[0] : 1;
  const double num_output = lead > 0 ? static_cast<double>(lsize) / static_cast<double>(lead) : 1.0;
  const double scale = grad_scale / num_output;
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    WEFT_CHECK(in[1].dtype() == in[0].dtype())
        << attrs.where() << ": label dtype must match the data's";
    const DT* y = in[0].ptr<DT>();
    const DT* l = in[1].ptr<DT>();
    DT* dx = out[0].ptr<DT>();
    parallel_for(in[0].size(), 16384, ctx.num_threads, [&](int64_t a, int64_t b) {
      for (int64_t k = a; k < b; ++k) {
        const double diff = static_cast<double>(y[k]) - static_cast<double>(l[k]);
        double g = diff;
        if constexpr (kKind == RegressionKind::kMAE) g = (diff > 0) - (diff < 0);
        store(dx + k, req[0], g * scale);
      }
    });
  });
}

template <RegressionKind kKind>
void register_regression_kernels(OpRegistry& r, const std::string& name) {
  r.kernels(name).set_attr<FCompute>(DeviceType::kCPU, FCompute(regression_forward<kKind>));
  r.kernels("_backward_" + name)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(regression_backward<kKind>));
}

/// The CPU kernels of SoftmaxOutput and the regression heads with their backward ops.
void register_loss_head_kernels(OpRegistry& r) {
  r.kernels("SoftmaxOutput").set_attr<FCompute>(DeviceType::kCPU, softmax_output_forward);
  r.kernels("_backward_SoftmaxOutput")
      .set_attr<FCompute>(DeviceType::kCPU, softmax_output_backward);
  register_regression_kernels<RegressionKind::kLinear>(r, "LinearRegressionOutput");
  register_regression_kernels<RegressionKind::kLogistic>(r, "LogisticRegressionOutput");
  register_regression_kernels<RegressionKind::kMAE>(r, "MAERegressionOutput");
}

}  // namespace

void register_nn_norm_kernels(OpRegistry& r) {
  register_batch_norm_kernels(r);
  register_layer_norm_kernels(r);
  register_softmax_kernels(r);
  register_loss_head_kernels(r);
  register_activation_kernels(r);
  register_dropout_kernels(r);
  register_ctc_loss_kernels(r);
}

}  // namespace weft::cpu
