// The HTTP/1.1 front end (see http_server.h): Boost.Beast sessions on strands of one io_context.
//
// A session alternates: wait for a first byte (idle timeout), read the request's header (read
// deadline, size limits), refuse it there if its header says so, else answer `Expect:
// 100-continue` and read the body, hand it to the Router (inference bodies on the decode pool),
// write the answer, repeat while keep-alive. A request that waits for its batch leaves the
// session with no pending operation; a work guard keeps the io_context running until shutdown
// has drained every batcher and answered what they return.
#include "serve/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "serve/client_message.h"
#include "serve/http_checks.h"
#include "serve/metrics.h"
#include "serve/repository.h"
#include "serve/router.h"

namespace weft::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {
class Session;
}

struct Server::Impl {
  Impl(ServerOptions o, Repository& repo, Metrics& m)
      : options(std::move(o)),
        repository(repo),
        metrics(m),
        router(repo, m, options.access),
        max_connections(options.max_connections > 0 ? options.max_connections
                                                    : default_max_connections()),
        ioc(std::max(1, options.io_threads)),
        accept_strand(asio::make_strand(ioc)),
        acceptor(accept_strand),
        signals(accept_strand),
        accept_retry(accept_strand),
        work(asio::make_work_guard(ioc)),
        decode_pool(static_cast<size_t>(std::max(1, options.decode_threads))) {}

  void accept();
  void on_accept(beast::error_code ec, tcp::socket socket);
  bool evict_oldest_idle();
  std::vector<std::shared_ptr<Session>> live();
  void begin_shutdown();
  void close_idle_sessions();

  ServerOptions options;
  Repository& repository;
  Metrics& metrics;
  Router router;
  const size_t max_connections;
  std::atomic<bool> stopping{false};
  std::atomic<int> live_sessions{0};
  /// Orders idle sessions for eviction (Session::idle_since_).
  std::atomic<uint64_t> idle_clock{0};
  uint16_t port = 0;  // the port listened on
  std::mutex sessions_mu;
  std::list<std::weak_ptr<Session>> sessions;  // guarded by sessions_mu
  std::mutex drainer_mu;  // guards drainer: begin_shutdown and join_drainer may run on two threads
  std::thread drainer;
  void join_drainer() {
    std::lock_guard<std::mutex> lock(drainer_mu);
    if (drainer.joinable()) drainer.join();
  }
  // Declared after the members above, destroyed before them: the io_context destroys the
  // handlers still queued (and the sessions they hold) while everything above is alive.
  asio::io_context ioc;
  // The acceptor, the signal set and the retry timer are touched only on this strand (their
  // handlers, and the shutdown's posts): Asio's objects are not safe for concurrent use.
  asio::strand<asio::io_context::executor_type> accept_strand;
  tcp::acceptor acceptor;
  asio::signal_set signals;
  asio::steady_timer accept_retry;
  int accept_retry_ms = 0;  // the current back-off while accepting fails; 0: accepting works
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // Decodes inference bodies (Router::handle for POST requests). Destroyed first: its queued
  // jobs hold sessions, whose sockets belong to the io_context.
  asio::thread_pool decode_pool;
  static constexpr int kAcceptRetryMinMs = 50;
  static constexpr int kAcceptRetryMaxMs = 2000;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl* server)
      : stream_(std::move(socket)), server_(server), read_deadline_(stream_.get_executor()) {
    ++server_->live_sessions;
  }
  ~Session() { --server_->live_sessions; }

  /// Serves the connection; `refuse`: answer 503 at once and close (over the connection cap).
  void start(bool refuse) {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this(), refuse] {
      if (!refuse) return self->wait_first_byte();
      HttpResponse r = error_response(503, "the server has too many open connections (limit " +
                                               std::to_string(self->server_->max_connections) +
                                               "); retry later");
      r.headers.emplace_back("Retry-After", "1");
      self->server_->metrics.request("", 503, 0, false);
      self->keep_alive_ = false;
      self->state_ = State::kBusy;
      self->write(std::move(r));
    });
  }

  /// When this session became idle (a tick of Impl::idle_clock), 0 while it is not idle.
  uint64_t idle_since() const {
    // Relaxed: a stale value only picks a slightly different victim; evict() re-checks.
    return idle_since_.load(std::memory_order_relaxed);
  }

  /// Closes the connection if it is still idle (called by the acceptor over the cap). False
  /// when it was no longer idle.
  bool evict() {
    if (idle_since_.exchange(0) == 0) return false;
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->state_ == State::kWaiting) self->close();
    });
    return true;
  }

  /// On shutdown. A connection that has been answered and waits for its next request closes. A
  /// new connection that has sent nothing yet gets a short grace (its request may be on the way;
  /// it is answered 503). One reading or answering a request finishes: a request read after the
  /// shutdown began is answered 503, a queued one with its result.
  void close_if_idle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->state_ != State::kWaiting) return;
      if (self->served_ > 0) return self->close();
      if (self->grace_) return;
      self->grace_.emplace(self->stream_.get_executor());
      self->grace_->expires_after(std::chrono::milliseconds(kShutdownGraceMs));
      self->grace_->async_wait([self](beast::error_code ec) {
        if (!ec && self->state_ == State::kWaiting) self->close();
      });
    });
  }

 private:
  static constexpr int kShutdownGraceMs = 500;
  static constexpr int kLingerMs = 2000;
  static constexpr size_t kLingerBytes = size_t{256} << 20;
  static constexpr size_t kHeaderLimit = 16 * 1024;
  static constexpr uint64_t kDiscardBytes =
      64 * 1024;  // a refused body read to keep the connection
  enum class State { kWaiting, kReading, kBusy };

  void wait_first_byte() {
    state_ = State::kWaiting;
    if (server_->stopping && served_ > 0) return close();
    if (buffer_.size() > 0) return read_request();  // a pipelined request is already here
    idle_since_ = ++server_->idle_clock;
    stream_.expires_after(std::chrono::milliseconds(
        server_->stopping ? kShutdownGraceMs : server_->options.idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(8192),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->close();  // idle timeout, EOF, reset
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  // Note [Read deadline]: the stream's own timer closes the socket when it fires, which would
  // leave no way to answer 408. The read of a request runs under a timer of its own instead,
  // which cancels the read; the session then answers 408 and closes.
  void read_request() {
    state_ = State::kReading;
    idle_since_ = 0;
    timed_out_ = false;
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(kHeaderLimit);
    stream_.expires_never();
    read_deadline_.expires_after(std::chrono::milliseconds(server_->options.read_timeout_ms));
    read_deadline_.async_wait(
        [self = shared_from_this(), turn = ++deadline_turn_](beast::error_code ec) {
          if (ec || turn != self->deadline_turn_ || self->state_ != State::kReading) return;
          self->timed_out_ = true;
          self->stream_.cancel();
        });
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto& head = parser_->get();
    // Request smuggling: Beast reads a body only for a final `chunked` and takes any other
    // Transfer-Encoding as "no body", so what follows would be read as the next request.
    std::string codings;
    for (const auto& field : head) {
      if (field.name() != http::field::transfer_encoding) continue;
      if (!codings.empty()) codings += ", ";
      codings += std::string(field.value());
    }
    const std::string expect(head[http::field::expect]);
    for (auto refusal : {detail::check_transfer_encoding(codings), detail::check_expect(expect)}) {
      if (refusal) return reply_and_close(refusal->status, refusal->message);
    }
    const bool expect_continue = !expect.empty() && head.version() >= 11;
    keep_alive_ = head.keep_alive();
    HttpRequest r;
    r.method = std::string(head.method_string());
    r.target = std::string(head.target());
    r.content_type = std::string(head[http::field::content_type]);
    r.accept = std::string(head[http::field::accept]);
    r.authorization = std::string(head[http::field::authorization]);
    if (auto refusal = server_->router.refuse_early(r, server_->stopping)) {
      if (parser_->is_done()) return answer_now(std::move(*refusal));
      // A small body already on its way is read and dropped, keeping the connection; a larger
      // one, or one the client waits to send (100-continue), is not: the connection closes.
      const auto length = parser_->content_length();
      if (!expect_continue && length && *length <= kDiscardBytes) {
        auto answer = std::make_shared<HttpResponse>(std::move(*refusal));
        return http::async_read(stream_, buffer_, *parser_,
                                [self = shared_from_this(), answer](beast::error_code ec, size_t) {
                                  if (ec) return self->on_read_error(ec);
                                  self->answer_now(std::move(*answer));
                                });
      }
      keep_alive_ = false;
      return answer_now(std::move(*refusal));
    }
    if (parser_->is_done()) return dispatch(std::move(r));
    auto read_body = [self = shared_from_this(), r = std::move(r)]() mutable {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self, r = std::move(r)](beast::error_code ec, size_t) mutable {
                         if (ec) return self->on_read_error(ec);
                         r.body = std::move(self->parser_->get().body());
                         self->dispatch(std::move(r));
                       });
    };
    // A client that has started sending the body is not waiting for 100 (RFC 9110, 10.1.1).
    if (!expect_continue || buffer_.size() > 0) return read_body();
    auto interim = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    http::async_write(stream_, *interim,
                      [self = shared_from_this(), interim, read_body = std::move(read_body)](
                          beast::error_code ec, size_t) mutable {
                        if (ec) return self->on_read_error(ec);
                        read_body();
                      });
  }

  void on_read_error(beast::error_code ec) {
    if (timed_out_) {
      // A slow or stalled client: it sent part of a request and then too little.
      return reply_and_close(408, "the request was not received within " +
                                      std::to_string(server_->options.read_timeout_ms) + " ms");
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      return close();
    }
    if (ec == http::error::body_limit) {
      return reply_and_close(413, "the request body is over the limit of " +
                                      std::to_string(server_->options.max_body_bytes) + " bytes");
    }
    if (ec == http::error::header_limit) {
      return reply_and_close(431, "the request headers are over 16 KiB");
    }
    reply_and_close(400, "malformed HTTP request: " + ec.message());
  }

  /// Hands the request to the router: inference bodies on the decode pool, the rest here (so
  /// /v1/health answers while bodies decode). Exactly one response is written.
  void dispatch(HttpRequest&& r) {
    ++deadline_turn_;
    read_deadline_.cancel();
    state_ = State::kBusy;
    stream_.expires_never();  // the batch may take a while; the write sets its own deadline
    auto answered = std::make_shared<std::atomic<bool>>(false);
    auto respond = [self = shared_from_this(), answered](HttpResponse&& response) {
      if (answered->exchange(true)) return;  // a second answer (after an error) is dropped
      // From this thread, a decoder's or a batcher's: continue on the session's strand.
      asio::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->write(std::move(response));
      });
    };
    const bool decode = r.method == "POST";
    auto handle = [server = server_, r = std::move(r), respond, answered]() mutable {
      try {
        server->router.handle(std::move(r), server->stopping, respond);
      } catch (const std::exception& e) {  // out of memory while decoding, say: this request only
        if (answered->load()) return;
        server->metrics.request("", 500, 0, false);
        respond(error_response(
            500, "the request could not be handled: " + printable(client_message(e))));
      }
    };
    if (decode) return asio::post(server_->decode_pool, std::move(handle));
    handle();
  }

  void answer_now(HttpResponse&& r) {
    ++deadline_turn_;
    read_deadline_.cancel();
    state_ = State::kBusy;
    write(std::move(r));
  }

  void reply_and_close(int status, const std::string& message) {
    server_->metrics.request("", status, 0, false);
    keep_alive_ = false;
    answer_now(error_response(status, message));
  }

  void write(HttpResponse&& r) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->result(static_cast<unsigned>(r.status));
    res->version(11);
    res->set(http::field::server, "weft");
    res->set(http::field::content_type, r.content_type);
    for (auto& [k, v] : r.headers) res->set(k, v);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive_ && !server_->stopping);
    res->prepare_payload();
    stream_.expires_after(std::chrono::milliseconds(server_->options.read_timeout_ms));
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res](beast::error_code ec, size_t) {
                        ++self->served_;
                        if (ec) return self->close();
                        if (res->need_eof()) return self->linger();
                        self->wait_first_byte();
                      });
  }

  /// After the last response: stop sending, then read and drop what the client still sends
  /// (the rest of an oversized body, say) for a while before closing, so that its send completes
  /// and it reads the response instead of seeing a reset.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::milliseconds(kLingerMs));
    drop_more(0);
  }
  void drop_more(size_t dropped) {
    if (dropped > kLingerBytes) return close();
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(65536),
                            [self = shared_from_this(), dropped](beast::error_code ec, size_t n) {
                              if (ec) return self->close();  // EOF: the client is done
                              self->drop_more(dropped + n);
                            });
  }

  void close() {
    idle_since_ = 0;
    if (grace_) grace_->cancel();
    read_deadline_.cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  // Everything below is touched on the session's strand only, but idle_since_.
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Server::Impl* server_;
  State state_ = State::kWaiting;
  int64_t served_ = 0;  // responses written on this connection
  std::optional<asio::steady_timer> grace_;
  asio::steady_timer read_deadline_;  // Note [Read deadline]
  uint64_t deadline_turn_ = 0;        // a deadline that fires for an earlier request is ignored
  bool timed_out_ = false;
  bool keep_alive_ = true;
  std::atomic<uint64_t> idle_since_{0};
};

}  // namespace

std::vector<std::shared_ptr<Session>> Server::Impl::live() {
  std::vector<std::shared_ptr<Session>> out;
  std::lock_guard<std::mutex> lock(sessions_mu);
  for (auto it = sessions.begin(); it != sessions.end();) {
    if (auto s = it->lock()) {
      out.push_back(std::move(s));
      ++it;
    } else {
      it = sessions.erase(it);
    }
  }
  return out;  // released outside the lock: a session may be destroyed with the last reference
}

bool Server::Impl::evict_oldest_idle() {
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::shared_ptr<Session> oldest;
    for (auto& s : live()) {
      const uint64_t since = s->idle_since();
      if (since != 0 && (!oldest || since < oldest->idle_since())) oldest = s;
    }
    if (!oldest) return false;
    if (oldest->evict()) return true;  // else it became busy meanwhile: look again
  }
  return false;
}

void Server::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc),
                        [self = this](beast::error_code ec, tcp::socket socket) {
                          self->on_accept(ec, std::move(socket));
                        });
}

// Runs on accept_strand.
void Server::Impl::on_accept(beast::error_code ec, tcp::socket socket) {
  // Connections keep being accepted while the queues drain (their requests are answered 503):
  // closing the acceptor at once would reset the connections in its backlog.
  if (ec == asio::error::operation_aborted) return;
  if (ec) {
    // Out of descriptors, say: retrying at once would spin. Close the longest idle connection
    // to free one, keep serving the open ones, and retry with a growing delay; log once.
    if (accept_retry_ms == 0) {
      std::fprintf(stderr,
                   "weft serve: accepting connections fails (%s) with %d open; closing idle "
                   "ones and retrying (lower --max-connections or raise ulimit -n)\n",
                   ec.message().c_str(), live_sessions.load());
    }
    evict_oldest_idle();
    accept_retry_ms = std::clamp(accept_retry_ms * 2, kAcceptRetryMinMs, kAcceptRetryMaxMs);
    accept_retry.expires_after(std::chrono::milliseconds(accept_retry_ms));
    accept_retry.async_wait([self = this](beast::error_code ec2) {
      if (!ec2 && self->acceptor.is_open()) self->accept();
    });
    return;
  }
  if (accept_retry_ms != 0) {
    std::fprintf(stderr, "weft serve: accepting connections again\n");
    accept_retry_ms = 0;
  }
  // Over the cap: make room by closing the longest idle connection, else refuse this one.
  const bool full = static_cast<size_t>(live_sessions.load()) >= max_connections;
  const bool refuse = full && !evict_oldest_idle();
  auto session = std::make_shared<Session>(std::move(socket), this);
  {
    // Closed sessions leave expired entries (holding their memory, make_shared): drop them once
    // they outnumber the live ones, so the cost per accept stays constant on average.
    std::lock_guard<std::mutex> lock(sessions_mu);
    if (sessions.size() > 2 * static_cast<size_t>(live_sessions.load()) + 64) {
      sessions.remove_if([](const std::weak_ptr<Session>& w) { return w.expired(); });
    }
    sessions.push_back(session);
  }
  session->start(refuse);
  if (acceptor.is_open()) accept();
}

void Server::Impl::close_idle_sessions() {
  for (auto& s : live()) s->close_if_idle();
}

void Server::Impl::begin_shutdown() {
  if (stopping.exchange(true)) return;
  std::fprintf(stderr, "weft serve: shutting down: finishing queued requests\n");
  asio::post(accept_strand, [self = this] {
    beast::error_code ignored;
    self->signals.cancel(ignored);
  });
  close_idle_sessions();
  // Drain off the I/O threads: the batchers' answers are written by them.
  std::lock_guard<std::mutex> lock(drainer_mu);
  drainer = std::thread([self = this] {
    self->repository.stop();
    asio::post(self->accept_strand, [self] {
      beast::error_code ignored;
      self->acceptor.close(ignored);
      self->accept_retry.cancel();
    });
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(self->options.shutdown_timeout_ms);
    while (self->live_sessions > 0 && std::chrono::steady_clock::now() < deadline) {
      self->close_idle_sessions();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (self->live_sessions > 0) {
      std::fprintf(stderr, "weft serve: %d connections still open after %d ms, closing\n",
                   self->live_sessions.load(), self->options.shutdown_timeout_ms);
      self->ioc.stop();
    }
    asio::post(self->ioc, [self] { self->work.reset(); });
  });
}

Server::Server(ServerOptions options, Repository& repository, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), repository, metrics)) {
  Impl& s = *impl_;
  beast::error_code ec;
  const auto address = asio::ip::make_address(s.options.host, ec);
  WEFT_CHECK(!ec) << "--host " << s.options.host << ": not an IP address (" << ec.message() << ")";
  const tcp::endpoint endpoint(address, s.options.port);
  const std::string where = s.options.host + ":" + std::to_string(s.options.port);
  s.acceptor.open(endpoint.protocol(), ec);
  WEFT_CHECK(!ec) << "listening on " << where << ": " << ec.message();
  s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  s.acceptor.bind(endpoint, ec);
  WEFT_CHECK(!ec) << "listening on " << where << ": " << ec.message();
  s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  WEFT_CHECK(!ec) << "listening on " << where << ": " << ec.message();
  s.port = s.acceptor.local_endpoint().port();
  if (!address.is_loopback() && s.options.access.token.empty()) {
    std::fprintf(stderr,
                 "weft serve: warning: listening on %s, which is not a loopback address, with no "
                 "--auth-token-file: anyone who can reach it can run and list the models\n",
                 s.options.host.c_str());
  }
  if (s.options.handle_signals) {
    s.signals.add(SIGINT);
    s.signals.add(SIGTERM);
    s.signals.async_wait([impl = impl_.get()](beast::error_code ec, int) {
      if (!ec) impl->begin_shutdown();
    });
  }
}

Server::~Server() {
  shutdown();
  impl_->join_drainer();
  impl_->decode_pool.join();
}

uint16_t Server::port() const { return impl_->port; }

void Server::run() {
  asio::post(impl_->accept_strand, [impl = impl_.get()] { impl->accept(); });
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->options.io_threads; ++i) {
    threads.emplace_back([this] { impl_->ioc.run(); });
  }
  impl_->ioc.run();
  for (auto& t : threads) t.join();
  impl_->join_drainer();
  impl_->decode_pool.join();  // nothing new arrives: every session has closed
}

void Server::shutdown() { impl_->begin_shutdown(); }

}  // namespace weft::serve
