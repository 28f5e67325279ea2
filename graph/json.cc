// MXNet/NNVM symbol JSON reader: every layout since 0.8, with MXNet's legacy upgrades
// (LoadLegacyJSONPass). The writer is in json_save.cc.
#include "graph/json.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

#include "base/error.h"
#include "graph/json_parse.h"

namespace weft::graph {

namespace {

using detail::describe;
using detail::Json;
using detail::node_label;

/// An 0.8 node missing more inputs than this is malformed, not an old file: the upgrade adds
/// variables only up to this many per node, so a number in the file cannot make it allocate.
constexpr size_t kMaxAddedInputs = 16;
/// Unknown op names longer than this get no close-name suggestions (edit distance is quadratic).
constexpr size_t kMaxSuggestedNameLength = 64;

/// The user attributes MXNet < 1.0 wrote without underscores (legacy_json_util.cc kHiddenKeys).
constexpr std::array<std::string_view, 5> kHiddenKeys = {"ctx_group", "lr_mult", "wd_mult",
                                                         "force_mirroring", "mirror_stage"};

/// Rethrows an error from the IR or the op registry with the input's name in front.
[[noreturn]] void rethrow_with_source(const Error& e, std::string_view source) {
  throw ValueError(std::string(source) + ": " + e.what());
}

/// MXNet's test for a key UpgradeJSON_FixParsing takes out of the dict: the key begins with a
/// hidden key (its last occurrence at 0) or ends with one.
bool is_legacy_hidden_key(const std::string& k) {
  for (std::string_view key : kHiddenKeys) {
    const size_t pos = k.rfind(key);
    if (pos == 0 || (pos != std::string::npos && pos == k.size() - key.size())) return true;
  }
  return false;
}

/// Input names of an op node, or empty when the op takes more inputs than the node could
/// plausibly be upgraded to (a number from the file must not size an allocation).
std::vector<std::string> bounded_input_names(const Node& n) {
  const int nin = n.op->num_inputs(*n.op_attrs);
  if (nin < 0 || static_cast<size_t>(nin) > n.inputs.size() + kMaxAddedInputs) return {};
  std::vector<std::string> names = n.op->input_names(*n.op_attrs);
  if (names.size() != static_cast<size_t>(nin)) return {};
  return names;
}

/// UpgradeJSON_FixParsing (files older than kCurrentMxnetVersion): `ctx_group`, `lr_mult`, ...
/// become `__ctx_group__`, ...; `<argname>_<key>` on an op node moves to the input variable named
/// by argname as `__<key>__`. Anything else that matched stays as it was. Returns whether the dict
/// of any node changed; `changed` marks the nodes whose attrs must be parsed again.
bool fix_legacy_keys(Graph& g, std::vector<bool>& changed) {
  bool any = false;
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    Node& n = g.nodes[nid];
    std::vector<std::pair<std::string, std::string>> hidden;
    for (auto it = n.attrs.begin(); it != n.attrs.end();) {
      if (is_legacy_hidden_key(it->first)) {
        hidden.emplace_back(it->first, it->second);
        it = n.attrs.erase(it);
      } else {
        ++it;
      }
    }
    if (hidden.empty()) continue;
    std::vector<std::string> arg_names;
    bool have_arg_names = false;
    for (auto& [k, v] : hidden) {
      bool moved = false;
      for (std::string_view key : kHiddenKeys) {
        const size_t pos = k.rfind(key);
        if (pos == 0 && key.size() == k.size()) {
          n.attrs["__" + std::string(key) + "__"] = v;
          moved = true;
          break;
        }
        if (pos != std::string::npos && pos > 1 && pos == k.size() - key.size()) {
          if (n.is_variable()) break;
          if (!have_arg_names) {
            arg_names = bounded_input_names(n);
            have_arg_names = true;
          }
          const std::string arg = k.substr(0, pos - 1);
          const auto found = std::find(arg_names.begin(), arg_names.end(), arg);
          const auto idx = static_cast<size_t>(found - arg_names.begin());
          if (found != arg_names.end() && idx < n.inputs.size()) {
            Node& var = g.nodes[n.inputs[idx].node];
            if (var.is_variable()) {
              var.attrs["__" + std::string(key) + "__"] = v;
              moved = true;
            }
          }
          break;
        }
      }
      if (!moved) {
        n.attrs[k] = v;
      } else {
        any = true;
        changed[nid] = true;
      }
    }
  }
  return any;
}

/// UpgradeJSON_000800_000900: before 0.9 auxiliary states were not stored, so a node with fewer
/// inputs than its op takes gets new variables `<node>_<input name>` (with a copy of the node's
/// attrs, as MXNet does). They are inserted right before the consumer, which keeps the order
/// topological; every index is renumbered. Returns the number of variables added.
int add_missing_inputs(Graph& g, std::vector<bool>& changed) {
  std::vector<Node> out;
  std::vector<bool> out_changed;
  std::vector<uint32_t> remap(g.nodes.size());
  int added = 0;
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    Node& n = g.nodes[nid];
    for (NodeEntry& e : n.inputs) e.node = remap[e.node];
    for (uint32_t& c : n.control_deps) c = remap[c];
    if (n.op) {
      const int nin = n.op->num_inputs(*n.op_attrs);
      if (nin >= 0 && n.inputs.size() < static_cast<size_t>(nin) &&
          static_cast<size_t>(nin) - n.inputs.size() <= kMaxAddedInputs) {
        const std::vector<std::string> names = bounded_input_names(n);
        for (size_t i = n.inputs.size(); i < names.size(); ++i) {
          Node var;
          var.name = n.name.empty() ? names[i] : n.name + "_" + names[i];
          var.attrs = n.attrs;
          out.push_back(std::move(var));
          out_changed.push_back(true);
          n.inputs.push_back(NodeEntry{static_cast<uint32_t>(out.size() - 1), 0, 0});
          ++added;
        }
      }
    }
    remap[nid] = static_cast<uint32_t>(out.size());
    out.push_back(std::move(n));
    out_changed.push_back(changed[nid]);
  }
  for (NodeEntry& e : g.heads) e.node = remap[e.node];
  g.nodes = std::move(out);
  changed = std::move(out_changed);
  return added;
}

/// UpgradeJSON_000903_000904: the initializers MXNet's FSetInputVarAttrOnCompose put on input
/// variables (BatchNorm's moving statistics, PReLU's gamma, bilinear UpSampling's weight), unless
/// the variable has one.
bool set_input_initializers(Graph& g, std::vector<bool>& changed) {
  struct Rule {
    std::string_view op;
    size_t input;
    std::string_view init;
  };
  static constexpr std::array<Rule, 6> kRules = {{
      {"BatchNorm", 3, R"(["zero", {}])"},
      {"BatchNorm", 4, R"(["one", {}])"},
      {"_contrib_SyncBatchNorm", 3, R"(["zero", {}])"},
      {"_contrib_SyncBatchNorm", 4, R"(["one", {}])"},
      {"LeakyReLU", 1, R"(["Constant", {"value": 0.25}])"},
      {"UpSampling", 1, R"(["bilinear", {}])"},
  }};
  bool any = false;
  for (const Node& n : g.nodes) {
    if (!n.op) continue;
    for (const Rule& r : kRules) {
      if (n.op->name() != r.op || r.input >= n.inputs.size()) continue;
      const uint32_t vid = n.inputs[r.input].node;
      Node& var = g.nodes[vid];
      if (!var.is_variable() || var.attrs.count("__init__")) continue;
      var.attrs["__init__"] = std::string(r.init);
      changed[vid] = true;
      any = true;
    }
  }
  return any;
}

/// UpgradeJSON_000904_000905: argmax/argmin `axis` became optional; -1 used to mean "none".
bool unset_reduce_axis(Graph& g, std::vector<bool>& changed) {
  bool any = false;
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    Node& n = g.nodes[nid];
    if (!n.op || (n.op->name() != "argmax" && n.op->name() != "argmin")) continue;
    auto it = n.attrs.find("axis");
    if (it == n.attrs.end() || it->second != "-1") continue;
    n.attrs.erase(it);
    changed[nid] = true;
    any = true;
  }
  return any;
}

/// Reads a string→string object (a node's attrs/attr/param) into `dict`; `overwrite` false keeps
/// keys already there (nnvm inserts `param` after `attrs`/`attr`).
void read_attr_dict(const Json& obj, const char* field, AttrMap& dict, bool overwrite,
                    std::string_view source, const std::string& where) {
  WEFT_INPUT_CHECK(obj.is_object()) << source << ": " << where << ": \"" << field
                                    << "\" must be an object, found " << describe(obj);
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    WEFT_INPUT_CHECK(it.value().is_string())
        << source << ": " << where << ": attribute '" << it.key() << "' in \"" << field
        << "\" must be a string, found " << describe(it.value());
    if (overwrite) {
      dict[it.key()] = it.value().get<std::string>();
    } else {
      dict.emplace(it.key(), it.value().get<std::string>());
    }
  }
}

const Op* resolve_op(const std::string& op_name, std::string_view source,
                     const std::string& where) {
  if (const Op* op = OpRegistry::global().find(op_name)) return op;
  if (op_name.size() <= kMaxSuggestedNameLength) {
    try {
      OpRegistry::global().get(op_name);  // throws "unknown operator 'x' (did you mean ...?)"
    } catch (const ValueError& e) {
      WEFT_THROW(ValueError) << source << ": " << where << ": " << e.what()
                             << "; an operator of a plugin must be loaded first (weft_load_plugin, "
                                "or --plugin on the command line)";
    }
  }
  WEFT_THROW(ValueError) << source << ": " << where << ": unknown operator '"
                         << op_name.substr(0, kMaxSuggestedNameLength) << "...'";
}

/// What a node object in the file says, before any op is resolved.
struct NodeFields {
  const Json* op = nullptr;
  const Json* name = nullptr;
  const Json* inputs = nullptr;
  const Json* attrs = nullptr;
  const Json* attr = nullptr;
  const Json* param = nullptr;
  const Json* control_deps = nullptr;
  const Json* backward_source_id = nullptr;
};

NodeFields node_fields(const Json& jn, size_t nid, std::string_view source) {
  WEFT_INPUT_CHECK(jn.is_object())
      << source << ": node " << nid << ": expected an object, found " << describe(jn);
  NodeFields f;
  for (auto it = jn.begin(); it != jn.end(); ++it) {
    const std::string& k = it.key();
    const Json* v = &it.value();
    if (k == "op") {
      f.op = v;
    } else if (k == "name") {
      f.name = v;
    } else if (k == "inputs") {
      f.inputs = v;
    } else if (k == "attrs") {
      f.attrs = v;
    } else if (k == "attr") {
      f.attr = v;
    } else if (k == "param") {
      f.param = v;
    } else if (k == "control_deps") {
      f.control_deps = v;
    } else if (k == "backward_source_id") {
      f.backward_source_id = v;
    } else {
      std::string label = "node " + std::to_string(nid);
      if (auto n = jn.find("name"); n != jn.end() && n->is_string())
        label = node_label(nid, n->get<std::string>());
      WEFT_THROW(ValueError) << source << ": " << label << ": unknown field \"" << k
                             << "\" (a node has op, name, inputs, attrs/attr/param, control_deps"
                             << (k == "subgraphs" ? "; control-flow subgraphs are not supported"
                                                  : "")
                             << ")";
    }
  }
  WEFT_INPUT_CHECK(f.name) << source << ": node " << nid << ": missing \"name\"";
  WEFT_INPUT_CHECK(f.name->is_string())
      << source << ": node " << nid << ": \"name\" must be a string, found " << describe(*f.name);
  return f;
}

}  // namespace

Graph load_json(std::string_view text, JsonInfo* info, std::string_view source) {
  const Json doc = detail::parse_json_text(text, source);
  WEFT_INPUT_CHECK(doc.is_object())
      << source << ": expected a JSON object at the top level, found " << describe(doc);

  const Json* nodes_j = nullptr;
  const Json* heads_j = nullptr;
  const Json* arg_nodes_j = nullptr;
  const Json* row_ptr_j = nullptr;
  const Json* attrs_j = nullptr;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    if (k == "nodes") {
      nodes_j = &it.value();
    } else if (k == "heads") {
      heads_j = &it.value();
    } else if (k == "arg_nodes") {
      arg_nodes_j = &it.value();
    } else if (k == "node_row_ptr") {
      row_ptr_j = &it.value();
    } else if (k == "attrs") {
      attrs_j = &it.value();
    } else {
      WEFT_THROW(ValueError) << source << ": unknown top-level field \"" << k
                             << "\" (expected nodes, arg_nodes, node_row_ptr, heads, attrs)";
    }
  }
  WEFT_INPUT_CHECK(nodes_j) << source << ": missing \"nodes\"";
  WEFT_INPUT_CHECK(nodes_j->is_array())
      << source << ": \"nodes\" must be an array, found " << describe(*nodes_j);
  WEFT_INPUT_CHECK(heads_j) << source << ": missing \"heads\"";
  WEFT_INPUT_CHECK(heads_j->is_array())
      << source << ": \"heads\" must be an array, found " << describe(*heads_j);
  const size_t num_nodes = nodes_j->size();
  WEFT_INPUT_CHECK(num_nodes < std::numeric_limits<uint32_t>::max())
      << source << ": too many nodes";

  // ---- top-level attributes: [type, value] pairs ----
  Graph g;
  int version = 800;
  if (attrs_j) {
    WEFT_INPUT_CHECK(attrs_j->is_object())
        << source << ": \"attrs\" must be an object, found " << describe(*attrs_j);
    for (auto it = attrs_j->begin(); it != attrs_j->end(); ++it) {
      const Json& v = it.value();
      WEFT_INPUT_CHECK(v.is_array() && v.size() == 2 && v[0].is_string())
          << source << ": graph attribute '" << it.key() << "' must be [type, value], found "
          << describe(v);
      g.attrs[it.key()] = GraphAttr{v[0].get<std::string>(), v[1].dump()};
      if (it.key() == "mxnet_version") {
        WEFT_INPUT_CHECK(v[0] == "int" && v[1].is_number_integer() && v[1].get<int64_t>() >= 0 &&
                         v[1].get<int64_t>() <= std::numeric_limits<int>::max())
            << source << ": \"mxnet_version\" must be [\"int\", <version>], found " << describe(v);
        version = static_cast<int>(v[1].get<int64_t>());
      }
    }
  }

  // ---- nodes ----
  bool any_param = false, any_attrs = false, any_attr = false;
  g.nodes.reserve(num_nodes);
  for (size_t nid = 0; nid < num_nodes; ++nid) {
    const NodeFields f = node_fields((*nodes_j)[nid], nid, source);
    Node n;
    n.name = f.name->get<std::string>();
    const std::string where = node_label(nid, n.name);
    WEFT_INPUT_CHECK(f.op) << source << ": " << where << ": missing \"op\"";
    WEFT_INPUT_CHECK(f.op->is_string())
        << source << ": " << where << ": \"op\" must be a string, found " << describe(*f.op);
    WEFT_INPUT_CHECK(f.inputs) << source << ": " << where << ": missing \"inputs\"";
    WEFT_INPUT_CHECK(f.inputs->is_array())
        << source << ": " << where << ": \"inputs\" must be an array, found "
        << describe(*f.inputs);
    // nnvm reads `attrs` and `attr` into one dict, then inserts `param` without overwriting.
    if (f.attrs) read_attr_dict(*f.attrs, "attrs", n.attrs, true, source, where);
    if (f.attr) read_attr_dict(*f.attr, "attr", n.attrs, true, source, where);
    if (f.param) read_attr_dict(*f.param, "param", n.attrs, false, source, where);
    any_attrs = any_attrs || f.attrs;
    any_attr = any_attr || f.attr;
    any_param = any_param || f.param || f.backward_source_id;
    if (f.backward_source_id) {
      WEFT_INPUT_CHECK(f.backward_source_id->is_number_integer())
          << source << ": " << where << ": \"backward_source_id\" must be an integer, found "
          << describe(*f.backward_source_id);
    }

    for (size_t i = 0; i < f.inputs->size(); ++i) {
      const Json& je = (*f.inputs)[i];
      const auto e = detail::to_entry(je);
      WEFT_INPUT_CHECK(e)
          << source << ": " << where << ": input " << i
          << " must be [node, output] or [node, output, version] of non-negative integers, found "
          << describe(je);
      WEFT_INPUT_CHECK(e->node < num_nodes)
          << source << ": " << where << ": input " << i << " refers to node " << e->node
          << ", but the graph has " << num_nodes << " nodes";
      WEFT_INPUT_CHECK(e->node < nid)
          << source << ": " << where << ": input " << i << " refers to node " << e->node
          << ", which is not an earlier node (a cycle, or nodes not in topological order)";
      n.inputs.push_back(*e);
    }
    if (f.control_deps) {
      WEFT_INPUT_CHECK(f.control_deps->is_array())
          << source << ": " << where << ": \"control_deps\" must be an array, found "
          << describe(*f.control_deps);
      for (size_t i = 0; i < f.control_deps->size(); ++i) {
        const auto c = detail::to_uint32((*f.control_deps)[i]);
        WEFT_INPUT_CHECK(c && *c < nid)
            << source << ": " << where << ": control dependency " << i
            << " must be the index of an earlier node, found " << describe((*f.control_deps)[i]);
        n.control_deps.push_back(*c);
      }
    }

    const std::string op_name = f.op->get<std::string>();
    if (op_name != "null") {
      n.op = resolve_op(op_name, source, where);
      n.op_name = op_name;
    } else {
      WEFT_INPUT_CHECK(n.inputs.empty())
          << source << ": " << where << ": a variable (op \"null\") has no inputs, found "
          << n.inputs.size();
    }
    g.nodes.push_back(std::move(n));
  }

  // ---- node_row_ptr (optional): kept per node for a byte-exact save, never trusted ----
  if (row_ptr_j) {
    WEFT_INPUT_CHECK(row_ptr_j->is_array())
        << source << ": \"node_row_ptr\" must be an array, found " << describe(*row_ptr_j);
    WEFT_INPUT_CHECK(row_ptr_j->size() == num_nodes + 1)
        << source << ": \"node_row_ptr\" has " << row_ptr_j->size() << " entries; " << num_nodes
        << " nodes need " << num_nodes + 1;
    uint32_t prev = 0;
    for (size_t i = 0; i <= num_nodes; ++i) {
      const auto r = detail::to_uint32((*row_ptr_j)[i]);
      WEFT_INPUT_CHECK(r && (i > 0 || *r == 0) && *r >= prev &&
                       *r - prev <= static_cast<uint32_t>(std::numeric_limits<int32_t>::max()))
          << source << ": \"node_row_ptr\"[" << i
          << "] must be a count that starts at 0 and never decreases, found "
          << describe((*row_ptr_j)[i]);
      if (i > 0) g.nodes[i - 1].file_num_outputs = static_cast<int32_t>(*r - prev);
      prev = *r;
    }
  }

  // ---- heads and arg_nodes ----
  for (size_t h = 0; h < heads_j->size(); ++h) {
    const auto e = detail::to_entry((*heads_j)[h]);
    WEFT_INPUT_CHECK(e) << source << ": head " << h
                        << " must be [node, output] or [node, output, version], found "
                        << describe((*heads_j)[h]);
    WEFT_INPUT_CHECK(e->node < num_nodes)
        << source << ": head " << h << " refers to node " << e->node << ", but the graph has "
        << num_nodes << " nodes";
    g.heads.push_back(*e);
  }
  if (arg_nodes_j) {
    WEFT_INPUT_CHECK(arg_nodes_j->is_array())
        << source << ": \"arg_nodes\" must be an array, found " << describe(*arg_nodes_j);
    for (size_t i = 0; i < arg_nodes_j->size(); ++i) {
      const auto a = detail::to_uint32((*arg_nodes_j)[i]);
      WEFT_INPUT_CHECK(a && *a < num_nodes)
          << source << ": \"arg_nodes\"[" << i << "] must be a node index below " << num_nodes
          << ", found " << describe((*arg_nodes_j)[i]);
      WEFT_INPUT_CHECK(g.nodes[*a].is_variable())
          << source << ": \"arg_nodes\"[" << i << "]: " << node_label(*a, g.nodes[*a].name)
          << " is not a variable";
    }
  }

  // ---- attributes, then the upgrades of LoadLegacyJSONPass, in MXNet's order ----
  try {
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) g.parse_node(nid);
  } catch (const Error& e) {
    rethrow_with_source(e, source);
  }
  std::vector<bool> changed(g.nodes.size(), false);
  bool upgraded = false;
  int added = 0;
  if (version < detail::kCurrentMxnetVersion) upgraded = fix_legacy_keys(g, changed) || upgraded;
  if (version < 900) {
    added = add_missing_inputs(g, changed);
    upgraded = upgraded || added > 0;
  }
  if (version < 904) upgraded = set_input_initializers(g, changed) || upgraded;
  if (version < 905) upgraded = unset_reduce_axis(g, changed) || upgraded;

  try {
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
      Node& n = g.nodes[nid];
      if (changed[nid] && n.op) {
        n.op_attrs.reset();
        g.parse_node(nid);
      }
    }
    // Output counts come from the ops' rules and are bounded there (Note [Bounded output
    // counts]); entry indices are checked against them, unsigned.
    g.reindex();
  } catch (const Error& e) {
    rethrow_with_source(e, source);
  }

  std::string layout;
  if (any_param) {
    layout = "legacy (param/attr)";
  } else if (any_attrs) {
    layout = "attrs";
  } else if (any_attr) {
    layout = "attr";
  } else {
    layout = version >= 10000 ? "attrs" : version >= 900 ? "attr" : "legacy (param/attr)";
  }
  // After the upgrades the graph has the current semantics. Record that where the file's own
  // version would make a reader apply upgrades again, suggest another layout, or is absent;
  // a >= 1.0 file that needed nothing keeps its version (and so saves back byte for byte).
  if (upgraded || layout != "attrs" || !g.attrs.count("mxnet_version")) {
    g.attrs["mxnet_version"] = GraphAttr{"int", std::to_string(detail::kCurrentMxnetVersion)};
  }

  if (info) {
    info->layout = layout;
    info->mxnet_version = version;
    info->upgraded = upgraded;
    info->added_variables = added;
  }
  return g;
}

Graph load_json_file(const std::filesystem::path& path, JsonInfo* info) {
  const std::string text = detail::read_text_file(path);
  return load_json(text, info, path.string());
}

}  // namespace weft::graph
