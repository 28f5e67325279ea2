// MXNet/NNVM symbol JSON: load every layout (0.8 `param`/`attr`, 0.9–0.12 `attr`, >= 1.0
// `attrs`) with the legacy upgrades, and save the >= 1.0 layout exactly as MXNet's writer does.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "graph/graph.h"

namespace weft::graph {

/// How a loaded file was written.
struct JsonInfo {
  std::string layout;       ///< "legacy (param/attr)", "attr" or "attrs"
  int mxnet_version = 800;  ///< attrs.mxnet_version, 800 (0.8.0) when absent
  bool upgraded = false;  ///< legacy upgrades changed the graph (aux variables added, keys renamed)
  int added_variables = 0;  ///< variables created by the 0.8 -> 0.9 upgrade
};

/// Parses MXNet symbol JSON. Applies the legacy upgrades, resolves op aliases, parses every op's
/// attributes and validates the structure. `source` names the input in messages (a file name).
/// Throws ValueError naming the node (name and index) and what is wrong: malformed JSON (with
/// line and column), a missing field, a dangling input, a cycle, an unknown op, a bad attribute.
Graph load_json(std::string_view text, JsonInfo* info = nullptr,
                std::string_view source = "<json>");
/// Reads and parses a file (ValueError naming the path when it cannot be read).
Graph load_json_file(const std::filesystem::path& path, JsonInfo* info = nullptr);

/// Writes the >= 1.0 layout in MXNet's exact format (dmlc JSON writer: 2-space indent, `", "`
/// separators with a newline, sorted attrs). A file written by MXNet >= 1.0 that loads without
/// upgrades saves back byte for byte. Graphs built in weft get mxnet_version 10901.
std::string save_json(const Graph& graph);
void save_json_file(const Graph& graph, const std::filesystem::path& path);

}  // namespace weft::graph
