// Optimizers of nn/: each update is one operator invocation per parameter (sgd_update,
// sgd_mom_update) writing the weight in place, so updates are asynchronous and ordered by the
// engine after the backward pass that produced their gradients.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ndarray/ndarray.h"
#include "nn/layer.h"

namespace weft::nn {

struct SGDOptions {
  double lr = 0.01;
  /// 0: plain SGD (sgd_update); > 0: mom = momentum*mom - lr*(g + wd*w); w += mom.
  double momentum = 0;
  double wd = 0;
  /// Gradients are multiplied by this first (1/batch for a summed per-sample loss).
  double rescale_grad = 1;
  /// Clip the rescaled gradient to [-clip_gradient, clip_gradient]; < 0: no clipping.
  double clip_gradient = -1;
};

/// Stochastic gradient descent, with momentum and weight decay.
class SGD {
 public:
  explicit SGD(SGDOptions options = {});

  /// One step on every trainable parameter of `params` that has a gradient in `grads` (others
  /// are skipped). Throws ValueError naming a gradient whose shape differs from its parameter.
  void update(Parameters& params, const std::map<std::string, NDArray, std::less<>>& grads);
  /// One step on one weight, in place. `name` keys the momentum state.
  void step(const std::string& name, NDArray& weight, const NDArray& grad);

  /// Changes the step size from the next update on.
  void set_learning_rate(double lr) { options_.lr = lr; }
  const SGDOptions& options() const { return options_; }
  /// Updates applied so far (calls of update()).
  int64_t num_update() const { return num_update_; }

 private:
  std::shared_ptr<const OpAttrs> attrs();

  SGDOptions options_;
  int64_t num_update_ = 0;
  std::map<std::string, NDArray, std::less<>> momentum_;
  // Parsed once per learning rate rather than per parameter and step.
  std::shared_ptr<const OpAttrs> attrs_;
  double attrs_lr_ = 0;
};

}  // namespace weft::nn
