#include "nn/layer.h"

#include <sstream>
#include <unordered_set>

#include "base/error.h"

namespace weft::nn {

namespace {

std::string join(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

// ---- BuildContext
// ---------------------------------------------------------------------------------

graph::Symbol BuildContext::param(const Layer& layer, std::string_view suffix) {
  std::string name = layer.name() + "_" + std::string(suffix);
  auto it = params_.find(name);
  if (it == params_.end()) {
    it = params_.emplace(name, graph::Symbol::variable(name)).first;
  }
  return it->second;
}

graph::Symbol BuildContext::op(const Layer& layer, std::string_view op,
                               std::vector<graph::Symbol> inputs, AttrMap attrs,
                               std::string_view suffix) {
  return graph::Symbol::op(op, std::move(inputs), std::move(attrs),
                           layer.name() + std::string(suffix));
}

graph::Symbol BuildContext::apply(const Layer& layer, const std::vector<graph::Symbol>& inputs) {
  WEFT_CHECK(layer.num_inputs() == 0 || layer.num_inputs() == inputs.size())
      << layer.label() << ": takes " << layer.num_inputs() << " input(s), got " << inputs.size();
  return layer.forward(*this, inputs);
}

// ---- Layer
// ----------------------------------------------------------------------------------------

std::string Layer::label() const { return name_.empty() ? kind_ : kind_ + " '" + name_ + "'"; }

std::vector<const Layer*> Layer::walk() const {
  std::vector<const Layer*> order;
  std::unordered_set<const Layer*> seen;
  // Depth first, parents before children, as Python's walk(); explicit stack of pending lists.
  struct Frame {
    std::vector<const Layer*> items;
    size_t next = 0;
  };
  std::vector<Frame> stack{{{this}, 0}};
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == f.items.size()) {
      stack.pop_back();
      continue;
    }
    const Layer* layer = f.items[f.next++];
    WEFT_CHECK(layer != nullptr) << label() << ": a child layer is null";
    if (!seen.insert(layer).second) continue;
    order.push_back(layer);
    std::vector<const Layer*> kids = layer->children();
    if (!kids.empty()) stack.push_back({std::move(kids), 0});
  }
  return order;
}

void Layer::name_tree() const {
  const std::vector<const Layer*> layers = walk();
  std::set<std::string, std::less<>> taken;
  for (const Layer* l : layers) {
    if (!l->name_.empty()) taken.insert(l->name_);
  }
  std::map<std::string, int, std::less<>> counts;
  for (const Layer* l : layers) {
    if (!l->name_.empty()) continue;
    int& n = counts[l->prefix_];
    while (taken.count(l->prefix_ + std::to_string(n)) != 0) ++n;
    l->name_ = l->prefix_ + std::to_string(n);
    taken.insert(l->name_);
    ++n;
  }
}

std::vector<std::string> Layer::input_names(size_t n) {
  if (n == 1) return {"data"};
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back("data" + std::to_string(i));
  return names;
}

graph::Symbol Layer::symbol(size_t num_inputs) const {
  WEFT_CHECK(num_inputs > 0) << label() << ": a model needs at least one input";
  name_tree();
  std::vector<graph::Symbol> xs;
  for (const std::string& n : input_names(num_inputs)) xs.push_back(graph::Symbol::variable(n));
  // A fresh naming context: nodes a layer leaves unnamed are counted per trace, not per thread.
  graph::NameScope scope;
  BuildContext ctx;
  return ctx.apply(*this, xs);
}

// ---- Parameters
// -----------------------------------------------------------------------------------

void Parameters::set(const std::string& name, NDArray value, bool auxiliary) {
  WEFT_CHECK(!value.is_none()) << "Parameters: the array for '" << name << "' is none";
  if (arrays_.find(name) == arrays_.end()) order_.push_back(name);
  arrays_[name] = std::move(value);
  if (auxiliary) {
    aux_.insert(name);
  } else {
    aux_.erase(name);
  }
}

const NDArray& Parameters::at(std::string_view name) const {
  auto it = arrays_.find(name);
  WEFT_CHECK(it != arrays_.end()) << "Parameters: no parameter '" << name
                                  << "' (have: " << join(order_) << ")";
  return it->second;
}

std::vector<std::string> Parameters::aux_names() const {
  std::vector<std::string> out;
  for (const std::string& n : order_) {
    if (is_auxiliary(n)) out.push_back(n);
  }
  return out;
}

std::map<std::string, NDArray, std::less<>> Parameters::trainable() const {
  std::map<std::string, NDArray, std::less<>> out;
  for (const auto& [n, a] : arrays_) {
    if (!is_auxiliary(n)) out.emplace(n, a);
  }
  return out;
}

std::map<std::string, NDArray, std::less<>> Parameters::auxiliary() const {
  std::map<std::string, NDArray, std::less<>> out;
  for (const auto& [n, a] : arrays_) {
    if (is_auxiliary(n)) out.emplace(n, a);
  }
  return out;
}

int64_t Parameters::count() const {
  int64_t total = 0;
  for (const auto& [n, a] : arrays_) {
    if (!is_auxiliary(n)) total += a.size();
  }
  return total;
}

Parameters Parameters::copy() const {
  Parameters out;
  for (const std::string& n : order_) out.set(n, arrays_.at(n).copy(), is_auxiliary(n));
  return out;
}

// ---- init
// -----------------------------------------------------------------------------------------

Parameters init(const Layer& layer, const std::vector<Shape>& input_shapes, uint64_t seed) {
  WEFT_CHECK(!input_shapes.empty())
      << "nn::init(" << layer.label() << "): give one shape per input (0 marks a deferred dim)";
  const graph::Symbol net = layer.symbol(input_shapes.size());
  const std::vector<std::string> inputs = Layer::input_names(input_shapes.size());
  // Parameter shapes do not depend on deferred dimensions: infer with 1 there.
  graph::InferInputs in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = input_shapes[i];
    WEFT_CHECK_AS(ShapeError, s.rank_known())
        << "nn::init(" << layer.label() << "): input '" << inputs[i] << "' has an unknown rank";
    std::vector<int64_t> dims;
    for (int d = 0; d < s.ndim(); ++d) dims.push_back(s[d] <= 0 ? 1 : s[d]);
    in.shapes[inputs[i]] = Shape(dims);
  }
  const graph::InferredShapes inferred = net.infer_shape(in, /*require_complete=*/true);

  std::map<std::string, InitializerPtr, std::less<>> inits;
  for (const Layer* l : layer.walk()) {
    for (auto& [suffix, init] : l->param_inits()) {
      if (init) inits[l->name() + "_" + suffix] = init;
    }
  }
  const std::set<std::string, std::less<>> input_set(inputs.begin(), inputs.end());
  Parameters params;
  auto make = [&](const std::string& name, const Shape& shape, bool aux) {
    if (input_set.count(name) != 0) return;
    auto it = inits.find(name);
    const InitializerPtr init = it != inits.end() ? it->second : default_initializer(name);
    // Note [One initialiser]: weft.nn's Layer.init draws the same values.
    params.set(name, NDArray::from_vector<float>(shape, initial_values(*init, shape, seed, name)),
               aux);
  };
  const std::vector<std::string> args = net.list_arguments();
  for (size_t i = 0; i < args.size(); ++i) make(args[i], inferred.arg_shapes[i], false);
  const std::vector<std::string> aux = net.list_auxiliary_states();
  for (size_t i = 0; i < aux.size(); ++i) make(aux[i], inferred.aux_shapes[i], true);
  return params;
}

}  // namespace weft::nn
