// The CUDA device and pinned host allocators: allocation on a machine with a GPU, the documented
// errors on one without (OutOfMemory) and in a build without CUDA (NotImplemented).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "base/build_config.h"
#include "base/error.h"
#include "devices/device_api.h"
#include "memory/allocator.h"
#include "memory/pooled_allocator.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::is_aligned;
using testing::MiB;

// Whether a CUDA device can be used by this process.
bool cuda_device_present() {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  return api != nullptr && api->device_count() > 0;
}

#if WEFT_USE_CUDA

TEST(CudaAllocatorTest, AllocatesAlignedDeviceMemory) {
  if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device on this machine";
  auto cuda = make_cuda_allocator(0);
  EXPECT_EQ(cuda->device(), Device::cuda(0));
  for (size_t alignment : {size_t{64}, size_t{256}, size_t{4096}}) {
    DataPtr block = cuda->allocate(1000, alignment);
    ASSERT_NE(block.get(), nullptr);
    EXPECT_TRUE(is_aligned(block.get(), alignment));
    EXPECT_GE(block.size(), 1000u);
    EXPECT_EQ(block.device(), Device::cuda(0));
  }
  DataPtr a = cuda->allocate(0);
  DataPtr b = cuda->allocate(0);
  EXPECT_NE(a.get(), b.get());
}

TEST(CudaAllocatorTest, PooledDeviceMemoryIsReused) {
  if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device on this machine";
  PooledAllocator pool(make_cuda_allocator(0), testing::pool_config(PoolStrategy::kBestFit));
  DataPtr a = pool.allocate(MiB);
  void* const p = a.get();
  EXPECT_EQ(a.device(), Device::cuda(0));
  a.reset();
  DataPtr b = pool.allocate(MiB);
  EXPECT_EQ(b.get(), p);
  b.reset();
  pool.empty_cache();
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
}

TEST(PinnedAllocatorTest, AllocatesAlignedPageLockedHostMemory) {
  if (!cuda_device_present()) GTEST_SKIP() << "no CUDA device on this machine";
  auto pinned = make_pinned_allocator();
  EXPECT_EQ(pinned->device().type, DeviceType::kCUDAHost);
  DataPtr block = pinned->allocate(10000, 4096);
  ASSERT_NE(block.get(), nullptr);
  EXPECT_TRUE(is_aligned(block.get(), 4096));
  EXPECT_EQ(block.device().type, DeviceType::kCUDAHost);
  testing::fill_pattern(block.get(), 10000, 1);  // host-accessible
  EXPECT_TRUE(testing::has_pattern(block.get(), 10000, 1));
}

TEST(CudaAllocatorTest, AllocationWithoutADeviceThrowsOutOfMemory) {
  if (cuda_device_present()) GTEST_SKIP() << "a CUDA device is present";
  auto cuda = make_cuda_allocator(0);
  try {
    DataPtr block = cuda->allocate(12345);
    ADD_FAILURE() << "cudaMalloc succeeded without a device";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("12345"), std::string::npos) << e.what();
  }
  auto pinned = make_pinned_allocator();
  EXPECT_THROW(pinned->allocate(4096), OutOfMemory);
}

TEST(CudaAllocatorTest, PoolOverAnAbsentDeviceThrowsOutOfMemoryNamingTheSize) {
  if (cuda_device_present()) GTEST_SKIP() << "a CUDA device is present";
  PooledAllocator pool(make_cuda_allocator(0), testing::pool_config(PoolStrategy::kBestFit));
  try {
    DataPtr block = pool.allocate(5000);
    ADD_FAILURE() << "allocation succeeded without a device";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("5000 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(pool.stats().oom_recoveries, 1u);
}

TEST(CudaAllocatorTest, NegativeOrdinalThrowsValueError) {
  EXPECT_THROW(make_cuda_allocator(-1), ValueError);
}

#else  // !WEFT_USE_CUDA

TEST(CudaAllocatorTest, BuildWithoutCudaThrowsNotImplemented) {
  EXPECT_FALSE(cuda_device_present());
  try {
    make_cuda_allocator(0);
    ADD_FAILURE() << "make_cuda_allocator succeeded in a build without CUDA";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_pinned_allocator(), NotImplemented);
}

#endif  // WEFT_USE_CUDA

}  // namespace
}  // namespace weft
