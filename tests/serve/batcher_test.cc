// Dynamic batching against a reference computed in the test: rows come back to the request that
// sent them, batches fill up to max_batch without waiting for the delay, the queue bound holds,
// stop() answers what is queued, reloads take effect, and models whose outputs are not
// batch-first run each request alone.
#include "serve/batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "base/error.h"
#include "serve/metrics.h"
#include "tests/serve/serve_fixture.h"

namespace weft::serve {
namespace {

using testing::MlpWeights;
using testing::TempDir;

// Collects replies by request index.
struct Replies {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int, InferReply> got;
  std::function<void(InferReply&&)> slot(int i) {
    return [this, i](InferReply&& r) {
      std::lock_guard<std::mutex> lock(mu);
      got[i] = std::move(r);
      cv.notify_all();
    };
  }
  bool wait_for(size_t n, std::chrono::seconds limit = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, limit, [&] { return got.size() >= n; });
  }
};

InferRequest request(HostTensor input, std::function<void(InferReply&&)> done) {
  InferRequest r;
  r.inputs.push_back(std::move(input));
  r.done = std::move(done);
  return r;
}

void expect_rows(const InferReply& reply, const HostTensor& input, const MlpWeights& w) {
  ASSERT_EQ(reply.status, 200) << reply.error;
  ASSERT_EQ(reply.outputs.size(), 1u);
  const HostTensor& out = reply.outputs[0];
  ASSERT_EQ(out.shape, (Shape{input.rows(), 3}));
  const std::vector<double> ref = w.forward(input.data);
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(out.data[i], ref[i], 1e-5 + 1e-5 * std::abs(ref[i])) << "element " << i;
  }
}

// Batch sizes recorded in the Prometheus text: the cumulative count of batches with <= le rows.
uint64_t batches_up_to(const Metrics& m, const std::string& model, const std::string& le) {
  const std::string key =
      "weft_serve_batch_size_bucket{model=\"" + model + "\",le=\"" + le + "\"} ";
  const std::string text = m.prometheus();
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size()));
}

TEST(ServeBatcher, SplitsRowsBackToEachRequest) {
  TempDir repo;
  const MlpWeights w;
  testing::write_mlp(repo.path(), "mlp", w, "\"max_batch\": 4, \"max_delay_ms\": 200");
  Metrics metrics;
  Batcher b(load_model((repo.path() / "mlp").string(), {}), true, &metrics);
  Replies replies;
  // 1 + 2 + 1 rows fill one batch of 4; 3 + 1 the next; 2 waits out the delay alone.
  const std::vector<int64_t> rows = {1, 2, 1, 3, 1, 2};
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < rows.size(); ++i) inputs.push_back(testing::mlp_input(rows[i], int(i)));
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(b.submit(request(inputs[i], replies.slot(int(i)))), Admit::kQueued);
  }
  ASSERT_TRUE(replies.wait_for(rows.size()));
  for (size_t i = 0; i < rows.size(); ++i) expect_rows(replies.got[int(i)], inputs[i], w);
  // Every executor run had at most 4 rows, and at least one combined several requests.
  EXPECT_EQ(batches_up_to(metrics, "mlp", "4"), batches_up_to(metrics, "mlp", "+Inf"));
  EXPECT_LT(batches_up_to(metrics, "mlp", "+Inf"), rows.size());
}

TEST(ServeBatcher, FullBatchDoesNotWaitForTheDelay) {
  TempDir repo;
  const MlpWeights w;
  testing::write_mlp(repo.path(), "mlp", w, "\"max_batch\": 4, \"max_delay_ms\": 60000");
  Batcher b(load_model((repo.path() / "mlp").string(), {}), true, nullptr);
  Replies replies;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(b.submit(request(testing::mlp_input(2, i), replies.slot(i))), Admit::kQueued);
  }
  // Well under the one-minute delay: the two requests fill max_batch.
  ASSERT_TRUE(replies.wait_for(2, std::chrono::seconds(30)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  for (int i = 0; i < 2; ++i) expect_rows(replies.got[i], testing::mlp_input(2, i), w);
}

TEST(ServeBatcher, QueueBoundAndStopAnswersWhatIsQueued) {
  TempDir repo;
  const MlpWeights w;
  testing::write_mlp(repo.path(), "mlp", w,
                     "\"max_batch\": 8, \"max_delay_ms\": 60000, \"queue_capacity\": 2");
  Batcher b(load_model((repo.path() / "mlp").string(), {}), true, nullptr);
  Replies replies;
  ASSERT_EQ(b.submit(request(testing::mlp_input(1, 0), replies.slot(0))), Admit::kQueued);
  ASSERT_EQ(b.submit(request(testing::mlp_input(1, 1), replies.slot(1))), Admit::kQueued);
  // The batcher holds both, waiting for more rows: the queue (2) is full.
  EXPECT_EQ(b.submit(request(testing::mlp_input(1, 2), replies.slot(2))), Admit::kQueueFull);
  EXPECT_EQ(b.depth(), 2);
  b.stop();  // runs the queued requests now instead of after the minute
  ASSERT_TRUE(replies.wait_for(2, std::chrono::seconds(1)));
  EXPECT_EQ(replies.got.size(), 2u);
  expect_rows(replies.got[0], testing::mlp_input(1, 0), w);
  expect_rows(replies.got[1], testing::mlp_input(1, 1), w);
  EXPECT_EQ(b.submit(request(testing::mlp_input(1, 3), replies.slot(3))), Admit::kStopped);
}

TEST(ServeBatcher, ReloadServesTheNewWeights) {
  TempDir repo;
  const MlpWeights w1(1.0f), w2(-0.5f);
  testing::write_mlp(repo.path(), "mlp", w1, "\"max_batch\": 4, \"max_delay_ms\": 0");
  Batcher b(load_model((repo.path() / "mlp").string(), {}), true, nullptr);
  Replies replies;
  const HostTensor x = testing::mlp_input(3, 7);
  ASSERT_EQ(b.submit(request(x, replies.slot(0))), Admit::kQueued);
  ASSERT_TRUE(replies.wait_for(1));
  expect_rows(replies.got[0], x, w1);
  testing::write_mlp(repo.path(), "mlp", w2, "\"max_batch\": 4, \"max_delay_ms\": 0");
  b.set_model(load_model((repo.path() / "mlp").string(), {}, 2));
  ASSERT_EQ(b.submit(request(x, replies.slot(1))), Admit::kQueued);
  ASSERT_TRUE(replies.wait_for(2));
  expect_rows(replies.got[1], x, w2);
  EXPECT_EQ(replies.got[1].model->version, 2);
}

TEST(ServeBatcher, PadsToTheAllowedBatchSizes) {
  TempDir repo;
  const MlpWeights w;
  // Sizes 1, 2, 4 (the default for max_batch 4): 3 rows run on the executor of 4, padded.
  testing::write_mlp(repo.path(), "mlp", w, "\"max_batch\": 4, \"max_delay_ms\": 60000");
  auto model = load_model((repo.path() / "mlp").string(), {});
  EXPECT_EQ(model->config.batch_sizes, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(model->run_size(3), 4);
  EXPECT_EQ(model->run_size(2), 2);
  Batcher b(model, true, nullptr);
  Replies replies;
  const HostTensor x = testing::mlp_input(3, 5);
  ASSERT_EQ(b.submit(request(x, replies.slot(0))), Admit::kQueued);
  b.stop();  // runs it now, alone: 3 rows on the executor bound for 4
  ASSERT_TRUE(replies.wait_for(1));
  expect_rows(replies.got[0], x, w);
}

TEST(ServeBatcher, SingleRowsAreNotPadded) {
  TempDir repo;
  const MlpWeights w;
  testing::write_mlp(repo.path(), "mlp", w, "\"max_batch\": 8, \"max_delay_ms\": 60000");
  Metrics metrics;
  Batcher b(load_model((repo.path() / "mlp").string(), {}), true, &metrics);
  Replies replies;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(b.submit(request(testing::mlp_input(1, i), replies.slot(i))), Admit::kQueued);
  }
  b.stop();  // five rows with sizes 1, 2, 4, 8: a run of 4, then one of 1 (never 8 padded)
  ASSERT_TRUE(replies.wait_for(5));
  for (int i = 0; i < 5; ++i) expect_rows(replies.got[i], testing::mlp_input(1, i), w);
  EXPECT_EQ(batches_up_to(metrics, "mlp", "+Inf"), 2u);
  EXPECT_EQ(batches_up_to(metrics, "mlp", "1"), 1u);
  EXPECT_EQ(batches_up_to(metrics, "mlp", "4"), 2u);
}

TEST(ServeBatcher, OutputsNotBatchFirstRunEachRequestAlone) {
  TempDir repo;
  testing::write_sum(repo.path(), "total");
  auto model = load_model((repo.path() / "total").string(), {});
  EXPECT_FALSE(model->batchable);
  Batcher b(model, true, nullptr);
  Replies replies;
  for (int i = 0; i < 3; ++i) {
    HostTensor t;
    t.shape = Shape{i + 1, 2};
    for (int k = 0; k < 2 * (i + 1); ++k) t.data.push_back(float(10 * i + k));
    ASSERT_EQ(b.submit(request(t, replies.slot(i))), Admit::kQueued);
  }
  ASSERT_TRUE(replies.wait_for(3));
  for (int i = 0; i < 3; ++i) {
    double expect = 0;
    for (int k = 0; k < 2 * (i + 1); ++k) expect += 10 * i + k;
    ASSERT_EQ(replies.got[i].status, 200) << replies.got[i].error;
    ASSERT_EQ(replies.got[i].outputs[0].data.size(), 1u);
    EXPECT_FLOAT_EQ(replies.got[i].outputs[0].data[0], float(expect)) << "request " << i;
  }
}

TEST(ServeBatcher, ValidateInputsNamesTheProblem) {
  TempDir repo;
  testing::write_mlp(repo.path(), "mlp", MlpWeights());
  auto model = load_model((repo.path() / "mlp").string(), {});
  auto message = [&](std::vector<std::pair<std::string, HostTensor>> named) {
    try {
      validate_inputs(*model, std::move(named));
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  HostTensor wrong;
  wrong.shape = Shape{2, 6};
  wrong.data.resize(12);
  EXPECT_NE(message({{"data", wrong}}).find("has shape (2, 6), expected (-1, 5)"),
            std::string::npos)
      << message({{"data", wrong}});
  EXPECT_NE(message({{"data", testing::mlp_input(5, 0)}}).find("5 rows"), std::string::npos);
  EXPECT_NE(message({{"image", testing::mlp_input(1, 0)}}).find("no input 'image'"),
            std::string::npos);
  EXPECT_NE(message({}).find("'data' is missing"), std::string::npos);
  EXPECT_EQ(message({{"data", testing::mlp_input(4, 0)}}), "accepted");
}

TEST(ServeModel, LoadErrorsNameTheFile) {
  TempDir repo;
  testing::write_mlp(repo.path(), "mlp", MlpWeights());
  const auto dir = repo.path() / "mlp";
  auto message = [&] {
    try {
      load_model(dir.string(), {});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_EQ(message(), "loaded");
  testing::write_text(dir / "config.json",
                      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 5]}], \"max_batch\": 0}");
  EXPECT_NE(message().find("'max_batch' must be an integer in [1, 4096]"), std::string::npos)
      << message();
  testing::write_text(dir / "config.json",
                      "{\"inputs\": [{\"name\": \"pixels\", \"shape\": [0, 5]}]}");
  EXPECT_NE(message().find("input 'pixels' is not a variable"), std::string::npos) << message();
  testing::write_text(
      dir / "config.json",
      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 5]}], \"batch_sizes\": [1, 4, "
      "2]}");
  EXPECT_NE(message().find("batch_sizes[2] is 2; the list must increase"), std::string::npos)
      << message();
  testing::write_text(
      dir / "config.json",
      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 5]}], \"batch_sizes\": [1, 4], "
      "\"max_batch\": 8}");
  EXPECT_NE(message().find("must equal max_batch (8)"), std::string::npos) << message();
  testing::write_text(dir / "config.json", "{\"inputs\": [], \"colour\": 1}");
  EXPECT_NE(message().find("unknown key 'colour'"), std::string::npos) << message();
  testing::write_text(dir / "config.json",
                      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 6]}]}");
  EXPECT_NE(message().find("fc1"), std::string::npos) << message();  // the weight's shape disagrees
  std::filesystem::remove(dir / "config.json");
  EXPECT_NE(message().find("config.json is missing"), std::string::npos) << message();
}

}  // namespace
}  // namespace weft::serve
