// `weft model` and `weft replay` end to end: save outputs and weights, replay from the saved
// weights and compare, a mismatch's exit code and message, and errors on bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "ndarray/io.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string output;
};

CliRun run(const std::string& args) {
#ifdef WEFT_CLI_PATH
  const std::string cmd = std::string(WEFT_CLI_PATH) + " " + args + " 2>&1";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
#else
  (void)args;
  return {};
#endif
}

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
  const std::string common = path("mlp-symbol.json") + " --input data=3x784 --warmup 1 --iters 2 --quiet";
  CliRun a = run("replay " + common + " --seed 5 --save-outputs " + path("ref") + " --save-params " +
              path("mlp-0000.params"));
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
  CliRun b = run("replay " + common + " --seed 5 --params " + path("mlp-0000.params") + " --compare " + path("ref"));
  EXPECT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("heads match"), std::string::npos) << b.output;

  // Other weights: exit code 3, naming the head and the worst element.
  CliRun c = run("replay " + common + " --seed 6 --compare " + path("ref"));
  EXPECT_EQ(c.code, 3) << c.output;
  EXPECT_NE(c.output.find("head 0 differs"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("worst element ["), std::string::npos) << c.output;
}

TEST_F(ReplayCli, ErrorsAreClearAndExitNonZero) {
  std::ofstream(path("bad.json")) << "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},\n"
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
  CliRun shape = run("replay " + path("mlp-symbol.json") + " --input data=3x784 --input softmax_label=5");
  EXPECT_NE(shape.code, 0);
  EXPECT_NE(shape.output.find("softmax"), std::string::npos) << shape.output;
  CliRun bad_spec = run("replay " + path("mlp-symbol.json") + " --input data");
  EXPECT_NE(bad_spec.code, 0);
  EXPECT_NE(bad_spec.output.find("NAME=SHAPE"), std::string::npos) << bad_spec.output;
  CliRun nofile = run("replay " + path("absent.json"));
  EXPECT_NE(nofile.code, 0);
  EXPECT_NE(nofile.output.find("absent.json"), std::string::npos) << nofile.output;
}

}  // namespace
}  // namespace weft
