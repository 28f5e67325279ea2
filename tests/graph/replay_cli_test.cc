// `weft model` and `weft replay` end to end: save outputs and weights, replay from the saved
// weights and compare, a mismatch's exit code and message, errors on bad input, and label inputs
// given as files (a CTC loss, SoftmaxOutput training) checked against independent references.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ndarray/io.h"
#include "tests/graph/cli_run.h"
#include "tests/graph/models_dir.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

using testing::CliRun;

CliRun run(const std::string& args) { return testing::run_cli(args); }

class ReplayCli : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef WEFT_CLI_PATH
    GTEST_SKIP() << "the weft program is not built (WEFT_BUILD_TOOLS=OFF)";
#endif
    dir_ = fs::temp_directory_path() / ("weft_replay_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(ReplayCli, SaveReplayFromParamsAndCompare) {
  CliRun m = run("model mlp -o " + path("mlp-symbol.json"));
  ASSERT_EQ(m.code, 0) << m.output;
  const std::string common =
      path("mlp-symbol.json") + " --input data=3x784 --warmup 1 --iters 2 --quiet";
  CliRun a = run("replay " + common + " --seed 5 --save-outputs " + path("ref") +
                 " --save-params " + path("mlp-0000.params"));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.output.find("memory plan: arena"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("latency: median"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("softmax_output (3, 10)"), std::string::npos) << a.output;
  NDArray out = load_npy_array(path("ref/0.npy"));
  EXPECT_EQ(out.shape(), Shape({3, 10}));
  // Rows of a softmax sum to 1.
  const auto v = out.to_doubles();
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int c = 0; c < 10; ++c) s += v[r * 10 + c];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  LoadedArrays params = load_arrays(path("mlp-0000.params"));
  EXPECT_TRUE(params.contains("arg:fc1_weight"));
  EXPECT_FALSE(params.contains("arg:data"));

  // The saved weights and the same seed reproduce the outputs.
  CliRun b = run("replay " + common + " --seed 5 --params " + path("mlp-0000.params") +
                 " --compare " + path("ref"));
  EXPECT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("heads match"), std::string::npos) << b.output;

  // Other weights: exit code 3, naming the head and the worst element.
  CliRun c = run("replay " + common + " --seed 6 --compare " + path("ref"));
  EXPECT_EQ(c.code, 3) << c.output;
  EXPECT_NE(c.output.find("head 0 differs"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("worst element ["), std::string::npos) << c.output;
}

TEST_F(ReplayCli, ErrorsAreClearAndExitNonZero) {
  std::ofstream(path("bad.json"))
      << "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},\n"
         "{\"op\": \"NoSuchOp\", \"name\": \"y\", \"inputs\": [[0, 0, 0]]}],\n"
         "\"arg_nodes\": [0], \"heads\": [[1, 0, 0]]}";
  CliRun r = run("replay " + path("bad.json") + " --input x=2x2");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("NoSuchOp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'y'"), std::string::npos) << r.output;

  CliRun m = run("model mlp -o " + path("mlp-symbol.json"));
  ASSERT_EQ(m.code, 0) << m.output;
  CliRun missing = run("replay " + path("mlp-symbol.json"));  // no input shape
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.output.find("'data'"), std::string::npos) << missing.output;
  // Labels for 5 samples, data for 3: the loss head names the contradiction.
  CliRun shape =
      run("replay " + path("mlp-symbol.json") + " --input data=3x784 --input softmax_label=5");
  EXPECT_NE(shape.code, 0);
  EXPECT_NE(shape.output.find("softmax"), std::string::npos) << shape.output;
  CliRun bad_spec = run("replay " + path("mlp-symbol.json") + " --input data");
  EXPECT_NE(bad_spec.code, 0);
  EXPECT_NE(bad_spec.output.find("NAME=SHAPE"), std::string::npos) << bad_spec.output;
  CliRun nofile = run("replay " + path("absent.json"));
  EXPECT_NE(nofile.code, 0);
  EXPECT_NE(nofile.output.find("absent.json"), std::string::npos) << nofile.output;
  // The CPU's kernels refuse 16-bit types, naming op, node and type, and point at a GPU (Note
  // [Reduced-precision replay]); unknown types are named.
  CliRun half = run("replay " + path("mlp-symbol.json") + " --input data=3x784 --dtype bf16");
  EXPECT_NE(half.code, 0);
  EXPECT_NE(half.output.find("--device cuda:N"), std::string::npos) << half.output;
  EXPECT_NE(half.output.find("op 'FullyConnected'"), std::string::npos) << half.output;
  EXPECT_NE(half.output.find("bfloat16"), std::string::npos) << half.output;
  CliRun int8 = run("replay " + path("mlp-symbol.json") + " --input data=3x784 --dtype int8");
  EXPECT_NE(int8.code, 0);
  EXPECT_NE(int8.output.find("--dtype int8"), std::string::npos) << int8.output;
}

// CTC loss by the forward (alpha) recursion of Graves et al. 2006 over per-step probabilities
// probs[t][k] (blank = channel 0), for a label sequence with its 0-padding removed.
double ctc_loss_reference(const std::vector<std::vector<double>>& probs, std::vector<int> label) {
  while (!label.empty() && label.back() == 0) label.pop_back();
  std::vector<int> ext = {0};  // blank, l1, blank, l2, ..., blank
  for (int c : label) ext.insert(ext.end(), {c, 0});
  const size_t steps = probs.size(), states = ext.size();
  std::vector<double> alpha(states, 0.0), next(states);
  alpha[0] = probs[0][0];
  if (states > 1) alpha[1] = probs[0][ext[1]];
  for (size_t t = 1; t < steps; ++t) {
    for (size_t s = 0; s < states; ++s) {
      double a = alpha[s] + (s >= 1 ? alpha[s - 1] : 0.0);
      if (s >= 2 && ext[s] != 0 && ext[s] != ext[s - 2]) a += alpha[s - 2];
      next[s] = a * probs[t][ext[s]];
    }
    alpha.swap(next);
  }
  const double p = alpha[states - 1] + (states > 1 ? alpha[states - 2] : 0.0);
  return -std::log(p);
}

// The CRNN OCR model's heads: head 0 is softmax(pred_fc) of shape (20 steps x batch 1, 27),
// head 1 the CTC loss of the same activations against `label`.
class CrnnLabels : public ReplayCli {
 protected:
  void SetUp() override {
    ReplayCli::SetUp();
    if (IsSkipped()) return;
    model_ = (testing::models_dir() / "Mengman__TensorRT_Tutorial__ocr-symbol.json").string();
    if (!fs::exists(model_)) GTEST_SKIP() << model_ << " is absent";
  }
  // Replays with `label_arg` ("" for no label), saving the heads to DIR/<tag>.
  CliRun replay(const std::string& label_arg, const std::string& tag) {
    std::string args = "replay " + model_ +
                       " --input data=1x1x80x32 --seed 3 --warmup 0 --iters 1" +
                       " --quiet --save-outputs " + path(tag);
    for (const char* state : {"h", "c"}) {
      for (int l = 0; l < 4; ++l)
        args += " --input l" + std::to_string(l) + "_init_" + state + "=1x100";
    }
    return run(args + label_arg);
  }
  // The step probabilities of head 0 and the loss of head 1.
  void heads(const std::string& tag, std::vector<std::vector<double>>* probs, double* loss) {
    const NDArray p = load_npy_array(path(tag + "/0.npy"));
    ASSERT_EQ(p.shape(), Shape({20, 27}));
    const std::vector<double> v = p.to_doubles();
    probs->assign(20, std::vector<double>(27));
    for (int t = 0; t < 20; ++t) {
      for (int k = 0; k < 27; ++k) (*probs)[t][k] = v[t * 27 + k];
    }
    const NDArray l = load_npy_array(path(tag + "/1.npy"));
    ASSERT_EQ(l.shape(), Shape({1}));
    *loss = l.to_doubles()[0];
  }
  std::string label_file(const std::string& name, const std::vector<float>& values) {
    save_npy_array(path(name), NDArray::from_vector(Shape({1, 4}), values));
    return " --input label=" + path(name);
  }
  std::string model_;
};

TEST_F(CrnnLabels, GivenLabelFilesAreUsedByTheCtcLoss) {
  const std::vector<std::vector<float>> labels = {{3, 7, 7, 1}, {20, 5, 0, 0}};
  std::vector<double> losses;
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string tag = "labels" + std::to_string(i);
    const CliRun r = replay(label_file(tag + ".npy", labels[i]), tag);
    ASSERT_EQ(r.code, 0) << r.output;
    std::vector<std::vector<double>> probs;
    double loss = 0;
    heads(tag, &probs, &loss);
    const std::vector<int> label(labels[i].begin(), labels[i].end());
    const double expected = ctc_loss_reference(probs, label);
    EXPECT_NEAR(loss, expected, 1e-4 * std::max(1.0, std::abs(expected))) << "label file " << i;
    losses.push_back(loss);
  }
  // Two different label files, two different losses (they were equal: both files were replaced
  // by zeros).
  EXPECT_GT(std::abs(losses[0] - losses[1]), 1e-3) << losses[0] << " vs " << losses[1];
}

TEST_F(CrnnLabels, LabelsNobodyGaveAreZero) {
  // Only the label's shape, no values: zeros, i.e. the empty sequence, whose loss is
  // -sum_t log p_t(blank).
  const CliRun r = replay(" --input label=1x4", "none");
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<std::vector<double>> probs;
  double loss = 0;
  heads("none", &probs, &loss);
  double expected = 0;
  for (const auto& p : probs) expected -= std::log(p[0]);
  EXPECT_NEAR(loss, expected, 1e-4 * std::max(1.0, std::abs(expected)));
}

TEST_F(ReplayCli, TrainingUsesGivenSoftmaxLabels) {
  CliRun m = run("model mlp -o " + path("mlp-symbol.json"));
  ASSERT_EQ(m.code, 0) << m.output;
  const std::vector<float> label = {2, 5, 9};
  save_npy_array(path("label.npy"), NDArray::from_vector(Shape({3}), label));
  CliRun r = run("replay " + path("mlp-symbol.json") +
                 " --input data=3x784 --input softmax_label=" + path("label.npy") +
                 " --train --warmup 0 --iters 1 --quiet --save-outputs " + path("out") +
                 " --save-grads " + path("grads.params"));
  ASSERT_EQ(r.code, 0) << r.output;
  // SoftmaxOutput's gradient with respect to its input is p - onehot(label) (grad_scale 1, no
  // normalisation), so the last layer's bias gradient is its sum over the batch.
  const std::vector<double> p = load_npy_array(path("out/0.npy")).to_doubles();
  ASSERT_EQ(p.size(), 30u);
  const LoadedArrays grads = load_arrays(path("grads.params"));
  ASSERT_TRUE(grads.contains("grad:fc3_bias")) << r.output;
  const std::vector<double> g = grads.get("grad:fc3_bias").to_doubles();
  ASSERT_EQ(g.size(), 10u);
  for (int k = 0; k < 10; ++k) {
    double expected = 0;
    for (int n = 0; n < 3; ++n) expected += p[n * 10 + k] - (label[n] == k ? 1.0 : 0.0);
    EXPECT_NEAR(g[k], expected, 1e-5) << "class " << k;
  }
}

TEST_F(ReplayCli, SaveGradsNeedsTrain) {
  CliRun m = run("model mlp -o " + path("mlp-symbol.json"));
  ASSERT_EQ(m.code, 0) << m.output;
  CliRun r = run("replay " + path("mlp-symbol.json") + " --input data=3x784 --iters 1 --quiet" +
                 " --save-grads " + path("g.params"));
  EXPECT_GE(r.code, 1) << r.output;
  EXPECT_LE(r.code, 127) << r.output;
  EXPECT_NE(r.output.find("--save-grads"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace weft
