// The routes of `weft serve`, free of any network code: a parsed request in, a response out
// (immediately, or from the batcher's thread for inference). The HTTP front end
// (http_server.cc) and the unit tests both drive it.
#pragma once

#include <chrono>
#include <functional>
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
  std::string body;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra headers
};

/// A JSON `{"error": message}` response.
HttpResponse error_response(int status, const std::string& message);

class Router {
 public:
  Router(Repository& repository, Metrics& metrics) : repository_(repository), metrics_(metrics) {}

  /// Answers `request` by calling `respond` exactly once: before returning, or later from a
  /// batcher thread for an inference request that was queued. `shutting_down` answers 503.
  /// Records the request in the metrics.
  void handle(HttpRequest&& request, bool shutting_down,
              std::function<void(HttpResponse&&)> respond);

 private:
  void infer(HttpRequest&& request, const std::string& model,
             std::function<void(HttpResponse&&)> respond);

  Repository& repository_;
  Metrics& metrics_;
};

}  // namespace weft::serve
