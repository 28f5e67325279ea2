// The graph IR: nodes (an op application or a variable), entries (node, output index), control
// dependencies and string attributes, stored in topological order and indexed for passes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op.h"

namespace weft::graph {

/// The most outputs one node may have (Note [Bounded output counts]). An op whose output count
/// comes from its attributes (SliceChannel's num_outputs, _backward_Concat's num_args) is refused
/// above this when a graph is validated, before anything is sized from the count.
inline constexpr int kMaxNodeOutputs = 4096;
/// The most entries (outputs of all nodes, hidden ones included) a graph may have.
inline constexpr uint32_t kMaxGraphEntries = uint32_t{1} << 24;

// Note [Bounded output counts]
// A node's output count is the op's own rule applied to the node's attributes (FNumOutputs),
// never a number the file states (node_row_ptr is kept for saving only). Those attributes are
// a few bytes of text, but inference, planning and binding hold a shape, a dtype and an array
// per entry, and output names are made per output: SliceChannel with num_outputs 2^31 - 1 in a
// 251-byte file would take gigabytes. Graph::reindex (every loader, the Symbol API and every
// pass end there) and Symbol composition refuse a count above kMaxNodeOutputs and a graph above
// kMaxGraphEntries, naming the node, its op and the count. MXNet has no such limit; graphs that
// split a tensor into more than 4096 parts in one node are not known to exist.

/// One output of one node. `version` is nnvm's variable version from the file (non-zero only on
/// mutated inputs such as BatchNorm's moving statistics); kept for a byte-exact save, ignored
/// when wiring.
struct NodeEntry {
  uint32_t node = 0;
  uint32_t index = 0;
  uint32_t version = 0;
  friend bool operator==(const NodeEntry& a, const NodeEntry& b) {
    return a.node == b.node && a.index == b.index;
  }
};

/// A node: a variable when `op` is null, otherwise an application of `op`.
struct Node {
  std::string name;
  const Op* op = nullptr;
  /// The op name as written in the file (an alias such as "_Plus" stays "_Plus" on save). Empty
  /// means op->name(); variables use "null".
  std::string op_name;
  /// Every string attribute as given: op params and hidden keys (`__shape__`, `__lr_mult__`...).
  /// Variables keep whatever the file carried (MXNet copies op params onto auto-created weights).
  AttrMap attrs;
  /// The parsed params (op nodes only), made from `attrs` by Graph::parse_node.
  std::shared_ptr<const OpAttrs> op_attrs;
  std::vector<NodeEntry> inputs;
  std::vector<uint32_t> control_deps;
  /// The node's output count recorded in the file's node_row_ptr, or -1. Only the saver reads
  /// it (a byte-exact round trip of a file whose writer counted differently, e.g. a workspace
  /// output on max pooling); everything else uses the op's own count.
  int32_t file_num_outputs = -1;

  bool is_variable() const { return op == nullptr; }
  /// Outputs, hidden ones included (1 for a variable).
  int num_outputs() const;
  /// Outputs other nodes may consume.
  int num_visible_outputs() const;
  /// The op name to write ("null" for a variable).
  const std::string& written_op_name() const;
};

/// A top-level graph attribute as the MXNet writer stores it: `[type, value]`, for example
/// `"mxnet_version": ["int", 10300]`. `value_json` is the value as compact JSON text.
struct GraphAttr {
  std::string type;
  std::string value_json;
};

/// A graph: nodes in topological order (every input and control dependency refers to an earlier
/// node), head entries, and top-level attributes. Entries are numbered densely: entry_id(e) =
/// row_ptr()[e.node] + e.index, counting every output including hidden ones.
///
/// After changing `nodes` or `heads` call `reindex()`, which validates the structure (indices in
/// range, topological order, output indices below the op's output count, output counts within
/// kMaxNodeOutputs and kMaxGraphEntries) and rebuilds the entry numbering; it throws ValueError
/// naming the node (name and index) at fault.
class Graph {
 public:
  std::vector<Node> nodes;
  std::vector<NodeEntry> heads;
  std::map<std::string, GraphAttr> attrs;

  /// Parses node `nid`'s attrs into op_attrs (op nodes). Throws ValueError naming node and key.
  void parse_node(uint32_t nid);
  /// Validates and rebuilds the entry index (see the class comment).
  void reindex();

  uint32_t entry_id(uint32_t node, uint32_t index) const { return row_ptr_[node] + index; }
  uint32_t entry_id(const NodeEntry& e) const { return row_ptr_[e.node] + e.index; }
  uint32_t num_entries() const { return row_ptr_.empty() ? 0 : row_ptr_.back(); }
  /// node_row_ptr: size nodes.size() + 1.
  const std::vector<uint32_t>& row_ptr() const { return row_ptr_; }
  /// The node that produces entry `eid`, and its output index.
  NodeEntry entry_of(uint32_t eid) const;

  /// Every variable node, in node order (MXNet's arg_nodes).
  std::vector<uint32_t> variable_nodes() const;
  /// Variables some op mutates (FMutateInputs): auxiliary states, e.g. BatchNorm moving stats.
  std::vector<uint32_t> aux_nodes() const;
  /// Variables that are not auxiliary states: data, labels and learned parameters, node order.
  std::vector<uint32_t> argument_nodes() const;
  /// Names of argument_nodes() / aux_nodes().
  std::vector<std::string> list_arguments() const;
  std::vector<std::string> list_auxiliary_states() const;
  /// "<node>_output" names of the heads, MXNet style (`<node>_<output name>` for multi-output ops).
  std::vector<std::string> list_outputs() const;
  /// Index of the variable called `name`, or -1.
  int64_t find_variable(std::string_view name) const;

  /// Consumers per entry: how many node inputs (plus heads) read each entry.
  std::vector<uint32_t> entry_ref_counts() const;

  /// Appends a node (its inputs must refer to earlier nodes); returns its index. Parses its attrs
  /// when it is an op node and op_attrs is unset. Call reindex() when done adding.
  uint32_t add_node(Node node);

  /// Writes the MXNet version recorded in attrs ("mxnet_version"), or 800 when absent.
  int mxnet_version() const;

 private:
  std::vector<uint32_t> row_ptr_;
};

/// The output count of an application of `op` with `attrs` by the op's rule, checked against
/// kMaxNodeOutputs: ValueError "<where>: op 'x' has N outputs by its attributes; ..." otherwise
/// (Note [Bounded output counts]). `where` names the node. Thread-safe.
int checked_num_outputs(const Op& op, const OpAttrs& attrs, std::string_view where);
/// Likewise for `node` (node `nid` of a graph; 1 for a variable). Its attributes must be parsed.
int checked_num_outputs(const Node& node, uint32_t nid);

/// A readable dump of the graph: one line per node with op, key attributes, inputs, and — when
/// given (indexed by entry id) — output shapes and dtypes.
std::string dump(const Graph& graph, const std::vector<Shape>* shapes = nullptr,
                 const std::vector<DType>* dtypes = nullptr);

}  // namespace weft::graph
