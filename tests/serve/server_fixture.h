// A `weft serve` front end on loopback for the HTTP tests: the perceptron of serve_fixture.h in a
// fresh repository, a Server on a free port run on a thread of its own, shut down after the test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/repository.h"
#include "tests/serve/serve_fixture.h"

namespace weft::serve::testing {

class ServeHttp : public ::testing::Test {
 protected:
  void start(ServerOptions so = {},
             const std::string& config = "\"max_batch\": 4, \"max_delay_ms\": 5") {
    write_mlp(repo_.path(), "mlp", weights_, config);
    RepositoryOptions ro;
    ro.dir = repo_.path().string();
    ro.reload_ms = 0;
    repository_ = std::make_unique<Repository>(ro, &metrics_);
    so.port = 0;
    server_ = std::make_unique<Server>(so, *repository_, metrics_);
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    if (server_) server_->shutdown();
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return server_->port(); }

  void expect_rows(const HostTensor& out, const HostTensor& in) const {
    ASSERT_EQ(out.shape, (Shape{in.rows(), 3}));
    const std::vector<double> ref = weights_.forward(in.data);
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_NEAR(out.data[i], ref[i], 1e-5 + 1e-5 * std::abs(ref[i])) << "element " << i;
    }
  }

  TempDir repo_;
  MlpWeights weights_;
  Metrics metrics_;
  std::unique_ptr<Repository> repository_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

}  // namespace weft::serve::testing
