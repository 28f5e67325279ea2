// The runtime's thread budget (Note [Thread budget] in engine/cpu_budget.cc): the budget bounds
// every kernel's intra-op threads, kernels share it, and a kernel leaves the OpenMP state of the
// thread it ran on as it found it (Note [Primitive thread count] in ops/cpu/dnnl_util.cc).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>

#include "engine/cpu_budget.h"
#include "ndarray/ndarray.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"
#include "ops/cpu/dnnl_util.h"

namespace weft::testing {
namespace {

class ThreadBudgetTest : public ::testing::Test {
 protected:
  ~ThreadBudgetTest() override { Runtime::reset(RuntimeConfig{}); }
  static void use(int budget, IntraOpPolicy policy = IntraOpPolicy::kAdaptive, int threads = 0) {
    RuntimeConfig config;
    config.engine.num_threads = budget;
    config.intra_op_policy = policy;
    config.intra_op_threads = threads;
    Runtime::reset(config);
  }
};

TEST_F(ThreadBudgetTest, TheBudgetSetsWorkersAndBoundsKernels) {
  use(3);
  Runtime& rt = Runtime::get();
  EXPECT_EQ(rt.thread_budget(), 3);
  EXPECT_EQ(rt.engine().num_workers(Device::cpu()), 3);
  const int one = rt.kernel_started();
  EXPECT_GE(one, 1);
  EXPECT_LE(one, 3);
  // A second kernel running at the same time shares the budget: together at most the budget
  // (each at least one thread).
  const int two = rt.kernel_started();
  EXPECT_GE(two, 1);
  EXPECT_LE(two, std::max(1, 3 / 2));
  rt.kernel_finished();
  rt.kernel_finished();
}

TEST_F(ThreadBudgetTest, DefaultBudgetIsTheProcessCores) {
  use(0);
  EXPECT_EQ(Runtime::get().thread_budget(), process_cpu_cores());
}

TEST_F(ThreadBudgetTest, FixedPolicyIgnoresTheShare) {
  use(4, IntraOpPolicy::kFixed, 3);
  Runtime& rt = Runtime::get();
  EXPECT_EQ(rt.kernel_started(), 3);
  EXPECT_EQ(rt.kernel_started(), 3);
  rt.kernel_finished();
  rt.kernel_finished();
}

#if WEFT_USE_ONEDNN
TEST_F(ThreadBudgetTest, KernelsPlanForTheirThreadsAndRestoreTheThread) {
  use(2, IntraOpPolicy::kFixed, 1);
  Runtime& rt = Runtime::get();
  omp_set_num_threads(2);
  EXPECT_EQ(dnnl_util::max_kernel_threads(), 2);
  EXPECT_EQ(dnnl_util::planning_threads(), 2) << "outside kernels: the most threads";
  EXPECT_EQ(rt.kernel_started(), 1);
  EXPECT_EQ(dnnl_util::planning_threads(), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
  {
    // A push from inside a kernel sizes workspaces like one from outside.
    dnnl_util::WidestPlans widest;
    EXPECT_EQ(dnnl_util::planning_threads(), 2);
  }
  EXPECT_EQ(dnnl_util::planning_threads(), 1);
  rt.kernel_finished();
  EXPECT_EQ(dnnl_util::planning_threads(), 2);
  EXPECT_EQ(omp_get_max_threads(), 2) << "the thread's OpenMP count is restored";
}

TEST_F(ThreadBudgetTest, ATinyKernelRunInlineLeavesTheCallersOpenMPCount) {
  // A 1-element add runs on the calling thread (its inputs are ready); with one thread per kernel
  // it must not leave this thread at one OpenMP thread: code outside kernels (descriptors made
  // while binding) would then plan for one thread while the kernels get two.
  use(2, IntraOpPolicy::kFixed, 1);
  omp_set_num_threads(2);
  NDArray a = NDArray::full(Shape{1}, 1.0);
  NDArray b = NDArray::full(Shape{1}, 2.0);
  NDArray c = a + b;
  EXPECT_EQ(c.item(), 3.0);
  EXPECT_EQ(omp_get_max_threads(), 2);
  EXPECT_EQ(dnnl_util::planning_threads(), 2);
}
#endif

}  // namespace
}  // namespace weft::testing
