// nn::Model: runs a layer tree as bound graphs (see nn/layer.h for the whole picture).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "nn/layer.h"

namespace weft::nn {

struct ModelOptions {
  /// Inference-time fusion (conv+BN+ReLU) for runs without gradients.
  bool fuse = true;
  /// Bound executors kept (one per input shapes, dtypes, mode and parameter arrays); the oldest
  /// is dropped beyond this.
  size_t max_bound = 8;
};

/// The outputs of a training-mode run and the gradients of the trainable parameters by name.
struct ValueAndGrad {
  std::vector<NDArray> outputs;
  /// The bound executor's gradient buffers: the next value_and_grad with the same input shapes
  /// overwrites them (in engine order, so updates already pushed read the old values). copy()
  /// one to keep it.
  std::map<std::string, NDArray, std::less<>> grads;
};

/// A layer tree traced once per number of inputs and bound per input shapes and mode. The
/// parameter arrays are bound as they are, without a copy, so in-place optimizer updates are
/// seen by the next run; a Parameters object with other arrays binds again. Outputs are copied
/// out of the bound arrays, so a later run never overwrites an earlier result. The tree is traced
/// at the first run: build it completely before. Use from one thread at a time.
class Model {
 public:
  explicit Model(LayerPtr layer, ModelOptions options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Layer& layer() const { return *layer_; }
  /// nn::init(layer(), input_shapes, seed).
  Parameters init(const std::vector<Shape>& input_shapes, uint64_t seed = 0) const;

  /// The outputs for `inputs` (one array per input) with `params`. `train`: training mode
  /// (Dropout masks; BatchNorm uses the batch statistics and updates the moving ones in
  /// `params` in place, as MXNet does). Returns at once; reading an output waits.
  /// Throws ValueError naming a parameter missing from `params`, ShapeError naming the op whose
  /// shapes do not fit.
  std::vector<NDArray> apply(const Parameters& params, const std::vector<NDArray>& inputs,
                             bool train = false);

  /// A forward pass in training mode (or inference mode with `train` false) and the backward
  /// pass: gradients of sum_i <outputs[i], head_grads[i]> with respect to every trainable
  /// parameter. `head_grads` empty: ones (the gradient of the sum of the outputs; a model ending
  /// in a per-sample loss gets the gradient of the summed loss).
  ValueAndGrad value_and_grad(const Parameters& params, const std::vector<NDArray>& inputs,
                              const std::vector<NDArray>& head_grads = {}, bool train = true);

  /// The traced symbol for `num_inputs` inputs (traced on first use).
  const graph::Symbol& symbol(size_t num_inputs = 1);
  /// The number of bound executors kept.
  size_t num_bound() const;

 private:
  struct Trace;
  struct Bound;
  Bound& bound_for(const Parameters& params, const std::vector<NDArray>& inputs, bool train,
                   bool grad);
  const Trace& trace(size_t num_inputs);

  LayerPtr layer_;
  ModelOptions options_;
  std::unique_ptr<Trace> trace_;
  std::vector<std::unique_ptr<Bound>> bound_;
};

}  // namespace weft::nn
