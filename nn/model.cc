#include "nn/model.h"

#include <algorithm>

#include "base/error.h"

namespace weft::nn {

struct Model::Trace {
  size_t num_inputs = 0;
  graph::Symbol symbol;
  std::shared_ptr<const graph::Graph> graph;
  std::vector<std::string> input_names;
  std::vector<std::string> param_names;  // arguments that are not inputs
  std::vector<std::string> aux_names;
};

struct Model::Bound {
  // Identity of the binding: input shapes and dtypes, mode, and the bound parameter arrays.
  std::vector<int64_t> key;
  std::unique_ptr<graph::Executor> executor;
  // The executor keeps the head gradients it was last given; whether they are other than ones.
  bool custom_head_grads = false;
  std::vector<NDArray> ones;
};

Model::Model(LayerPtr layer, ModelOptions options) : layer_(std::move(layer)), options_(options) {
  WEFT_CHECK(layer_ != nullptr) << "nn::Model: the layer is null";
  WEFT_CHECK(options_.max_bound > 0) << "nn::Model: max_bound must be positive";
}

Model::~Model() = default;

Parameters Model::init(const std::vector<Shape>& input_shapes, uint64_t seed) const {
  return nn::init(*layer_, input_shapes, seed);
}

const Model::Trace& Model::trace(size_t num_inputs) {
  if (trace_ && trace_->num_inputs == num_inputs) return *trace_;
  auto t = std::make_unique<Trace>();
  t->num_inputs = num_inputs;
  t->symbol = layer_->symbol(num_inputs);
  t->graph = std::make_shared<const graph::Graph>(t->symbol.to_graph());
  t->input_names = Layer::input_names(num_inputs);
  for (const std::string& a : t->symbol.list_arguments()) {
    if (std::find(t->input_names.begin(), t->input_names.end(), a) == t->input_names.end()) {
      t->param_names.push_back(a);
    }
  }
  t->aux_names = t->symbol.list_auxiliary_states();
  // The executors of another trace bind other graphs.
  bound_.clear();
  trace_ = std::move(t);
  return *trace_;
}

const graph::Symbol& Model::symbol(size_t num_inputs) { return trace(num_inputs).symbol; }

size_t Model::num_bound() const { return bound_.size(); }

Model::Bound& Model::bound_for(const Parameters& params, const std::vector<NDArray>& inputs,
                               bool train, bool grad) {
  WEFT_CHECK(!inputs.empty()) << "nn::Model(" << layer_->label() << "): no inputs given";
  const Trace& t = trace(inputs.size());
  const std::string where = "nn::Model(" + layer_->label() + ")";
  for (const std::vector<std::string>* names : {&t.param_names, &t.aux_names}) {
    for (const std::string& p : *names) {
      if (params.contains(p)) continue;
      std::string have;
      for (const std::string& n : params.names()) have += (have.empty() ? "" : ", ") + n;
      WEFT_THROW(ValueError) << where << ": parameter '" << p
                             << "' is missing from params (have: " << (have.empty() ? "none" : have)
                             << "); were they made by nn::init of "
                             << "this model?";
    }
  }

  std::vector<int64_t> key{train ? 1 : 0, grad ? 1 : 0};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const NDArray& x = inputs[i];
    WEFT_CHECK(!x.is_none()) << where << ": input '" << t.input_names[i] << "' is none";
    key.push_back(static_cast<int64_t>(x.dtype()));
    key.push_back(x.ndim());
    for (int d = 0; d < x.ndim(); ++d) key.push_back(x.shape()[d]);
  }
  // A binding holds the arrays it was given: other arrays (another Parameters, or an entry
  // replaced with set()) need another binding.
  for (const std::vector<std::string>* names : {&t.param_names, &t.aux_names}) {
    for (const std::string& p : *names) {
      const NDArray& a = params.at(p);
      key.push_back(static_cast<int64_t>(a.storage_id()));
      key.push_back(static_cast<int64_t>(a.byte_offset()));
    }
  }
  for (auto it = bound_.begin(); it != bound_.end(); ++it) {
    if ((*it)->key == key) return **it;
  }

  graph::BindOptions opts;
  opts.fuse = options_.fuse && !grad && !train;
  std::map<std::string, NDArray, std::less<>> args, aux;
  for (size_t i = 0; i < inputs.size(); ++i) {
    opts.inputs.shapes[t.input_names[i]] = inputs[i].shape();
    opts.inputs.dtypes[t.input_names[i]] = inputs[i].dtype();
  }
  for (const std::string& p : t.param_names) {
    // detach(): the executor computes the gradients itself; autograd history must not follow.
    args.emplace(p, params.at(p).detach());
    if (grad) opts.grad_req[p] = GradReq::kWrite;
  }
  for (const std::string& p : t.aux_names) aux.emplace(p, params.at(p).detach());

  auto b = std::make_unique<Bound>();
  b->key = std::move(key);
  b->executor = graph::Executor::bind(t.graph, opts, std::move(args), std::move(aux));
  bound_.push_back(std::move(b));
  if (bound_.size() > options_.max_bound) bound_.erase(bound_.begin());
  return *bound_.back();
}

namespace {

void feed_inputs(graph::Executor& ex, const std::vector<std::string>& names,
                 const std::vector<NDArray>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    NDArray dst = ex.arg(names[i]);
    inputs[i].copy_to(dst);
  }
}

std::vector<NDArray> copy_outputs(const graph::Executor& ex) {
  std::vector<NDArray> out;
  for (const NDArray& o : ex.outputs()) out.push_back(o.copy());
  return out;
}

}  // namespace

std::vector<NDArray> Model::apply(const Parameters& params, const std::vector<NDArray>& inputs,
                                  bool train) {
  Bound& b = bound_for(params, inputs, train, /*grad=*/false);
  feed_inputs(*b.executor, trace_->input_names, inputs);
  b.executor->forward(train);
  return copy_outputs(*b.executor);
}

ValueAndGrad Model::value_and_grad(const Parameters& params, const std::vector<NDArray>& inputs,
                                   const std::vector<NDArray>& head_grads, bool train) {
  Bound& b = bound_for(params, inputs, train, /*grad=*/true);
  graph::Executor& ex = *b.executor;
  feed_inputs(ex, trace_->input_names, inputs);
  ex.forward(train);
  ValueAndGrad r;
  r.outputs = copy_outputs(ex);
  if (!head_grads.empty()) {
    WEFT_CHECK(head_grads.size() == ex.outputs().size())
        << "nn::Model(" << layer_->label() << ")::value_and_grad: " << head_grads.size()
        << " head gradients for " << ex.outputs().size() << " outputs";
    ex.backward(head_grads);
    b.custom_head_grads = true;
  } else if (b.custom_head_grads) {
    // The executor would reuse the last head gradients given: give ones explicitly.
    if (b.ones.empty()) {
      for (const Shape& s : ex.output_shapes()) b.ones.push_back(NDArray::ones(s));
    }
    ex.backward(b.ones);
    b.custom_head_grads = false;
  } else {
    ex.backward();
  }
  for (const std::string& p : trace_->param_names) r.grads.emplace(p, ex.grad(p));
  return r;
}

}  // namespace weft::nn
