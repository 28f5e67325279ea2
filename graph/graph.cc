// The graph IR: validation, entry numbering, variable classification and the readable dump.
#include "graph/graph.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"

namespace weft::graph {
namespace {

std::string node_label_of(uint32_t nid, const std::string& name) {
  return "node " + std::to_string(nid) + " ('" + name + "')";
}

std::string node_label(const Graph& g, uint32_t nid) {
  if (nid < g.nodes.size()) return node_label_of(nid, g.nodes[nid].name);
  return "node " + std::to_string(nid);
}

}  // namespace

int checked_num_outputs(const Op& op, const OpAttrs& attrs, std::string_view where) {
  const int nout = op.num_outputs(attrs);
  WEFT_CHECK(nout >= 0 && nout <= kMaxNodeOutputs)
      << where << ": op '" << op.name() << "' has " << nout
      << " outputs by its attributes; a node may have 0 to " << kMaxNodeOutputs
      << " (kMaxNodeOutputs)";
  return nout;
}

int checked_num_outputs(const Node& node, uint32_t nid) {
  if (!node.op) return 1;
  return checked_num_outputs(*node.op, *node.op_attrs, node_label_of(nid, node.name));
}

int Node::num_outputs() const { return op ? op->num_outputs(*op_attrs) : 1; }

int Node::num_visible_outputs() const { return op ? op->num_visible_outputs(*op_attrs) : 1; }

const std::string& Node::written_op_name() const {
  static const std::string kNull = "null";
  if (!op) return kNull;
  return op_name.empty() ? op->name() : op_name;
}

void Graph::parse_node(uint32_t nid) {
  Node& n = nodes.at(nid);
  if (!n.op) return;
  try {
    n.op_attrs = std::make_shared<const OpAttrs>(n.op->make_attrs(n.attrs, n.name));
  } catch (const ValueError& e) {
    WEFT_THROW(ValueError) << node_label(*this, nid) << ": " << e.what();
  }
}

uint32_t Graph::add_node(Node node) {
  const auto nid = static_cast<uint32_t>(nodes.size());
  for (const NodeEntry& e : node.inputs) {
    WEFT_CHECK(e.node < nid) << "node " << nid << " ('" << node.name << "'): input refers to node "
                             << e.node << ", which is not an earlier node";
  }
  nodes.push_back(std::move(node));
  if (nodes.back().op && !nodes.back().op_attrs) parse_node(nid);
  return nid;
}

void Graph::reindex() {
  row_ptr_.assign(nodes.size() + 1, 0);
  for (uint32_t nid = 0; nid < nodes.size(); ++nid) {
    Node& n = nodes[nid];
    if (n.op && !n.op_attrs) parse_node(nid);
    // Note [Bounded output counts]: both bounds hold before any entry is numbered or sized.
    const int nout = checked_num_outputs(n, nid);
    WEFT_CHECK(row_ptr_[nid] + static_cast<uint64_t>(nout) <= kMaxGraphEntries)
        << node_label(*this, nid) << ": the graph has more than " << kMaxGraphEntries
        << " entries (kMaxGraphEntries)";
    row_ptr_[nid + 1] = row_ptr_[nid] + static_cast<uint32_t>(nout);
    if (n.op) {
      const int nin = n.op->num_inputs(*n.op_attrs);
      WEFT_CHECK(nin < 0 || static_cast<size_t>(nin) == n.inputs.size())
          << node_label(*this, nid) << ": op '" << n.op->name() << "' takes " << nin
          << " inputs, the node has " << n.inputs.size();
    } else {
      WEFT_CHECK(n.inputs.empty())
          << node_label(*this, nid) << ": a variable has no inputs, found " << n.inputs.size();
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const NodeEntry& e = n.inputs[i];
      WEFT_CHECK(e.node < nid) << node_label(*this, nid) << ": input " << i << " refers to node "
                               << e.node
                               << (e.node >= nodes.size()
                                       ? " (out of range)"
                                       : " (not earlier: the graph has a cycle or is not in "
                                         "topological order)");
      // Unsigned comparisons throughout: an index of 2^31 or more is no negative number.
      const uint32_t src_out = row_ptr_[e.node + 1] - row_ptr_[e.node];
      WEFT_CHECK(e.index < src_out)
          << node_label(*this, nid) << ": input " << i << " uses output " << e.index << " of "
          << node_label(*this, e.node) << ", which has " << src_out << " outputs";
    }
    for (uint32_t c : n.control_deps) {
      WEFT_CHECK(c < nid) << node_label(*this, nid) << ": control dependency on node " << c
                          << " which is not an earlier node";
    }
  }
  for (size_t h = 0; h < heads.size(); ++h) {
    const NodeEntry& e = heads[h];
    WEFT_CHECK(e.node < nodes.size())
        << "head " << h << " refers to node " << e.node << " of " << nodes.size();
    const uint32_t src_out = row_ptr_[e.node + 1] - row_ptr_[e.node];
    WEFT_CHECK(e.index < src_out) << "head " << h << " uses output " << e.index << " of "
                                  << node_label(*this, e.node) << ", which has " << src_out
                                  << " outputs";
  }
}

NodeEntry Graph::entry_of(uint32_t eid) const {
  auto it = std::upper_bound(row_ptr_.begin(), row_ptr_.end(), eid);
  const auto nid = static_cast<uint32_t>(it - row_ptr_.begin() - 1);
  return NodeEntry{nid, eid - row_ptr_[nid], 0};
}

std::vector<uint32_t> Graph::variable_nodes() const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].is_variable()) out.push_back(i);
  }
  return out;
}

std::vector<uint32_t> Graph::aux_nodes() const {
  std::vector<bool> aux(nodes.size(), false);
  for (const Node& n : nodes) {
    if (!n.op) continue;
    const auto& mutate = n.op->attr<FMutateInputs>();
    if (!mutate) continue;
    for (int i : mutate(*n.op_attrs)) {
      if (i >= 0 && static_cast<size_t>(i) < n.inputs.size() &&
          nodes[n.inputs[i].node].is_variable()) {
        aux[n.inputs[i].node] = true;
      }
    }
  }
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (aux[i]) out.push_back(i);
  }
  return out;
}

std::vector<uint32_t> Graph::argument_nodes() const {
  const std::vector<uint32_t> aux = aux_nodes();
  std::vector<uint32_t> out;
  for (uint32_t i : variable_nodes()) {
    if (!std::binary_search(aux.begin(), aux.end(), i)) out.push_back(i);
  }
  return out;
}

std::vector<std::string> Graph::list_arguments() const {
  std::vector<std::string> out;
  for (uint32_t i : argument_nodes()) out.push_back(nodes[i].name);
  return out;
}

std::vector<std::string> Graph::list_auxiliary_states() const {
  std::vector<std::string> out;
  for (uint32_t i : aux_nodes()) out.push_back(nodes[i].name);
  return out;
}

std::vector<std::string> Graph::list_outputs() const {
  std::vector<std::string> out;
  for (const NodeEntry& e : heads) {
    const Node& n = nodes[e.node];
    if (!n.op) {
      out.push_back(n.name);
      continue;
    }
    const std::vector<std::string> names = n.op->output_names(*n.op_attrs);
    if (n.num_visible_outputs() > 1 && e.index < names.size()) {
      out.push_back(n.name + "_" + names[e.index]);
    } else {
      out.push_back(n.name + "_output");
    }
  }
  return out;
}

int64_t Graph::find_variable(std::string_view name) const {
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].is_variable() && nodes[i].name == name) return i;
  }
  return -1;
}

std::vector<uint32_t> Graph::entry_ref_counts() const {
  std::vector<uint32_t> refs(num_entries(), 0);
  for (const Node& n : nodes) {
    for (const NodeEntry& e : n.inputs) ++refs[entry_id(e)];
  }
  for (const NodeEntry& e : heads) ++refs[entry_id(e)];
  return refs;
}

int Graph::mxnet_version() const {
  auto it = attrs.find("mxnet_version");
  if (it == attrs.end()) return 800;
  try {
    return std::stoi(it->second.value_json);
  } catch (...) {
    return 800;
  }
}

std::string dump(const Graph& g, const std::vector<Shape>* shapes,
                 const std::vector<DType>* dtypes) {
  std::ostringstream os;
  auto entry_text = [&](uint32_t eid) {
    std::string s;
    if (shapes && eid < shapes->size()) s += (*shapes)[eid].to_string();
    if (dtypes && eid < dtypes->size())
      s += std::string(s.empty() ? "" : " ") + dtype_name((*dtypes)[eid]);
    return s;
  };
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    os << '#' << nid << ' ' << n.name << " = ";
    if (n.is_variable()) {
      os << "variable";
    } else {
      os << n.op->name() << '(';
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const NodeEntry& e = n.inputs[i];
        if (i) os << ", ";
        os << '#' << e.node;
        if (g.nodes[e.node].num_outputs() > 1) os << '.' << e.index;
      }
      os << ')';
      bool first = true;
      for (const auto& [k, v] : n.op_attrs ? n.op_attrs->dict : n.attrs) {
        if (k.size() > 4 && k.starts_with("__") && k.ends_with("__")) continue;
        os << (first ? " {" : ", ") << k << '=' << v;
        first = false;
      }
      if (!first) os << '}';
    }
    if (!n.control_deps.empty()) {
      os << " after";
      for (uint32_t c : n.control_deps) os << " #" << c;
    }
    if ((shapes || dtypes) && !g.row_ptr().empty()) {
      os << "  ->";
      for (int o = 0; o < n.num_outputs(); ++o) os << ' ' << entry_text(g.entry_id(nid, o));
    }
    os << '\n';
  }
  os << "heads:";
  for (const NodeEntry& e : g.heads) os << " #" << e.node << '.' << e.index;
  os << '\n';
  return os.str();
}

}  // namespace weft::graph
