// read_environment: parsing and validation of the WEFT_* variables.
#include "base/env.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "tests/base/scoped_env.h"

namespace weft::testing {
namespace {

/// The message of the ValueError read_environment() throws, or "<none>".
std::string read_error() {
  try {
    read_environment();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "<none>";
}

/// Every WEFT_* variable unset for the test's duration.
class EnvTest : public ::testing::Test {
 protected:
  ScopedEnv engine_{"WEFT_ENGINE", std::nullopt};
  ScopedEnv workers_{"WEFT_CPU_WORKERS", std::nullopt};
  ScopedEnv threads_{"WEFT_NUM_THREADS", std::nullopt};
  ScopedEnv profile_{"WEFT_PROFILE", std::nullopt};
};

TEST_F(EnvTest, UnsetVariablesAreAbsent) {
  Environment env = read_environment();
  EXPECT_FALSE(env.engine.has_value());
  EXPECT_FALSE(env.cpu_workers.has_value());
  EXPECT_FALSE(env.profile_path.has_value());
}

TEST_F(EnvTest, ReadsEngineKind) {
  {
    ScopedEnv set("WEFT_ENGINE", "sync");
    EXPECT_EQ(read_environment().engine, "sync");
  }
  {
    ScopedEnv set("WEFT_ENGINE", "threaded");
    EXPECT_EQ(read_environment().engine, "threaded");
  }
  EXPECT_FALSE(read_environment().engine.has_value()) << "ScopedEnv must restore the unset state";
}

TEST_F(EnvTest, ReadsCpuWorkers) {
  ScopedEnv set("WEFT_CPU_WORKERS", "3");
  EXPECT_EQ(read_environment().cpu_workers, 3);
}

TEST_F(EnvTest, ReadsThreadBudget) {
  EXPECT_FALSE(read_environment().num_threads.has_value());
  ScopedEnv set("WEFT_NUM_THREADS", "6");
  EXPECT_EQ(read_environment().num_threads, 6);
}

TEST_F(EnvTest, MalformedThreadBudgetThrowsValueErrorNamingVariable) {
  for (const char* bad : {"lots", "0", "-1", "2x", "5000"}) {
    SCOPED_TRACE(bad);
    ScopedEnv set("WEFT_NUM_THREADS", bad);
    const std::string message = read_error();
    EXPECT_NE(message.find("WEFT_NUM_THREADS"), std::string::npos) << message;
  }
}

TEST_F(EnvTest, ReadsProfilePath) {
  ScopedEnv set("WEFT_PROFILE", "/tmp/weft trace.json");
  EXPECT_EQ(read_environment().profile_path, "/tmp/weft trace.json");
}

TEST_F(EnvTest, UnknownEngineThrowsValueErrorNamingVariableAndValue) {
  ScopedEnv set("WEFT_ENGINE", "turbo");
  std::string message = read_error();
  EXPECT_NE(message.find("WEFT_ENGINE"), std::string::npos) << message;
  EXPECT_NE(message.find("turbo"), std::string::npos) << message;
}

TEST_F(EnvTest, MalformedCpuWorkersThrowsValueErrorNamingVariable) {
  for (const char* bad : {"abc", "0", "-2", "3x", "2.5", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    ScopedEnv set("WEFT_CPU_WORKERS", bad);
    std::string message = read_error();
    EXPECT_NE(message.find("WEFT_CPU_WORKERS"), std::string::npos) << message;
    EXPECT_NE(message.find(bad), std::string::npos) << message;
  }
}

TEST(ScopedEnvTest, RestoresPreviousValue) {
  ScopedEnv outer("WEFT_TEST_SCOPED_ENV", "outer");
  {
    ScopedEnv inner("WEFT_TEST_SCOPED_ENV", "inner");
    EXPECT_STREQ(std::getenv("WEFT_TEST_SCOPED_ENV"), "inner");
    {
      ScopedEnv cleared("WEFT_TEST_SCOPED_ENV", std::nullopt);
      EXPECT_EQ(std::getenv("WEFT_TEST_SCOPED_ENV"), nullptr);
    }
    EXPECT_STREQ(std::getenv("WEFT_TEST_SCOPED_ENV"), "inner");
  }
  EXPECT_STREQ(std::getenv("WEFT_TEST_SCOPED_ENV"), "outer");
}

TEST_F(EnvTest, CudnnAlgorithmChoiceIsHeuristicOrMeasure) {
  ScopedEnv unset("WEFT_CUDNN_ALGO", std::nullopt);
  EXPECT_FALSE(read_environment().cudnn_algo.has_value());
  {
    ScopedEnv set("WEFT_CUDNN_ALGO", "measure");
    EXPECT_EQ(read_environment().cudnn_algo, "measure");
  }
  ScopedEnv set("WEFT_CUDNN_ALGO", "fastest");
  std::string message = read_error();
  EXPECT_NE(message.find("WEFT_CUDNN_ALGO"), std::string::npos) << message;
  EXPECT_NE(message.find("fastest"), std::string::npos) << message;
}

}  // namespace
}  // namespace weft::testing
