// Every registered op (hidden ones too) that has a CPU kernel has a CUDA kernel, except those on
// kNoCudaKernelYet. The list only shrinks: an op on it that has gained a CUDA kernel fails the
// test until it is taken off. Needs a CUDA build, not a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "base/build_config.h"
#include "ops/op.h"

namespace weft::testing {
namespace {

#if WEFT_USE_CUDA

// Ops with a CPU kernel and no CUDA kernel yet. Sorted; remove an entry when its kernel lands.
const std::set<std::string> kNoCudaKernelYet = {};

TEST(CudaCoverageTest, EveryOpWithACpuKernelHasACudaKernel) {
  std::vector<std::string> missing, gained;
  int with_cpu = 0, with_cuda = 0;
  for (const Op* op : OpRegistry::global().list()) {
    const bool cpu = op->has_kernel(DeviceType::kCPU);
    const bool cuda = op->has_kernel(DeviceType::kCUDA);
    with_cpu += cpu;
    with_cuda += cuda;
    const bool allowed = kNoCudaKernelYet.count(op->name()) != 0;
    if (cpu && !cuda && !allowed) missing.push_back(op->name());
    if (cuda && allowed) gained.push_back(op->name());
  }
  std::string m, g;
  for (const auto& n : missing) m += "\n  \"" + n + "\",";
  for (const auto& n : gained) g += "\n  \"" + n + "\",";
  EXPECT_TRUE(missing.empty()) << missing.size()
                               << " ops have a CPU kernel, no CUDA kernel and are not on "
                                  "kNoCudaKernelYet:"
                               << m;
  EXPECT_TRUE(gained.empty()) << gained.size()
                              << " ops on kNoCudaKernelYet have a CUDA kernel now; take them off "
                                 "the list:"
                              << g;
  std::printf(
      "[ coverage ] %d ops with a CPU kernel, %d with a CUDA kernel; kNoCudaKernelYet "
      "holds %zu\n",
      with_cpu, with_cuda, kNoCudaKernelYet.size());
}

TEST(CudaCoverageTest, AllowlistNamesRegisteredOps) {
  for (const auto& name : kNoCudaKernelYet) {
    const Op* op = OpRegistry::global().find(name);
    ASSERT_NE(op, nullptr) << "kNoCudaKernelYet names '" << name << "', which is not an op";
    EXPECT_EQ(op->name(), name) << "kNoCudaKernelYet names an alias: use the op's own name";
    EXPECT_TRUE(op->has_kernel(DeviceType::kCPU))
        << name << " has no CPU kernel: it does not belong on kNoCudaKernelYet";
  }
}

#else

TEST(CudaCoverageTest, NeedsACudaBuild) { GTEST_SKIP() << "built without CUDA"; }

#endif

}  // namespace
}  // namespace weft::testing
