// MXNet/NNVM symbol JSON writer: the >= 1.0 layout in the exact format of dmlc-core's
// JSONWriter, so that a file MXNet wrote saves back byte for byte.
#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "graph/json.h"
#include "graph/json_parse.h"

namespace weft::graph {
namespace {

using detail::Json;
using detail::node_label;

/// dmlc-core's JSONWriter, reproduced: items are separated by ", " and, in a multi-line scope, a
/// newline and two spaces per open scope; a scope's closing bracket goes on its own line when it
/// is multi-line and not empty. What is multi-line is the caller's choice, as in dmlc (arrays of
/// more than 10 numbers, arrays of strings or structures, objects of more than one key, nodes).
class DmlcWriter {
 public:
  explicit DmlcWriter(std::string& out) : out_(out) {}

  void begin_object(bool multi_line) { begin('{', multi_line); }
  void end_object() { end('}'); }
  void begin_array(bool multi_line) { begin('[', multi_line); }
  void end_array() { end(']'); }

  /// Starts an object member; write its value next.
  void key(std::string_view k) {
    if (scopes_.back().count > 0) out_ += ", ";
    separator();
    string(k);
    out_ += ": ";
    ++scopes_.back().count;
  }
  /// Starts an array item; write its value next.
  void item() {
    if (scopes_.back().count > 0) out_ += ", ";
    ++scopes_.back().count;
    separator();
  }

  /// dmlc's WriteString escapes \r \n \\ \t and "; other control characters become \u00XX so that
  /// the output stays valid JSON (dmlc writes them raw). Other bytes (UTF-8) pass through.
  void string(std::string_view s) {
    out_ += '"';
    for (const char ch : s) {
      switch (ch) {
        case '\r':
          out_ += "\\r";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\t':
          out_ += "\\t";
          break;
        case '"':
          out_ += "\\\"";
          break;
        default:
          if (static_cast<unsigned char>(ch) < 0x20) {
            static constexpr char kHex[] = "0123456789abcdef";
            out_ += "\\u00";
            out_ += kHex[(ch >> 4) & 0xf];
            out_ += kHex[ch & 0xf];
          } else {
            out_ += ch;
          }
      }
    }
    out_ += '"';
  }
  void number(uint64_t v) { out_ += std::to_string(v); }
  void raw(std::string_view text) { out_ += text; }

 private:
  struct Scope {
    bool multi_line;
    size_t count;
  };
  void begin(char bracket, bool multi_line) {
    out_ += bracket;
    scopes_.push_back({multi_line, 0});
  }
  void end(char bracket) {
    const Scope s = scopes_.back();
    scopes_.pop_back();
    if (s.multi_line && s.count != 0) separator();
    out_ += bracket;
  }
  void separator() {
    if (scopes_.empty() || scopes_.back().multi_line) {
      out_ += '\n';
      out_.append(scopes_.size() * 2, ' ');
    }
  }

  std::string& out_;
  std::vector<Scope> scopes_;
};

void write_entry(DmlcWriter& w, const NodeEntry& e) {
  w.begin_array(false);
  w.item();
  w.number(e.node);
  w.item();
  w.number(e.index);
  w.item();
  w.number(e.version);
  w.end_array();
}

void write_index_list(DmlcWriter& w, const std::vector<uint64_t>& values) {
  w.begin_array(values.size() > 10);
  for (uint64_t v : values) {
    w.item();
    w.number(v);
  }
  w.end_array();
}

/// A graph attribute's value as dmlc writes the C++ type behind it: vectors of numbers are
/// multi-line past 10 items, vectors of anything else always (dmlc::is_pod is false for them).
void write_attr_value(DmlcWriter& w, const Json& v) {
  if (v.is_array()) {
    bool all_numbers = true;
    for (const Json& x : v) all_numbers = all_numbers && (x.is_number() || x.is_boolean());
    w.begin_array(v.size() > 10 || !all_numbers);
    for (const Json& x : v) {
      w.item();
      write_attr_value(w, x);
    }
    w.end_array();
  } else if (v.is_object()) {
    w.begin_object(v.size() > 1);
    for (auto it = v.begin(); it != v.end(); ++it) {
      w.key(it.key());
      write_attr_value(w, it.value());
    }
    w.end_object();
  } else if (v.is_string()) {
    w.string(v.get<std::string>());
  } else {
    w.raw(v.dump());
  }
}

}  // namespace

std::string save_json(const Graph& graph) {
  std::string out;
  DmlcWriter w(out);
  std::vector<uint64_t> arg_nodes;
  std::vector<uint64_t> row_ptr{0};
  w.begin_object(true);
  w.key("nodes");
  w.begin_array(true);
  for (uint32_t nid = 0; nid < graph.nodes.size(); ++nid) {
    const Node& n = graph.nodes[nid];
    WEFT_INPUT_CHECK(!n.op || n.op_attrs)
        << node_label(nid, n.name) << ": attributes not parsed; call Graph::reindex()";
    if (n.is_variable()) arg_nodes.push_back(nid);
    const int nout = n.file_num_outputs >= 0 ? n.file_num_outputs : n.num_outputs();
    row_ptr.push_back(row_ptr.back() + static_cast<uint64_t>(std::max(nout, 0)));

    w.item();
    w.begin_object(true);
    w.key("op");
    w.string(n.written_op_name());
    w.key("name");
    w.string(n.name);
    if (!n.attrs.empty()) {
      w.key("attrs");
      w.begin_object(n.attrs.size() > 1);
      for (const auto& [k, v] : n.attrs) {
        w.key(k);
        w.string(v);
      }
      w.end_object();
    }
    w.key("inputs");
    w.begin_array(n.inputs.size() > 10);
    for (const NodeEntry& e : n.inputs) {
      w.item();
      write_entry(w, e);
    }
    w.end_array();
    if (!n.control_deps.empty()) {
      w.key("control_deps");
      write_index_list(w, std::vector<uint64_t>(n.control_deps.begin(), n.control_deps.end()));
    }
    w.end_object();
  }
  w.end_array();
  w.key("arg_nodes");
  write_index_list(w, arg_nodes);
  w.key("node_row_ptr");
  write_index_list(w, row_ptr);
  w.key("heads");
  w.begin_array(graph.heads.size() > 10);
  for (const NodeEntry& e : graph.heads) {
    w.item();
    write_entry(w, e);
  }
  w.end_array();

  std::map<std::string, GraphAttr> attrs = graph.attrs;
  attrs.emplace("mxnet_version", GraphAttr{"int", std::to_string(detail::kCurrentMxnetVersion)});
  w.key("attrs");
  w.begin_object(attrs.size() > 1);
  for (const auto& [k, a] : attrs) {
    const Json value = detail::parse_json_text(a.value_json, "graph attribute '" + k + "'");
    w.key(k);
    w.begin_array(false);
    w.item();
    w.string(a.type);
    w.item();
    write_attr_value(w, value);
    w.end_array();
  }
  w.end_object();
  w.end_object();
  return out;
}

void save_json_file(const Graph& graph, const std::filesystem::path& path) {
  const std::string text = save_json(graph);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  WEFT_INPUT_CHECK(out.good()) << "cannot open '" << path.string() << "' for writing";
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.flush();
  WEFT_INPUT_CHECK(out.good()) << "error while writing '" << path.string() << "'";
}

}  // namespace weft::graph
