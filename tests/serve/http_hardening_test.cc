// `weft serve`'s HTTP front end under hostile or unusual requests, on loopback with raw bytes: a
// deeply nested JSON body, transfer codings that would smuggle a second request, `Expect:
// 100-continue`, a stalled request, invalid UTF-8 in the path and Content-Type, idle connections
// beyond the connection cap and the descriptor limit, and the bearer token.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve/client_message.h"
#include "serve/http_checks.h"
#include "serve/router.h"
#include "tests/serve/http_client.h"
#include "tests/serve/server_fixture.h"

namespace weft::serve {
namespace {

using json = nlohmann::json;
using testing::Connection;
using testing::request;
using testing::ServeHttp;

// How many times an HTTP/1.1 status line starts in `bytes`.
int responses_in(const std::string& bytes) {
  int n = 0;
  for (size_t at = bytes.find("HTTP/1.1 "); at != std::string::npos;
       at = bytes.find("HTTP/1.1 ", at + 1)) {
    ++n;
  }
  return n;
}

int status_of(const std::string& bytes) {
  return bytes.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(bytes.substr(9, 3)) : 0;
}

TEST_F(ServeHttp, DeeplyNestedJsonBodyIsRefusedAndTheServerLives) {
  start();
  const int depth = 20000;  // 40 KB: once enough to overflow the decoder's stack
  const std::string body =
      "{\"inputs\": {\"data\": " + std::string(depth, '[') + "1" + std::string(depth, ']') + "}}";
  {
    Connection c(port());
    c.send(request("POST", "/v1/models/mlp/infer", "application/json", body));
    const auto r = c.read();
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("deeper than 64 levels"), std::string::npos) << r.body;
  }
  {
    // Within the body's limit but deeper than a tensor may be: refused naming the path.
    const std::string deep =
        "{\"inputs\": {\"data\": " + std::string(40, '[') + "1" + std::string(40, ']') + "}}";
    Connection c(port());
    c.send(request("POST", "/v1/models/mlp/infer", "application/json", deep));
    const auto r = c.read();
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("deeper than 32 levels"), std::string::npos) << r.body;
  }
  Connection c(port());
  c.send(request("GET", "/v1/health"));
  EXPECT_EQ(c.read().status, 200);
}

TEST_F(ServeHttp, TransferCodingsOtherThanAFinalChunkedAreRefusedAndClose) {
  start();
  // The body is a whole second request: read as one, it would be answered too.
  const std::string smuggled = "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string coding : {"gzip", "chunked, identity", "identity", "gzip, chunked"}) {
    Connection c(port());
    c.send(
        "POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        "Transfer-Encoding: " +
        coding + "\r\n\r\n" + smuggled);
    bool closed = false;
    const std::string bytes = c.read_until_closed(5000, &closed);
    EXPECT_EQ(responses_in(bytes), 1) << coding << ":\n" << bytes;
    const int status = status_of(bytes);
    EXPECT_TRUE(status == 400 || status == 501) << coding << ": " << status;
    EXPECT_TRUE(closed) << coding;
  }
  {
    // Two Transfer-Encoding fields count as their list joined: chunked is not the only coding.
    Connection c(port());
    c.send(
        "POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
        smuggled);
    bool closed = false;
    const std::string bytes = c.read_until_closed(5000, &closed);
    EXPECT_EQ(responses_in(bytes), 1) << bytes;
    EXPECT_TRUE(closed);
  }
  // A chunked body alone is read and served.
  const HostTensor x = testing::mlp_input(2, 5);
  const std::string npy = encode_npy(x);
  char size[32];
  std::snprintf(size, sizeof size, "%zx", npy.size());
  Connection c(port());
  c.send(
      "POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
      "Transfer-Encoding: chunked\r\n\r\n" +
      std::string(size) + "\r\n" + npy + "\r\n0\r\n\r\n");
  const auto r = c.read();
  ASSERT_EQ(r.status, 200) << r.body;
  expect_rows(decode_npy(r.body, "response"), x);
}

TEST_F(ServeHttp, ExpectContinueGetsTheInterimResponseOrTheFinalStatus) {
  start();
  const HostTensor x = testing::mlp_input(3, 7);
  const std::string npy = encode_npy(x);
  const std::string head =
      "POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/x-npy\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
      std::to_string(npy.size()) + "\r\n\r\n";
  {
    Connection c(port());
    c.send(head);
    EXPECT_EQ(c.read(5000).status, 100);  // before any byte of the body
    c.send(npy);
    const auto r = c.read();
    ASSERT_EQ(r.status, 200) << r.body;
    expect_rows(decode_npy(r.body, "response"), x);
    c.send(head);  // again on the same connection
    EXPECT_EQ(c.read(5000).status, 100);
    c.send(npy);
    EXPECT_EQ(c.read().status, 200);
  }
  {
    // Refused on the header: the final status at once, no body read, and the connection closes.
    Connection c(port());
    c.send(
        "POST /v1/models/nope/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        "Expect: 100-continue\r\nContent-Length: 100\r\n\r\n");
    auto r = c.read(5000);
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_EQ(r.headers["connection"], "close");
    EXPECT_TRUE(c.closed_within(5000));
  }
  {
    Connection c(port());
    c.send(
        "POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        "Expect: 100-continue\r\nContent-Length: 999999999999\r\n\r\n");
    EXPECT_EQ(c.read(5000).status, 413);
  }
}

TEST_F(ServeHttp, StalledRequestIsAnswered408) {
  ServerOptions so;
  so.read_timeout_ms = 300;
  start(so);
  Connection c(port());
  ASSERT_TRUE(c.send("POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n"));
  const auto r = c.read(10000);
  EXPECT_EQ(r.status, 408) << r.body;
  EXPECT_NE(r.body.find("300 ms"), std::string::npos) << r.body;
  EXPECT_TRUE(c.closed_within(10000));
  Connection again(port());
  again.send(request("GET", "/metrics"));
  const auto m = again.read();
  EXPECT_NE(m.body.find("weft_serve_requests_total{model=\"\",code=\"408\"} 1"), std::string::npos)
      << m.body;
}

TEST_F(ServeHttp, InvalidUtf8InPathOrContentTypeIsAClientErrorQuotingTheBytes) {
  start();
  Connection c(port());
  c.send(request("GET", "/v1/\xff\xfe/x"));
  auto r = c.read();
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().find("/v1/\\xFF\\xFE/x"), 9u) << r.body;
  c.send(request("GET", "/v1/models/m\xc3"));  // a truncated two-byte sequence
  r = c.read();
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("'m\\xC3'"), std::string::npos);
  // Valid UTF-8 is quoted as it is.
  c.send(request("GET", "/v1/models/caf\xc3\xa9"));
  r = c.read();
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("'caf\xc3\xa9'"),
            std::string::npos);
  c.send(request("POST", "/v1/models/mlp/infer", "application/\xe9t\xe9", "x"));
  r = c.read();
  EXPECT_EQ(r.status, 415) << r.body;
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("application/\\xE9t\\xE9"),
            std::string::npos);
  c.send(request("GET", "/v1/health"));  // the connection still serves
  EXPECT_EQ(c.read().status, 200);
}

TEST(ServeHttpChecks, OnlyChunkedAloneIsATransferCoding) {
  using detail::check_transfer_encoding;
  EXPECT_FALSE(check_transfer_encoding(""));
  EXPECT_FALSE(check_transfer_encoding("chunked"));
  EXPECT_FALSE(check_transfer_encoding(" Chunked ,"));  // case and empty list elements
  for (const char* last_not_chunked : {"gzip", "chunked, identity", "identity", ",", "chunkedx"}) {
    const auto r = check_transfer_encoding(last_not_chunked);
    ASSERT_TRUE(r) << last_not_chunked;
    EXPECT_EQ(r->status, 400) << last_not_chunked;
    EXPECT_NE(r->message.find(last_not_chunked), std::string::npos) << r->message;
  }
  for (const char* other_codings : {"gzip, chunked", "chunked, chunked"}) {
    const auto r = check_transfer_encoding(other_codings);
    ASSERT_TRUE(r) << other_codings;
    EXPECT_EQ(r->status, 501) << other_codings;
  }
  EXPECT_FALSE(detail::check_expect(""));
  EXPECT_FALSE(detail::check_expect("100-Continue"));
  ASSERT_TRUE(detail::check_expect("200-ok"));
  EXPECT_EQ(detail::check_expect("200-ok")->status, 417);
}

TEST(ServeRouter, PrintableEscapesOnlyInvalidUtf8) {
  EXPECT_EQ(printable("caf\xc3\xa9 \\ \xe2\x82\xac"), "caf\xc3\xa9 \\ \xe2\x82\xac");  // valid
  EXPECT_EQ(printable("a\xff\\b"), "a\\xFF\\\\b");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xC0\\xAF");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(printable("x\xe2\x82"), "x\\xE2\\x82");         // truncated
}

TEST(ServeRouter, ErrorResponsesNeverThrowOnInvalidUtf8) {
  const HttpResponse r = error_response(400, "bad \xff byte");
  EXPECT_EQ(r.status, 400);
  EXPECT_NO_THROW(json::parse(r.body));
}

TEST(ServeRouter, ConstantTimeCompare) {
  EXPECT_TRUE(equal_in_constant_time("s3cret", "s3cret"));
  EXPECT_FALSE(equal_in_constant_time("s3cret", "s3creT"));
  EXPECT_FALSE(equal_in_constant_time("s3cret", "s3cre"));
  EXPECT_FALSE(equal_in_constant_time("s3cret", "s3cretx"));
  EXPECT_FALSE(equal_in_constant_time("", "x"));
  EXPECT_TRUE(equal_in_constant_time("", ""));
}

TEST_F(ServeHttp, IdleConnectionsBeyondTheCapCloseTheLongestIdle) {
  ServerOptions so;
  so.max_connections = 4;
  start(so);
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<Connection>(port()));
    ASSERT_TRUE(idle.back()->open());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // an order of idleness
  }
  Connection c(port());
  c.send(request("GET", "/v1/health"));
  EXPECT_EQ(c.read(10000).status, 200);
  // The first ones made room (the server holds at most the cap, plus those closing).
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(idle[i]->closed_within(5000)) << "connection " << i;
  EXPECT_FALSE(idle[7]->closed_within(200));
}

// Lowers the soft descriptor limit for the test's lifetime.
class DescriptorLimit {
 public:
  explicit DescriptorLimit(rlim_t soft) {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    ok_ = ::setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~DescriptorLimit() { ::setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

size_t open_descriptors() {
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd");
       it != std::filesystem::directory_iterator(); ++it) {
    ++n;
  }
  return n;
}

TEST_F(ServeHttp, IdleConnectionsAtTheDescriptorLimitDoNotStarveHealth) {
  // As `ulimit -n 64` with 80 idle clients: the clients' sockets are made first (they live in
  // this process too), then the limit leaves 48 descriptors for the server, whose default cap
  // keeps a reserve of them.
  constexpr int kIdle = 80;
  std::vector<std::unique_ptr<Connection>> idle;
  for (int i = 0; i < kIdle; ++i) idle.push_back(std::make_unique<Connection>());
  Connection health;
  ASSERT_TRUE(health.open());
  DescriptorLimit limit(open_descriptors() + 48);
  if (!limit.ok()) GTEST_SKIP() << "cannot lower RLIMIT_NOFILE";
  ServerOptions so;
  EXPECT_LE(default_max_connections(), 48u);
  start(so);
  for (auto& c : idle) ASSERT_TRUE(c->connect(port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(health.connect(port()));
  health.send(request("GET", "/v1/health"));
  const auto r = health.read(10000);
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ServeHttp, BearerTokenGuardsModelRoutes) {
  ServerOptions so;
  so.access.token = "s3cret-token";
  start(so);
  auto with = [](const std::string& token) { return "Authorization: Bearer " + token + "\r\n"; };
  auto get = [&](const std::string& target, const std::string& extra = "") {
    Connection c(port());
    c.send("GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n");
    return c.read(10000);
  };
  auto r = get("/v1/models");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(r.headers["www-authenticate"].rfind("Bearer", 0), 0u);
  r = get("/v1/models/mlp", with("wrong-token"));
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.headers["www-authenticate"].find("invalid_token"), std::string::npos);
  EXPECT_EQ(get("/v1/models/mlp", "Authorization: Basic czNjcmV0LXRva2Vu\r\n").status, 401);
  EXPECT_EQ(get("/v1/models/mlp", "Authorization: Bearer   \r\n").status, 401);
  EXPECT_EQ(get("/v1/models/mlp", with("s3cret-token")).status, 200);
  EXPECT_EQ(get("/v1/models/mlp", "authorization: bearer s3cret-token\r\n").status, 200);
  EXPECT_EQ(get("/v1/health").status, 200);  // open by default
  EXPECT_EQ(get("/metrics").status, 200);

  const HostTensor x = testing::mlp_input(2, 1);
  const std::string npy = encode_npy(x);
  {
    // Refused on the header: a small body is read and dropped, the connection stays usable.
    Connection c(port());
    c.send(request("POST", "/v1/models/mlp/infer", "application/x-npy", npy));
    EXPECT_EQ(c.read(10000).status, 401);
    c.send(request("GET", "/v1/health"));
    EXPECT_EQ(c.read(10000).status, 200);
  }
  {
    // A large one is not waited for: the answer comes at once and the connection closes.
    Connection c(port());
    c.send(
        "POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n"
        "Content-Length: 10000000\r\n\r\n");
    EXPECT_EQ(c.read(10000).status, 401);
    EXPECT_TRUE(c.closed_within(5000));
  }
  Connection c(port());
  c.send("POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-npy\r\n" +
         with("s3cret-token") + "Content-Length: " + std::to_string(npy.size()) + "\r\n\r\n" + npy);
  r = c.read();
  ASSERT_EQ(r.status, 200) << r.body;
  expect_rows(decode_npy(r.body, "response"), x);
}

TEST_F(ServeHttp, HealthAndMetricsCanNeedTheTokenToo) {
  ServerOptions so;
  so.access = {"tok", /*protect_health=*/true, /*protect_metrics=*/true};
  start(so);
  for (const char* target : {"/v1/health", "/metrics"}) {
    Connection c(port());
    c.send(request("GET", target));
    EXPECT_EQ(c.read().status, 401) << target;
    c.send("GET " + std::string(target) +
           " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n\r\n");
    EXPECT_EQ(c.read().status, 200) << target;
  }
}

}  // namespace
}  // namespace weft::serve
