#include "nn/combinators.h"

#include "base/error.h"

namespace weft::nn {

namespace {

// The outputs of `s` as separate symbols, so a group feeds a layer of several inputs.
std::vector<graph::Symbol> split(const graph::Symbol& s) {
  std::vector<graph::Symbol> out;
  if (s.num_outputs() == 1) return {s};
  for (size_t i = 0; i < s.num_outputs(); ++i) out.push_back(s[i]);
  return out;
}

}  // namespace

Sequential::Sequential(std::vector<LayerPtr> layers, std::string name)
    : Layer("Sequential", "sequential", std::move(name)) {
  for (LayerPtr& l : layers) add(std::move(l));
}

Sequential& Sequential::add(LayerPtr layer) {
  WEFT_CHECK(layer != nullptr) << label() << ": layer " << layers_.size() << " is null";
  layers_.push_back(std::move(layer));
  return *this;
}

size_t Sequential::num_inputs() const {
  return layers_.empty() ? 0 : layers_.front()->num_inputs();
}

std::vector<const Layer*> Sequential::children() const {
  std::vector<const Layer*> out;
  for (const LayerPtr& l : layers_) out.push_back(l.get());
  return out;
}

graph::Symbol Sequential::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  if (layers_.empty()) {
    WEFT_CHECK(in.size() == 1) << label() << ": an empty Sequential passes one input on, got "
                               << in.size();
    return in[0];
  }
  std::vector<graph::Symbol> xs = in;
  graph::Symbol out;
  for (const LayerPtr& l : layers_) {
    out = ctx.apply(*l, xs);
    xs = split(out);
  }
  return out;
}

Residual::Residual(LayerPtr block, LayerPtr shortcut, std::string activation, std::string name)
    : Layer("Residual", "residual", std::move(name)),
      block_(std::move(block)),
      shortcut_(std::move(shortcut)),
      activation_(std::move(activation)) {
  WEFT_CHECK(block_ != nullptr) << "Residual: the block is null";
}

std::vector<const Layer*> Residual::children() const {
  if (shortcut_) return {block_.get(), shortcut_.get()};
  return {block_.get()};
}

graph::Symbol Residual::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  graph::Symbol y = ctx.apply(*block_, in);
  graph::Symbol s = shortcut_ ? ctx.apply(*shortcut_, in) : in[0];
  graph::Symbol out = ctx.op(*this, "elemwise_add", {y, s}, {}, "_add");
  if (!activation_.empty()) {
    out = ctx.op(*this, "Activation", {out}, {{"act_type", activation_}}, "_act");
  }
  return out;
}

Concat::Concat(std::vector<LayerPtr> branches, int axis, std::string name)
    : Layer("Concat", "concat", std::move(name)), branches_(std::move(branches)), axis_(axis) {
  WEFT_CHECK(!branches_.empty()) << "Concat: needs at least one branch";
  for (size_t i = 0; i < branches_.size(); ++i) {
    WEFT_CHECK(branches_[i] != nullptr) << "Concat: branch " << i << " is null";
  }
}

std::vector<const Layer*> Concat::children() const {
  std::vector<const Layer*> out;
  for (const LayerPtr& l : branches_) out.push_back(l.get());
  return out;
}

graph::Symbol Concat::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  std::vector<graph::Symbol> outs;
  for (const LayerPtr& b : branches_) outs.push_back(ctx.apply(*b, in));
  return ctx.op(*this, "Concat", std::move(outs),
                {{"dim", std::to_string(axis_)}, {"num_args", std::to_string(branches_.size())}});
}

WithLoss::WithLoss(LayerPtr net, LayerPtr loss, std::string name)
    : Layer("WithLoss", "withloss", std::move(name)), net_(std::move(net)), loss_(std::move(loss)) {
  WEFT_CHECK(net_ != nullptr && loss_ != nullptr) << "WithLoss: the network or the loss is null";
  WEFT_CHECK(loss_->num_inputs() == 2)
      << "WithLoss: the loss " << loss_->label() << " must take (prediction, label)";
}

graph::Symbol WithLoss::forward(BuildContext& ctx, const std::vector<graph::Symbol>& in) const {
  graph::Symbol pred = ctx.apply(*net_, {in[0]});
  return ctx.apply(*loss_, {pred, in[1]});
}

}  // namespace weft::nn
