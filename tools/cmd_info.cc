// `weft info GRAPH.json`: what a graph file holds. MXNet symbol JSON: layout, version, upgrades,
// nodes, arguments and auxiliary states, heads, op histogram, parameter sizes from __shape__.
// TVM graph JSON: nodes, heads, compiled functions, dtypes and the storage plan.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "graph/json.h"
#include "graph/tvm.h"
#include "ops/kernel_libraries.h"
#include "ops/params.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace weft::tools {
namespace {

struct InfoOptions {
  std::string graph;
  std::vector<std::string> plugins;
  bool all = false;  ///< list every argument, aux state and head instead of the first few
};

constexpr size_t kListedNames = 5;

std::string version_text(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string bytes_text(uint64_t bytes) {
  char buf[64];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  } else if (bytes >= (uint64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

/// "a, b, c, ... (12 more)" unless `all`.
std::string name_list(const std::vector<std::string>& names, bool all) {
  std::string s;
  const size_t shown = all ? names.size() : std::min(names.size(), kListedNames);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + names[i];
  if (shown < names.size()) s += ", ... (" + std::to_string(names.size() - shown) + " more)";
  return s;
}

/// Rows of (name, count) sorted by count, then name.
void print_histogram(const char* title, const std::map<std::string, int>& counts,
                     const std::map<std::string, std::string>& notes = {}) {
  std::vector<std::pair<std::string, int>> rows(counts.begin(), counts.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  std::printf("  %s (%zu kinds):\n", title, rows.size());
  for (const auto& [name, count] : rows) {
    auto note = notes.find(name);
    std::printf("    %-*s %6d%s\n", static_cast<int>(width), name.c_str(), count,
                note == notes.end() ? "" : ("  (written " + note->second + ")").c_str());
  }
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

int info_mxnet(const InfoOptions& o, const std::string& text) {
  graph::JsonInfo info;
  const graph::Graph g = graph::load_json(text, &info, o.graph);
  std::map<std::string, int> ops;
  std::map<std::string, std::string> written;  // canonical name -> aliases as written
  size_t op_nodes = 0;
  for (const graph::Node& n : g.nodes) {
    if (!n.op) continue;
    ++op_nodes;
    ++ops[n.op->name()];
    if (n.written_op_name() != n.op->name()) {
      std::string& w = written[n.op->name()];
      if (w.find(n.written_op_name()) == std::string::npos)
        w += (w.empty() ? "" : ", ") + n.written_op_name();
    }
  }
  const auto args = g.list_arguments();
  const auto aux = g.list_auxiliary_states();
  const auto outputs = g.list_outputs();

  std::printf("%s: MXNet symbol JSON\n", o.graph.c_str());
  std::printf("  layout      %s\n", info.layout.c_str());
  std::printf("  version     %s (%d)%s\n", version_text(info.mxnet_version).c_str(),
              info.mxnet_version,
              info.mxnet_version == 800 ? "; files without mxnet_version read as 0.8.0" : "");
  if (info.upgraded) {
    std::printf("  upgraded    to %s semantics", version_text(g.mxnet_version()).c_str());
    if (info.added_variables) std::printf(", %d auxiliary variables added", info.added_variables);
    std::printf("\n");
  }
  std::printf("  nodes       %zu (%zu op nodes, %zu variables)\n", g.nodes.size(), op_nodes,
              g.nodes.size() - op_nodes);
  std::printf("  arguments   %zu: %s\n", args.size(), name_list(args, o.all).c_str());
  std::printf("  aux states  %zu%s%s\n", aux.size(), aux.empty() ? "" : ": ",
              name_list(aux, o.all).c_str());
  std::printf("  heads       %zu: %s\n", g.heads.size(), name_list(outputs, o.all).c_str());

  // Parameter sizes where the file records them (gluon exports and some symbol API files).
  size_t with_shape = 0, fully_known = 0;
  uint64_t elements = 0;
  for (const graph::Node& n : g.nodes) {
    if (!n.is_variable()) continue;
    auto it = n.attrs.find("__shape__");
    if (it == n.attrs.end()) continue;
    ++with_shape;
    try {
      const Shape s = parse_shape(it->second);
      // MXNet before numpy semantics writes 0 for a dimension not known yet.
      bool known = true;
      uint64_t count = 1;
      for (int64_t d : s) {
        known = known && d > 0 && !__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count);
      }
      if (known) {
        ++fully_known;
        elements += count;
      }
    } catch (const ValueError&) {
    }
  }
  if (with_shape) {
    std::printf("  __shape__   on %zu of %zu variables; %zu fully known, %llu elements\n",
                with_shape, g.nodes.size() - op_nodes, fully_known,
                static_cast<unsigned long long>(elements));
  } else {
    std::printf("  __shape__   none (shapes come from inference with the data shape)\n");
  }
  print_histogram("ops", ops, written);
  return 0;
}

int info_tvm(const InfoOptions& o, const std::string& text) {
  const graph::TvmGraph g = graph::load_tvm_json(text, o.graph);
  size_t calls = 0;
  std::map<std::string, int> funcs, dltypes;
  for (const graph::TvmNode& n : g.nodes) {
    if (n.is_variable()) continue;
    ++calls;
    ++funcs[n.func_name];
  }
  for (const std::string& t : g.dltype) ++dltypes[t];
  std::printf("%s: TVM graph JSON (graph executor)\n", o.graph.c_str());
  std::printf("  nodes       %zu (%zu tvm_op, %zu null)\n", g.nodes.size(), calls,
              g.nodes.size() - calls);
  std::printf("  entries     %u\n", g.num_entries());
  std::vector<std::string> heads;
  for (const graph::NodeEntry& e : g.heads) {
    const uint32_t eid = g.entry_id(e);
    heads.push_back(g.nodes[e.node].name + " " + shape_text(g.shape[eid]) + " " + g.dltype[eid]);
  }
  std::printf("  heads       %zu: %s\n", g.heads.size(), name_list(heads, o.all).c_str());
  // Inputs and parameters alike: TVM feeds both by name.
  std::vector<std::string> inputs;
  for (uint32_t nid : g.arg_nodes) {
    const uint32_t eid = g.entry_id(nid, 0);
    inputs.push_back(g.nodes[nid].name + " " + shape_text(g.shape[eid]));
  }
  std::printf("  null nodes  %zu: %s\n", inputs.size(), name_list(inputs, o.all).c_str());
  std::string types;
  for (const auto& [t, count] : dltypes)
    types += (types.empty() ? "" : ", ") + t + " x" + std::to_string(count);
  std::printf("  dltypes     %s\n", types.c_str());
  const graph::TvmStoragePlan plan = graph::tvm_storage_plan(g);
  std::printf("  storage     %u storage ids for %u entries\n", plan.num_storage_ids,
              plan.num_entries);
  std::printf("              planned %s (each id sized to its largest entry)\n",
              bytes_text(plan.planned_bytes).c_str());
  std::printf("              without sharing %s; sharing saves %.1f%%\n",
              bytes_text(plan.unshared_bytes).c_str(),
              plan.unshared_bytes
                  ? 100.0 * static_cast<double>(plan.unshared_bytes - plan.planned_bytes) /
                        static_cast<double>(plan.unshared_bytes)
                  : 0.0);
  std::printf("              of which inputs and parameters %s\n",
              bytes_text(plan.param_bytes).c_str());
  print_histogram("functions", funcs);
  return 0;
}

int run_info(const InfoOptions& o) {
  std::printf("kernels: %s\n", describe_kernel_libraries().c_str());
  try {
    load_plugins(o.plugins);  // before the graph: it may use the plugins' operators
    std::ifstream in(o.graph, std::ios::binary);
    if (!in.good()) WEFT_THROW(ValueError) << "cannot open '" << o.graph << "' for reading";
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return graph::looks_like_tvm_json(text) ? info_tvm(o, text) : info_mxnet(o, text);
  } catch (const Error& e) {
    std::fprintf(stderr, "weft info: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  Command c;
  c.app = app.add_subcommand(
      "info", "Describe a graph file: MXNet symbol JSON (any version) or TVM graph JSON");
  c.app->add_option("graph", options->graph, "Graph JSON file")->required();
  c.app->add_flag("--all", options->all, "List every argument, auxiliary state and head");
  add_plugin_option(*c.app, options->plugins);
  c.run = [options] { return run_info(*options); };
  return c;
}

}  // namespace weft::tools
