// Reading helpers shared by the MXNet and TVM graph JSON readers (see json_parse.h).
#include "graph/json_parse.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <utility>

namespace weft::graph::detail {
namespace {

/// Line and column (1-based) of byte `offset` of `text`.
std::pair<size_t, size_t> line_and_column(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t last_newline = before.rfind('\n');
  const size_t column = last_newline == std::string_view::npos ? offset + 1 : offset - last_newline;
  return {line, column};
}

}  // namespace

size_t find_nesting_past(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

Json parse_json_text(std::string_view text, std::string_view source) {
  // Nesting is bounded before the parser sees the text, so that no later recursive walk (dump,
  // the writer) can exhaust the stack.
  if (const size_t past = find_nesting_past(text, kMaxJsonDepth); past != std::string_view::npos) {
    const auto [line, column] = line_and_column(text, past);
    WEFT_THROW(ValueError) << source << ": malformed JSON at line " << line << ", column " << column
                           << ": nesting deeper than " << kMaxJsonDepth << " levels";
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // nlohmann reports the number of bytes read when it failed; its message carries its own
    // position prefix, which is replaced by ours.
    const auto [line, column] = line_and_column(text, e.byte > 0 ? e.byte - 1 : 0);
    std::string reason = e.what();
    if (const size_t p = reason.find("parse error"); p != std::string::npos) {
      if (const size_t colon = reason.find(": ", p); colon != std::string::npos) {
        reason = reason.substr(colon + 2);
      }
    }
    WEFT_THROW(ValueError) << source << ": malformed JSON at line " << line << ", column " << column
                           << ": " << reason;
  } catch (const Json::exception& e) {
    // A number too large for a double ("1e400") is an out_of_range error without a position; the
    // message quotes the number, whose first occurrence is the one that failed.
    std::string reason = e.what();
    if (const size_t p = reason.find("] "); p != std::string::npos) reason = reason.substr(p + 2);
    std::string where;
    const size_t open = reason.find('\'');
    const size_t close = open == std::string::npos ? open : reason.find('\'', open + 1);
    if (close != std::string::npos && close > open + 1) {
      if (const size_t at = text.find(reason.substr(open + 1, close - open - 1));
          at != std::string_view::npos) {
        const auto [line, column] = line_and_column(text, at);
        where = " at line " + std::to_string(line) + ", column " + std::to_string(column);
      }
    }
    WEFT_THROW(ValueError) << source << ": malformed JSON" << where << ": " << reason;
  }
}

std::optional<uint32_t> to_uint32(const Json& v) {
  if (!v.is_number_unsigned()) return std::nullopt;
  const uint64_t x = v.get<uint64_t>();
  if (x > std::numeric_limits<uint32_t>::max()) return std::nullopt;
  return static_cast<uint32_t>(x);
}

std::optional<NodeEntry> to_entry(const Json& v) {
  if (!v.is_array() || v.size() < 2 || v.size() > 3) return std::nullopt;
  NodeEntry e;
  const auto node = to_uint32(v[0]);
  const auto index = to_uint32(v[1]);
  if (!node || !index) return std::nullopt;
  e.node = *node;
  e.index = *index;
  if (v.size() == 3) {
    const auto version = to_uint32(v[2]);
    if (!version) return std::nullopt;
    e.version = *version;
  }
  return e;
}

std::string describe(const Json& v) {
  constexpr size_t kMaxChars = 40;
  std::string text = v.dump();
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return std::string(v.type_name()) + " " + text;
}

std::string node_label(size_t nid, std::string_view name) {
  return "node " + std::to_string(nid) + " ('" + std::string(name) + "')";
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_INPUT_CHECK(in.good()) << "cannot open '" << path.string() << "' for reading";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  WEFT_INPUT_CHECK(!in.bad()) << "error while reading '" << path.string() << "'";
  return text;
}

}  // namespace weft::graph::detail
