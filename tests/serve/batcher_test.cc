// Dynamic batching against a reference computed in the test: rows come back to the request that
// sent them, batches fill up to max_batch without waiting for the delay, the queue bound holds,
// stop() answers what is queued, reloads take effect, models whose outputs are not batch-first
// run each request alone (also when only a run finds it out), every request gets one answer
// when rendering it throws, and the executors for distinct row counts stay bounded.
#include "serve/batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "graph/symbol.h"
#include "serve/metrics.h"
#include "tests/serve/serve_fixture.h"

namespace weft::serve {
namespace {

namespace fs = std::filesystem;
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

// DIR/NAME/: data (n, 3) → `slice` begin (0,) end (2,): the first min(n, 2) rows. Its output is
// batch-first at batch 1 and 2 and not beyond.
void write_first_two_rows(const fs::path& repo, const std::string& name,
                          const std::string& config) {
  using graph::Symbol;
  const fs::path dir = repo / name;
  fs::create_directories(dir);
  Symbol data = Symbol::variable("data");
  testing::write_text(
      dir / (name + "-symbol.json"),
      Symbol::op("slice", {data}, {{"begin", "(0,)"}, {"end", "(2,)"}}, "first2").to_json());
  testing::write_text(dir / "config.json",
                      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 3]}], " + config + "}");
}

HostTensor row_of_three(int i) {
  HostTensor t;
  t.shape = Shape{1, 3};
  t.data = {float(10 * i + 1), float(10 * i + 2), float(10 * i + 3)};
  return t;
}

// Four one-row requests to the slice model, taken as one batch (they fill max_batch 4): each
// must come back as its own row, which is what the graph gives for that row alone.
void expect_own_rows(const std::shared_ptr<const Model>& model) {
  Batcher b(model, true, nullptr);
  Replies replies;
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(b.submit(request(row_of_three(i), replies.slot(i))), Admit::kQueued);
  }
  ASSERT_TRUE(replies.wait_for(4));
  for (int i = 0; i < 4; ++i) {
    const InferReply& r = replies.got[i];
    ASSERT_EQ(r.status, 200) << r.error;
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.outputs[0].shape, (Shape{1, 3})) << "request " << i;
    EXPECT_EQ(r.outputs[0].data, row_of_three(i).data) << "request " << i;
  }
}

TEST(ServeBatcher, OutputKeepingTwoRowsIsNotBatchable) {
  TempDir repo;
  write_first_two_rows(repo.path(), "first2", "\"max_batch\": 4, \"max_delay_ms\": 60000");
  auto model = load_model((repo.path() / "first2").string(), {});
  EXPECT_FALSE(model->batchable);  // (2, 3) at batch 4
  expect_own_rows(model);
}

TEST(ServeBatcher, RunThatFindsAnOutputNotBatchFirstRerunsEachRequestAlone) {
  TempDir repo;
  write_first_two_rows(repo.path(), "first2", "\"max_batch\": 4, \"max_delay_ms\": 60000");
  // A version whose load-time check was fooled: the batcher's own check must catch it.
  auto fooled = std::make_shared<Model>(*load_model((repo.path() / "first2").string(), {}));
  fooled->batchable = true;
  ::testing::internal::CaptureStderr();
  expect_own_rows(fooled);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("not batch-first; requests run alone"), std::string::npos) << log;
}

TEST(ServeBatcher, AnswerWhoseRenderingThrowsTwiceStillGetsOne) {
  TempDir repo;
  const MlpWeights w;
  testing::write_mlp(repo.path(), "mlp", w, "\"max_batch\": 4, \"max_delay_ms\": 0");
  Batcher b(load_model((repo.path() / "mlp").string(), {}), true, nullptr);
  // The first rendering throws with bytes that are not UTF-8; rendering an error message, as a
  // JSON writer does, throws on such bytes too.
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0, answers = 0;
  InferReply answered;
  auto done = [&](InferReply&& reply) {
    std::unique_lock<std::mutex> lock(mu);
    ++calls;
    if (reply.status == 200) throw std::runtime_error("cannot encode \xff\xfe");
    static_cast<void>(nlohmann::json{{"error", reply.error}}.dump());
    ++answers;
    answered = std::move(reply);
    cv.notify_all();
  };
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(b.submit(request(testing::mlp_input(1, 0), done)), Admit::kQueued);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return answers > 0; }))
        << "the request was never answered (" << calls << " calls)";
  }
  b.stop();  // no further call can come
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(answers, 1);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(answered.status, 500);
  EXPECT_EQ(answered.error, kAnswerFailed);
  EXPECT_NE(log.find("the answer could not be written"), std::string::npos) << log;
}

TEST(ServeBatcher, BatcherServesOnAfterAnAnswerFailed) {
  TempDir repo;
  const MlpWeights w;
  testing::write_mlp(repo.path(), "mlp", w, "\"max_batch\": 4, \"max_delay_ms\": 0");
  Batcher b(load_model((repo.path() / "mlp").string(), {}), true, nullptr);
  Replies replies;
  auto always_throws = [](InferReply&&) { throw std::runtime_error("broken pipe"); };
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(b.submit(request(testing::mlp_input(1, 0), always_throws)), Admit::kQueued);
  ASSERT_EQ(b.submit(request(testing::mlp_input(2, 1), replies.slot(0))), Admit::kQueued);
  ASSERT_TRUE(replies.wait_for(1));
  b.stop();
  const std::string log = ::testing::internal::GetCapturedStderr();
  expect_rows(replies.got[0], testing::mlp_input(2, 1), w);
  EXPECT_NE(log.find("the error answer could not be written either"), std::string::npos) << log;
}

// DIR/NAME/: the sum over every axis (not batch-first), taking up to `max_batch` rows.
void write_sum_up_to(const fs::path& repo, const std::string& name, int max_batch,
                     const std::string& extra = "") {
  testing::write_sum(repo, name);
  testing::write_text(repo / name / "config.json",
                      "{\"inputs\": [{\"name\": \"data\", \"shape\": [-1, 2]}], "
                      "\"max_batch\": " +
                          std::to_string(max_batch) + ", \"max_delay_ms\": 0" + extra + "}");
}

// Sends one request of each row count in `counts`, one after another, checking each sum
// against a loop here; returns the most executors held after any of them.
size_t run_row_counts(Batcher& b, const std::vector<int>& counts) {
  size_t most = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int n = counts[i];
    HostTensor t;
    t.shape = Shape{n, 2};
    double expect = 0;
    for (int k = 0; k < 2 * n; ++k) {
      t.data.push_back(float(k % 7) - 2.5f);
      expect += double(k % 7) - 2.5;
    }
    Replies replies;
    EXPECT_EQ(b.submit(request(t, replies.slot(0))), Admit::kQueued);
    EXPECT_TRUE(replies.wait_for(1));
    const InferReply& r = replies.got[0];
    EXPECT_EQ(r.status, 200) << r.error;
    if (r.status == 200) {
      EXPECT_EQ(r.outputs[0].data.size(), 1u);
      EXPECT_NEAR(r.outputs[0].data[0], expect, 1e-4) << n << " rows";
    }
    most = std::max(most, b.executors_bound());
  }
  return most;
}

TEST(ServeBatcher, ExecutorsForDistinctRowCountsAreBounded) {
  TempDir repo;
  write_sum_up_to(repo.path(), "total", 32);
  auto model = load_model((repo.path() / "total").string(), {});
  ASSERT_FALSE(model->batchable);
  EXPECT_EQ(model->config.extra_executors, 8);  // the documented default
  Batcher b(model, true, nullptr);
  std::vector<int> counts;
  for (int n = 1; n <= 20; ++n) counts.push_back(n);
  // Sizes 1, 2, 4, 8, 16 are batch sizes (kept); the 15 others share 8 places.
  EXPECT_EQ(run_row_counts(b, counts), 5u + 8u);
  EXPECT_EQ(b.executors_bound(), 5u + 8u);
  // Dropped sizes bind again when they come back, and still answer correctly.
  EXPECT_EQ(run_row_counts(b, {3, 5, 6, 7, 3, 20}), 5u + 8u);
}

TEST(ServeBatcher, ExtraExecutorsComeFromTheConfig) {
  TempDir repo;
  write_sum_up_to(repo.path(), "total", 12, ", \"batch_sizes\": [4, 12], \"extra_executors\": 2");
  auto model = load_model((repo.path() / "total").string(), {});
  EXPECT_EQ(model->config.extra_executors, 2);
  Batcher b(model, true, nullptr);
  EXPECT_EQ(run_row_counts(b, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 12}), 2u + 2u);
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
