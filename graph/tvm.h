// TVM graph-executor JSON (the `graph.json` of a compiled module): read for inspection of its
// nodes, per-entry shapes and types, and the storage plan the compiler chose.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"

namespace weft::graph {

/// One node: a parameter/input ("null") or a call of a compiled function ("tvm_op").
struct TvmNode {
  std::string name;
  std::string op;         ///< "null" or "tvm_op"
  std::string func_name;  ///< the compiled function (tvm_op only), e.g. "fuse_conv2d_relu"
  int num_inputs = 0;     ///< from attrs (tvm_op); equals inputs.size()
  int num_outputs = 1;    ///< from attrs (tvm_op); 1 for a null node
  bool flatten_data = false;
  std::map<std::string, std::string> attrs;  ///< every attribute as written
  std::vector<NodeEntry> inputs;

  bool is_variable() const { return op == "null"; }
};

/// A TVM graph. Entries (node outputs) are numbered entry_id(node, index) = node_row_ptr[node] +
/// index; the per-entry vectors are indexed that way. Plain data: safe to read from many threads.
struct TvmGraph {
  std::vector<TvmNode> nodes;
  std::vector<uint32_t> arg_nodes;
  std::vector<uint32_t> node_row_ptr;  ///< nodes.size() + 1 entries
  std::vector<NodeEntry> heads;
  // Per entry:
  std::vector<int64_t> storage_id;          ///< buffer-sharing ids (equal id = same buffer)
  std::vector<std::vector<int64_t>> shape;  ///< may be blocked layouts (NCHW8c: 5-D)
  std::vector<std::string> dltype;          ///< "float32", "int8", ...
  std::vector<int64_t> device_index;  ///< empty unless the file has one (heterogeneous builds)

  uint32_t num_entries() const { return node_row_ptr.empty() ? 0 : node_row_ptr.back(); }
  uint32_t entry_id(uint32_t node, uint32_t index) const { return node_row_ptr[node] + index; }
  uint32_t entry_id(const NodeEntry& e) const { return node_row_ptr[e.node] + e.index; }
};

/// Parses TVM graph JSON and validates it: the node structure (inputs refer to earlier nodes and
/// existing outputs, num_inputs/num_outputs agree with inputs and node_row_ptr), the per-entry
/// attribute lists (one item per entry, known dltypes, non-negative dims and storage ids).
/// Throws ValueError naming `source`, the node (name and index) or the attribute and what is
/// wrong. Thread-safe.
TvmGraph load_tvm_json(std::string_view text, std::string_view source = "<json>");
TvmGraph load_tvm_json_file(const std::filesystem::path& path);

/// A cheap test (no parse) that text is TVM graph JSON rather than MXNet symbol JSON: it mentions
/// a "tvm_op" node or the storage_id/dltype entry attributes.
bool looks_like_tvm_json(std::string_view text);

/// Bytes of one element of a TVM dltype ("float32" 4, "int8" 1, "uint1" and "bool" 1, "float16x4"
/// 8). Throws ValueError for an unknown type name.
int64_t tvm_dltype_bytes(std::string_view dltype);

/// Bytes of entry `eid` (shape product times element size). Throws ValueError on overflow.
uint64_t tvm_entry_bytes(const TvmGraph& graph, uint32_t eid);

/// The compiler's memory plan in figures.
struct TvmStoragePlan {
  uint32_t num_entries = 0;
  uint32_t num_storage_ids = 0;  ///< distinct buffers
  uint64_t planned_bytes = 0;    ///< each storage id sized to its largest entry, summed
  uint64_t unshared_bytes = 0;   ///< every entry in a buffer of its own
  uint64_t param_bytes = 0;      ///< entries of null nodes (inputs and parameters)
};
TvmStoragePlan tvm_storage_plan(const TvmGraph& graph);

}  // namespace weft::graph
