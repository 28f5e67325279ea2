// The HTTP front end's rules that need no socket (see http_checks.h), and the default of
// ServerOptions::max_connections (declared in http_server.h).
#include "serve/http_checks.h"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "serve/client_message.h"
#include "serve/http_server.h"

namespace weft::serve {

size_t default_max_connections() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  const size_t cap = size_t{1} << 20;
  const size_t soft = limit.rlim_cur == RLIM_INFINITY ? cap : static_cast<size_t>(limit.rlim_cur);
  size_t open = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++open;
  }
  const size_t free = soft > open ? soft - open : 0;
  const size_t reserve = 32 + free / 8;
  return std::clamp(free > reserve ? free - reserve : 0, size_t{4}, cap);
}

namespace detail {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<HeaderRefusal> check_transfer_encoding(std::string_view codings) {
  if (codings.empty()) return std::nullopt;
  // The list's elements without whitespace; empty elements do not count (RFC 9110, 5.6.1).
  std::vector<std::string_view> items;
  for (size_t pos = 0; pos <= codings.size();) {
    size_t comma = codings.find(',', pos);
    if (comma == std::string_view::npos) comma = codings.size();
    std::string_view item = codings.substr(pos, comma - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) items.push_back(item);
    pos = comma + 1;
  }
  const std::string quoted = "Transfer-Encoding '" + printable(codings) + "'";
  if (items.empty() || !iequals(items.back(), "chunked")) {
    return HeaderRefusal{400, quoted + " does not end in chunked (the body's length is unknown)"};
  }
  if (items.size() > 1) {
    return HeaderRefusal{501, quoted + " is not supported: send the body as it is, or chunked"};
  }
  return std::nullopt;
}

std::optional<HeaderRefusal> check_expect(std::string_view expect) {
  if (expect.empty() || iequals(expect, "100-continue")) return std::nullopt;
  return HeaderRefusal{417,
                       "Expect '" + printable(expect) + "' is not supported (only 100-continue)"};
}

}  // namespace detail
}  // namespace weft::serve
