// Hostile command lines for every `weft` subcommand: each ends in a clean error (exit status
// 1..127, never a signal) whose message names the flag and the value. Also the progress bar
// (drawn only on a terminal) and the kernel-library line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/build_config.h"
#include "tests/graph/cli_run.h"

#if WEFT_USE_ONEDNN
#include <oneapi/dnnl/dnnl_version.h>
#endif

namespace weft::testing {
namespace {

namespace fs = std::filesystem;

class CliArgs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
#ifdef WEFT_CLI_PATH
    dir_ =
        new fs::path(fs::temp_directory_path() / ("weft_cli_args_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    model_ = run_cli("model mlp -o " + (*dir_ / "mlp-symbol.json").string());
#endif
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
#ifndef WEFT_CLI_PATH
    GTEST_SKIP() << "the weft program is not built (WEFT_BUILD_TOOLS=OFF)";
#endif
    ASSERT_EQ(model_.code, 0) << model_.output;
  }
  static std::string mlp() { return (*dir_ / "mlp-symbol.json").string(); }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }

  static fs::path* dir_;
  static CliRun model_;
};

fs::path* CliArgs::dir_ = nullptr;
CliRun CliArgs::model_;

struct BadCase {
  std::string args;                   ///< after "weft "
  std::vector<std::string> expected;  ///< substrings of the message (flag, value)
};

void expect_clean_error(const BadCase& c) {
  SCOPED_TRACE("weft " + c.args);
  const CliRun r = run_cli(c.args);
  EXPECT_EQ(r.signal, 0) << "ended by signal " << r.signal << "\n" << r.output;
  EXPECT_GE(r.code, 1) << r.output;
  EXPECT_LE(r.code, 127) << r.output;
  for (const std::string& s : c.expected) {
    EXPECT_NE(r.output.find(s), std::string::npos) << "no '" << s << "' in:\n" << r.output;
  }
  // Our own errors, not an exception's bare what() such as "stoi".
  EXPECT_EQ(r.output.find("error: stoi"), std::string::npos) << r.output;
}

TEST_F(CliArgs, ReplayDeviceTextIsParsedStrictly) {
  const std::string base = "replay " + mlp() + " --input data=2x784 --iters 1 --warmup 0 ";
  for (const char* device :
       {"cuda:x", "cuda:-1", "cuda:+1", "cuda:1x", "cuda:", "cuda::0", "cuda:99999999999999999999",
        "cuda:2147483648", "tpu", "tpu:0", "CUDA:0", "cpu:1", "cpu:-0"}) {
    expect_clean_error({base + "--device '" + device + "'", {"--device", device}});
  }
}

TEST_F(CliArgs, ReplayRejectsDevicesItCannotRunOn) {
  const std::string base = "replay " + mlp() + " --input data=2x784 --iters 1 --warmup 0 ";
  // Page-locked host memory is not a device kernels run on (it used to run as cuda:0).
  expect_clean_error({base + "--device cuda_host:0", {"--device", "cuda_host:0"}});
  expect_clean_error({base + "--device cpu_pinned", {"--device", "cpu_pinned"}});
  // No machine has 1024 GPUs: either this build has no CUDA or there is no such device.
  expect_clean_error({base + "--device cuda:1023", {"--device", "cuda:1023"}});
  if (!WEFT_USE_CUDA) {
    expect_clean_error({base + "--device cuda:0", {"--device", "cuda:0", "without CUDA"}});
  }
}

TEST_F(CliArgs, ReplayNumericFlagsHaveRanges) {
  const std::string base = "replay " + mlp() + " --input data=2x784 --quiet ";
  for (const BadCase& c : std::vector<BadCase>{
           {"--iters -5", {"--iters", "-5"}},
           {"--iters 0", {"--iters", "0"}},
           {"--iters 1.5", {"--iters", "1.5"}},
           {"--iters abc", {"--iters", "abc"}},
           {"--iters 0x10", {"--iters", "0x10"}},
           {"--iters 99999999999", {"--iters", "99999999999"}},
           {"--warmup -1", {"--warmup", "-1"}},
           {"--warmup 1e3", {"--warmup", "1e3"}},
           {"--batch 0", {"--batch", "0"}},
           {"--batch -3", {"--batch", "-3"}},
           {"--batch 99999999999999999999", {"--batch", "99999999999999999999"}},
           {"--rtol -1", {"--rtol", "-1"}},
           {"--rtol nan", {"--rtol", "nan"}},
           {"--rtol inf", {"--rtol", "inf"}},
           {"--rtol 1e999", {"--rtol", "1e999"}},
           {"--atol -0.001", {"--atol", "-0.001"}},
           {"--atol x", {"--atol", "x"}},
           {"--seed -1", {"--seed", "-1"}},
           {"--seed 18446744073709551616", {"--seed", "18446744073709551616"}},
           {"--seed 12ab", {"--seed", "12ab"}},
       }) {
    expect_clean_error({base + c.args, c.expected});
  }
}

TEST_F(CliArgs, IntegersAreDecimal) {
  // CLI11 alone reads "010" as octal 8.
  const CliRun r =
      run_cli("replay " + mlp() + " --input data=2x784 --warmup 010 --iters 2 --quiet");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("over 2 iterations (10 warm-up)"), std::string::npos) << r.output;
}

TEST_F(CliArgs, InputSpecsRejectGarbageAndOverflow) {
  const std::string base = "replay " + mlp() + " --iters 1 --warmup 0 --quiet ";
  for (const BadCase& c : std::vector<BadCase>{
           {"--input data", {"--input", "data", "NAME=SHAPE"}},
           {"--input =2x784", {"--input", "=2x784"}},
           {"--input data=", {"--input", "data="}},
           {"--input data=-1x784", {"--input", "data=-1x784"}},
           {"--input data=0x784", {"--input", "data=0x784", "positive"}},
           {"--input data=axb", {"--input", "data=axb"}},
           {"--input data=2x", {"--input", "data=2x"}},
           {"--input data=2xx784", {"--input", "data=2xx784"}},
           {"--input 'data=()'", {"--input", "data=()"}},
           {"--input 'data=(2,784'", {"--input", "data=(2,784"}},
           {"--input data=2.5x784", {"--input", "data=2.5x784"}},
           {"--input data=99999999999999999999x784", {"--input", "data=99999999999999999999x784"}},
           // 2^62 x 2^62 overflows int64: rejected while parsing, before any allocation.
           {"--input data=4611686018427387904x4611686018427387904",
            {"--input", "data=4611686018427387904x4611686018427387904"}},
           {"--input data=2x784 --input data=3x784", {"--input", "given twice"}},
           {"--input nosuch=2x784", {"--input", "nosuch"}},
           {"--input data=" + path("absent.npy"), {"--input", "absent.npy"}},
       }) {
    expect_clean_error({base + c.args, c.expected});
  }
}

TEST_F(CliArgs, OtherSubcommandsCheckTheirFlags) {
  for (const BadCase& c : std::vector<BadCase>{
           {"plan " + mlp() + " --input data=2x784 --batch 0", {"--batch", "0"}},
           {"plan " + mlp() + " --input data=-2x784", {"--input", "data=-2x784"}},
           {"plan " + mlp() + " --input data=4611686018427387904x4611686018427387904",
            {"--input", "4611686018427387904"}},
           {"plan " + mlp() + " --input data=" + path("x.npy"), {"--input", "x.npy"}},
           {"model mlp -o " + path("m.json") + " --batch 0", {"--batch", "0"}},
           {"model mlp -o " + path("m.json") + " --batch -1", {"--batch", "-1"}},
           {"model nosuch", {"nosuch"}},
           {"info " + path("absent.json"), {"absent.json"}},
           {"ops NoSuchOp", {"NoSuchOp"}},
           {"demo --size -1", {"--size", "-1"}},
           {"demo --tiles 0", {"--tiles", "0"}},
           {"demo --repeats -2", {"--repeats", "-2"}},
           {"demo --seed -1", {"--seed", "-1"}},
           {"demo --workers 99999999999", {"--workers", "99999999999"}},
       }) {
    expect_clean_error(c);
  }
}

TEST_F(CliArgs, ProgressBarIsNotDrawnIntoAPipe) {
  // Without --quiet, output to a pipe (like `scripts/run.sh > log`) gets no '\r' redraws.
  const CliRun r = run_cli("replay " + mlp() + " --input data=2x784 --warmup 0 --iters 20");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[#"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("latency: median"), std::string::npos) << r.output;
}

TEST_F(CliArgs, ProgressBarIsDrawnOnATerminal) {
  // util-linux `script` runs the command on a pseudo-terminal.
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no `script`";
#ifdef WEFT_CLI_PATH
  const std::string log = path("tty.log");
  const std::string cmd = "script -qec \"" + std::string(WEFT_CLI_PATH) + " replay " + mlp() +
                          " --input data=2x784 --warmup 0 --iters 3\" " + log +
                          " >/dev/null 2>&1 </dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(log, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("] 3/3"), std::string::npos) << text;
#endif
}

TEST_F(CliArgs, ReplayInfoAndVersionNameTheKernelLibraries) {
  std::string expected = "CUDA off";
#if WEFT_USE_ONEDNN
  // The header's version, an independent reference for what the library reports at run time.
  const std::string onednn = "oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "." +
                             std::to_string(DNNL_VERSION_MINOR) + "." +
                             std::to_string(DNNL_VERSION_PATCH) + " (cpu";
#else
  const std::string onednn = "reference CPU kernels";
#endif
  if (WEFT_USE_CUDA) expected = ", CUDA ";
  const CliRun replay = run_cli("replay " + mlp() + " --input data=2x784 --iters 1 --quiet");
  ASSERT_EQ(replay.code, 0) << replay.output;
  EXPECT_EQ(replay.output.rfind("kernels: " + onednn, 0), 0u) << replay.output;
  EXPECT_NE(replay.output.find(expected), std::string::npos) << replay.output;
  const CliRun info = run_cli("info " + mlp());
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_EQ(info.output.rfind("kernels: " + onednn, 0), 0u) << info.output;
  for (const char* args : {"--version", "version"}) {
    const CliRun v = run_cli(args);
    EXPECT_EQ(v.code, 0) << v.output;
    EXPECT_NE(v.output.find(std::string("weft ") + WEFT_VERSION_STRING), std::string::npos)
        << v.output;
    EXPECT_NE(v.output.find("kernels: " + onednn), std::string::npos) << v.output;
  }
}

}  // namespace
}  // namespace weft::testing
