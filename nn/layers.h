// The basic layers of nn/, each one operator of weft's MXNet-compatible set, named as Gluon
// names them (dense0_weight, conv0_bias, batchnorm0_moving_mean), and two losses.
#pragma once

#include <cstdint>
#include <string>

#include "nn/layer.h"

namespace weft::nn {

/// A pair of sizes (height, width); one number stands for both.
struct Size2 {
  int64_t h = 0, w = 0;
  Size2(int64_t v) : h(v), w(v) {}  // NOLINT(google-explicit-constructor): `.strides = 2`
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  Shape shape() const { return Shape{h, w}; }
};

struct DenseOptions {
  /// Activation applied after the product (relu, sigmoid, tanh, softrelu, softsign; "" none).
  std::string activation{};
  bool use_bias = true;
  /// Treat all axes but the first as the features (MXNet's default); false: the last axis.
  bool flatten = true;
  InitializerPtr weight_init{};  ///< null: Xavier
  InitializerPtr bias_init{};    ///< null: Zero
};

/// y = act(x W^T + b) with W (units, in_units); in_units is inferred at init.
class Dense : public Layer {
 public:
  explicit Dense(int64_t units, DenseOptions options = {}, std::string name = "");
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;
  std::map<std::string, InitializerPtr> param_inits() const override;

 private:
  int64_t units_;
  DenseOptions o_;
};

struct Conv2DOptions {
  Size2 strides = 1;
  Size2 padding = 0;
  Size2 dilation = 1;
  /// Channels are split into `groups` independent convolutions (groups = channels: depthwise).
  int64_t groups = 1;
  std::string activation{};
  bool use_bias = true;
  InitializerPtr weight_init{};
  InitializerPtr bias_init{};
};

/// 2-D convolution over (N, C, H, W): weight (channels, C/groups, kh, kw), C inferred at init.
class Conv2D : public Layer {
 public:
  Conv2D(int64_t channels, Size2 kernel, Conv2DOptions options = {}, std::string name = "");
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;
  std::map<std::string, InitializerPtr> param_inits() const override;

 private:
  int64_t channels_;
  Size2 kernel_;
  Conv2DOptions o_;
};

struct BatchNormOptions {
  int axis = 1;
  double momentum = 0.9;
  double epsilon = 1e-5;
  /// false: gamma is fixed at 1 (MXNet's fix_gamma).
  bool scale = true;
  /// Use the moving statistics in training too.
  bool use_global_stats = false;
};

/// Batch normalization over `axis`. Training uses the batch statistics and updates the moving
/// ones in place (moving = moving*momentum + batch*(1-momentum)); inference uses the moving ones.
class BatchNorm : public Layer {
 public:
  explicit BatchNorm(BatchNormOptions options = {}, std::string name = "");
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  BatchNormOptions o_;
};

/// An activation by name: relu, sigmoid, tanh, softrelu, softsign.
class Activation : public Layer {
 public:
  explicit Activation(std::string act_type, std::string name = "");
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  std::string act_type_;
};

struct PoolOptions {
  /// 0: equal to the pool size.
  Size2 strides = 0;
  Size2 padding = 0;
  /// Round the output size up (MXNet's pooling_convention "full").
  bool ceil_mode = false;
  /// Average pooling: padded elements count in the divisor.
  bool count_include_pad = true;
};

/// Max or average pooling over (N, C, H, W).
class Pool2D : public Layer {
 public:
  /// `type` "max" or "avg"; global: over all of H and W, giving (N, C, 1, 1).
  Pool2D(std::string kind, std::string type, bool global, Size2 pool_size, PoolOptions options,
         std::string name);
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  std::string type_;
  bool global_;
  Size2 pool_size_;
  PoolOptions o_;
};

class MaxPool2D : public Pool2D {
 public:
  explicit MaxPool2D(Size2 pool_size = 2, PoolOptions options = {}, std::string name = "")
      : Pool2D("MaxPool2D", "max", false, pool_size, options, std::move(name)) {}
};

class AvgPool2D : public Pool2D {
 public:
  explicit AvgPool2D(Size2 pool_size = 2, PoolOptions options = {}, std::string name = "")
      : Pool2D("AvgPool2D", "avg", false, pool_size, options, std::move(name)) {}
};

class GlobalAvgPool2D : public Pool2D {
 public:
  explicit GlobalAvgPool2D(std::string name = "")
      : Pool2D("GlobalAvgPool2D", "avg", true, 1, {}, std::move(name)) {}
};

/// (N, d1, ..., dn) -> (N, d1*...*dn).
class Flatten : public Layer {
 public:
  explicit Flatten(std::string name = "") : Layer("Flatten", "flatten", std::move(name)) {}
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;
};

/// Inverted dropout with drop probability `rate` in training; the identity in inference.
class Dropout : public Layer {
 public:
  explicit Dropout(double rate, std::string name = "");
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  double rate_;
};

// ---- losses: two inputs (prediction, label), one loss per sample (N,)
// ------------------------------

/// -log softmax(pred)[label] along the last axis; labels are class indices (N,).
class SoftmaxCrossEntropyLoss : public Layer {
 public:
  explicit SoftmaxCrossEntropyLoss(std::string name = "")
      : Layer("SoftmaxCrossEntropyLoss", "softmaxcrossentropyloss", std::move(name)) {}
  size_t num_inputs() const override { return 2; }
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;
};

/// 0.5 * (pred - label)^2 averaged over all axes but the first; label has pred's shape.
class L2Loss : public Layer {
 public:
  explicit L2Loss(std::string name = "") : Layer("L2Loss", "l2loss", std::move(name)) {}
  size_t num_inputs() const override { return 2; }
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;
};

}  // namespace weft::nn
