// The symbolic API: compose graphs from variables and op applications (MXNet's Symbol), list
// their arguments, outputs and auxiliary states, infer shapes, and convert to and from the IR
// and MXNet symbol JSON. The `sym` namespace has one thin builder per common op.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "graph/infer.h"

namespace weft::graph {

namespace detail {
struct SymNode;
}  // namespace detail

/// Shapes and types of a symbol's arguments, outputs and auxiliary states, each in the order of
/// list_arguments(), list_outputs() and list_auxiliary_states().
struct InferredShapes {
  std::vector<Shape> arg_shapes;
  std::vector<Shape> out_shapes;
  std::vector<Shape> aux_shapes;
  std::vector<DType> arg_types;
  std::vector<DType> out_types;
  std::vector<DType> aux_types;
  /// Every shape and type above is fully known.
  bool complete = false;
};

/// A symbol: one or more outputs of a graph of immutable nodes. Copies are cheap and share the
/// nodes, so sub-graphs built once can feed many ops. A default-constructed symbol is empty (no
/// outputs); passed as an op input it stands for "create this input as a variable".
///
/// Thread safety: the nodes never change after creation, so symbols may be read and composed
/// from several threads; automatic names come from the calling thread's NameScope.
class Symbol {
 public:
  /// One output of a node.
  struct Entry {
    std::shared_ptr<const detail::SymNode> node;
    uint32_t index = 0;
    /// nnvm's variable version (kept from loaded files for an exact save; 0 when composed).
    uint32_t version = 0;
  };

  Symbol() = default;

  /// A variable (a graph input or a learned parameter). `attrs` holds hidden keys such as
  /// `__lr_mult__` or `__init__`. Throws ValueError for an empty name.
  static Symbol variable(std::string name, AttrMap attrs = {});
  /// A variable with a declared shape (`__shape__`; unknown dims, -1 or 0, are written as 0, the
  /// way MXNet writes deferred dims) and, unless kUnknown, a type (`__dtype__`, the MXNet flag).
  static Symbol variable(std::string name, const Shape& shape, DType dtype = DType::kUnknown,
                         AttrMap attrs = {});

  /// Applies op `op` (a name or alias) to `inputs` with string attributes `attrs`, MXNet style.
  ///  - `name` empty: the current NameScope makes one, `<op name in lower case><n>`.
  ///  - Inputs the op needs beyond those given, and empty symbols among those given, become new
  ///    variables named `<name>_<input name>` (`fc1_weight`, `bn0_moving_mean`).
  ///  - An op with a `num_args` parameter (Concat, add_n, stack...) gets num_args = the number
  ///    of inputs when `attrs` does not set it.
  /// Every input must have one output (pick one with operator[]). Returns the op's visible
  /// outputs. Throws ValueError naming the op and node: unknown op, bad attribute, too many
  /// inputs, a multi-output input.
  static Symbol op(std::string_view op, std::vector<Symbol> inputs, AttrMap attrs = {},
                   std::string name = "");

  /// The outputs of every symbol, in order (MXNet's Group): a graph with several heads.
  static Symbol group(const std::vector<Symbol>& symbols);

  /// The symbol of a graph's heads. Nodes that no head reaches are dropped.
  static Symbol from_graph(const Graph& graph);
  /// Parses MXNet symbol JSON (any layout graph/json.h reads). Throws ValueError.
  static Symbol from_json(std::string_view text);
  /// Reads a symbol JSON file. Throws ValueError naming the path.
  static Symbol load(const std::filesystem::path& path);

  bool empty() const { return outputs_.empty(); }
  /// Number of outputs.
  size_t num_outputs() const { return outputs_.size(); }
  const std::vector<Entry>& outputs() const { return outputs_; }
  /// Output `i` as a symbol of its own. Throws ValueError when out of range.
  Symbol operator[](size_t i) const;
  /// The output called `output_name` in list_outputs() (e.g. "fc1_output" of get_internals()).
  /// Throws ValueError when there is none, or more than one.
  Symbol operator[](std::string_view output_name) const;

  /// The node name of a single-output symbol. Throws ValueError for a group.
  const std::string& name() const;
  /// Whether this is a single variable.
  bool is_variable() const;
  /// The op name of a single-output symbol ("null" for a variable).
  const std::string& op_name() const;
  /// The attribute `key` of a single-output symbol's node, if set (params and hidden keys).
  std::optional<std::string> attr(std::string_view key) const;
  /// Every attribute of a single-output symbol's node.
  const AttrMap& list_attr() const;

  /// Variables that are not auxiliary states (data, labels, parameters), in DFS post-order.
  std::vector<std::string> list_arguments() const;
  /// One name per output: `<node>_output`, `<node>_<output name>` for multi-output ops, or the
  /// variable's name.
  std::vector<std::string> list_outputs() const;
  /// Variables that an op mutates (FMutateInputs: BatchNorm's moving mean and var), DFS order.
  std::vector<std::string> list_auxiliary_states() const;
  /// Every variable (arguments and auxiliary states), DFS order.
  std::vector<std::string> list_inputs() const;
  /// A group of every visible output of every node, DFS order (for feature extraction).
  Symbol get_internals() const;

  /// The IR: nodes in DFS post-order from the outputs (inputs before control dependencies,
  /// nnvm's order), reindexed. Throws ValueError for an empty symbol.
  Graph to_graph() const;
  /// MXNet symbol JSON (>= 1.0 layout, graph/json.h).
  std::string to_json() const;
  /// Writes to_json() to `path`. Throws ValueError naming the path when it cannot be written.
  void save(const std::filesystem::path& path) const;

  /// Shape and type inference over to_graph() (graph/infer.h). Every name in `inputs` must be a
  /// variable of the symbol (ValueError otherwise, listing the arguments). With
  /// `require_complete`, an unknown shape throws ShapeError naming what is missing; without it
  /// unknown shapes come back with unknown dims and `complete` is false.
  InferredShapes infer_shape(const InferInputs& inputs, bool require_complete = true) const;

 private:
  explicit Symbol(std::vector<Entry> outputs) : outputs_(std::move(outputs)) {}
  const detail::SymNode& single_node(const char* what) const;

  std::vector<Entry> outputs_;
};

/// Installs, for its lifetime and on the calling thread, a fresh naming context: automatic op
/// names count from 0 again (`convolution0`, `convolution1`, `fullyconnected0`...), and every
/// op name, given or automatic, gets `prefix` in front (MXNet's NameManager and Prefix).
/// Scopes nest; the innermost one is used. Variables made with Symbol::variable keep their name.
/// Not copyable or movable; destroy on the thread that made it.
class NameScope {
 public:
  explicit NameScope(std::string prefix = "");
  ~NameScope();
  NameScope(const NameScope&) = delete;
  NameScope& operator=(const NameScope&) = delete;

  /// The name for an op node: `prefix + given` when `given` is non-empty, else
  /// `prefix + hint + <count of hint so far>` in the calling thread's innermost scope.
  static std::string make_name(std::string_view given, std::string_view hint);
};

/// Thin builders over Symbol::op for common ops, named and ordered like MXNet's symbol API
/// (`data, name, params...`). Only parameters that differ from the op's default are written, as
/// MXNet writes only what the caller passed. An empty name asks NameScope for one. An empty
/// Shape ({}: unknown rank) means "not given". `extra` adds further attributes verbatim.
// NOLINTBEGIN(readability-identifier-naming): the builders carry MXNet's op names.
namespace sym {

Symbol Variable(std::string name, AttrMap attrs = {});

Symbol Convolution(const Symbol& data, std::string name, int64_t num_filter, const Shape& kernel,
                   const Shape& stride = {}, const Shape& pad = {}, bool no_bias = false,
                   int64_t num_group = 1, AttrMap extra = {});
/// `weight`/`bias` empty: created as `<name>_weight` / `<name>_bias`.
Symbol FullyConnected(const Symbol& data, std::string name, int64_t num_hidden,
                      bool no_bias = false, bool flatten = true, const Symbol& weight = {},
                      const Symbol& bias = {});
/// act_type: relu, sigmoid, tanh, softrelu, softsign.
Symbol Activation(const Symbol& data, std::string name, std::string act_type);
/// MXNet defaults: fix_gamma true, eps 1e-3, momentum 0.9. Gamma, beta and the moving mean and
/// var are created as `<name>_gamma`... (the last two are auxiliary states).
Symbol BatchNorm(const Symbol& data, std::string name, bool fix_gamma = true, double eps = 1e-3,
                 double momentum = 0.9, AttrMap extra = {});
/// pool_type: max, avg, sum; pooling_convention: valid, full.
Symbol Pooling(const Symbol& data, std::string name, const Shape& kernel,
               std::string pool_type = "max", const Shape& stride = {}, const Shape& pad = {},
               bool global_pool = false, std::string pooling_convention = "valid");
Symbol Flatten(const Symbol& data, std::string name = "");
/// `label` empty: created as `<name>_label`.
Symbol SoftmaxOutput(const Symbol& data, std::string name, const Symbol& label = {},
                     bool multi_output = false, AttrMap extra = {});
Symbol Dropout(const Symbol& data, std::string name, double p = 0.5);
/// Clips to [a_min, a_max]; clip(x, 0, 6) is ReLU6.
Symbol clip(const Symbol& data, std::string name, double a_min, double a_max);
Symbol elemwise_add(const Symbol& lhs, const Symbol& rhs, std::string name = "");
Symbol elemwise_mul(const Symbol& lhs, const Symbol& rhs, std::string name = "");
Symbol broadcast_add(const Symbol& lhs, const Symbol& rhs, std::string name = "");
Symbol broadcast_mul(const Symbol& lhs, const Symbol& rhs, std::string name = "");
/// Concatenates along `dim` (num_args = inputs.size()).
Symbol Concat(const std::vector<Symbol>& inputs, std::string name = "", int dim = 1);
/// `weight` empty: created as `<name>_weight` (input_dim, output_dim).
Symbol Embedding(const Symbol& data, std::string name, int64_t input_dim, int64_t output_dim,
                 const Symbol& weight = {});
/// num_outputs equal parts along `axis`; index the result for each part.
Symbol SliceChannel(const Symbol& data, std::string name, int64_t num_outputs, int axis = 1,
                    bool squeeze_axis = false);
/// `shape` may use Reshape's special values (0, -1, -2, -3, -4).
Symbol Reshape(const Symbol& data, std::string name, const Shape& shape, bool reverse = false);
Symbol transpose(const Symbol& data, std::string name, const Shape& axes);
/// The fused RNN (mode: rnn_relu, rnn_tanh, lstm, gru). Empty `parameters`, `state`,
/// `state_cell` are created as `<name>_parameters`, `<name>_state`, `<name>_state_cell`.
Symbol RNN(const Symbol& data, std::string name, int64_t state_size, int64_t num_layers,
           std::string mode, const Symbol& parameters = {}, const Symbol& state = {},
           const Symbol& state_cell = {}, bool bidirectional = false, double p = 0,
           bool state_outputs = false);

}  // namespace sym
// NOLINTEND(readability-identifier-naming)
}  // namespace weft::graph
