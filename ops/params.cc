// Parsers for MXNet's attribute value spellings and the parameter error messages.
#include "ops/params.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace weft {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// Splits "(a, b, c)" / "[a,b]" / "a" into trimmed items; "()" gives none.
std::vector<std::string_view> split_tuple(std::string_view text, const char* what) {
  std::string_view s = trim(text);
  if (!s.empty() && (s.front() == '(' || s.front() == '[')) {
    const char close = s.front() == '(' ? ')' : ']';
    WEFT_CHECK(s.size() >= 2 && s.back() == close)
        << "expected a " << what << " like (1, 2), got '" << text << "'";
    s = trim(s.substr(1, s.size() - 2));
  }
  std::vector<std::string_view> items;
  if (s.empty()) return items;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    std::string_view item =
        trim(s.substr(start, comma == std::string_view::npos ? s.npos : comma - start));
    if (item.empty()) {
      // A trailing comma as in "(3,)" is allowed.
      WEFT_CHECK(comma == std::string_view::npos)
          << "empty element in " << what << " '" << text << "'";
    } else {
      items.push_back(item);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace

bool is_none(std::string_view text) {
  text = trim(text);
  return text.empty() || iequals(text, "none") || text == "null";
}

bool parse_bool(std::string_view text) {
  std::string_view s = trim(text);
  if (s == "1" || iequals(s, "true")) return true;
  if (s == "0" || iequals(s, "false")) return false;
  WEFT_THROW(ValueError) << "expected a boolean (True/False/1/0), got '" << text << "'";
}

int64_t parse_int(std::string_view text) {
  std::string_view s = trim(text);
  if (!s.empty() && (s.back() == 'L' || s.back() == 'l')) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) {
    // Accept integral floats such as "2.0" (some writers print ints that way).
    char* end = nullptr;
    std::string copy(s);
    double d = std::strtod(copy.c_str(), &end);
    WEFT_CHECK(!copy.empty() && end == copy.c_str() + copy.size() && std::floor(d) == d &&
               std::abs(d) < 9.2e18)
        << "expected an integer, got '" << text << "'";
    return static_cast<int64_t>(d);
  }
  return value;
}

double parse_float(std::string_view text) {
  std::string s(trim(text));
  WEFT_CHECK(!s.empty()) << "expected a number, got ''";
  if (iequals(s, "inf") || iequals(s, "+inf")) return INFINITY;
  if (iequals(s, "-inf")) return -INFINITY;
  if (iequals(s, "nan")) return NAN;
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  WEFT_CHECK(end == s.c_str() + s.size()) << "expected a number, got '" << text << "'";
  return d;
}

Shape parse_shape(std::string_view text) {
  Shape s;
  s.resize(0);
  for (auto item : split_tuple(text, "tuple of integers")) {
    try {
      s.push_back(parse_int(item));
    } catch (const ValueError&) {
      WEFT_THROW(ValueError) << "expected a tuple of integers like (1, 2), got '" << text << "'";
    }
  }
  return s;
}

std::vector<double> parse_float_tuple(std::string_view text) {
  std::vector<double> out;
  for (auto item : split_tuple(text, "tuple of numbers")) out.push_back(parse_float(item));
  return out;
}

std::string format_shape_attr(const Shape& s) {
  if (!s.rank_known()) return "None";
  std::string out = "(";
  for (int i = 0; i < s.ndim(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (s.ndim() == 1) out += ",";
  return out + ")";
}

std::string format_float_attr(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

namespace detail {

static std::string where(const std::string& op, const std::string& node) {
  return "op '" + op + "'" + (node.empty() ? std::string() : " (node '" + node + "')");
}

void rethrow_param_error(const std::string& op, const std::string& node, const std::string& key,
                         std::string_view value, const std::string& type, const std::exception& e) {
  WEFT_THROW(ValueError) << where(op, node) << ": invalid value '" << value << "' for attribute '"
                         << key << "' (" << type << "): " << e.what();
}

void throw_missing_param(const std::string& op, const std::string& node, const std::string& key,
                         const std::string& type) {
  WEFT_THROW(ValueError) << where(op, node) << ": required attribute '" << key << "' (" << type
                         << ") is missing";
}

void throw_unknown_param(const std::string& op, const std::string& node, const std::string& key,
                         const std::vector<std::string>& known) {
  std::string list;
  for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
  WEFT_THROW(ValueError) << where(op, node) << ": unknown attribute '" << key << "'"
                         << (list.empty() ? " (the op takes no attributes)"
                                          : " (known: " + list + ")");
}

bool is_hidden_attr_key(std::string_view key) {
  if (key.size() >= 4 && key.substr(0, 2) == "__" && key.substr(key.size() - 2) == "__")
    return true;
  // MXNet's pre-1.0 user attributes, which old files leave on op nodes (OPS.md §1.5).
  static const char* kLegacy[] = {"ctx_group", "lr_mult", "wd_mult", "force_mirroring",
                                  "mirror_stage"};
  for (const char* k : kLegacy) {
    std::string_view kv(k);
    if (key == kv) return true;
    if (key.size() > kv.size() + 1 && key.substr(key.size() - kv.size()) == kv &&
        key[key.size() - kv.size() - 1] == '_')
      return true;
  }
  return false;
}

}  // namespace detail
}  // namespace weft
