// What an HTTP client is told of an error.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

namespace weft::serve {

/// The error's message without what weft's checks add for developers: the condition
/// ("check failed: cond: ...") and the source location (" [file.cc:12]").
inline std::string client_message(const std::exception& e) {
  std::string m = e.what();
  const std::string check = "check failed: ";
  if (m.rfind(check, 0) == 0) {
    const size_t colon = m.find(": ", check.size());
    if (colon != std::string::npos) m = m.substr(colon + 2);
  }
  if (!m.empty() && m.back() == ']') {
    const size_t open = m.rfind(" [");
    if (open != std::string::npos && m.find(':', open) != std::string::npos) m.resize(open);
  }
  return m;
}

/// `text` with every byte that is not part of a valid UTF-8 sequence written as `\xNN` (and a
/// backslash as `\\` when any byte was escaped, so the escape is unambiguous), for quoting
/// request bytes (a path, a Content-Type) in a JSON message: nlohmann's dump throws on invalid
/// UTF-8. Valid text comes back unchanged. Thread-safe.
inline std::string printable(std::string_view text) {
  // The length of the valid UTF-8 sequence starting at text[i] (RFC 3629: no overlong forms, no
  // surrogates, at most U+10FFFF), or 0.
  auto sequence = [&](size_t i) -> size_t {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char b = byte(i);
    if (b < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) {
      n = 2;
    } else if (b >= 0xe0 && b <= 0xef) {
      n = 3;
      if (b == 0xe0) lo = 0xa0;
      if (b == 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      n = 4;
      if (b == 0xf0) lo = 0x90;
      if (b == 0xf4) hi = 0x8f;
    } else {
      return 0;
    }
    if (i + n > text.size()) return 0;
    if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
    for (size_t k = 2; k < n; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
    }
    return n;
  };
  bool valid = true;
  for (size_t i = 0; i < text.size() && valid;) {
    const size_t n = sequence(i);
    valid = n > 0;
    i += n;
  }
  if (valid) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence(i);
    if (n == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned char>(text[i]));
      out += hex;
      ++i;
    } else if (text[i] == '\\') {
      out += "\\\\";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace weft::serve
