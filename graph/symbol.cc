// The symbolic API: composition with automatic variables and names, DFS conversion to the IR,
// listing, JSON and inference through the graph passes.
#include "graph/symbol.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "graph/json.h"

namespace weft::graph {
namespace detail {

/// A node of a symbol graph. Built once by Symbol's factories and never changed afterwards, so
/// symbols can share it freely.
struct SymNode {
  std::string name;
  const Op* op = nullptr;
  /// The op name as loaded from a file (an alias such as "_Plus"); empty for composed nodes.
  std::string op_name;
  AttrMap attrs;
  std::shared_ptr<const OpAttrs> op_attrs;
  std::vector<Symbol::Entry> inputs;
  std::vector<std::shared_ptr<const SymNode>> control_deps;
  int32_t file_num_outputs = -1;

  SymNode() = default;
  SymNode(const SymNode&) = delete;
  SymNode& operator=(const SymNode&) = delete;
  ~SymNode();

  bool is_variable() const { return op == nullptr; }
  int num_visible_outputs() const { return op ? op->num_visible_outputs(*op_attrs) : 1; }
};

// Note [Iterative symbol teardown]
// A symbol owns its graph through shared_ptrs from each node to its inputs, so destroying the
// last reference to a deep graph (an LSTM unrolled over thousands of steps) would recurse once
// per node and could overflow the stack. Instead, a dying node takes its inputs out, drops the
// references it shares with others, and moves the ones it alone holds into a worklist that is
// released one node at a time; each of those has no inputs left when its destructor runs.
// References are dropped one by one so that a node used twice (elemwise_add(x, x)) is seen as
// uniquely held at its second reference. use_count() == 1 is exact: there are no weak
// references, so no other thread can gain a reference to a node held only here.
SymNode::~SymNode() {
  std::vector<std::shared_ptr<const SymNode>> pending;
  auto take_inputs = [&pending](SymNode& n) {
    std::vector<std::shared_ptr<const SymNode>> children;
    children.reserve(n.inputs.size() + n.control_deps.size());
    for (Symbol::Entry& e : n.inputs) children.push_back(std::move(e.node));
    for (auto& c : n.control_deps) children.push_back(std::move(c));
    n.inputs.clear();
    n.control_deps.clear();
    for (auto& c : children) {
      if (c.use_count() == 1) {
        pending.push_back(std::move(c));
      } else {
        c.reset();
      }
    }
  };
  take_inputs(*this);
  while (!pending.empty()) {
    std::shared_ptr<const SymNode> node = std::move(pending.back());
    pending.pop_back();
    // The sole owner of a node made non-const (make_shared<SymNode>), so changing it is sound.
    take_inputs(const_cast<SymNode&>(*node));
  }
}

}  // namespace detail

using detail::SymNode;

namespace {

// ---- naming ------------------------------------------------------------------------------------

struct NameState {
  std::string prefix;
  std::map<std::string, int, std::less<>> counters;
};

std::vector<NameState>& name_stack() {
  // The bottom entry is the thread's default context, which lives as long as the thread.
  thread_local std::vector<NameState> stack(1);
  return stack;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// ---- traversal ---------------------------------------------------------------------------------

/// Nodes reachable from `heads` in nnvm's DFS post-order: for each head in order, a node's
/// inputs (in order) then its control dependencies, then the node. Iterative (deep graphs).
std::vector<const SymNode*> post_order(const std::vector<Symbol::Entry>& heads) {
  std::vector<const SymNode*> order;
  std::unordered_set<const SymNode*> done;
  struct Frame {
    const SymNode* node;
    size_t next;
  };
  std::vector<Frame> stack;
  auto child = [](const SymNode* n, size_t i) -> const SymNode* {
    return i < n->inputs.size() ? n->inputs[i].node.get()
                                : n->control_deps[i - n->inputs.size()].get();
  };
  for (const Symbol::Entry& h : heads) {
    if (done.count(h.node.get())) continue;
    stack.push_back({h.node.get(), 0});
    // A node is on the stack at most once: the graph is acyclic, so a node cannot be reached
    // again through its own inputs while it is being visited.
    done.insert(h.node.get());
    while (!stack.empty()) {
      Frame& f = stack.back();
      const size_t nchildren = f.node->inputs.size() + f.node->control_deps.size();
      if (f.next < nchildren) {
        const SymNode* c = child(f.node, f.next++);
        if (done.insert(c).second) stack.push_back({c, 0});
        continue;
      }
      order.push_back(f.node);
      stack.pop_back();
    }
  }
  return order;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

Symbol::Entry make_variable_entry(std::string name, AttrMap attrs) {
  auto node = std::make_shared<SymNode>();
  node->name = std::move(name);
  node->attrs = std::move(attrs);
  return Symbol::Entry{std::move(node), 0, 0};
}

}  // namespace

// ---- NameScope ---------------------------------------------------------------------------------

NameScope::NameScope(std::string prefix) {
  name_stack().push_back(NameState{std::move(prefix), {}});
}

NameScope::~NameScope() {
  // Never pops the thread's default context, even if scopes were destroyed out of order.
  if (name_stack().size() > 1) name_stack().pop_back();
}

std::string NameScope::make_name(std::string_view given, std::string_view hint) {
  NameState& s = name_stack().back();
  if (!given.empty()) return s.prefix + std::string(given);
  auto it = s.counters.find(hint);
  if (it == s.counters.end()) it = s.counters.emplace(std::string(hint), 0).first;
  return s.prefix + std::string(hint) + std::to_string(it->second++);
}

// ---- construction ------------------------------------------------------------------------------

Symbol Symbol::variable(std::string name, AttrMap attrs) {
  WEFT_CHECK(!name.empty()) << "Symbol::variable: the name is empty";
  return Symbol({make_variable_entry(std::move(name), std::move(attrs))});
}

Symbol Symbol::variable(std::string name, const Shape& shape, DType dtype, AttrMap attrs) {
  if (shape.rank_known()) {
    Shape written = shape;
    for (int64_t& d : written) d = d < 0 ? 0 : d;
    attrs["__shape__"] = format_shape_attr(written);
  }
  if (dtype != DType::kUnknown) attrs["__dtype__"] = std::to_string(static_cast<int>(dtype));
  return variable(std::move(name), std::move(attrs));
}

Symbol Symbol::op(std::string_view op_name, std::vector<Symbol> inputs, AttrMap attrs,
                  std::string name) {
  const Op& op = OpRegistry::global().get(op_name);
  name = NameScope::make_name(name, lower(op_name));
  const std::string where = "op '" + op.name() + "' (node '" + name + "')";

  // Variadic ops (MXNet's key_var_num_args): the input count is the number of inputs given.
  if (attrs.find("num_args") == attrs.end()) {
    const auto& params = op.param_info_list();
    const bool has_num_args = std::any_of(params.begin(), params.end(),
                                          [](const ParamInfo& p) { return p.name == "num_args"; });
    if (has_num_args) attrs["num_args"] = std::to_string(inputs.size());
  }

  auto node = std::make_shared<SymNode>();
  node->name = name;
  node->op = &op;
  node->attrs = attrs;
  node->op_attrs = std::make_shared<const OpAttrs>(op.make_attrs(std::move(attrs), name));

  checked_num_outputs(op, *node->op_attrs, "node '" + name + "'");  // Note [Bounded output counts]
  const int nin = op.num_inputs(*node->op_attrs);
  const std::vector<std::string> arg_names = op.input_names(*node->op_attrs);
  if (nin >= 0) {
    // Empty symbols past the op's inputs ask for nothing; real inputs there are an error.
    while (inputs.size() > static_cast<size_t>(nin) && inputs.back().empty()) inputs.pop_back();
    WEFT_CHECK(inputs.size() <= static_cast<size_t>(nin))
        << where << ": takes " << nin << " inputs (" << join(arg_names) << "), got "
        << inputs.size();
  }
  const size_t total = nin >= 0 ? static_cast<size_t>(nin) : inputs.size();
  node->inputs.reserve(total);
  for (size_t i = 0; i < total; ++i) {
    const bool given = i < inputs.size() && !inputs[i].empty();
    if (given) {
      WEFT_CHECK(inputs[i].num_outputs() == 1)
          << where << ": input " << i
          << (i < arg_names.size() ? " ('" + arg_names[i] + "')" : std::string()) << " has "
          << inputs[i].num_outputs() << " outputs; pick one with operator[]";
      node->inputs.push_back(inputs[i].outputs_[0]);
      continue;
    }
    WEFT_CHECK(i < arg_names.size())
        << where << ": input " << i << " is missing and has no name to create it by";
    // MXNet before 1.4 also copied the op's params onto the variables it created (OPS.md §1.4);
    // every reader has to ignore them, so they are not copied here.
    node->inputs.push_back(make_variable_entry(name + "_" + arg_names[i], {}));
  }

  // nnvm counts mutations of a variable in the entry's version, and MXNet's symbol API writes 1
  // on the moving mean and var of each BatchNorm it composes (OPS.md §1.2); so does weft, so
  // its files read like MXNet's. Wiring ignores versions.
  if (const auto& mutate = op.attr<FMutateInputs>()) {
    for (int i : mutate(*node->op_attrs)) {
      if (i >= 0 && static_cast<size_t>(i) < node->inputs.size() &&
          node->inputs[i].node->is_variable()) {
        node->inputs[i].version = 1;
      }
    }
  }

  std::vector<Entry> outs;
  const int nvis = node->num_visible_outputs();
  std::shared_ptr<const SymNode> shared = std::move(node);
  for (int i = 0; i < nvis; ++i) outs.push_back(Entry{shared, static_cast<uint32_t>(i), 0});
  return Symbol(std::move(outs));
}

Symbol Symbol::group(const std::vector<Symbol>& symbols) {
  std::vector<Entry> outs;
  for (const Symbol& s : symbols) outs.insert(outs.end(), s.outputs_.begin(), s.outputs_.end());
  return Symbol(std::move(outs));
}

Symbol Symbol::from_graph(const Graph& graph) {
  std::vector<std::shared_ptr<SymNode>> made(graph.nodes.size());
  for (size_t nid = 0; nid < graph.nodes.size(); ++nid) {
    const Node& n = graph.nodes[nid];
    auto s = std::make_shared<SymNode>();
    s->name = n.name;
    s->op = n.op;
    s->op_name = n.op_name;
    s->attrs = n.attrs;
    s->op_attrs = n.op_attrs;
    if (s->op && !s->op_attrs)
      s->op_attrs = std::make_shared<const OpAttrs>(s->op->make_attrs(n.attrs, n.name));
    s->file_num_outputs = n.file_num_outputs;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const NodeEntry& e = n.inputs[i];
      WEFT_CHECK(e.node < nid) << "Symbol::from_graph: node " << nid << " ('" << n.name
                               << "') input " << i << " refers to node " << e.node
                               << ", which is not an earlier node";
      s->inputs.push_back(Entry{made[e.node], e.index, e.version});
    }
    for (uint32_t c : n.control_deps) {
      WEFT_CHECK(c < nid) << "Symbol::from_graph: node " << nid << " ('" << n.name
                          << "') has a control dependency on node " << c
                          << ", which is not an earlier node";
      s->control_deps.push_back(made[c]);
    }
    made[nid] = std::move(s);
  }
  std::vector<Entry> outs;
  for (size_t h = 0; h < graph.heads.size(); ++h) {
    const NodeEntry& e = graph.heads[h];
    WEFT_CHECK(e.node < graph.nodes.size())
        << "Symbol::from_graph: head " << h << " refers to node " << e.node << " of "
        << graph.nodes.size();
    outs.push_back(Entry{made[e.node], e.index, e.version});
  }
  return Symbol(std::move(outs));
}

Symbol Symbol::from_json(std::string_view text) { return from_graph(load_json(text)); }

Symbol Symbol::load(const std::filesystem::path& path) { return from_graph(load_json_file(path)); }

// ---- access ------------------------------------------------------------------------------------

Symbol Symbol::operator[](size_t i) const {
  WEFT_CHECK(i < outputs_.size()) << "Symbol: output " << i << " is out of range; the symbol has "
                                  << outputs_.size() << " outputs";
  return Symbol({outputs_[i]});
}

Symbol Symbol::operator[](std::string_view output_name) const {
  const std::vector<std::string> names = list_outputs();
  size_t found = names.size();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] != output_name) continue;
    WEFT_CHECK(found == names.size())
        << "Symbol: more than one output is called '" << output_name << "'";
    found = i;
  }
  WEFT_CHECK(found < names.size())
      << "Symbol: no output is called '" << output_name << "' (outputs: " << join(names) << ")";
  return Symbol({outputs_[found]});
}

const SymNode& Symbol::single_node(const char* what) const {
  WEFT_CHECK(outputs_.size() == 1)
      << "Symbol::" << what << ": needs a single-output symbol, this one has " << outputs_.size()
      << " outputs";
  return *outputs_[0].node;
}

const std::string& Symbol::name() const { return single_node("name").name; }

bool Symbol::is_variable() const { return outputs_.size() == 1 && outputs_[0].node->is_variable(); }

const std::string& Symbol::op_name() const {
  static const std::string null_op = "null";
  const SymNode& n = single_node("op_name");
  if (!n.op) return null_op;
  return n.op_name.empty() ? n.op->name() : n.op_name;
}

std::optional<std::string> Symbol::attr(std::string_view key) const {
  const SymNode& n = single_node("attr");
  auto it = n.attrs.find(key);
  if (it == n.attrs.end()) return std::nullopt;
  return it->second;
}

const AttrMap& Symbol::list_attr() const { return single_node("list_attr").attrs; }

// ---- listing -----------------------------------------------------------------------------------

std::vector<std::string> Symbol::list_arguments() const {
  if (outputs_.empty()) return {};
  return to_graph().list_arguments();
}

std::vector<std::string> Symbol::list_outputs() const {
  if (outputs_.empty()) return {};
  return to_graph().list_outputs();
}

std::vector<std::string> Symbol::list_auxiliary_states() const {
  if (outputs_.empty()) return {};
  return to_graph().list_auxiliary_states();
}

std::vector<std::string> Symbol::list_inputs() const {
  std::vector<std::string> out;
  for (const SymNode* n : post_order(outputs_)) {
    if (n->is_variable()) out.push_back(n->name);
  }
  return out;
}

Symbol Symbol::get_internals() const {
  // post_order hands out raw pointers; the shared owners are found again through the inputs
  // and outputs that reach each node.
  std::unordered_map<const SymNode*, std::shared_ptr<const SymNode>> owner;
  for (const Entry& e : outputs_) owner.emplace(e.node.get(), e.node);
  const std::vector<const SymNode*> order = post_order(outputs_);
  for (const SymNode* n : order) {
    for (const Entry& e : n->inputs) owner.emplace(e.node.get(), e.node);
    for (const auto& c : n->control_deps) owner.emplace(c.get(), c);
  }
  std::vector<Entry> outs;
  for (const SymNode* n : order) {
    const auto& shared = owner.at(n);
    for (int i = 0; i < n->num_visible_outputs(); ++i)
      outs.push_back(Entry{shared, static_cast<uint32_t>(i), 0});
  }
  return Symbol(std::move(outs));
}

// ---- conversion --------------------------------------------------------------------------------

Graph Symbol::to_graph() const {
  WEFT_CHECK(!outputs_.empty()) << "Symbol::to_graph: the symbol is empty";
  Graph g;
  std::unordered_map<const SymNode*, uint32_t> ids;
  for (const SymNode* s : post_order(outputs_)) {
    Node n;
    n.name = s->name;
    n.op = s->op;
    n.op_name = s->op_name;
    n.attrs = s->attrs;
    n.op_attrs = s->op_attrs;
    n.file_num_outputs = s->file_num_outputs;
    n.inputs.reserve(s->inputs.size());
    for (const Entry& e : s->inputs)
      n.inputs.push_back(NodeEntry{ids.at(e.node.get()), e.index, e.version});
    for (const auto& c : s->control_deps) n.control_deps.push_back(ids.at(c.get()));
    ids.emplace(s, static_cast<uint32_t>(g.nodes.size()));
    g.nodes.push_back(std::move(n));
  }
  for (const Entry& e : outputs_)
    g.heads.push_back(NodeEntry{ids.at(e.node.get()), e.index, e.version});
  g.reindex();
  return g;
}

std::string Symbol::to_json() const { return save_json(to_graph()); }

void Symbol::save(const std::filesystem::path& path) const { save_json_file(to_graph(), path); }

InferredShapes Symbol::infer_shape(const InferInputs& inputs, bool require_complete) const {
  const Graph g = to_graph();
  // A misspelt input name would otherwise be ignored and surface as a confusing missing shape.
  auto check_names = [&](const auto& map, const char* what) {
    for (const auto& [name, value] : map) {
      WEFT_CHECK(g.find_variable(name) >= 0) << "Symbol::infer_shape: " << what << " given for '"
                                             << name << "', which is not a variable of the symbol "
                                             << "(arguments: " << join(g.list_arguments()) << ")";
    }
  };
  check_names(inputs.shapes, "a shape");
  check_names(inputs.fixed_shapes, "a fixed shape");
  check_names(inputs.dtypes, "a dtype");

  const InferResult r = infer_shapes_types(g, inputs, require_complete);
  InferredShapes out;
  out.complete = true;
  auto take = [&](uint32_t eid, std::vector<Shape>& shapes, std::vector<DType>& types) {
    shapes.push_back(r.shapes.at(eid));
    types.push_back(r.dtypes.at(eid));
    out.complete = out.complete && shapes.back().known() && types.back() != DType::kUnknown;
  };
  for (uint32_t nid : g.argument_nodes()) take(g.entry_id(nid, 0), out.arg_shapes, out.arg_types);
  for (const NodeEntry& e : g.heads) take(g.entry_id(e), out.out_shapes, out.out_types);
  for (uint32_t nid : g.aux_nodes()) take(g.entry_id(nid, 0), out.aux_shapes, out.aux_types);
  return out;
}

// ---- sym:: builders ----------------------------------------------------------------------------

// NOLINTBEGIN(readability-identifier-naming): the builders carry MXNet's op names.
namespace sym {
namespace {

std::string bool_attr(bool v) { return v ? "True" : "False"; }

void set_shape(AttrMap& attrs, const char* key, const Shape& s) {
  if (s.rank_known()) attrs[key] = format_shape_attr(s);
}

Symbol binary(std::string_view op, const Symbol& lhs, const Symbol& rhs, std::string name) {
  return Symbol::op(op, {lhs, rhs}, {}, std::move(name));
}

}  // namespace

Symbol Variable(std::string name, AttrMap attrs) {
  return Symbol::variable(std::move(name), std::move(attrs));
}

Symbol Convolution(const Symbol& data, std::string name, int64_t num_filter, const Shape& kernel,
                   const Shape& stride, const Shape& pad, bool no_bias, int64_t num_group,
                   AttrMap extra) {
  AttrMap a = std::move(extra);
  a["num_filter"] = std::to_string(num_filter);
  a["kernel"] = format_shape_attr(kernel);
  set_shape(a, "stride", stride);
  set_shape(a, "pad", pad);
  if (no_bias) a["no_bias"] = bool_attr(true);
  if (num_group != 1) a["num_group"] = std::to_string(num_group);
  return Symbol::op("Convolution", {data}, std::move(a), std::move(name));
}

Symbol FullyConnected(const Symbol& data, std::string name, int64_t num_hidden, bool no_bias,
                      bool flatten, const Symbol& weight, const Symbol& bias) {
  AttrMap a{{"num_hidden", std::to_string(num_hidden)}};
  if (no_bias) a["no_bias"] = bool_attr(true);
  if (!flatten) a["flatten"] = bool_attr(false);
  return Symbol::op("FullyConnected", {data, weight, bias}, std::move(a), std::move(name));
}

Symbol Activation(const Symbol& data, std::string name, std::string act_type) {
  return Symbol::op("Activation", {data}, {{"act_type", std::move(act_type)}}, std::move(name));
}

Symbol BatchNorm(const Symbol& data, std::string name, bool fix_gamma, double eps, double momentum,
                 AttrMap extra) {
  AttrMap a = std::move(extra);
  if (!fix_gamma) a["fix_gamma"] = bool_attr(false);
  if (eps != 1e-3) a["eps"] = format_float_attr(eps);
  if (momentum != 0.9) a["momentum"] = format_float_attr(momentum);
  return Symbol::op("BatchNorm", {data}, std::move(a), std::move(name));
}

Symbol Pooling(const Symbol& data, std::string name, const Shape& kernel, std::string pool_type,
               const Shape& stride, const Shape& pad, bool global_pool,
               std::string pooling_convention) {
  AttrMap a;
  set_shape(a, "kernel", kernel);
  if (pool_type != "max") a["pool_type"] = std::move(pool_type);
  set_shape(a, "stride", stride);
  set_shape(a, "pad", pad);
  if (global_pool) a["global_pool"] = bool_attr(true);
  if (pooling_convention != "valid") a["pooling_convention"] = std::move(pooling_convention);
  return Symbol::op("Pooling", {data}, std::move(a), std::move(name));
}

Symbol Flatten(const Symbol& data, std::string name) {
  return Symbol::op("Flatten", {data}, {}, std::move(name));
}

Symbol SoftmaxOutput(const Symbol& data, std::string name, const Symbol& label, bool multi_output,
                     AttrMap extra) {
  AttrMap a = std::move(extra);
  if (multi_output) a["multi_output"] = bool_attr(true);
  return Symbol::op("SoftmaxOutput", {data, label}, std::move(a), std::move(name));
}

Symbol Dropout(const Symbol& data, std::string name, double p) {
  AttrMap a;
  if (p != 0.5) a["p"] = format_float_attr(p);
  return Symbol::op("Dropout", {data}, std::move(a), std::move(name));
}

Symbol clip(const Symbol& data, std::string name, double a_min, double a_max) {
  return Symbol::op("clip", {data},
                    {{"a_min", format_float_attr(a_min)}, {"a_max", format_float_attr(a_max)}},
                    std::move(name));
}

Symbol elemwise_add(const Symbol& lhs, const Symbol& rhs, std::string name) {
  return binary("elemwise_add", lhs, rhs, std::move(name));
}
Symbol elemwise_mul(const Symbol& lhs, const Symbol& rhs, std::string name) {
  return binary("elemwise_mul", lhs, rhs, std::move(name));
}
Symbol broadcast_add(const Symbol& lhs, const Symbol& rhs, std::string name) {
  return binary("broadcast_add", lhs, rhs, std::move(name));
}
Symbol broadcast_mul(const Symbol& lhs, const Symbol& rhs, std::string name) {
  return binary("broadcast_mul", lhs, rhs, std::move(name));
}

Symbol Concat(const std::vector<Symbol>& inputs, std::string name, int dim) {
  AttrMap a{{"num_args", std::to_string(inputs.size())}};
  if (dim != 1) a["dim"] = std::to_string(dim);
  return Symbol::op("Concat", inputs, std::move(a), std::move(name));
}

Symbol Embedding(const Symbol& data, std::string name, int64_t input_dim, int64_t output_dim,
                 const Symbol& weight) {
  return Symbol::op(
      "Embedding", {data, weight},
      {{"input_dim", std::to_string(input_dim)}, {"output_dim", std::to_string(output_dim)}},
      std::move(name));
}

Symbol SliceChannel(const Symbol& data, std::string name, int64_t num_outputs, int axis,
                    bool squeeze_axis) {
  AttrMap a{{"num_outputs", std::to_string(num_outputs)}};
  if (axis != 1) a["axis"] = std::to_string(axis);
  if (squeeze_axis) a["squeeze_axis"] = bool_attr(true);
  return Symbol::op("SliceChannel", {data}, std::move(a), std::move(name));
}

Symbol Reshape(const Symbol& data, std::string name, const Shape& shape, bool reverse) {
  AttrMap a{{"shape", format_shape_attr(shape)}};
  if (reverse) a["reverse"] = bool_attr(true);
  return Symbol::op("Reshape", {data}, std::move(a), std::move(name));
}

Symbol transpose(const Symbol& data, std::string name, const Shape& axes) {
  return Symbol::op("transpose", {data}, {{"axes", format_shape_attr(axes)}}, std::move(name));
}

Symbol RNN(const Symbol& data, std::string name, int64_t state_size, int64_t num_layers,
           std::string mode, const Symbol& parameters, const Symbol& state,
           const Symbol& state_cell, bool bidirectional, double p, bool state_outputs) {
  AttrMap a{{"state_size", std::to_string(state_size)},
            {"num_layers", std::to_string(num_layers)},
            {"mode", mode}};
  if (bidirectional) a["bidirectional"] = bool_attr(true);
  if (p != 0) a["p"] = format_float_attr(p);
  if (state_outputs) a["state_outputs"] = bool_attr(true);
  std::vector<Symbol> inputs{data, parameters, state};
  // Only LSTM has a cell state; a cell given for another mode is the caller's mistake.
  WEFT_CHECK(mode == "lstm" || state_cell.empty())
      << "sym::RNN (node '" << name << "'): state_cell is given but mode '" << mode
      << "' has no cell state";
  if (mode == "lstm") inputs.push_back(state_cell);
  return Symbol::op("RNN", std::move(inputs), std::move(a), std::move(name));
}

}  // namespace sym
// NOLINTEND(readability-identifier-naming)
}  // namespace weft::graph
