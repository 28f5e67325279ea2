// `weft serve`'s HTTP front end on loopback: routes and status codes, the three body forms
// against the test's own reference, keep-alive, limits, a stalled client, concurrent clients, and
// a graceful shutdown that answers every queued request.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "tests/serve/http_client.h"
#include "tests/serve/server_fixture.h"

namespace weft::serve {
namespace {

using json = nlohmann::json;
using testing::Connection;
using testing::request;
using testing::ServeHttp;

TEST_F(ServeHttp, RoutesAndStatusCodesOnOneConnection) {
  start();
  Connection c(port());
  ASSERT_TRUE(c.open());
  auto get = [&](const std::string& target) {
    c.send(request("GET", target));
    return c.read();
  };
  auto r = get("/v1/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["models"], 1);
  r = get("/v1/models/mlp");
  ASSERT_EQ(r.status, 200);
  const json m = json::parse(r.body);
  EXPECT_EQ(m["version"], 1);
  EXPECT_EQ(m["inputs"][0]["shape"], json::parse("[-1, 5]"));
  EXPECT_EQ(m["outputs"][0]["name"], "fc2_output");
  r = get("/v1/models");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["models"].size(), 1u);
  r = get("/v1/models/nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("no model 'nope'"),
            std::string::npos);
  EXPECT_EQ(get("/v2/elsewhere").status, 404);
  r = get("/v1/models/mlp/infer");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
  c.send(request("DELETE", "/v1/health"));
  EXPECT_EQ(c.read().status, 405);

  auto post = [&](const std::string& type, const std::string& body) {
    c.send(request("POST", "/v1/models/mlp/infer", type, body));
    return c.read();
  };
  const HostTensor x = testing::mlp_input(3, 11);
  // .npy in, .npy out.
  r = post("application/x-npy", encode_npy(x));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "application/x-npy");
  EXPECT_EQ(r.headers["x-weft-model-version"], "1");
  expect_rows(decode_npy(r.body, "response"), x);
  // multipart in, multipart out (one part per output, named after it).
  const std::string body =
      write_multipart({{"data", "application/x-npy", encode_npy(x)}}, "b0undary");
  r = post("multipart/form-data; boundary=b0undary", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto boundary = multipart_boundary(r.headers["content-type"]);
  ASSERT_TRUE(boundary);
  const auto parts = parse_multipart(r.body, *boundary);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].name, "fc2_output");
  expect_rows(decode_npy(parts[0].body, "part"), x);
  // JSON in, JSON out.
  r = post("application/json", json{{"inputs", {{"data", tensor_to_json(x)}}}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = json::parse(r.body);
  EXPECT_EQ(out["shapes"]["fc2_output"], json::parse("[3, 3]"));
  expect_rows(json_to_tensor(out["outputs"]["fc2_output"], "out"), x);

  // Client errors, each naming the problem; the connection stays usable.
  r = post("application/json", "{\"inputs\": ");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("not valid JSON"), std::string::npos) << r.body;
  r = post("application/json", json{{"inputs", {{"pixels", tensor_to_json(x)}}}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no input 'pixels'"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("check failed"), std::string::npos) << r.body;
  r = post("application/x-npy", encode_npy(testing::mlp_input(5, 0)));  // max_batch is 4
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("1 to 4"), std::string::npos) << r.body;
  r = post("application/x-npy", "\x93NUMPY garbage");
  EXPECT_EQ(r.status, 400);
  r = post("text/csv", "1,2,3,4,5");
  EXPECT_EQ(r.status, 415);
  r = post("", "");
  EXPECT_EQ(r.status, 415);
  r = get("/v1/health");
  EXPECT_EQ(r.status, 200);

  r = get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("weft_serve_requests_total{model=\"mlp\",code=\"200\"} 4"),
            std::string::npos)
      << r.body;  // 3 inferences and GET /v1/models/mlp
  EXPECT_NE(r.body.find("weft_serve_requests_total{model=\"mlp\",code=\"400\"} 4"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("weft_serve_request_seconds_count{model=\"mlp\"} 3"), std::string::npos);
  EXPECT_NE(r.body.find("weft_serve_model_loads_total{model=\"mlp\",result=\"ok\"} 1"),
            std::string::npos);
}

TEST_F(ServeHttp, BodyLimitAndMalformedHttp) {
  ServerOptions so;
  so.max_body_bytes = 1024;
  start(so);
  {
    Connection c(port());
    c.send(request("POST", "/v1/models/mlp/infer", "application/x-npy", std::string(4096, 'x')));
    const auto r = c.read();
    EXPECT_EQ(r.status, 413);
    EXPECT_NE(r.body.find("1024 bytes"), std::string::npos) << r.body;
    EXPECT_TRUE(c.closed_within(5000));
  }
  {
    Connection c(port());
    c.send("GARBAGE\r\n\r\n");
    EXPECT_EQ(c.read().status, 400);
    EXPECT_TRUE(c.closed_within(5000));
  }
  Connection c(port());
  c.send(request("GET", "/v1/health"));
  EXPECT_EQ(c.read().status, 200);
}

TEST_F(ServeHttp, StalledClientIsClosedWhileOthersAreServed) {
  ServerOptions so;
  so.read_timeout_ms = 300;
  start(so);
  Connection slow(port());
  ASSERT_TRUE(slow.send("POST /v1/models/mlp/infer HTTP/1.1\r\nHost: x\r\n"));
  // Another client is answered meanwhile.
  Connection fast(port());
  const HostTensor x = testing::mlp_input(1, 3);
  fast.send(request("POST", "/v1/models/mlp/infer", "application/x-npy", encode_npy(x)));
  const auto r = fast.read();
  ASSERT_EQ(r.status, 200);
  expect_rows(decode_npy(r.body, "response"), x);
  // The stalled one is closed after the read timeout (generous bound: a loaded machine).
  EXPECT_TRUE(slow.closed_within(10000));
}

TEST_F(ServeHttp, ConcurrentClientsGetTheirOwnRows) {
  start({}, "\"max_batch\": 4, \"max_delay_ms\": 10");
  constexpr int kClients = 16, kRequests = 5;
  std::vector<std::thread> clients;
  std::vector<int> failures(kClients, 0);
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      Connection c(port());
      for (int i = 0; i < kRequests; ++i) {
        const HostTensor x = testing::mlp_input(1 + (t + i) % 3, 100 * t + i);
        c.send(request("POST", "/v1/models/mlp/infer", "application/x-npy", encode_npy(x)));
        const auto r = c.read();
        if (r.status != 200) {
          ++failures[t];
          continue;
        }
        const HostTensor out = decode_npy(r.body, "response");
        const std::vector<double> ref = weights_.forward(x.data);
        bool ok = out.data.size() == ref.size();
        for (size_t k = 0; ok && k < ref.size(); ++k) {
          ok = std::abs(out.data[k] - ref[k]) <= 1e-5 + 1e-5 * std::abs(ref[k]);
        }
        failures[t] += ok ? 0 : 1;
      }
    });
  }
  for (auto& t : clients) t.join();
  for (int t = 0; t < kClients; ++t) EXPECT_EQ(failures[t], 0) << "client " << t;
}

TEST_F(ServeHttp, ShutdownAnswersEveryQueuedRequest) {
  // A long delay keeps the requests queued until the shutdown drains them.
  start({}, "\"max_batch\": 8, \"max_delay_ms\": 60000");
  constexpr int kClients = 3;
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<HostTensor> inputs;
  for (int i = 0; i < kClients; ++i) {
    conns.push_back(std::make_unique<Connection>(port()));
    inputs.push_back(testing::mlp_input(1, i));
    conns[i]->send(
        request("POST", "/v1/models/mlp/infer", "application/x-npy", encode_npy(inputs[i])));
  }
  Connection idle(port());  // open, no request: closed by the shutdown
  ASSERT_TRUE(idle.open());
  auto batcher = repository_->find("mlp");
  for (int i = 0; i < 1000 && batcher->depth() < kClients; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(batcher->depth(), kClients);
  server_->shutdown();
  for (int i = 0; i < kClients; ++i) {
    auto r = conns[i]->read();
    ASSERT_EQ(r.status, 200) << "request " << i << ": " << r.body;
    EXPECT_EQ(r.headers["connection"], "close");
    expect_rows(decode_npy(r.body, "response"), inputs[i]);
  }
  EXPECT_TRUE(idle.closed_within(10000));
  thread_.join();  // run() returns once everything is answered
  Connection late(port());
  EXPECT_FALSE(late.open() && late.send(request("GET", "/v1/health")) &&
               late.read(2000).status != 0);
}

}  // namespace
}  // namespace weft::serve
