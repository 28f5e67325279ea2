#include "nn/optim.h"

#include "base/error.h"
#include "ops/params.h"

namespace weft::nn {

SGD::SGD(SGDOptions options) : options_(options) {
  WEFT_CHECK(options_.momentum >= 0 && options_.momentum < 1)
      << "SGD: momentum must be in [0, 1), got " << options_.momentum;
  WEFT_CHECK(options_.lr >= 0) << "SGD: lr must not be negative, got " << options_.lr;
}

std::shared_ptr<const OpAttrs> SGD::attrs() {
  if (attrs_ && attrs_lr_ == options_.lr) return attrs_;
  AttrMap a{{"lr", format_float_attr(options_.lr)},
            {"wd", format_float_attr(options_.wd)},
            {"rescale_grad", format_float_attr(options_.rescale_grad)},
            {"clip_gradient", format_float_attr(options_.clip_gradient)}};
  const bool mom = options_.momentum > 0;
  if (mom) a["momentum"] = format_float_attr(options_.momentum);
  attrs_ = make_op_attrs(mom ? "sgd_mom_update" : "sgd_update", a);
  attrs_lr_ = options_.lr;
  return attrs_;
}

void SGD::step(const std::string& name, NDArray& weight, const NDArray& grad) {
  WEFT_CHECK_AS(ShapeError, grad.shape() == weight.shape())
      << "SGD: gradient of '" << name << "' has shape " << grad.shape() << ", the parameter has "
      << weight.shape();
  InvokeOptions out;
  out.outputs = {weight};  // in place (Note [Optimizer updates in place] in ops/defs/optimizer.cc)
  if (options_.momentum == 0) {
    invoke(attrs(), {weight, grad}, std::move(out));
    return;
  }
  auto it = momentum_.find(name);
  if (it == momentum_.end()) {
    it = momentum_.emplace(name, NDArray::zeros(weight.shape(), weight.dtype(), weight.device()))
             .first;
  }
  invoke(attrs(), {weight, grad, it->second}, std::move(out));
}

void SGD::update(Parameters& params, const std::map<std::string, NDArray, std::less<>>& grads) {
  ++num_update_;
  for (const std::string& name : params.names()) {
    if (params.is_auxiliary(name)) continue;
    auto g = grads.find(name);
    if (g == grads.end() || g->second.is_none()) continue;
    NDArray w = params.at(name);
    step(name, w, g->second);
  }
}

}  // namespace weft::nn
