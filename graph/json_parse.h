// Reading helpers shared by the MXNet symbol JSON reader (json.cc) and the TVM graph JSON reader
// (tvm.cc): parsing with line/column errors and a nesting limit, and checked conversions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "graph/graph.h"

/// A check of the file being read: throws ValueError with the streamed message alone (the message
/// says what is wrong with the input; WEFT_CHECK's condition text would only add noise for users).
#define WEFT_INPUT_CHECK(cond)         \
  if (__builtin_expect(!!(cond), 1)) { \
  } else                               \
    WEFT_THROW(ValueError)

namespace weft::graph::detail {

using Json = nlohmann::json;

/// The MXNet version whose semantics loaded graphs have after the legacy upgrades, and which
/// save_json writes for graphs that carry none (1.9.1, the last 1.x release).
inline constexpr int kCurrentMxnetVersion = 10901;

/// Graph JSON nests five levels deep (list_shape attributes); anything past this is not a graph.
/// The limit also bounds the recursion of every walk over a parsed value.
inline constexpr int kMaxJsonDepth = 64;

/// The offset of the first '[' or '{' of `text` that opens a level deeper than `max_depth`
/// (brackets inside strings do not count), or npos when it nests no deeper. A scan of the text
/// only, so that a limit holds before a parser or any recursive walk sees it. Thread-safe.
size_t find_nesting_past(std::string_view text, int max_depth);

/// Parses `text`. Throws ValueError "<source>: malformed JSON at line L, column C: ..." for a
/// syntax error and for nesting deeper than kMaxJsonDepth. Thread-safe.
Json parse_json_text(std::string_view text, std::string_view source);

/// A non-negative integer that fits in 32 bits (node and output indices), or nullopt.
std::optional<uint32_t> to_uint32(const Json& v);
/// `[node, index]` or `[node, index, version]` (MXNet <= 0.8 writes two elements), or nullopt.
std::optional<NodeEntry> to_entry(const Json& v);
/// A short description of a value for messages: its type and its first characters.
std::string describe(const Json& v);
/// "node 3 ('conv1')".
std::string node_label(size_t nid, std::string_view name);

/// Reads a whole file; ValueError naming the path when it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

}  // namespace weft::graph::detail
