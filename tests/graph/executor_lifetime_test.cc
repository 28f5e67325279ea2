// Executors that outlive their runtime (docs/LIFETIMES.md): destroyed after shutdown() or
// Runtime::reset() with passes still queued, they free their arena, arrays and pool safely
// (checked under AddressSanitizer); using one afterwards is a clear error; and a program that
// exits with an executor alive and a pass queued exits cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "graph/executor.h"
#include "graph/models.h"
#include "ndarray/ndarray.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"
#include "tests/ndarray/child_process.h"

namespace weft::graph {
namespace {

constexpr int64_t kBatch = 8;

std::unique_ptr<Executor> bind_mlp(GradReq grad_req) {
  auto g = std::make_shared<const Graph>(models::build("mlp").to_graph());
  BindOptions opts;
  opts.inputs = models::default_inputs("mlp", kBatch);
  opts.default_grad_req = grad_req;
  auto exec = Executor::bind(g, opts);
  for (const std::string& name : exec->arg_names()) {
    if (name == "softmax_label") continue;
    NDArray a = exec->arg(name);
    NDArray::uniform(a.shape(), -0.5, 0.5).copy_to(a);
  }
  return exec;
}

// The head is a softmax: every row of the output is a distribution (a property known without
// weft's kernels).
void expect_rows_are_distributions(const NDArray& probs) {
  ASSERT_EQ(probs.ndim(), 2);
  const std::vector<float> p = probs.to_vector<float>();
  const int64_t rows = probs.shape()[0], cols = probs.shape()[1];
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_GE(p[r * cols + c], 0.0f);
      sum += p[r * cols + c];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

TEST(ExecutorLifetime, OutlivesShutdownWithPassesQueuedAndIsFreedAfterwards) {
  auto exec = bind_mlp(GradReq::kWrite);
  exec->forward(true);
  exec->backward();
  expect_rows_are_distributions(exec->outputs()[0]);
  for (int i = 0; i < 20; ++i) {  // still queued when shutdown() starts
    exec->forward(true);
    exec->backward();
  }
  NDArray output = exec->outputs()[0];
  NDArray grad = exec->grad(exec->arg_names()[1]);
  shutdown();
  EXPECT_FALSE(Runtime::alive());
  EXPECT_THROW(exec->forward(), Error);
  EXPECT_THROW(exec->backward(), Error);
  output = NDArray();
  // A new runtime is in use when the executor goes.
  NDArray x = NDArray::from_vector<float>(Shape{3}, {1, 2, 3}) * 2.0;
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  exec.reset();
  grad = NDArray();
  // The new runtime still works after the old executor freed everything.
  auto again = bind_mlp(GradReq::kNull);
  again->forward();
  expect_rows_are_distributions(again->outputs()[0]);
}

TEST(ExecutorLifetime, DestroyedWhileNoRuntimeExists) {
  auto exec = bind_mlp(GradReq::kNull);
  for (int i = 0; i < 10; ++i) exec->forward();
  shutdown();
  ASSERT_FALSE(Runtime::alive());
  exec.reset();  // no runtime at all now: nothing may be created for this
  EXPECT_FALSE(Runtime::alive());
}

TEST(ExecutorLifetime, OutlivesRuntimeReset) {
  auto exec = bind_mlp(GradReq::kWrite);
  for (int i = 0; i < 10; ++i) {
    exec->forward(true);
    exec->backward();
  }
  Runtime::reset(RuntimeConfig{});
  EXPECT_THROW(exec->forward(), Error);
  exec.reset();
  auto fresh = bind_mlp(GradReq::kNull);
  fresh->forward();
  expect_rows_are_distributions(fresh->outputs()[0]);
}

constexpr const char* kChildEnv = "WEFT_EXECUTOR_LIFETIME_CHILD";
constexpr const char* kChildMarker = "executor lifetime child: passes queued";

// The child: an executor with forward and backward passes queued at exit, never destroyed
// ("keep": reachable from a static pointer, so not a leak) or destroyed by static destruction
// ("static").
TEST(ExecutorLifetimeExitChild, ExitsWithPassesQueued) {
  const char* mode = std::getenv(kChildEnv);
  if (mode == nullptr) GTEST_SKIP() << "runs only as the child of ExitWithAnExecutorAliveIsClean";
  static std::unique_ptr<Executor> in_static_storage;
  std::unique_ptr<Executor> exec = bind_mlp(GradReq::kWrite);
  for (int i = 0; i < 30; ++i) {
    exec->forward(true);
    exec->backward();
  }
  std::printf("%s\n", kChildMarker);
  std::fflush(stdout);
  if (std::string(mode) == "keep") {
    static Executor* never_destroyed = nullptr;
    never_destroyed = exec.release();
  } else {
    in_static_storage = std::move(exec);
  }
  std::exit(0);
}

TEST(ExecutorLifetime, ExitWithAnExecutorAliveIsClean) {
  for (int run = 0; run < 10; ++run) {
    const std::string mode = run % 2 == 0 ? "keep" : "static";
    std::string output;
    const int status = testing::run_child("ExecutorLifetimeExitChild.ExitsWithPassesQueued",
                                          kChildEnv, mode, output);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "run " << run << " (" << mode << "): " << testing::describe_status(status) << "\n"
        << output;
    ASSERT_NE(output.find(kChildMarker), std::string::npos) << "the child did not run its body:\n"
                                                            << output;
  }
}

}  // namespace
}  // namespace weft::graph
