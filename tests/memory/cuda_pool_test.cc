// PooledAllocator over real CUDA memory: per-stream reuse against real events (a block freed on
// stream A goes to stream B only after A's work up to the free has run), the memory limit and
// out-of-memory recovery, limit_fraction, empty_cache, and the pinned host allocator. Every test
// skips without a device.
#include <gtest/gtest.h>

#include "base/build_config.h"

#if WEFT_USE_CUDA

#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "memory/pooled_allocator.h"
#include "tests/devices/cuda_test_util.h"
#include "tests/memory/memory_test_util.h"

namespace weft {
namespace {

using testing::KiB;
using testing::MiB;
using testing::StreamGate;

constexpr Device kDev = Device::cuda(0);

PoolConfig cuda_pool_config(PoolStrategy strategy) {
  PoolConfig c;
  c.strategy = strategy;
  c.arenas = 1;  // exact statistics
  c.trace_counters = false;
  return c;
}

class CudaPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::cuda_device_usable()) GTEST_SKIP() << "no CUDA device";
    api_ = DeviceAPI::get(DeviceType::kCUDA);
    api_->set_device(kDev);
    a_ = api_->create_stream(kDev);
    b_ = api_->create_stream(kDev);
  }
  void TearDown() override {
    if (api_ == nullptr) return;
    for (const Stream& s : {a_, b_}) {
      api_->synchronize(s);
      api_->destroy_stream(s);
    }
  }
  DeviceAPI* api_ = nullptr;
  Stream a_, b_;
};

class CudaPoolStreamTest : public CudaPoolTest,
                           public ::testing::WithParamInterface<PoolStrategy> {};

INSTANTIATE_TEST_SUITE_P(AllStrategies, CudaPoolStreamTest,
                         ::testing::Values(PoolStrategy::kExact, PoolStrategy::kRound,
                                           PoolStrategy::kBestFit),
                         testing::strategy_test_name);

TEST_P(CudaPoolStreamTest, BlockFreedBehindPendingWorkIsReusedOnItsStreamButNotElsewhere) {
  // 4 MiB is one whole upstream block under every strategy (no split-off rest).
  const size_t bytes = 4 * MiB;
  PooledAllocator pool(make_cuda_allocator(0), cuda_pool_config(GetParam()));
  StreamGate gate;
  {
    DataPtr warm = pool.allocate_on(bytes, a_);  // a first block, so later ones are cache hits
  }
  api_->synchronize(a_);

  DataPtr x = pool.allocate_on(bytes, a_);
  void* const p = x.get();
  gate.enqueue(a_);                  // stream A is now held back...
  api_->memset(p, 0x7F, bytes, a_);  // ...with work on the block queued behind the gate
  x.reset();                         // freed on A: its event is behind the gate
  ASSERT_FALSE(gate.finished());

  DataPtr on_b = pool.allocate_on(bytes, b_);
  EXPECT_NE(on_b.get(), p) << "stream B got a block that stream A's pending work still uses";
  DataPtr on_a = pool.allocate_on(bytes, a_);
  EXPECT_EQ(on_a.get(), p) << "stream A did not reuse its own block at once";
  EXPECT_FALSE(gate.finished()) << "the test relies on A's work still pending";

  on_a.reset();  // freed on A again, still behind the gate
  gate.open();
  api_->synchronize(a_);
  DataPtr later = pool.allocate_on(bytes, b_);
  EXPECT_EQ(later.get(), p) << "after A's event completed the block is free for B";

  // The memory is usable from B: the memset queued on A happened before B sees the block.
  std::vector<uint8_t> back(16, 0);
  api_->copy(back.data(), Device::cpu(), later.get(), kDev, back.size(), b_);
  api_->synchronize(b_);
  for (uint8_t v : back) EXPECT_EQ(v, 0x7F);
}

TEST_F(CudaPoolTest, OutOfMemoryAtTheLimitNamesTheSizeAndThePool) {
  PoolConfig c = cuda_pool_config(PoolStrategy::kExact);
  c.limit_bytes = 8 * MiB;
  PooledAllocator pool(make_cuda_allocator(0), c);
  EXPECT_EQ(pool.limit(), 8 * MiB);
  std::vector<DataPtr> held;
  std::string message;
  for (int i = 0; i < 100 && message.empty(); ++i) {
    try {
      held.push_back(pool.allocate_on(MiB, a_));
    } catch (const OutOfMemory& e) {
      message = e.what();
    }
  }
  ASSERT_FALSE(message.empty()) << "no OutOfMemory within 100 MiB of a 8 MiB limit";
  EXPECT_EQ(held.size(), 8u);
  EXPECT_NE(message.find("1.00 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("8.00 MiB limit"), std::string::npos) << message;
  EXPECT_NE(message.find("in use 8.00 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("allocations"), std::string::npos) << message;
  EXPECT_LE(pool.stats().reserved_bytes, 8 * MiB);

  held.pop_back();  // one block back
  DataPtr again;
  ASSERT_NO_THROW(again = pool.allocate_on(MiB, a_));
  EXPECT_NE(again.get(), nullptr);
  EXPECT_THROW(pool.allocate_on(MiB, a_), OutOfMemory);
}

TEST_F(CudaPoolTest, OverTheLimitTheCacheIsReleasedAndTheRequestRetried) {
  PoolConfig c = cuda_pool_config(PoolStrategy::kExact);
  c.limit_bytes = 8 * MiB;
  PooledAllocator pool(make_cuda_allocator(0), c);
  {
    std::vector<DataPtr> held;
    for (int i = 0; i < 8; ++i) held.push_back(pool.allocate_on(MiB, a_));
  }
  api_->synchronize(a_);
  EXPECT_EQ(pool.stats().cached_bytes, 8 * MiB);
  DataPtr big = pool.allocate_on(6 * MiB, a_);  // needs the cache given back
  EXPECT_NE(big.get(), nullptr);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.oom_recoveries, 1u);
  EXPECT_LE(s.reserved_bytes, 8 * MiB);
  EXPECT_EQ(s.in_use_bytes, 6 * MiB);
}

TEST_F(CudaPoolTest, LimitFractionIsAShareOfTheDeviceMemory) {
  const int64_t total = api_->attribute(kDev, DeviceAttribute::kTotalMemory);
  ASSERT_GT(total, 0);
  PoolConfig c = cuda_pool_config(PoolStrategy::kBestFit);
  c.limit_fraction = 0.01;
  PooledAllocator pool(make_cuda_allocator(0), c);
  const auto expected = static_cast<size_t>(static_cast<double>(total) * 0.01);
  EXPECT_EQ(pool.limit(), expected);
  EXPECT_THROW(pool.allocate_on(expected + 4 * MiB, a_), OutOfMemory);
  DataPtr half;
  ASSERT_NO_THROW(half = pool.allocate_on(expected / 2, a_));
  EXPECT_LE(pool.stats().reserved_bytes, expected);

  c.limit_bytes = 2 * MiB;  // both set: the smaller applies
  PooledAllocator both(make_cuda_allocator(0), c);
  EXPECT_EQ(both.limit(), 2 * MiB);
}

TEST_F(CudaPoolTest, EmptyCacheGivesMemoryBack) {
  PooledAllocator pool(make_cuda_allocator(0), cuda_pool_config(PoolStrategy::kBestFit));
  {
    std::vector<DataPtr> held;
    for (int i = 0; i < 3; ++i) held.push_back(pool.allocate_on(4 * MiB, a_));
    DataPtr small = pool.allocate_on(100 * KiB, a_);
  }
  api_->synchronize(a_);
  PoolStats s = pool.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_GE(s.cached_bytes, 12 * MiB);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes);
  pool.empty_cache();
  s = pool.stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.upstream_frees, s.upstream_allocations);
  // Still usable afterwards.
  DataPtr again = pool.allocate_on(MiB, a_);
  EXPECT_NE(again.get(), nullptr);
}

TEST_F(CudaPoolTest, EmptyCacheWaitsForBlocksFreedBehindPendingWork) {
  PooledAllocator pool(make_cuda_allocator(0), cuda_pool_config(PoolStrategy::kExact));
  StreamGate gate;
  DataPtr x = pool.allocate_on(2 * MiB, a_);
  gate.enqueue(a_);
  api_->memset(x.get(), 0, 2 * MiB, a_);
  x.reset();
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gate.open();
  });
  pool.empty_cache();  // must wait for A's event rather than free memory still in use
  opener.join();
  EXPECT_TRUE(gate.finished());
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
}

TEST_F(CudaPoolTest, PoolBlocksAreDeviceMemory) {
  PooledAllocator pool(make_cuda_allocator(0), cuda_pool_config(PoolStrategy::kBestFit));
  DataPtr x = pool.allocate_on(1000, a_);
  EXPECT_EQ(x.device(), kDev);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, x.get()), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);
}

TEST_F(CudaPoolTest, PinnedHostMemoryAllocatesAndPools) {
  auto pinned = make_pinned_allocator();
  EXPECT_EQ(pinned->device().type, DeviceType::kCUDAHost);
  {
    DataPtr block = pinned->allocate(MiB);
    ASSERT_NE(block.get(), nullptr);
    std::memset(block.get(), 0x3C, MiB);  // host-writable
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, block.get()), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeHost);
    // Usable as the source of an asynchronous copy.
    void* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, MiB), cudaSuccess);
    api_->copy(d, kDev, block.get(), pinned->device(), MiB, a_);
    std::vector<uint8_t> back(MiB, 0);
    api_->copy(back.data(), Device::cpu(), d, kDev, MiB, a_);
    api_->synchronize(a_);
    cudaFree(d);
    EXPECT_EQ(back[0], 0x3C);
    EXPECT_EQ(back[MiB - 1], 0x3C);
  }
  PooledAllocator pool(pinned, cuda_pool_config(PoolStrategy::kExact));
  void* first = nullptr;
  {
    DataPtr a = pool.allocate(64 * KiB);
    first = a.get();
  }
  DataPtr b = pool.allocate(64 * KiB);
  EXPECT_EQ(b.get(), first);
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.upstream_allocations, 1u);
}

}  // namespace
}  // namespace weft

#else  // !WEFT_USE_CUDA

TEST(CudaPoolTest, ThisBuildHasNoCuda) { GTEST_SKIP() << "built without CUDA"; }

#endif  // WEFT_USE_CUDA
