// TVM graph-executor JSON: reader, validation and the storage-plan figures.
#include "graph/tvm.h"

#include <charconv>
#include <limits>
#include <map>

#include "base/error.h"
#include "graph/json_parse.h"

namespace weft::graph {
namespace {

using detail::describe;
using detail::Json;
using detail::node_label;

/// A non-negative decimal integer written as a string ("3"), as TVM writes node attributes.
std::optional<uint32_t> parse_count(const std::string& s) {
  uint32_t v = 0;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty()) return std::nullopt;
  return v;
}

/// The value list of a per-entry attribute `["<type>", [...]]`, checked against its type name
/// and the entry count.
const Json& entry_list(const Json& attr, const std::string& key, const char* type,
                       uint32_t num_entries, std::string_view source) {
  WEFT_INPUT_CHECK(attr.is_array() && attr.size() == 2 && attr[0].is_string() && attr[1].is_array())
      << source << ": attribute \"" << key << "\" must be [\"" << type << "\", [...]], found "
      << describe(attr);
  WEFT_INPUT_CHECK(attr[0] == type) << source << ": attribute \"" << key << "\" must have type \""
                                    << type << "\", found \"" << attr[0].get<std::string>() << "\"";
  WEFT_INPUT_CHECK(attr[1].size() == num_entries)
      << source << ": attribute \"" << key << "\" has " << attr[1].size()
      << " items, but node_row_ptr counts " << num_entries << " entries";
  return attr[1];
}

std::optional<int64_t> to_int64(const Json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;
  }
  return v.get<int64_t>();
}

TvmNode read_node(const Json& jn, size_t nid, std::string_view source) {
  WEFT_INPUT_CHECK(jn.is_object())
      << source << ": node " << nid << ": expected an object, found " << describe(jn);
  auto name_it = jn.find("name");
  WEFT_INPUT_CHECK(name_it != jn.end()) << source << ": node " << nid << ": missing \"name\"";
  WEFT_INPUT_CHECK(name_it->is_string())
      << source << ": node " << nid << ": \"name\" must be a string, found " << describe(*name_it);
  TvmNode n;
  n.name = name_it->get<std::string>();
  const std::string where = node_label(nid, n.name);
  const Json* op = nullptr;
  const Json* inputs = nullptr;
  for (auto it = jn.begin(); it != jn.end(); ++it) {
    const std::string& k = it.key();
    if (k == "op") {
      op = &it.value();
    } else if (k == "inputs") {
      inputs = &it.value();
    } else if (k == "attrs" || k == "attr") {
      WEFT_INPUT_CHECK(it.value().is_object())
          << source << ": " << where << ": \"" << k << "\" must be an object, found "
          << describe(it.value());
      for (auto a = it.value().begin(); a != it.value().end(); ++a) {
        WEFT_INPUT_CHECK(a.value().is_string())
            << source << ": " << where << ": attribute '" << a.key() << "' must be a string, found "
            << describe(a.value());
        n.attrs[a.key()] = a.value().get<std::string>();
      }
    } else if (k == "control_deps") {
      WEFT_INPUT_CHECK(it.value().is_array() && it.value().empty())
          << source << ": " << where << ": control dependencies are not supported in TVM graphs";
    } else if (k != "name") {
      WEFT_THROW(ValueError) << source << ": " << where << ": unknown field \"" << k
                             << "\" (a node has op, name, inputs, attrs)";
    }
  }
  WEFT_INPUT_CHECK(op) << source << ": " << where << ": missing \"op\"";
  WEFT_INPUT_CHECK(op->is_string() && (*op == "null" || *op == "tvm_op"))
      << source << ": " << where << ": \"op\" must be \"null\" or \"tvm_op\", found "
      << describe(*op);
  n.op = op->get<std::string>();
  WEFT_INPUT_CHECK(inputs) << source << ": " << where << ": missing \"inputs\"";
  WEFT_INPUT_CHECK(inputs->is_array())
      << source << ": " << where << ": \"inputs\" must be an array, found " << describe(*inputs);
  for (size_t i = 0; i < inputs->size(); ++i) {
    const auto e = detail::to_entry((*inputs)[i]);
    WEFT_INPUT_CHECK(e) << source << ": " << where << ": input " << i
                        << " must be [node, output, version] of non-negative integers, found "
                        << describe((*inputs)[i]);
    WEFT_INPUT_CHECK(e->node < nid)
        << source << ": " << where << ": input " << i << " refers to node " << e->node
        << ", which is not an earlier node";
    n.inputs.push_back(*e);
  }
  if (n.is_variable()) {
    WEFT_INPUT_CHECK(n.inputs.empty())
        << source << ": " << where << ": a null node has no inputs, found " << n.inputs.size();
    return n;
  }
  auto attr = [&](const char* key) -> const std::string& {
    auto it = n.attrs.find(key);
    WEFT_INPUT_CHECK(it != n.attrs.end())
        << source << ": " << where << ": tvm_op without attribute '" << key << "'";
    return it->second;
  };
  n.func_name = attr("func_name");
  const auto num_inputs = parse_count(attr("num_inputs"));
  const auto num_outputs = parse_count(attr("num_outputs"));
  const auto flatten = parse_count(attr("flatten_data"));
  WEFT_INPUT_CHECK(num_inputs && *num_inputs == n.inputs.size())
      << source << ": " << where << ": num_inputs is '" << attr("num_inputs") << "', the node has "
      << n.inputs.size() << " inputs";
  // Note [Bounded output counts].
  WEFT_INPUT_CHECK(num_outputs && *num_outputs <= static_cast<uint32_t>(kMaxNodeOutputs))
      << source << ": " << where << ": num_outputs must be a count from 0 to " << kMaxNodeOutputs
      << " (kMaxNodeOutputs), found '" << attr("num_outputs") << "'";
  WEFT_INPUT_CHECK(flatten && *flatten <= 1)
      << source << ": " << where << ": flatten_data must be 0 or 1, found '" << attr("flatten_data")
      << "'";
  n.num_inputs = static_cast<int>(*num_inputs);
  n.num_outputs = static_cast<int>(*num_outputs);
  n.flatten_data = *flatten == 1;
  return n;
}

}  // namespace

TvmGraph load_tvm_json(std::string_view text, std::string_view source) {
  const Json doc = detail::parse_json_text(text, source);
  WEFT_INPUT_CHECK(doc.is_object())
      << source << ": expected a JSON object at the top level, found " << describe(doc);
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& k = it.key();
    WEFT_INPUT_CHECK(k == "nodes" || k == "arg_nodes" || k == "node_row_ptr" || k == "heads" ||
                     k == "attrs" || k == "metadata")
        << source << ": unknown top-level field \"" << k
        << "\" (expected nodes, arg_nodes, node_row_ptr, heads, attrs)";
  }
  auto field = [&](const char* key, bool is_object) -> const Json& {
    auto it = doc.find(key);
    WEFT_INPUT_CHECK(it != doc.end()) << source << ": missing \"" << key << "\"";
    WEFT_INPUT_CHECK(is_object ? it->is_object() : it->is_array())
        << source << ": \"" << key << "\" must be " << (is_object ? "an object" : "an array")
        << ", found " << describe(*it);
    return *it;
  };
  const Json& nodes_j = field("nodes", false);
  const Json& arg_nodes_j = field("arg_nodes", false);
  const Json& row_ptr_j = field("node_row_ptr", false);
  const Json& heads_j = field("heads", false);
  const Json& attrs_j = field("attrs", true);

  TvmGraph g;
  const size_t num_nodes = nodes_j.size();
  WEFT_INPUT_CHECK(num_nodes < std::numeric_limits<uint32_t>::max())
      << source << ": too many nodes";
  for (size_t nid = 0; nid < num_nodes; ++nid)
    g.nodes.push_back(read_node(nodes_j[nid], nid, source));

  WEFT_INPUT_CHECK(row_ptr_j.size() == num_nodes + 1)
      << source << ": \"node_row_ptr\" has " << row_ptr_j.size() << " entries; " << num_nodes
      << " nodes need " << num_nodes + 1;
  for (size_t i = 0; i <= num_nodes; ++i) {
    const auto r = detail::to_uint32(row_ptr_j[i]);
    WEFT_INPUT_CHECK(r) << source << ": \"node_row_ptr\"[" << i
                        << "] must be a non-negative integer, found " << describe(row_ptr_j[i]);
    if (i == 0) {
      WEFT_INPUT_CHECK(*r == 0) << source << ": \"node_row_ptr\" must start at 0, found " << *r;
    } else {
      const TvmNode& n = g.nodes[i - 1];
      const uint64_t expected =
          static_cast<uint64_t>(g.node_row_ptr.back()) + static_cast<uint64_t>(n.num_outputs);
      WEFT_INPUT_CHECK(*r == expected)
          << source << ": " << node_label(i - 1, n.name) << ": node_row_ptr gives it "
          << (static_cast<int64_t>(*r) - static_cast<int64_t>(g.node_row_ptr.back()))
          << " outputs, the node has " << n.num_outputs;
    }
    g.node_row_ptr.push_back(*r);
  }
  auto check_entry = [&](const NodeEntry& e, const std::string& what) {
    WEFT_INPUT_CHECK(e.node < num_nodes) << source << ": " << what << " refers to node " << e.node
                                         << ", but the graph has " << num_nodes << " nodes";
    const TvmNode& src = g.nodes[e.node];
    WEFT_INPUT_CHECK(e.index < static_cast<uint32_t>(src.num_outputs))
        << source << ": " << what << " uses output " << e.index << " of "
        << node_label(e.node, src.name) << ", which has " << src.num_outputs << " outputs";
  };
  for (size_t nid = 0; nid < num_nodes; ++nid) {
    const TvmNode& n = g.nodes[nid];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      check_entry(n.inputs[i], node_label(nid, n.name) + ": input " + std::to_string(i));
    }
  }
  for (size_t h = 0; h < heads_j.size(); ++h) {
    const auto e = detail::to_entry(heads_j[h]);
    WEFT_INPUT_CHECK(e) << source << ": head " << h << " must be [node, output, version], found "
                        << describe(heads_j[h]);
    check_entry(*e, "head " + std::to_string(h));
    g.heads.push_back(*e);
  }
  for (size_t i = 0; i < arg_nodes_j.size(); ++i) {
    const auto a = detail::to_uint32(arg_nodes_j[i]);
    WEFT_INPUT_CHECK(a && *a < num_nodes && g.nodes[*a].is_variable())
        << source << ": \"arg_nodes\"[" << i << "] must be the index of a null node, found "
        << describe(arg_nodes_j[i]);
    g.arg_nodes.push_back(*a);
  }

  // ---- per-entry attributes ----
  const uint32_t num_entries = g.num_entries();
  bool have_storage = false, have_shape = false, have_dltype = false;
  for (auto it = attrs_j.begin(); it != attrs_j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "storage_id") {
      const Json& list = entry_list(it.value(), key, "list_int", num_entries, source);
      for (size_t i = 0; i < list.size(); ++i) {
        const auto s = to_int64(list[i]);
        WEFT_INPUT_CHECK(s && *s >= 0)
            << source << ": storage_id of entry " << i << " must be a non-negative integer, found "
            << describe(list[i]);
        g.storage_id.push_back(*s);
      }
      have_storage = true;
    } else if (key == "shape") {
      const Json& list = entry_list(it.value(), key, "list_shape", num_entries, source);
      for (size_t i = 0; i < list.size(); ++i) {
        WEFT_INPUT_CHECK(list[i].is_array())
            << source << ": shape of entry " << i << " must be a list, found " << describe(list[i]);
        std::vector<int64_t> dims;
        for (const Json& d : list[i]) {
          const auto v = to_int64(d);
          WEFT_INPUT_CHECK(v && *v >= 0)
              << source << ": shape of entry " << i << " must hold non-negative integers, found "
              << describe(d);
          dims.push_back(*v);
        }
        g.shape.push_back(std::move(dims));
      }
      have_shape = true;
    } else if (key == "dltype") {
      const Json& list = entry_list(it.value(), key, "list_str", num_entries, source);
      for (size_t i = 0; i < list.size(); ++i) {
        WEFT_INPUT_CHECK(list[i].is_string()) << source << ": dltype of entry " << i
                                              << " must be a string, found " << describe(list[i]);
        std::string t = list[i].get<std::string>();
        try {
          tvm_dltype_bytes(t);
        } catch (const ValueError& e) {
          WEFT_THROW(ValueError) << source << ": dltype of entry " << i << ": " << e.what();
        }
        g.dltype.push_back(std::move(t));
      }
      have_dltype = true;
    } else if (key == "device_index") {
      const Json& list = entry_list(it.value(), key, "list_int", num_entries, source);
      for (size_t i = 0; i < list.size(); ++i) {
        const auto d = to_int64(list[i]);
        WEFT_INPUT_CHECK(d) << source << ": device_index of entry " << i
                            << " must be an integer, found " << describe(list[i]);
        g.device_index.push_back(*d);
      }
    } else {
      // Other attributes (the NNVM-era integer "dtype" list) are not needed; only their form is
      // checked.
      WEFT_INPUT_CHECK(it.value().is_array() && it.value().size() == 2 && it.value()[0].is_string())
          << source << ": attribute \"" << key << "\" must be [type, value], found "
          << describe(it.value());
    }
  }
  WEFT_INPUT_CHECK(have_storage) << source << ": attrs has no \"storage_id\"";
  WEFT_INPUT_CHECK(have_shape) << source << ": attrs has no \"shape\"";
  WEFT_INPUT_CHECK(have_dltype) << source << ": attrs has no \"dltype\"";
  return g;
}

TvmGraph load_tvm_json_file(const std::filesystem::path& path) {
  const std::string text = detail::read_text_file(path);
  return load_tvm_json(text, path.string());
}

bool looks_like_tvm_json(std::string_view text) {
  const bool tvm_op = text.find("\"tvm_op\"") != std::string_view::npos;
  const bool storage = text.find("\"storage_id\"") != std::string_view::npos &&
                       text.find("\"dltype\"") != std::string_view::npos;
  return tvm_op || storage;
}

int64_t tvm_dltype_bytes(std::string_view t) {
  if (t == "bool") return 1;
  if (t == "handle") return 8;
  std::string_view rest;
  for (std::string_view prefix : {"bfloat", "float", "uint", "int"}) {
    if (t.substr(0, prefix.size()) == prefix) {
      rest = t.substr(prefix.size());
      break;
    }
  }
  uint32_t bits = 0, lanes = 1;
  const char* end = rest.data() + rest.size();
  auto [p, ec] = std::from_chars(rest.data(), end, bits);
  bool ok = !rest.empty() && ec == std::errc() && bits > 0 && bits <= 1024;
  if (ok && p != end) {
    ok = *p == 'x';
    if (ok) {
      auto [q, ec2] = std::from_chars(p + 1, end, lanes);
      ok = ec2 == std::errc() && q == end && lanes > 0 && lanes <= 65536;
    }
  }
  if (!ok) {
    WEFT_THROW(ValueError) << "unknown dltype '" << t
                           << "' (expected int/uint/float/bfloat<bits>[x<lanes>], bool or handle)";
  }
  // TVM's GraphExecutor rounds a sub-byte element up to a byte: ((bits * lanes + 7) / 8).
  return (static_cast<int64_t>(bits) * lanes + 7) / 8;
}

uint64_t tvm_entry_bytes(const TvmGraph& g, uint32_t eid) {
  WEFT_INPUT_CHECK(eid < g.shape.size() && eid < g.dltype.size())
      << "entry " << eid << " out of range";
  uint64_t bytes = static_cast<uint64_t>(tvm_dltype_bytes(g.dltype[eid]));
  for (int64_t d : g.shape[eid]) {
    const auto ud = static_cast<uint64_t>(d);
    WEFT_INPUT_CHECK(ud == 0 || bytes <= std::numeric_limits<uint64_t>::max() / ud)
        << "entry " << eid << ": its size overflows 64 bits";
    bytes *= ud;
  }
  return bytes;
}

TvmStoragePlan tvm_storage_plan(const TvmGraph& g) {
  TvmStoragePlan plan;
  plan.num_entries = g.num_entries();
  std::map<int64_t, uint64_t>
      pool;  // storage id -> largest entry; ids come from the file, so no dense table
  std::vector<bool> is_param(plan.num_entries, false);
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    if (g.nodes[nid].is_variable() && g.node_row_ptr[nid] < plan.num_entries)
      is_param[g.node_row_ptr[nid]] = true;
  }
  auto add = [](uint64_t a, uint64_t b) {
    WEFT_INPUT_CHECK(a <= std::numeric_limits<uint64_t>::max() - b)
        << "storage plan: total bytes overflow 64 bits";
    return a + b;
  };
  for (uint32_t eid = 0; eid < plan.num_entries && eid < g.storage_id.size(); ++eid) {
    const uint64_t bytes = tvm_entry_bytes(g, eid);
    uint64_t& slot = pool[g.storage_id[eid]];
    slot = std::max(slot, bytes);
    plan.unshared_bytes = add(plan.unshared_bytes, bytes);
    if (is_param[eid]) plan.param_bytes = add(plan.param_bytes, bytes);
  }
  plan.num_storage_ids = static_cast<uint32_t>(pool.size());
  for (const auto& [sid, bytes] : pool) plan.planned_bytes = add(plan.planned_bytes, bytes);
  return plan;
}

}  // namespace weft::graph
