// EngineConfig::from_environment and Engine::create: choosing and validating an engine.
#include <gtest/gtest.h>

#include <string>

#include "engine/cpu_budget.h"
#include "engine/engine.h"
#include "tests/base/scoped_env.h"
#include "tests/engine/engine_test_util.h"

namespace weft::testing {
namespace {

/// Every WEFT_* variable the engine reads, unset for the test's duration.
class EngineConfigTest : public ::testing::Test {
 protected:
  ScopedEnv engine_{"WEFT_ENGINE", std::nullopt};
  ScopedEnv workers_{"WEFT_CPU_WORKERS", std::nullopt};
  ScopedEnv threads_{"WEFT_NUM_THREADS", std::nullopt};
  ScopedEnv profile_{"WEFT_PROFILE", std::nullopt};
  ScopedEnv profile_events_{"WEFT_PROFILE_MAX_EVENTS", std::nullopt};
};

/// The message of the ValueError EngineConfig::from_environment() throws, or "<none>".
std::string config_error() {
  try {
    EngineConfig::from_environment();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "<none>";
}

TEST_F(EngineConfigTest, EmptyEnvironmentGivesDefaults) {
  EngineConfig config = EngineConfig::from_environment();
  EngineConfig defaults;
  EXPECT_EQ(config.kind, EngineKind::kThreaded);
  EXPECT_EQ(config.kind, defaults.kind);
  EXPECT_EQ(config.cpu_workers, defaults.cpu_workers);
  EXPECT_EQ(config.cpu_priority_lane, defaults.cpu_priority_lane);
  EXPECT_EQ(config.profile_path, "");
}

TEST_F(EngineConfigTest, EnvironmentSelectsSyncEngineAndWorkers) {
  ScopedEnv kind("WEFT_ENGINE", "sync");
  ScopedEnv workers("WEFT_CPU_WORKERS", "3");
  EngineConfig config = EngineConfig::from_environment();
  EXPECT_EQ(config.kind, EngineKind::kSync);
  EXPECT_EQ(config.cpu_workers, 3);
  auto engine = Engine::create(config);
  EXPECT_EQ(engine->kind(), EngineKind::kSync);
}

TEST_F(EngineConfigTest, EnvironmentSelectsThreadedEngineWithWorkers) {
  ScopedEnv kind("WEFT_ENGINE", "threaded");
  ScopedEnv workers("WEFT_CPU_WORKERS", "3");
  EngineConfig config = EngineConfig::from_environment();
  EXPECT_EQ(config.kind, EngineKind::kThreaded);
  EXPECT_EQ(config.cpu_workers, 3);
  auto engine = Engine::create(config);
  EXPECT_EQ(engine->kind(), EngineKind::kThreaded);
  EXPECT_EQ(engine->num_workers(Device::cpu()), 3);
  run_with_deadline("engine destruction", [&] { engine.reset(); });
}

TEST_F(EngineConfigTest, EnvironmentSetsProfilePath) {
  ScopedEnv profile("WEFT_PROFILE", "/tmp/weft-config-test.json");
  EXPECT_EQ(EngineConfig::from_environment().profile_path, "/tmp/weft-config-test.json");
}

TEST_F(EngineConfigTest, MalformedEngineThrowsValueErrorNamingVariable) {
  ScopedEnv kind("WEFT_ENGINE", "naive");
  std::string message = config_error();
  EXPECT_NE(message.find("WEFT_ENGINE"), std::string::npos) << message;
}

TEST_F(EngineConfigTest, MalformedWorkersThrowsValueErrorNamingVariable) {
  for (const char* bad : {"many", "0", "-1", "4 "}) {
    SCOPED_TRACE(bad);
    ScopedEnv workers("WEFT_CPU_WORKERS", bad);
    std::string message = config_error();
    EXPECT_NE(message.find("WEFT_CPU_WORKERS"), std::string::npos) << message;
  }
}

TEST_F(EngineConfigTest, DefaultCpuWorkersIsOnePerCoreOfTheProcess) {
  auto engine = Engine::create(make_config(EngineKind::kThreaded, 0));
  EXPECT_EQ(engine->num_workers(Device::cpu()), process_cpu_cores());
  run_with_deadline("engine destruction", [&] { engine.reset(); });
}

TEST_F(EngineConfigTest, ThreadBudgetSetsTheDefaultWorkerCount) {
  EngineConfig config = make_config(EngineKind::kThreaded, 0);
  config.num_threads = 3;
  auto engine = Engine::create(config);
  EXPECT_EQ(engine->num_workers(Device::cpu()), 3);
  run_with_deadline("engine destruction", [&] { engine.reset(); });
  config.cpu_workers = 2;  // explicit workers win over the budget
  engine = Engine::create(config);
  EXPECT_EQ(engine->num_workers(Device::cpu()), 2);
  run_with_deadline("engine destruction", [&] { engine.reset(); });
}

TEST_F(EngineConfigTest, EnvironmentSetsThreadBudget) {
  EXPECT_EQ(EngineConfig::from_environment().num_threads, 0);
  ScopedEnv threads("WEFT_NUM_THREADS", "5");
  EXPECT_EQ(EngineConfig::from_environment().num_threads, 5);
}

TEST_F(EngineConfigTest, MalformedThreadBudgetThrowsValueErrorNamingVariable) {
  for (const char* bad : {"all", "0", "-2", "3 "}) {
    SCOPED_TRACE(bad);
    ScopedEnv threads("WEFT_NUM_THREADS", bad);
    std::string message = config_error();
    EXPECT_NE(message.find("WEFT_NUM_THREADS"), std::string::npos) << message;
  }
}

TEST_F(EngineConfigTest, InvalidThreadBudgetIsRejected) {
  EngineConfig config = make_config(EngineKind::kThreaded, 0);
  config.num_threads = -1;
  EXPECT_THROW(Engine::create(config), ValueError);
}

TEST_F(EngineConfigTest, NegativeWorkerCountIsRejected) {
  EXPECT_THROW(Engine::create(make_config(EngineKind::kThreaded, -1)), ValueError);
}

TEST_F(EngineConfigTest, EnvironmentSetsProfileEventBound) {
  EXPECT_EQ(EngineConfig::from_environment().profile_max_events, EngineConfig().profile_max_events);
  ScopedEnv events("WEFT_PROFILE_MAX_EVENTS", "5000");
  EXPECT_EQ(EngineConfig::from_environment().profile_max_events, 5000);
}

TEST_F(EngineConfigTest, MalformedProfileEventBoundThrowsValueErrorNamingVariable) {
  for (const char* bad : {"lots", "0", "-5", "12x"}) {
    SCOPED_TRACE(bad);
    ScopedEnv events("WEFT_PROFILE_MAX_EVENTS", bad);
    std::string message = config_error();
    EXPECT_NE(message.find("WEFT_PROFILE_MAX_EVENTS"), std::string::npos) << message;
  }
}

TEST_F(EngineConfigTest, InvalidBoundsAreRejected) {
  EngineConfig config = make_config(EngineKind::kSync, 0);
  config.profile_max_events = 0;
  EXPECT_THROW(Engine::create(config), ValueError);
  config = make_config(EngineKind::kSync, 0);
  config.max_retained_errors = -1;
  EXPECT_THROW(Engine::create(config), ValueError);
}

TEST_F(EngineConfigTest, CreateUsesEnvironmentByDefault) {
  ScopedEnv kind("WEFT_ENGINE", "sync");
  auto engine = Engine::create();
  EXPECT_EQ(engine->kind(), EngineKind::kSync);
  EXPECT_EQ(engine->num_workers(Device::cpu()), 0);
}

}  // namespace
}  // namespace weft::testing
