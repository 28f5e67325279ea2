// The routes of `weft serve`, free of any network code: a parsed request in, a response out
// (immediately, or from the batcher's thread for inference). The HTTP front end
// (http_server.cc) and the unit tests both drive it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace weft::serve {

class Repository;
class Metrics;

struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string target;  ///< path and query
  std::string content_type;
  std::string accept;
  std::string authorization;  ///< the Authorization header, if any
  std::string body;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra headers
};

/// A JSON `{"error": message}` response. Never throws for the message's bytes: `message` should
/// quote request bytes through printable() (client_message.h), and any invalid UTF-8 left is
/// replaced by U+FFFD.
HttpResponse error_response(int status, const std::string& message);

/// Who may call which route (docs/SERVE.md, "Authentication").
struct AccessOptions {
  /// The bearer token every protected route requires (`Authorization: Bearer TOKEN`); empty:
  /// none, every route is open.
  std::string token;
  bool protect_health = false;   ///< GET /v1/health needs the token too
  bool protect_metrics = false;  ///< GET /metrics needs the token too
};

/// Whether `a` equals `b`, in a time that depends on their lengths only, not on where they
/// first differ (for comparing a secret). Thread-safe.
bool equal_in_constant_time(const std::string& a, const std::string& b);

class Router {
 public:
  /// Thread-safe after construction: handle() and refuse_early() may run on several threads.
  Router(Repository& repository, Metrics& metrics, AccessOptions access = {})
      : repository_(repository), metrics_(metrics), access_(std::move(access)) {}

  /// Answers `request` by calling `respond` exactly once: before returning, or later from a
  /// batcher thread for an inference request that was queued. `shutting_down` answers 503.
  /// Records the request in the metrics. Decoding an inference body happens on the caller's
  /// thread (the HTTP front end calls this from its decode pool for POST requests).
  void handle(HttpRequest&& request, bool shutting_down,
              std::function<void(HttpResponse&&)> respond);

  /// The answer to a request that is refused on its headers alone (`head.body` is not read yet):
  /// a missing or wrong token (401), an unknown route or model (404), a wrong method (405), an
  /// inference request whose Content-Type is not taken (415), or 503 while shutting down. Records
  /// the refusal in the metrics; nullopt when the body is needed (then call handle()). Lets the
  /// front end answer `Expect: 100-continue` with the final status and skip unwanted bodies.
  std::optional<HttpResponse> refuse_early(const HttpRequest& head, bool shutting_down);

 private:
  // The refusal of a request, whether or not its body was read (it is not looked at).
  std::optional<HttpResponse> refusal(const HttpRequest& request, const std::string& path,
                                      bool shutting_down);
  void infer(HttpRequest&& request, const std::string& model,
             std::function<void(HttpResponse&&)> respond);

  Repository& repository_;
  Metrics& metrics_;
  const AccessOptions access_;
};

}  // namespace weft::serve
