// The HTTP front end's rules that need no socket (http_server.cc applies them): which transfer
// codings and expectations a request may carry, and the default connection cap.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace weft::serve::detail {

/// Why a request is refused on its header: the status and the message for the client.
struct HeaderRefusal {
  int status;
  std::string message;
};

/// `codings`: the values of every Transfer-Encoding field of a request, joined with ", " (empty
/// when there is none). Only `chunked` alone is accepted: a list whose last coding is not
/// `chunked` leaves the body's length unknown (400; Beast would read no body and take the body
/// as the next request), other codings before it are not supported (501). Thread-safe.
std::optional<HeaderRefusal> check_transfer_encoding(std::string_view codings);

/// `expect`: the Expect field's value (empty: none). Only `100-continue` is known (else 417).
/// Thread-safe.
std::optional<HeaderRefusal> check_expect(std::string_view expect);

/// ASCII case-insensitive equality. Thread-safe.
bool iequals(std::string_view a, std::string_view b);

}  // namespace weft::serve::detail
