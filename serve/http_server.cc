// The HTTP/1.1 front end (see http_server.h): Boost.Beast sessions on strands of one io_context.
//
// A session alternates: wait for a first byte (idle timeout), read the request (read timeout,
// size limits), hand it to the Router, write the answer, repeat while keep-alive. A request that
// waits for its batch leaves the session with no pending operation; a work guard keeps the
// io_context running until shutdown has drained every batcher and answered what they return.
#include "serve/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <list>
#include <mutex>
#include <optional>
#include <thread>

#include "base/error.h"
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
        router(repo, m),
        ioc(std::max(1, options.io_threads)),
        acceptor(ioc),
        signals(ioc),
        work(asio::make_work_guard(ioc)) {}

  void accept();
  void begin_shutdown();
  void close_idle_sessions();

  ServerOptions options;
  Repository& repository;
  Metrics& metrics;
  Router router;
  std::atomic<bool> stopping{false};
  std::atomic<int> live_sessions{0};
  uint16_t port = 0;  // the port listened on
  std::mutex sessions_mu;
  std::list<std::weak_ptr<Session>> sessions;
  std::mutex drainer_mu;  // guards drainer: begin_shutdown and join_drainer may run on two threads
  std::thread drainer;
  void join_drainer() {
    std::lock_guard<std::mutex> lock(drainer_mu);
    if (drainer.joinable()) drainer.join();
  }
  // Declared last, destroyed first: the io_context destroys the handlers still queued (and the
  // sessions they hold) while everything above is alive.
  asio::io_context ioc;
  tcp::acceptor acceptor;
  asio::signal_set signals;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  asio::steady_timer accept_retry{ioc};
  static constexpr int kAcceptRetryMs = 100;
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Server::Impl* server) : stream_(std::move(socket)), server_(server) {
    ++server_->live_sessions;
  }
  ~Session() { --server_->live_sessions; }

  void start() {
    asio::dispatch(stream_.get_executor(),
                   [self = shared_from_this()] { self->wait_first_byte(); });
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
  enum class State { kWaiting, kReading, kBusy };

  void wait_first_byte() {
    state_ = State::kWaiting;
    if (server_->stopping && served_ > 0) return close();
    if (buffer_.size() > 0) return read_request();  // a pipelined request is already here
    stream_.expires_after(std::chrono::milliseconds(
        server_->stopping ? kShutdownGraceMs : server_->options.idle_timeout_ms));
    stream_.async_read_some(buffer_.prepare(8192),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->close();  // idle timeout, EOF, reset
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  void read_request() {
    state_ = State::kReading;
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(16 * 1024);
    stream_.expires_after(std::chrono::milliseconds(server_->options.read_timeout_ms));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
      return close();
    }
    if (ec == beast::error::timeout) {
      // The client sent part of a request and then too little (a slow or stalled client); the
      // stream is already closed by its deadline.
      server_->metrics.request("", 408, 0, false);
      return close();
    }
    if (ec == http::error::body_limit) {
      return reply_and_close(413, "the request body is over the limit of " +
                                      std::to_string(server_->options.max_body_bytes) + " bytes");
    }
    if (ec == http::error::header_limit) {
      return reply_and_close(431, "the request headers are over 16 KiB");
    }
    if (ec) return reply_and_close(400, "malformed HTTP request: " + ec.message());

    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    HttpRequest r;
    r.method = std::string(req.method_string());
    r.target = std::string(req.target());
    r.content_type = std::string(req[http::field::content_type]);
    r.accept = std::string(req[http::field::accept]);
    r.body = std::move(req.body());
    state_ = State::kBusy;
    stream_.expires_never();  // the batch may take a while; the write sets its own deadline
    auto self = shared_from_this();
    auto respond = [self](HttpResponse&& response) {
      // From this thread or a batcher's: continue on the session's strand.
      asio::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->write(std::move(response));
      });
    };
    try {
      server_->router.handle(std::move(r), server_->stopping, respond);
    } catch (const std::exception& e) {  // out of memory while decoding, say: this request only
      server_->metrics.request("", 500, 0, false);
      respond(error_response(500, std::string("the request could not be handled: ") + e.what()));
    }
  }

  void reply_and_close(int status, const std::string& message) {
    server_->metrics.request("", status, 0, false);
    keep_alive_ = false;
    state_ = State::kBusy;
    write(error_response(status, message));
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
    if (grace_) grace_->cancel();
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Server::Impl* server_;
  State state_ = State::kWaiting;
  int64_t served_ = 0;  // responses written on this connection
  std::optional<asio::steady_timer> grace_;
  bool keep_alive_ = true;
};

}  // namespace

void Server::Impl::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [self = this](beast::error_code ec,
                                                              tcp::socket socket) {
    // Connections keep being accepted while the queues drain (their requests are answered
    // 503): closing the acceptor at once would reset the connections in its backlog.
    if (!ec) {
      auto session = std::make_shared<Session>(std::move(socket), self);
      {
        std::lock_guard<std::mutex> lock(self->sessions_mu);
        self->sessions.remove_if([](const std::weak_ptr<Session>& w) { return w.expired(); });
        self->sessions.push_back(session);
      }
      session->start();
      self->accept();
    } else if (ec != asio::error::operation_aborted) {
      // Out of descriptors, say: retrying at once would spin. Keep serving the open
      // connections and try again shortly.
      std::fprintf(stderr, "weft serve: accepting a connection failed (%s); retrying in %d ms\n",
                   ec.message().c_str(), kAcceptRetryMs);
      self->accept_retry.expires_after(std::chrono::milliseconds(kAcceptRetryMs));
      self->accept_retry.async_wait([self](beast::error_code ec2) {
        if (!ec2 && self->acceptor.is_open()) self->accept();
      });
    }
  });
}

void Server::Impl::close_idle_sessions() {
  std::lock_guard<std::mutex> lock(sessions_mu);
  for (auto& w : sessions) {
    if (auto s = w.lock()) s->close_if_idle();
  }
}

void Server::Impl::begin_shutdown() {
  if (stopping.exchange(true)) return;
  std::fprintf(stderr, "weft serve: shutting down: finishing queued requests\n");
  asio::post(ioc, [self = this] {
    beast::error_code ignored;
    self->signals.cancel(ignored);
    self->close_idle_sessions();
  });
  // Drain off the I/O threads: the batchers' answers are written by them.
  std::lock_guard<std::mutex> lock(drainer_mu);
  drainer = std::thread([self = this] {
    self->repository.stop();
    asio::post(self->ioc, [self] {
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
}

uint16_t Server::port() const { return impl_->port; }

void Server::run() {
  impl_->accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->options.io_threads; ++i) {
    threads.emplace_back([this] { impl_->ioc.run(); });
  }
  impl_->ioc.run();
  for (auto& t : threads) t.join();
  impl_->join_drainer();
}

void Server::shutdown() { impl_->begin_shutdown(); }

}  // namespace weft::serve
