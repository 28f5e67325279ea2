// Entry point of the normalisation group (BatchNorm, LayerNorm, LRN, softmax family, Activation,
// LeakyReLU, Dropout, CTC loss: each part in its own file) and the loss heads: SoftmaxOutput
// (alias Softmax) and the Linear/Logistic/MAE regression outputs.
#include "ops/builtin_ops.h"
#include "ops/cpu/norm_kernels.h"
#include "ops/defs/norm_common.h"
#include "ops/defs/norm_params.h"

namespace weft::detail {
namespace {

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

/// The label shape for data `d`: multi_output (d0, d2, ...); preserve_shape d[:-1]; else (d0,).
Shape softmax_output_label_shape(const SoftmaxOutputParam& p, const Shape& d) {
  Shape l(std::vector<int64_t>{});
  if (p.multi_output) {
    for (int i = 0; i < d.ndim(); ++i)
      if (i != 1) l.push_back(d[i]);
  } else if (p.preserve_shape) {
    for (int i = 0; i + 1 < d.ndim(); ++i) l.push_back(d[i]);
  } else {
    l.push_back(d[0]);
  }
  return l;
}

bool softmax_output_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                std::vector<Shape>& out) {
  const auto& p = attrs.params<SoftmaxOutputParam>();
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  const Shape& d = in[0];
  WEFT_CHECK_AS(ShapeError, d.ndim() >= (p.multi_output ? 2 : 1))
      << attrs.where() << ": data of rank " << d.ndim() << " is too small";
  // A label with the data's shape holds probabilities.
  Shape probe = in[1];
  if (probe.rank_known() && probe.ndim() == d.ndim() && probe.ndim() > 1 &&
      merge_shape(&probe, d)) {
    in[1] = probe;
  } else {
    assign_input_shape(attrs, in, 1, softmax_output_label_shape(p, d));
  }
  return all_known(in) && all_known(out);
}

bool loss_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[0]);
  assign_output_type(attrs, out, 0, in[0]);
  norm::check_float_type(attrs, in[0], "data");
  if (in[1] == DType::kUnknown) in[1] = in[0];
  return in[0] != DType::kUnknown;
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

bool loss_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                               std::vector<Shape>& out) {
  // in: [out_grad,] output, label; out: data gradient (the output's shape).
  const int oi = static_cast<int>(in.size()) - 2;
  Shape s;
  for (int i = 0; i <= oi; ++i) merge_shape(&s, in[i]);
  merge_shape(&s, out[0]);
  if (!s.rank_known()) return false;
  for (int i = 0; i <= oi; ++i) assign_input_shape(attrs, in, i, s);
  assign_output_shape(attrs, out, 0, s);
  return all_known(in) && all_known(out);
}

// ---- regression outputs
// --------------------------------------------------------------------------

enum class RegressionKind { kLinear, kLogistic, kMAE };

bool regression_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  const Shape& d = in[0];
  if (!in[1].rank_known()) {
    // (N, 1) data takes an (N,) label by default.
    if (d.ndim() == 2 && d[1] == 1) {
      in[1] = Shape{d[0]};
    } else {
      in[1] = d;
    }
  } else if (!(d.ndim() == 2 && d[1] == 1 && in[1].ndim() == 1)) {
    assign_input_shape(attrs, in, 1, d);
  } else {
    assign_input_shape(attrs, in, 1, Shape{d[0]});
  }
  return all_known(in) && all_known(out);
}

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
void register_regression(OpRegistry& r, const std::string& name, const std::string& text) {
  r.register_op(name)
      .describe(text)
      .set_params<RegressionParam>()
      .set_input_names({"data", "label"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(regression_infer_shape)
      .set_attr<FInferType>(loss_infer_type)
      .set_attr<FInplaceOption>(norm::inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(regression_forward<kKind>))
      .template set_attr<FGradient>([name](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_" + name, {b.output(0), b.input(1)}).at(0),
            GradBuilder::none()};
      });
  r.register_op("_backward_" + name)
      .describe("Gradient of " + name + " with respect to data (the head gradient is ignored).")
      .set_params<RegressionParam>()
      .set_input_names({"output", "label"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(loss_backward_infer_shape)
      .set_attr<FInferType>(loss_infer_type)
      .set_attr<FCompute>(DeviceType::kCPU, FCompute(regression_backward<kKind>));
}

/// Registers SoftmaxOutput, its alias and the regression heads with their backward ops.
void register_loss_head_ops(OpRegistry& r) {
  r.register_op("SoftmaxOutput")
      .describe(
          "Softmax loss head. Forward: softmax over all non-batch elements jointly (default), the "
          "last "
          "axis (preserve_shape) or axis 1 at each position (multi_output); the label is ignored. "
          "Backward: (softmax - smoothed one_hot(label)) * grad_scale / normaliser, rows with "
          "ignore_label zeroed when use_ignore, times the head gradient only with out_grad. A "
          "label "
          "shaped like the data holds probabilities: gradient (softmax - label) * grad_scale.")
      .set_params<SoftmaxOutputParam>()
      .set_input_names({"data", "label"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(softmax_output_infer_shape)
      .set_attr<FInferType>(loss_infer_type)
      .set_attr<FInplaceOption>(norm::inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, softmax_output_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_SoftmaxOutput",
                                      {b.out_grad(0), b.output(0), b.input(1)})
                .at(0),
            GradBuilder::none()};
      });
  r.add_alias("Softmax", "SoftmaxOutput");
  r.register_op("_backward_SoftmaxOutput")
      .describe("Gradient of SoftmaxOutput with respect to data.")
      .set_params<SoftmaxOutputParam>()
      .set_input_names({"out_grad", "output", "label"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(loss_backward_infer_shape)
      .set_attr<FInferType>(
          [](const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
            if (in[1] == DType::kUnknown) assign_input_type(attrs, in, 1, out[0]);
            assign_output_type(attrs, out, 0, in[1]);
            assign_input_type(attrs, in, 0, in[1]);
            if (in[2] == DType::kUnknown) in[2] = in[1];
            return in[1] != DType::kUnknown;
          })
      .set_attr<FCompute>(DeviceType::kCPU, softmax_output_backward);

  register_regression<RegressionKind::kLinear>(r, "LinearRegressionOutput",
                                               "Linear regression head: forward identity; gradient "
                                               "(out - label) * grad_scale / num_output, with "
                                               "num_output = label.size / label.shape[0].");
  register_regression<RegressionKind::kLogistic>(
      r, "LogisticRegressionOutput",
      "Logistic regression head: forward sigmoid; gradient (out - label) * grad_scale / "
      "num_output.");
  register_regression<RegressionKind::kMAE>(r, "MAERegressionOutput",
                                            "Mean-absolute-error head: forward identity; gradient "
                                            "sign(out - label) * grad_scale / num_output.");
}

}  // namespace

void register_nn_norm_ops(OpRegistry& r) {
  register_batch_norm_ops(r);
  register_layer_norm_ops(r);
  register_softmax_ops(r);
  register_loss_head_ops(r);
  register_activation_ops(r);
  register_dropout_ops(r);
  register_ctc_loss_ops(r);
}

}  // namespace weft::detail
