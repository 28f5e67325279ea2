// The autograd tape and backward pass: an eager GradBuilder runs each op's FGradient at once.
#include "ndarray/autograd.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ndarray/runtime.h"

namespace weft {
namespace {

thread_local bool t_recording = false;
thread_local bool t_training = false;

// Runs an FGradient by invoking each emitted op immediately (onto the engine).
class EagerGradBuilder final : public GradBuilder {
 public:
  EagerGradBuilder(const detail::AutogradNode& node, std::vector<NDArray> out_grads)
      : node_(node), out_grads_(std::move(out_grads)) {}
  const OpAttrs& attrs() const override { return *node_.attrs; }
  GradEntry input(int i) override { return add(node_.inputs.at(i)); }
  GradEntry output(int i) override { return add(node_.outputs.at(i)); }
  GradEntry out_grad(int i) override {
    NDArray& g = out_grads_.at(i);
    if (g.is_none()) g = invoke1("zeros_like", {node_.outputs.at(i)});
    return add(g);
  }
  std::vector<GradEntry> emit(std::string_view op, std::vector<GradEntry> inputs,
                              AttrMap attrs) override {
    auto a = std::make_shared<const OpAttrs>(
        get_op(op).make_attrs(std::move(attrs), node_.attrs->node_name));
    return run(a, inputs);
  }
  std::vector<GradEntry> emit_with_forward_attrs(std::string_view op,
                                                 std::vector<GradEntry> inputs) override {
    auto a = std::make_shared<const OpAttrs>(get_op(op).make_attrs_like(*node_.attrs));
    return run(a, inputs);
  }
  const NDArray& value(GradEntry e) const { return values_.at(e.id); }

 private:
  GradEntry add(NDArray a) {
    values_.push_back(a.detach());
    return {static_cast<int32_t>(values_.size() - 1)};
  }
  std::vector<GradEntry> run(const std::shared_ptr<const OpAttrs>& a,
                             const std::vector<GradEntry>& inputs) {
    std::vector<NDArray> in;
    in.reserve(inputs.size());
    for (auto e : inputs) {
      WEFT_CHECK_AS(InternalError, e.valid())
          << a->where() << ": gradient emitted on an invalid entry";
      in.push_back(values_.at(e.id));
    }
    std::vector<GradEntry> out;
    for (auto& r : invoke_all(a, in)) out.push_back(add(r));
    return out;
  }
  const detail::AutogradNode& node_;
  std::vector<NDArray> out_grads_;
  std::vector<NDArray> values_;
};

NDArray sum_all(std::vector<NDArray>& parts) {
  if (parts.empty()) return NDArray();
  if (parts.size() == 1) return parts[0];
  return invoke1("add_n", parts, {{"num_args", std::to_string(parts.size())}});
}

using NodePtr = std::shared_ptr<detail::AutogradNode>;

// Op nodes reachable from `roots`, heads first (reverse topological order). Holds a reference to
// each, so freeing the graph while walking `order` cannot destroy a node still to be visited.
std::vector<NodePtr> reverse_topological(const std::vector<NodePtr>& roots) {
  std::vector<NodePtr> order;
  std::unordered_set<detail::AutogradNode*> seen;
  std::vector<std::pair<NodePtr, size_t>> stack;
  for (const auto& r : roots) {
    if (r == nullptr || !r->is_call() || seen.count(r.get())) continue;
    seen.insert(r.get());
    stack.emplace_back(r, 0);
    while (!stack.empty()) {
      auto& top = stack.back();
      detail::AutogradNode* node = top.first.get();
      if (top.second < node->inputs.size()) {
        const auto& e = node->inputs[top.second++].autograd_entry();
        if (e && e->node && e->node->is_call() && !seen.count(e->node.get())) {
          seen.insert(e->node.get());
          stack.emplace_back(e->node, 0);
        }
      } else {
        order.push_back(std::move(top.first));
        stack.pop_back();
      }
    }
  }
  std::reverse(order.begin(), order.end());
  return order;
}

struct Key {
  detail::AutogradNode* node;
  int index;
  bool operator==(const Key& o) const { return node == o.node && index == o.index; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return std::hash<void*>()(k.node) * 31 + static_cast<size_t>(k.index);
  }
};

using Pending = std::unordered_map<Key, std::vector<NDArray>, KeyHash>;

// The backward of a recorded function: its gradients join `pending` like an op's.
void run_function(detail::AutogradNode& node, std::vector<NDArray>& out_grads, Pending& pending) {
  for (size_t k = 0; k < out_grads.size(); ++k) {
    if (out_grads[k].is_none()) out_grads[k] = invoke1("zeros_like", {node.outputs[k]});
  }
  std::vector<NDArray> grads = node.function(out_grads);
  WEFT_CHECK(grads.size() == node.inputs.size())
      << "backward: function '" << node.function_name << "' returned " << grads.size()
      << " gradients for " << node.inputs.size() << " inputs";
  for (size_t i = 0; i < grads.size(); ++i) {
    const auto& e = node.inputs[i].autograd_entry();
    if (!e || grads[i].is_none()) continue;
    WEFT_CHECK_AS(ShapeError, grads[i].shape() == node.inputs[i].shape())
        << "backward: function '" << node.function_name << "' returned a gradient of shape "
        << grads[i].shape() << " for input " << i << " of shape " << node.inputs[i].shape();
    pending[{e->node.get(), e->index}].push_back(grads[i].detach());
  }
}

// Shared by backward() and grad(): returns the summed gradient of each requested entry.
std::vector<NDArray> run_backward(const std::vector<NDArray>& heads,
                                  const std::vector<NDArray>& head_grads,
                                  const std::vector<Key>& wanted, bool retain_graph,
                                  bool train_mode, bool write_leaves) {
  WEFT_CHECK(head_grads.empty() || head_grads.size() == heads.size())
      << "backward: " << head_grads.size() << " head gradients for " << heads.size() << " heads";
  autograd::PauseScope pause(train_mode);  // backward ops are not recorded

  Pending pending;
  std::vector<NodePtr> roots;
  bool any = false;
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto& e = heads[i].autograd_entry();
    if (!e) continue;
    WEFT_CHECK(!e->node->freed)
        << "backward: the graph of head " << i
        << " was freed by an earlier backward; pass retain_graph=true to run backward twice";
    any = true;
    NDArray g = (i < head_grads.size() && !head_grads[i].is_none())
                    ? head_grads[i]
                    : invoke1("ones_like", {heads[i].detach()});
    WEFT_CHECK_AS(ShapeError, g.shape() == heads[i].shape())
        << "backward: head gradient " << i << " has shape " << g.shape() << ", head has "
        << heads[i].shape();
    pending[{e->node.get(), e->index}].push_back(g);
    roots.push_back(e->node);
  }
  WEFT_CHECK(any)
      << "backward: no head requires a gradient (record the computation with autograd::RecordScope "
         "and call attach_grad on its inputs)";

  std::unordered_map<Key, NDArray, KeyHash> captured;
  std::unordered_set<Key, KeyHash> wanted_set(wanted.begin(), wanted.end());
  auto take = [&](const Key& k) {
    auto it = pending.find(k);
    if (it == pending.end()) return NDArray();
    NDArray g = sum_all(it->second);
    pending.erase(it);
    if (wanted_set.count(k)) captured[k] = g;
    return g;
  };

  auto order = reverse_topological(roots);
  for (const NodePtr& node_ptr : order) {
    detail::AutogradNode* node = node_ptr.get();
    WEFT_CHECK(!node->freed)
        << "backward: part of the graph was freed by an earlier backward; pass retain_graph=true";
    const int nout = static_cast<int>(node->outputs.size());
    std::vector<NDArray> out_grads(nout);
    bool has_grad = false;
    for (int k = 0; k < nout; ++k) {
      out_grads[k] = take({node, k});
      has_grad = has_grad || !out_grads[k].is_none();
    }
    if (!has_grad) continue;
    if (node->function) {
      run_function(*node, out_grads, pending);
      continue;
    }
    const auto& fgrad = node->attrs->op->attr<FGradient>();
    WEFT_CHECK(static_cast<bool>(fgrad))
        << "backward: " << node->attrs->where()
        << " has no gradient (FGradient), but a result depends on it";
    EagerGradBuilder builder(*node, std::move(out_grads));
    auto entries = fgrad(builder);
    WEFT_CHECK_AS(InternalError, entries.size() == node->inputs.size())
        << node->attrs->where() << ": FGradient returned " << entries.size() << " entries for "
        << node->inputs.size() << " inputs";
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& e = node->inputs[i].autograd_entry();
      if (!e || !entries[i].valid()) continue;
      pending[{e->node.get(), e->index}].push_back(builder.value(entries[i]));
    }
  }

  // Leaves: everything still pending belongs to leaf nodes.
  std::vector<Key> leaves;
  for (auto& [k, parts] : pending) leaves.push_back(k);
  for (const Key& k : leaves) {
    NDArray g = take(k);
    if (!write_leaves || k.node->is_call() || k.node->grad_req == GradReq::kNull ||
        k.node->grad.is_none())
      continue;
    InvokeOptions o;
    o.outputs = {k.node->grad};
    if (k.node->grad_req == GradReq::kWrite) {
      invoke("_copy", {g}, {}, std::move(o));
    } else {
      invoke("elemwise_add", {k.node->grad, g}, {}, std::move(o));
    }
  }

  if (!retain_graph) {
    for (const NodePtr& node : order) {
      node->inputs.clear();
      node->outputs.clear();
      node->freed = true;
      // Drop what the function holds (an executor, Python state); it stays a call node.
      if (node->function)
        node->function = [](const std::vector<NDArray>&) { return std::vector<NDArray>{}; };
    }
  }
  std::vector<NDArray> result;
  for (const Key& k : wanted) {
    auto it = captured.find(k);
    result.push_back(it == captured.end() ? NDArray() : it->second);
  }
  return result;
}

}  // namespace

namespace detail {
void maybe_record(const std::shared_ptr<const OpAttrs>& attrs, const std::vector<NDArray>& inputs,
                  std::vector<NDArray>& outputs) {
  if (!t_recording) return;
  bool needs = false;
  for (const auto& in : inputs) needs = needs || in.requires_grad();
  if (!needs) return;
  auto node = std::make_shared<AutogradNode>();
  node->attrs = attrs;
  node->inputs = inputs;
  node->is_train = t_training;
  node->outputs.reserve(outputs.size());
  for (const auto& out : outputs) node->outputs.push_back(out.detach());
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto e = std::make_shared<AutogradEntry>();
    e->node = node;
    e->index = static_cast<int>(k);
    outputs[k].set_autograd_entry(std::move(e));
  }
}
}  // namespace detail

// ---- NDArray autograd members ------------------------------------------------------------------

void NDArray::attach_grad(GradReq req) {
  check_not_none("attach_grad");
  if (req == GradReq::kNull) {
    autograd_.reset();
    return;
  }
  auto node = std::make_shared<detail::AutogradNode>();
  node->grad_req = req;
  node->grad = NDArray::zeros(shape_, dtype_, device());
  auto e = std::make_shared<detail::AutogradEntry>();
  e->node = std::move(node);
  autograd_ = std::move(e);
}

NDArray NDArray::grad() const {
  if (!autograd_ || autograd_->node->is_call()) return NDArray();
  return autograd_->node->grad;
}

void NDArray::backward() const { backward(NDArray()); }

void NDArray::backward(const NDArray& head_grad, bool retain_graph, bool train_mode) const {
  autograd::backward({*this},
                     head_grad.is_none() ? std::vector<NDArray>{} : std::vector<NDArray>{head_grad},
                     retain_graph, train_mode);
}

NDArray NDArray::detach() const {
  NDArray a = *this;
  a.autograd_.reset();
  return a;
}

bool NDArray::requires_grad() const {
  return autograd_ && (autograd_->node->is_call() || autograd_->node->grad_req != GradReq::kNull);
}

namespace autograd {

bool is_recording() { return t_recording; }
bool is_training() { return t_training; }
bool set_recording(bool recording) {
  bool prev = t_recording;
  t_recording = recording;
  return prev;
}
bool set_training(bool training) {
  bool prev = t_training;
  t_training = training;
  return prev;
}

RecordScope::RecordScope(bool train_mode)
    : prev_recording_(t_recording), prev_training_(t_training) {
  t_recording = true;
  t_training = train_mode;
}
RecordScope::~RecordScope() {
  t_recording = prev_recording_;
  t_training = prev_training_;
}
PauseScope::PauseScope(bool train_mode) : prev_recording_(t_recording), prev_training_(t_training) {
  t_recording = false;
  t_training = train_mode;
}
PauseScope::~PauseScope() {
  t_recording = prev_recording_;
  t_training = prev_training_;
}
TrainModeScope::TrainModeScope() : prev_(t_training) { t_training = true; }
TrainModeScope::~TrainModeScope() { t_training = prev_; }
PredictModeScope::PredictModeScope() : prev_(t_training) { t_training = false; }
PredictModeScope::~PredictModeScope() { t_training = prev_; }

bool record_function(std::string name, const std::vector<NDArray>& inputs,
                     std::vector<NDArray>& outputs, BackwardFunction backward) {
  WEFT_CHECK(static_cast<bool>(backward))
      << "record_function '" << name << "': no backward function given";
  if (!t_recording) return false;
  bool needs = false;
  for (const auto& in : inputs) needs = needs || in.requires_grad();
  if (!needs) return false;
  auto node = std::make_shared<detail::AutogradNode>();
  node->function = std::move(backward);
  node->function_name = std::move(name);
  node->inputs = inputs;
  node->is_train = t_training;
  for (const auto& out : outputs) node->outputs.push_back(out.detach());
  for (size_t k = 0; k < outputs.size(); ++k) {
    auto e = std::make_shared<detail::AutogradEntry>();
    e->node = node;
    e->index = static_cast<int>(k);
    outputs[k].set_autograd_entry(std::move(e));
  }
  return true;
}

void backward(const std::vector<NDArray>& heads, const std::vector<NDArray>& head_grads,
              bool retain_graph, bool train_mode) {
  run_backward(heads, head_grads, {}, retain_graph, train_mode, true);
}

std::vector<NDArray> grad(const std::vector<NDArray>& heads, const std::vector<NDArray>& variables,
                          const std::vector<NDArray>& head_grads, bool retain_graph,
                          bool train_mode) {
  std::vector<Key> wanted;
  for (size_t i = 0; i < variables.size(); ++i) {
    const auto& e = variables[i].autograd_entry();
    WEFT_CHECK(e) << "autograd::grad: variable " << i << " does not require a gradient";
    wanted.push_back({e->node.get(), e->index});
  }
  auto out = run_backward(heads, head_grads, wanted, retain_graph, train_mode, false);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].is_none())
      out[i] = NDArray::zeros(variables[i].shape(), variables[i].dtype(), variables[i].device());
  }
  return out;
}

}  // namespace autograd
}  // namespace weft
