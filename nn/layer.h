// weft::nn: models as trees of layers, the C++ core of the Python `weft.nn` (docs/LAYERS.md).
//
// A layer builds its part of a symbol (graph/symbol.h) in forward(); a model is a layer tree.
// There are two pure pieces, as in Python:
//  - nn::init(layer, input shapes, seed) traces the model, infers every parameter's shape
//    (deferred dims such as the batch are 0) and returns the initialized Parameters;
//  - nn::Model::apply(params, inputs, train) runs it. In C++ the core always runs hybridized:
//    the traced symbol is bound with the executor (graph/executor.h), the parameter arrays are
//    bound as they are (no copy), and one bound executor is kept per input shapes and mode.
// Model::value_and_grad adds the backward pass and returns the gradients by name, and nn::SGD
// updates the parameters in place through the sgd_update / sgd_mom_update operators.
//
//   #include "nn/nn.h"
//   using namespace weft;
//   auto net = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Layer>>{
//       std::make_shared<nn::Conv2D>(8, 3, nn::Conv2DOptions{.padding = 1}),
//       std::make_shared<nn::BatchNorm>(), std::make_shared<nn::Activation>("relu"),
//       std::make_shared<nn::GlobalAvgPool2D>(), std::make_shared<nn::Flatten>(),
//       std::make_shared<nn::Dense>(10)});
//   nn::Parameters params = nn::init(*net, {Shape{0, 3, 32, 32}}, /*seed=*/0);
//   nn::Model model(net);
//   NDArray y = model.apply(params, {NDArray::uniform(Shape{4, 3, 32, 32})})[0];  // (4, 10)
//
//   // Training: the loss is part of the model (inputs data0 = data, data1 = label).
//   nn::Model train(std::make_shared<nn::WithLoss>(net,
//       std::make_shared<nn::SoftmaxCrossEntropyLoss>()));
//   nn::SGD sgd({.lr = 0.1, .momentum = 0.9, .rescale_grad = 1.0 / 4});
//   nn::ValueAndGrad r = train.value_and_grad(params, {x, labels});  // r.outputs[0]: (4,)
//   sgd.update(params, r.grads);
//
// Names follow MXNet/Gluon: an unnamed layer is named `<prefix><n>` (dense0, conv1,
// batchnorm0), counted per model in tree order when the model is first traced; its parameters
// are `<layer name>_<suffix>` (dense0_weight, batchnorm0_moving_mean). A layer object used twice
// shares its parameters. Not thread-safe: trace and run a model from one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "graph/symbol.h"
#include "ndarray/ndarray.h"
#include "nn/init.h"

namespace weft::nn {

class Layer;

/// What forward() builds against: makes parameter variables and op nodes named after the layer.
class BuildContext {
 public:
  /// The variable `<layer name>_<suffix>`; the same node each time it is asked for, so a layer
  /// applied twice uses one parameter.
  graph::Symbol param(const Layer& layer, std::string_view suffix);
  /// Applies `op` to `inputs`; the node is named `<layer name><suffix>`, so a layer's main node
  /// (suffix "") gives the output `<layer name>_output`.
  graph::Symbol op(const Layer& layer, std::string_view op, std::vector<graph::Symbol> inputs,
                   AttrMap attrs = {}, std::string_view suffix = "");
  /// `layer.forward(*this, inputs)`, checking the number of inputs it takes.
  graph::Symbol apply(const Layer& layer, const std::vector<graph::Symbol>& inputs);

 private:
  std::map<std::string, graph::Symbol, std::less<>> params_;
};

/// A layer, or a combination of layers. Subclasses define forward() (and combinators
/// children()). Layers hold no parameters: init() makes them, Model::apply() takes them.
class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  /// Builds the layer's output from `inputs`. A layer with several outputs returns a group.
  virtual graph::Symbol forward(BuildContext& ctx,
                                const std::vector<graph::Symbol>& inputs) const = 0;
  /// How many inputs forward() takes; 0: any number (combinators that pass them on).
  virtual size_t num_inputs() const { return 1; }
  /// The layers this one applies, in order.
  virtual std::vector<const Layer*> children() const { return {}; }
  /// Initializers by parameter suffix ("weight"); other parameters get default_initializer().
  virtual std::map<std::string, InitializerPtr> param_inits() const { return {}; }

  /// The class name ("Dense"), for messages.
  const std::string& kind() const { return kind_; }
  /// The prefix of automatic names ("dense").
  const std::string& prefix() const { return prefix_; }
  /// The name: given, or automatic once a model containing the layer was traced ("" before).
  const std::string& name() const { return name_; }
  /// "Dense 'dense0'", for messages.
  std::string label() const;

  /// This layer and every layer below it, depth first, each once.
  std::vector<const Layer*> walk() const;
  /// Names the unnamed layers of the tree: `<prefix><n>` counted per prefix in walk() order,
  /// skipping names already taken. Names once given never change.
  void name_tree() const;
  /// The model as a symbol with inputs `data` (one input) or `data0`, `data1`... (names the tree).
  graph::Symbol symbol(size_t num_inputs = 1) const;
  /// The names symbol() gives the inputs.
  static std::vector<std::string> input_names(size_t n);

 protected:
  Layer(std::string kind, std::string prefix, std::string name)
      : kind_(std::move(kind)), prefix_(std::move(prefix)), name_(std::move(name)) {}

 private:
  std::string kind_, prefix_;
  // Assigned lazily by name_tree() (a trace of a const model); fixed from then on.
  mutable std::string name_;
};

using LayerPtr = std::shared_ptr<Layer>;

/// A model's parameters: name -> NDArray with MXNet's names, auxiliary states included
/// (BatchNorm's moving statistics, updated in place by training-mode runs). Copies share the
/// arrays (copy() makes new ones). Names keep their insertion order.
class Parameters {
 public:
  /// Adds or replaces `name`.
  void set(const std::string& name, NDArray value, bool auxiliary = false);
  bool contains(std::string_view name) const { return arrays_.find(name) != arrays_.end(); }
  /// The array of `name`. Throws ValueError naming the parameter and listing those there are.
  const NDArray& at(std::string_view name) const;
  bool is_auxiliary(std::string_view name) const { return aux_.find(name) != aux_.end(); }
  /// Every name, in insertion order.
  const std::vector<std::string>& names() const { return order_; }
  std::vector<std::string> aux_names() const;
  /// The learned parameters (auxiliary states left out), by name.
  std::map<std::string, NDArray, std::less<>> trainable() const;
  std::map<std::string, NDArray, std::less<>> auxiliary() const;
  /// The number of trainable scalars.
  int64_t count() const;
  size_t size() const { return order_.size(); }
  /// A deep copy (new arrays).
  Parameters copy() const;

 private:
  std::vector<std::string> order_;
  std::map<std::string, NDArray, std::less<>> arrays_;
  std::set<std::string, std::less<>> aux_;
};

/// Creates the parameters of `layer` for inputs of `input_shapes` (one per input; a dimension
/// of 0 or -1 is deferred, such as the batch). Parameter shapes come from the traced symbol's
/// shape inference with deferred dims set to 1, so layers need no input widths. The same seed
/// gives the same values. Names the tree. Throws ShapeError naming the op when the shapes do not
/// fit the model.
Parameters init(const Layer& layer, const std::vector<Shape>& input_shapes, uint64_t seed = 0);

}  // namespace weft::nn
