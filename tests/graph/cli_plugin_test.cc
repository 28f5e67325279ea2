// `--plugin PATH` of `weft replay`, `weft info` and `weft plan`: plugins load before the graph is
// read, so a graph using a plugin's operator runs (checked against 2 * input, the test plugin's
// operator); a missing file, a file that is no library, a library that is no weft plugin and a
// plugin of another ABI version end in a clean error naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ndarray/io.h"
#include "tests/graph/cli_run.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;

// The plugins tests/capi builds (weft_test_plugin registers plugin_double: out = 2 * data):
// given by the build as WEFT_TEST_PLUGIN_DIR, else found beside the weft program in the usual
// build tree (BUILD/tools/weft, BUILD/tests/capi/*.so).
fs::path capi_plugin(const std::string& name) {
#if defined(WEFT_TEST_PLUGIN_DIR)
  return fs::path(WEFT_TEST_PLUGIN_DIR) / (name + ".so");
#elif defined(WEFT_CLI_PATH)
  return fs::path(WEFT_CLI_PATH).parent_path().parent_path() / "tests" / "capi" / (name + ".so");
#else
  return fs::path(name + ".so");
#endif
}

// data -> plugin_double, MXNet 1.9.1 symbol JSON.
constexpr const char* kDoubleGraph = R"({
  "nodes": [
    {"op": "null", "name": "data", "inputs": []},
    {"op": "plugin_double", "name": "double0", "inputs": [[0, 0, 0]]}
  ],
  "arg_nodes": [0],
  "node_row_ptr": [0, 1, 2],
  "heads": [[1, 0, 0]],
  "attrs": {"mxnet_version": ["int", 10901]}
})";

class CliPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef WEFT_CLI_PATH
    GTEST_SKIP() << "the weft program is not built (WEFT_BUILD_TOOLS=OFF)";
#endif
    dir_ = fs::temp_directory_path() / ("weft_cli_plugin_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(path("double-symbol.json")) << kDoubleGraph;
    std::ofstream(path("text.so")) << "not a shared library\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // The tests/capi plugin `name`, or skips the test when that tree was not built.
  static std::string plugin_or_skip(const std::string& name) {
    const fs::path p = capi_plugin(name);
    return fs::exists(p) ? p.string() : std::string();
  }
  fs::path dir_;
};

// A failed load: exit status 1 (as the other input errors), no signal, the message naming the
// flag, the file and `reason`.
void expect_load_error(const std::string& args, const std::string& file,
                       const std::string& reason) {
  SCOPED_TRACE("weft " + args);
  const CliRun r = run_cli(args);
  EXPECT_EQ(r.signal, 0) << r.output;
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--plugin"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(file), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(reason), std::string::npos) << r.output;
}

TEST_F(CliPlugin, EveryCommandNamesAMissingPluginFile) {
  const std::string missing = path("no_such_plugin.so");
  const std::string graph = path("double-symbol.json");
  for (const std::string& cmd : {"replay " + graph + " --iters 1 --warmup 0 --input data=2x3",
                                 "info " + graph, "plan " + graph + " --input data=2x3"}) {
    expect_load_error(cmd + " --plugin " + missing, missing, "could not be loaded");
  }
}

TEST_F(CliPlugin, FileThatIsNoLibraryIsAnError) {
  const std::string text = path("text.so");
  expect_load_error("info " + path("double-symbol.json") + " --plugin " + text, text,
                    "could not be loaded");
}

TEST_F(CliPlugin, EmptyPathIsAnError) {
  const CliRun r = run_cli("info " + path("double-symbol.json") + " --plugin ''");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("--plugin: the path is empty"), std::string::npos) << r.output;
}

TEST_F(CliPlugin, LibraryWithoutEntryPointsIsNotAPlugin) {
  const std::string lib = plugin_or_skip("weft_not_a_plugin");
  if (lib.empty()) GTEST_SKIP() << "tests/capi's plugins are not built: " << capi_plugin("x");
  expect_load_error("info " + path("double-symbol.json") + " --plugin " + lib, lib,
                    "is not a weft plugin");
}

TEST_F(CliPlugin, OtherAbiVersionIsRefused) {
  const std::string lib = plugin_or_skip("weft_bad_version_plugin");
  if (lib.empty()) GTEST_SKIP() << "tests/capi's plugins are not built: " << capi_plugin("x");
  expect_load_error("replay " + path("double-symbol.json") + " --input data=2x3 --plugin " + lib,
                    lib, "C ABI version");
}

TEST_F(CliPlugin, GraphUsingThePluginOperatorNeedsThePlugin) {
  const CliRun r = run_cli("info " + path("double-symbol.json"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("plugin_double"), std::string::npos) << r.output;
}

TEST_F(CliPlugin, ReplayRunsThePluginOperator) {
  const std::string lib = plugin_or_skip("weft_test_plugin");
  if (lib.empty()) GTEST_SKIP() << "tests/capi's plugins are not built: " << capi_plugin("x");
  const std::vector<float> x = {-1.5f, 0.25f, 3.0f, 7.5f, -0.125f, 1e-3f};
  save_npy_array(path("x.npy"), NDArray::from_vector(Shape({2, 3}), x));
  // Given twice: the second load of the same library is a no-op, not a duplicate registration.
  const CliRun r = run_cli("replay " + path("double-symbol.json") + " --plugin " + lib +
                           " --plugin " + lib + " --input data=" + path("x.npy") +
                           " --warmup 0 --iters 2 --quiet --save-outputs " + path("out"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<double> y = load_npy_array(path("out/0.npy")).to_doubles();
  ASSERT_EQ(y.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], 2.0 * x[i]) << "element " << i;
}

TEST_F(CliPlugin, InfoAndPlanSeeThePluginOperator) {
  const std::string lib = plugin_or_skip("weft_test_plugin");
  if (lib.empty()) GTEST_SKIP() << "tests/capi's plugins are not built: " << capi_plugin("x");
  const CliRun info = run_cli("info --plugin " + lib + " " + path("double-symbol.json"));
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.output.find("plugin_double"), std::string::npos) << info.output;
  const CliRun plan =
      run_cli("plan --plugin " + lib + " --input data=4x5 " + path("double-symbol.json"));
  ASSERT_EQ(plan.code, 0) << plan.output;
}

}  // namespace
}  // namespace weft::testing
