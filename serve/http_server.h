// `weft serve`'s HTTP/1.1 front end (Boost.Beast on Asio): keep-alive connections on a few I/O
// threads, each request read under a deadline and a size limit, inference requests handed to the
// model's batcher and answered from its callback. Routes and error codes: docs/SERVE.md.
// Boost stays inside http_server.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>  // http_server.cc includes this first: Boost 1.74's asio needs std::exchange

#include "serve/router.h"

namespace weft::serve {

class Repository;
class Metrics;

/// The connection cap used when ServerOptions::max_connections is 0: the descriptors still free
/// when it is called (RLIMIT_NOFILE's soft limit less those open), less a reserve of 32 plus an
/// eighth of them for model and weight files, reload scans, plugins and the engine; at least 4.
/// Thread-safe.
size_t default_max_connections();

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  ///< 0: any free port (see Server::port)
  int io_threads = 2;
  /// Threads that decode inference bodies (JSON, .npy, multipart) and queue them, so a large or
  /// slow body never holds an I/O thread.
  int decode_threads = 2;
  /// Open connections at most; 0: default_max_connections(). A connection accepted beyond it
  /// closes the connection that has been idle longest (waiting for its first or next request);
  /// when none is idle it is answered 503 and closed.
  size_t max_connections = 0;
  /// The bearer token and which routes need it (empty token: no authentication).
  AccessOptions access;
  size_t max_body_bytes = size_t{64} << 20;
  /// A request (headers and body) must arrive within this time once its first byte did; if it
  /// does not, it is answered 408 and the connection closes.
  int read_timeout_ms = 10000;
  /// A keep-alive connection without a request for this long is closed.
  int idle_timeout_ms = 30000;
  /// After SIGTERM: how long queued requests may take before the server exits anyway.
  int shutdown_timeout_ms = 30000;
  /// Install SIGINT/SIGTERM handlers that start the graceful shutdown.
  bool handle_signals = false;
};

class Server {
 public:
  /// Binds and listens; throws weft::Error naming host and port when that fails. Warns on stderr
  /// when the address is not a loopback one and no token is set.
  Server(ServerOptions options, Repository& repository, Metrics& metrics);
  /// Shuts down (if not yet) and waits for the drain; run() must have returned (or never run).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The port listened on (the chosen one when options.port was 0).
  uint16_t port() const;
  /// Serves until shutdown() (or a signal) and the drain finish; runs the I/O threads.
  void run();
  /// Graceful shutdown, callable from any thread: stop accepting, answer new requests on open
  /// connections with 503, finish every queued inference request and write its response, close.
  void shutdown();

  struct Impl;  // opaque; public so the sessions in http_server.cc can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::serve
