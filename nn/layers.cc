#include "nn/layers.h"

#include "base/error.h"
#include "ops/params.h"

namespace weft::nn {

namespace {

const char* bool_attr(bool v) { return v ? "True" : "False"; }

std::map<std::string, InitializerPtr> weight_bias_inits(const InitializerPtr& weight,
                                                        const InitializerPtr& bias) {
  std::map<std::string, InitializerPtr> out;
  if (weight) out["weight"] = weight;
  if (bias) out["bias"] = bias;
  return out;
}

void check_positive(const Layer& layer, const char* what, const Size2& s, int64_t minimum) {
  WEFT_CHECK(s.h >= minimum && s.w >= minimum)
      << layer.kind() << ": " << what << " must be >= " << minimum << ", got (" << s.h << ", "
      << s.w << ")";
}

}  // namespace

// ---- Dense
// ----------------------------------------------------------------------------------------

Dense::Dense(int64_t units, DenseOptions options, std::string name)
    : Layer("Dense", "dense", std::move(name)), units_(units), o_(std::move(options)) {
  WEFT_CHECK(units_ > 0) << "Dense: units must be positive, got " << units_;
}

std::map<std::string, InitializerPtr> Dense::param_inits() const {
  return weight_bias_inits(o_.weight_init, o_.bias_init);
}

graph::Symbol Dense::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  std::vector<graph::Symbol> inputs{in[0], ctx.param(*this, "weight")};
  if (o_.use_bias) inputs.push_back(ctx.param(*this, "bias"));
  AttrMap attrs{{"num_hidden", std::to_string(units_)},
                {"no_bias", bool_attr(!o_.use_bias)},
                {"flatten", bool_attr(o_.flatten)}};
  graph::Symbol y = ctx.op(*this, "FullyConnected", std::move(inputs), std::move(attrs));
  if (!o_.activation.empty()) {
    y = ctx.op(*this, "Activation", {y}, {{"act_type", o_.activation}}, "_act");
  }
  return y;
}

// ---- Conv2D
// ---------------------------------------------------------------------------------------

Conv2D::Conv2D(int64_t channels, Size2 kernel, Conv2DOptions options, std::string name)
    : Layer("Conv2D", "conv", std::move(name)),
      channels_(channels),
      kernel_(kernel),
      o_(std::move(options)) {
  WEFT_CHECK(channels_ > 0) << "Conv2D: channels must be positive, got " << channels_;
  check_positive(*this, "kernel_size", kernel_, 1);
  check_positive(*this, "strides", o_.strides, 1);
  check_positive(*this, "padding", o_.padding, 0);
  check_positive(*this, "dilation", o_.dilation, 1);
  WEFT_CHECK(o_.groups >= 1 && channels_ % o_.groups == 0)
      << "Conv2D: groups (" << o_.groups << ") must divide channels (" << channels_ << ")";
}

std::map<std::string, InitializerPtr> Conv2D::param_inits() const {
  return weight_bias_inits(o_.weight_init, o_.bias_init);
}

graph::Symbol Conv2D::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  std::vector<graph::Symbol> inputs{in[0], ctx.param(*this, "weight")};
  if (o_.use_bias) inputs.push_back(ctx.param(*this, "bias"));
  AttrMap attrs{{"kernel", format_shape_attr(kernel_.shape())},
                {"stride", format_shape_attr(o_.strides.shape())},
                {"pad", format_shape_attr(o_.padding.shape())},
                {"dilate", format_shape_attr(o_.dilation.shape())},
                {"num_filter", std::to_string(channels_)},
                {"num_group", std::to_string(o_.groups)},
                {"no_bias", bool_attr(!o_.use_bias)}};
  graph::Symbol y = ctx.op(*this, "Convolution", std::move(inputs), std::move(attrs));
  if (!o_.activation.empty()) {
    y = ctx.op(*this, "Activation", {y}, {{"act_type", o_.activation}}, "_act");
  }
  return y;
}

// ---- BatchNorm
// ------------------------------------------------------------------------------------

BatchNorm::BatchNorm(BatchNormOptions options, std::string name)
    : Layer("BatchNorm", "batchnorm", std::move(name)), o_(options) {
  WEFT_CHECK(o_.epsilon > 0) << "BatchNorm: epsilon must be positive, got " << o_.epsilon;
}

graph::Symbol BatchNorm::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  std::vector<graph::Symbol> inputs{in[0]};
  for (const char* s : {"gamma", "beta", "moving_mean", "moving_var"}) {
    inputs.push_back(ctx.param(*this, s));
  }
  AttrMap attrs{{"axis", std::to_string(o_.axis)},
                {"momentum", format_float_attr(o_.momentum)},
                {"eps", format_float_attr(o_.epsilon)},
                {"fix_gamma", bool_attr(!o_.scale)},
                {"use_global_stats", bool_attr(o_.use_global_stats)}};
  return ctx.op(*this, "BatchNorm", std::move(inputs), std::move(attrs));
}

// ---- Activation, Flatten, Dropout
// -----------------------------------------------------------------

Activation::Activation(std::string act_type, std::string name)
    : Layer("Activation", "activation", std::move(name)), act_type_(std::move(act_type)) {}

graph::Symbol Activation::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  return ctx.op(*this, "Activation", {in[0]}, {{"act_type", act_type_}});
}

graph::Symbol Flatten::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  return ctx.op(*this, "Flatten", {in[0]});
}

Dropout::Dropout(double rate, std::string name)
    : Layer("Dropout", "dropout", std::move(name)), rate_(rate) {
  WEFT_CHECK(rate_ >= 0 && rate_ < 1) << "Dropout: rate must be in [0, 1), got " << rate_;
}

graph::Symbol Dropout::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  return ctx.op(*this, "Dropout", {in[0]}, {{"p", format_float_attr(rate_)}});
}

// ---- pooling
// --------------------------------------------------------------------------------------

Pool2D::Pool2D(std::string kind, std::string type, bool global, Size2 pool_size,
               PoolOptions options, std::string name)
    : Layer(std::move(kind), "pool", std::move(name)),
      type_(std::move(type)),
      global_(global),
      pool_size_(pool_size),
      o_(options) {
  check_positive(*this, "pool_size", pool_size_, 1);
  check_positive(*this, "strides", o_.strides, 0);
  check_positive(*this, "padding", o_.padding, 0);
  if (o_.strides.h == 0 || o_.strides.w == 0) o_.strides = pool_size_;
}

graph::Symbol Pool2D::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  if (global_) {
    return ctx.op(*this, "Pooling", {in[0]},
                  {{"kernel", "(1, 1)"}, {"pool_type", type_}, {"global_pool", "True"}});
  }
  AttrMap attrs{{"kernel", format_shape_attr(pool_size_.shape())},
                {"stride", format_shape_attr(o_.strides.shape())},
                {"pad", format_shape_attr(o_.padding.shape())},
                {"pool_type", type_},
                {"pooling_convention", o_.ceil_mode ? "full" : "valid"}};
  if (type_ == "avg") attrs["count_include_pad"] = bool_attr(o_.count_include_pad);
  return ctx.op(*this, "Pooling", {in[0]}, std::move(attrs));
}

// ---- losses
// ---------------------------------------------------------------------------------------

graph::Symbol SoftmaxCrossEntropyLoss::forward(BuildContext& ctx,
                                               const std::vector<graph::Symbol>& in) const {
  graph::Symbol logp = ctx.op(*this, "log_softmax", {in[0]}, {{"axis", "-1"}}, "_logsoftmax");
  graph::Symbol picked = ctx.op(*this, "pick", {logp, in[1]}, {{"axis", "-1"}}, "_pick");
  return ctx.op(*this, "negative", {picked});
}

graph::Symbol L2Loss::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  graph::Symbol d = ctx.op(*this, "elemwise_sub", {in[0], in[1]}, {}, "_sub");
  graph::Symbol sq = ctx.op(*this, "square", {d}, {}, "_square");
  graph::Symbol half = ctx.op(*this, "_mul_scalar", {sq}, {{"scalar", "0.5"}}, "_half");
  // Averages over every axis but the batch axis, whatever the prediction's rank.
  return ctx.op(*this, "mean", {half}, {{"axis", "(0,)"}, {"exclude", "True"}});
}

}  // namespace weft::nn
