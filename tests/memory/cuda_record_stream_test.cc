// PooledAllocator::record_stream on real CUDA streams: a block also used on a second stream is
// freed behind that stream's work (its stream waits on the device), and the engine's current
// stream decides where a block freed inside an operation was last used. Skips without a device.
#include <gtest/gtest.h>

#include "base/build_config.h"

#if WEFT_USE_CUDA

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "base/error.h"
#include "memory/allocator.h"
#include "memory/pooled_allocator.h"
#include "tests/devices/cuda_test_util.h"

namespace weft {
namespace {

constexpr Device kDev = Device::cuda(0);

std::shared_ptr<PooledAllocator> make_pool() {
  PoolConfig c;
  c.arenas = 1;
  c.trace_counters = false;
  return std::make_shared<PooledAllocator>(make_cuda_allocator(0), c);
}

TEST(CudaRecordStream, AFreedBlockIsOrderedBehindWorkOnEveryStreamThatUsedIt) {
  if (!testing::cuda_device_usable()) GTEST_SKIP() << "no CUDA device";
  DeviceAPI* api = DeviceAPI::get(DeviceType::kCUDA);
  Stream a = api->create_stream(kDev), b = api->create_stream(kDev);
  auto pool = make_pool();
  {
    testing::StreamGate gate;
    DataPtr block = pool->allocate_on(1 << 20, a);
    void* address = block.get();
    pool->record_stream(block, b);
    gate.enqueue(b);  // b's "use" of the block is still running
    block.reset();    // freed on a
    // Same stream: served at once, but a's later work now waits for b's.
    DataPtr again = pool->allocate_on(1 << 20, a);
    EXPECT_EQ(again.get(), address);
    std::atomic<int> flag{0};
    api->launch_host_func(a, &testing::set_flag, &flag);
    Event after = api->create_event(kDev);
    after.record(a);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(after.query()) << "stream a ran past the free before b's work on the block ended";
    EXPECT_EQ(flag.load(), 0);
    gate.open();
    after.synchronize();
    EXPECT_EQ(flag.load(), 1);
  }
  api->synchronize(a);
  api->synchronize(b);
  api->destroy_stream(a);
  api->destroy_stream(b);
}

TEST(CudaRecordStream, ABlockFreedUnderACurrentStreamIsHeldForThatStreamsWork) {
  if (!testing::cuda_device_usable()) GTEST_SKIP() << "no CUDA device";
  DeviceAPI* api = DeviceAPI::get(DeviceType::kCUDA);
  Stream a = api->create_stream(kDev), b = api->create_stream(kDev);
  auto pool = make_pool();
  {
    testing::StreamGate gate;
    DataPtr block = pool->allocate(1 << 20);  // the null stream: allocated outside any op
    void* address = block.get();
    gate.enqueue(a);  // an operation on a uses the block and is still running
    {
      CurrentStreamScope inside_op(a);
      block.reset();  // freed by that operation's worker: ordered on a
    }
    DataPtr other = pool->allocate_on(1 << 20, b);
    EXPECT_NE(other.get(), address) << "stream b got a block a's pending work still uses";
    gate.open();
  }
  api->synchronize(a);
  api->destroy_stream(a);
  api->destroy_stream(b);
}

TEST(CudaRecordStream, RefusesAPointerFromAnotherAllocator) {
  if (!testing::cuda_device_usable()) GTEST_SKIP() << "no CUDA device";
  auto pool = make_pool();
  DataPtr raw = make_cuda_allocator(0)->allocate(256);
  const Stream null_stream{kDev, nullptr};
  EXPECT_THROW(pool->record_stream(raw, null_stream), ValueError);
}

}  // namespace
}  // namespace weft

#endif  // WEFT_USE_CUDA
