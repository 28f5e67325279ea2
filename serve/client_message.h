// What an HTTP client is told of an error.
#pragma once

#include <exception>
#include <string>

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

}  // namespace weft::serve
