// `weft serve`: serve a folder of MXNet models over HTTP with dynamic batching (docs/SERVE.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "base/error.h"
#include "ndarray/runtime.h"
#include "ops/kernel_libraries.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/repository.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace weft::tools {
namespace {

struct ServeOptions {
  std::string models;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string device = "cpu";
  std::vector<std::string> plugins;
  int io_threads = 2;
  int decode_threads = 2;
  int max_connections = 0;
  std::string auth_token_file;
  bool auth_health = false;
  bool auth_metrics = false;
  int max_body_mb = 64;
  int read_timeout_ms = 10000;
  int idle_timeout_ms = 30000;
  int shutdown_timeout_ms = 30000;
  int reload_ms = 1000;
  bool no_batching = false;
  uint64_t seed = 0;
  bool seed_given = false;  // --seed was passed: draw weights for folders without .params
  std::string port_file;
};

// The bearer token in `path`: its first line without surrounding whitespace, read once at start.
std::string read_token(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in) << "--auth-token-file " << path << ": cannot be read";
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  token = token.substr(0, token.find_first_of("\r\n"));
  const size_t begin = token.find_first_not_of(" \t");
  token = begin == std::string::npos ? "" : token.substr(begin);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.pop_back();
  WEFT_CHECK(!token.empty()) << "--auth-token-file " << path << ": the first line is empty";
  for (char c : token) {
    WEFT_CHECK(c > ' ' && c < 127) << "--auth-token-file " << path
                                   << ": the token has a space or a byte outside printable ASCII";
  }
  return token;
}

int run_serve(const ServeOptions& o) {
  std::fprintf(stderr, "weft serve: kernels: %s\n", describe_kernel_libraries().c_str());
  load_plugins(o.plugins);
  const std::string token = o.auth_token_file.empty() ? "" : read_token(o.auth_token_file);
  serve::Metrics metrics;
  serve::RepositoryOptions ro;
  ro.dir = o.models;
  ro.load.device = runnable_device("--device", o.device);
  if (o.seed_given) ro.load.seed = o.seed;
  ro.batching = !o.no_batching;
  ro.reload_ms = o.reload_ms;
  serve::Repository repository(ro, &metrics);

  serve::ServerOptions so;
  so.host = o.host;
  so.port = static_cast<uint16_t>(o.port);
  so.io_threads = o.io_threads;
  so.decode_threads = o.decode_threads;
  so.max_connections = static_cast<size_t>(o.max_connections);
  so.access.token = token;
  so.access.protect_health = o.auth_health;
  so.access.protect_metrics = o.auth_metrics;
  so.max_body_bytes = static_cast<size_t>(o.max_body_mb) << 20;
  so.read_timeout_ms = o.read_timeout_ms;
  so.idle_timeout_ms = o.idle_timeout_ms;
  so.shutdown_timeout_ms = o.shutdown_timeout_ms;
  so.handle_signals = true;
  serve::Server server(so, repository, metrics);
  if (!o.port_file.empty()) {
    const std::string tmp = o.port_file + ".tmp";
    std::ofstream(tmp) << server.port() << "\n";
    std::filesystem::rename(tmp, o.port_file);
  }
  std::printf("serve listening on http://%s:%u (%zu models%s%s)\n", o.host.c_str(), server.port(),
              repository.models().size(), o.no_batching ? ", batching off" : "",
              token.empty() ? "" : ", bearer token required");
  std::fflush(stdout);
  server.run();
  std::fprintf(stderr, "weft serve: stopped\n");
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  Command c;
  c.app = app.add_subcommand("serve",
                             "Serve a folder of MXNet models over HTTP/1.1 with dynamic batching");
  CLI::App* a = c.app;
  a->add_option("--models", o->models,
                "Model repository: one folder per model with *-symbol.json, config.json and "
                "optionally *.params")
      ->required();
  a->add_option("--host", o->host, "Address to listen on");
  a->add_option("--port", o->port, "Port (0: any free port)")->transform(integer_in(0, 65535));
  a->add_option("--port-file", o->port_file, "Write the port listened on to this file");
  a->add_option("--device", o->device, "cpu or cuda:N")->check(device_text());
  add_plugin_option(*a, o->plugins);
  a->add_option("--io-threads", o->io_threads, "Threads reading and writing HTTP")
      ->transform(integer_in(1, 64));
  a->add_option("--decode-threads", o->decode_threads,
                "Threads decoding inference request bodies (off the I/O threads)")
      ->transform(integer_in(1, 64));
  a->add_option("--max-connections", o->max_connections,
                "Open connections at most; beyond it the longest idle one is closed, or the new "
                "one answered 503 (0: the free descriptors less a reserve, docs/SERVE.md)")
      ->transform(integer_in(0, 1 << 20));
  CLI::Option* token =
      a->add_option("--auth-token-file", o->auth_token_file,
                    "Require 'Authorization: Bearer TOKEN' on the model routes, TOKEN being the "
                    "file's first line (read at start)");
  a->add_flag("--auth-health", o->auth_health, "Require the token on GET /v1/health too")
      ->needs(token);
  a->add_flag("--auth-metrics", o->auth_metrics, "Require the token on GET /metrics too")
      ->needs(token);
  a->add_option("--max-body-mb", o->max_body_mb, "Largest request body, MiB")
      ->transform(integer_in(1, 4096));
  a->add_option("--read-timeout-ms", o->read_timeout_ms,
                "A request must arrive within this time after its first byte")
      ->transform(integer_in(1, 3600000));
  a->add_option("--idle-timeout-ms", o->idle_timeout_ms,
                "Close keep-alive connections idle this long")
      ->transform(integer_in(1, 3600000));
  a->add_option("--shutdown-timeout-ms", o->shutdown_timeout_ms,
                "On SIGTERM, how long queued requests may take")
      ->transform(integer_in(0, 3600000));
  a->add_option("--reload-ms", o->reload_ms,
                "Check model folders for changes this often (0: never)")
      ->transform(integer_in(0, 3600000));
  a->add_flag("--no-batching", o->no_batching, "Run every request alone");
  a->add_option("--seed", o->seed,
                "Draw the weights of models without .params from this seed (as replay --seed); "
                "without it such a model loads only if its config.json has \"seed\": N")
      ->transform(unsigned_integer())
      ->each([o](const std::string&) { o->seed_given = true; });
  c.run = [o] { return run_serve(*o); };
  return c;
}

}  // namespace weft::tools
