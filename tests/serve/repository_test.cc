// The model repository's loads and reloads, driven by hand (reload_ms 0, scan() called by the
// test): weights drawn from a seed only when asked for, a folder that lost its .params failing to
// load while the previous version serves, and changed folders loading only once stable.
#include "serve/repository.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>

#include "base/error.h"
#include "graph/init_values.h"
#include "serve/metrics.h"
#include "tests/serve/serve_fixture.h"

namespace weft::serve {
namespace {

namespace fs = std::filesystem;
using testing::MlpWeights;
using testing::TempDir;

// One request's reply, waited for.
InferReply infer(Batcher& b, HostTensor input) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<InferReply> got;
  InferRequest r;
  r.inputs.push_back(std::move(input));
  r.done = [&](InferReply&& reply) {
    std::lock_guard<std::mutex> lock(mu);
    got = std::move(reply);
    cv.notify_all();
  };
  EXPECT_EQ(b.submit(std::move(r)), Admit::kQueued);
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return got.has_value(); }));
  return got ? std::move(*got) : InferReply{};
}

// The model `name` answers with the perceptron of weights `w` (the reference computed here).
void expect_serves(const Repository& repo, const std::string& name, const MlpWeights& w,
                   int version) {
  std::shared_ptr<Batcher> b = repo.find(name);
  ASSERT_NE(b, nullptr) << "model '" << name << "' is not served";
  EXPECT_EQ(b->model()->version, version);
  const HostTensor x = testing::mlp_input(2, 3);
  const InferReply reply = infer(*b, x);
  ASSERT_EQ(reply.status, 200) << reply.error;
  const std::vector<double> ref = w.forward(x.data);
  ASSERT_EQ(reply.outputs.at(0).data.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(reply.outputs[0].data[i], ref[i], 1e-5 + 1e-5 * std::abs(ref[i])) << i;
  }
}

RepositoryOptions by_hand(const fs::path& dir) {
  RepositoryOptions o;
  o.dir = dir.string();
  o.reload_ms = 0;  // no watcher: the test scans
  return o;
}

uint64_t failed_loads(const Metrics& m, const std::string& model) {
  const std::string key = "weft_serve_model_loads_total{model=\"" + model + "\",result=\"error\"} ";
  const std::string text = m.prometheus();
  const size_t at = text.find(key);
  return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size()));
}

std::string load_error(const fs::path& dir, const LoadOptions& options) {
  try {
    load_model(dir.string(), options);
  } catch (const Error& e) {
    return e.what();
  }
  return "loaded";
}

TEST(ServeRepository, LostParamsIsAFailedLoadAndTheOldVersionServes) {
  TempDir repo;
  const MlpWeights w1(1.0f), w2(-0.5f);
  testing::write_mlp(repo.path(), "mlp", w1);
  Metrics metrics;
  RepositoryOptions options = by_hand(repo.path());
  options.load.seed = 3;  // as `weft serve --seed 3`: not enough to replace a .params
  Repository r(options, &metrics);
  expect_serves(r, "mlp", w1, 1);
  EXPECT_EQ(r.find("mlp")->model()->weights_source, "mlp-0000.params");

  // The deploy's window: the old .params removed, the new one not there yet.
  fs::remove(repo.path() / "mlp" / "mlp-0000.params");
  ::testing::internal::CaptureStderr();
  r.scan();
  r.scan();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("model 'mlp' failed to load (the previous version keeps serving)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("mlp-0000.params is gone"), std::string::npos) << log;
  EXPECT_EQ(failed_loads(metrics, "mlp"), 1u);
  expect_serves(r, "mlp", w1, 1);
  r.scan();  // the same files are not tried again
  EXPECT_EQ(failed_loads(metrics, "mlp"), 1u);

  // The new weights arrive: version 2 serves them once the folder is stable.
  testing::write_mlp(repo.path(), "mlp", w2);
  r.scan();
  expect_serves(r, "mlp", w1, 1);
  r.scan();
  expect_serves(r, "mlp", w2, 2);
  r.stop();
}

TEST(ServeRepository, ConfigSeedMaySwitchAFolderToDrawnWeights) {
  TempDir repo;
  testing::write_mlp(repo.path(), "mlp", MlpWeights());
  Repository r(by_hand(repo.path()), nullptr);
  ASSERT_NE(r.find("mlp"), nullptr);
  fs::remove(repo.path() / "mlp" / "mlp-0000.params");
  testing::write_text(repo.path() / "mlp" / "config.json",
                      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 5]}], \"seed\": 4}");
  r.scan();
  r.scan();
  ASSERT_NE(r.find("mlp"), nullptr);
  EXPECT_EQ(r.find("mlp")->model()->version, 2);
  EXPECT_EQ(r.find("mlp")->model()->weights_source, "seed 4");
  r.stop();
}

TEST(ServeRepository, ChangedFolderLoadsOnceStable) {
  TempDir repo;
  const MlpWeights w1(1.0f), w2(-0.5f), w3(0.25f);
  testing::write_mlp(repo.path(), "mlp", w1);
  Repository r(by_hand(repo.path()), nullptr);  // the first scan loads at once
  expect_serves(r, "mlp", w1, 1);
  testing::write_mlp(repo.path(), "mlp", w2);
  r.scan();  // changed since the version serving: seen once
  expect_serves(r, "mlp", w1, 1);
  testing::write_mlp(repo.path(), "mlp", w3, "\"max_batch\": 4, \"max_delay_ms\": 1");
  r.scan();  // changed again since the last scan: still waiting
  expect_serves(r, "mlp", w1, 1);
  r.scan();  // unchanged since the last scan: loads
  expect_serves(r, "mlp", w3, 2);
  r.scan();
  expect_serves(r, "mlp", w3, 2);

  // A new folder is loaded by the second scan that sees it unchanged.
  testing::write_mlp(repo.path(), "other", w2);
  r.scan();
  EXPECT_EQ(r.find("other"), nullptr);
  r.scan();
  expect_serves(r, "other", w2, 1);
  r.stop();
}

TEST(ServeRepository, DrawnWeightsMustBeAskedFor) {
  TempDir repo;
  testing::write_mlp(repo.path(), "mlp", MlpWeights());
  const fs::path dir = repo.path() / "mlp";
  fs::remove(dir / "mlp-0000.params");
  const std::string message = load_error(dir, {});
  EXPECT_NE(message.find(dir.string() + ": no *.params file"), std::string::npos) << message;
  EXPECT_NE(message.find("\"seed\": N in config.json or `weft serve --seed N`"), std::string::npos)
      << message;

  // Asked for with --seed: the weights `weft replay --seed 5` draws.
  LoadOptions seeded;
  seeded.seed = 5;
  auto model = load_model(dir.string(), seeded);
  EXPECT_EQ(model->weights_source, "seed 5");
  EXPECT_FALSE(model->from_params);
  NDArray ref = NDArray::zeros(Shape{4, 5});
  graph::init_variable_seeded(5, "fc1_weight", false, ref);
  EXPECT_EQ(model->args.at("fc1_weight").to_vector<float>(), ref.to_vector<float>());

  // Asked for in config.json, which wins over --seed.
  testing::write_text(dir / "config.json",
                      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 5]}], \"seed\": 5}");
  LoadOptions other;
  other.seed = 9;
  for (const LoadOptions& options : {LoadOptions{}, other}) {
    auto m = load_model(dir.string(), options);
    EXPECT_EQ(m->weights_source, "seed 5");
    EXPECT_EQ(m->args.at("fc1_weight").to_vector<float>(), ref.to_vector<float>());
  }
  testing::write_text(dir / "config.json",
                      "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 5]}], \"seed\": -1}");
  EXPECT_NE(load_error(dir, {}).find("'seed' must be an integer in [0, 2^64)"), std::string::npos)
      << load_error(dir, {});

  // A graph without weights needs neither.
  testing::write_sum(repo.path(), "total");
  auto total = load_model((repo.path() / "total").string(), {});
  EXPECT_EQ(total->weights_source, "none");
}

TEST(ServeRepository, FolderWithoutParamsOrSeedIsNotServed) {
  TempDir repo;
  testing::write_mlp(repo.path(), "mlp", MlpWeights());
  fs::remove(repo.path() / "mlp" / "mlp-0000.params");
  testing::write_mlp(repo.path(), "good", MlpWeights());
  Metrics metrics;
  ::testing::internal::CaptureStderr();
  Repository r(by_hand(repo.path()), &metrics);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.find("mlp"), nullptr);
  EXPECT_NE(r.find("good"), nullptr);
  EXPECT_EQ(failed_loads(metrics, "mlp"), 1u);
  EXPECT_NE(log.find("--seed N"), std::string::npos) << log;
  r.stop();
}

}  // namespace
}  // namespace weft::serve
