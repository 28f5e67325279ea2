// Combinators of nn/: layers made of layers.
#pragma once

#include <string>
#include <vector>

#include "nn/layer.h"

namespace weft::nn {

/// Applies its layers in order, each to the previous one's outputs (a group is passed on as
/// several inputs). Takes as many inputs as its first layer.
class Sequential : public Layer {
 public:
  explicit Sequential(std::vector<LayerPtr> layers = {}, std::string name = "");
  /// Appends a layer; returns *this. Throws ValueError for a null layer.
  Sequential& add(LayerPtr layer);
  const std::vector<LayerPtr>& layers() const { return layers_; }
  size_t num_inputs() const override;
  std::vector<const Layer*> children() const override;
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  std::vector<LayerPtr> layers_;
};

/// act(block(x) + shortcut(x)): the shortcut is the identity unless given (a projection such as
/// a strided 1x1 convolution); `activation` "" adds none.
class Residual : public Layer {
 public:
  explicit Residual(LayerPtr block, LayerPtr shortcut = nullptr, std::string activation = "",
                    std::string name = "");
  std::vector<const Layer*> children() const override;
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  LayerPtr block_, shortcut_;
  std::string activation_;
};

/// Applies every branch to the same input and concatenates the outputs along `axis`.
class Concat : public Layer {
 public:
  explicit Concat(std::vector<LayerPtr> branches, int axis = 1, std::string name = "");
  std::vector<const Layer*> children() const override;
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  std::vector<LayerPtr> branches_;
  int axis_;
};

/// A network followed by a loss: inputs (data, label), output loss(net(data), label), one value
/// per sample. The network's parameters keep their names, so the Parameters of nn::init(net)
/// serve both models.
class WithLoss : public Layer {
 public:
  WithLoss(LayerPtr net, LayerPtr loss, std::string name = "");
  size_t num_inputs() const override { return 2; }
  std::vector<const Layer*> children() const override { return {net_.get(), loss_.get()}; }
  graph::Symbol forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const override;

 private:
  LayerPtr net_, loss_;
};

}  // namespace weft::nn
