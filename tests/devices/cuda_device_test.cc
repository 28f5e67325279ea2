// The CUDA DeviceAPI (copies, memset, host functions, stream priorities, the current device,
// pooled events) and the per-stream cuBLAS/cuDNN handles. Every test skips without a device; in
// a build without CUDA there is nothing to test beyond DeviceAPI::get throwing.
#include <gtest/gtest.h>

#include "base/build_config.h"
#include "base/error.h"
#include "devices/device_api.h"
#include "tests/devices/cuda_test_util.h"

#if WEFT_USE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "devices/cuda_handles.h"

namespace weft::testing {
namespace {

// Device memory freed at scope exit.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes, int device = 0) {
    cudaSetDevice(device);
    EXPECT_EQ(cudaMalloc(&ptr, bytes), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  void* ptr = nullptr;
};

// Page-locked host memory freed at scope exit.
struct PinnedBuffer {
  explicit PinnedBuffer(size_t bytes) { EXPECT_EQ(cudaMallocHost(&ptr, bytes), cudaSuccess); }
  ~PinnedBuffer() { cudaFreeHost(ptr); }
  void* ptr = nullptr;
};

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_usable()) GTEST_SKIP() << "no CUDA device";
    api_ = DeviceAPI::get(DeviceType::kCUDA);
    api_->set_device(kDev);
    stream_ = api_->create_stream(kDev);
  }
  void TearDown() override {
    if (api_ == nullptr) return;
    for (Stream& s : extra_) {
      api_->synchronize(s);
      api_->destroy_stream(s);
    }
    api_->synchronize(stream_);
    api_->destroy_stream(stream_);
  }
  Stream new_stream(int priority = 0) {
    extra_.push_back(api_->create_stream(kDev, priority));
    return extra_.back();
  }

  static constexpr Device kDev = Device::cuda(0);
  DeviceAPI* api_ = nullptr;
  Stream stream_;
  std::vector<Stream> extra_;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST_F(CudaDeviceTest, CountAndAttributes) {
  EXPECT_GE(api_->device_count(), 1);
  EXPECT_EQ(api_->attribute(kDev, DeviceAttribute::kExists), 1);
  EXPECT_GT(api_->attribute(kDev, DeviceAttribute::kComputeUnits), 0);
  EXPECT_GT(api_->attribute(kDev, DeviceAttribute::kTotalMemory), int64_t{1} << 30);
  EXPECT_EQ(api_->attribute(Device::cuda(api_->device_count()), DeviceAttribute::kExists), 0);
  EXPECT_EQ(device_memory_capacity(kDev),
            static_cast<size_t>(api_->attribute(kDev, DeviceAttribute::kTotalMemory)));
}

TEST_F(CudaDeviceTest, CopiesHostToDeviceToDeviceToHost) {
  const size_t n = (size_t{1} << 20) + 13;  // not a multiple of anything
  const auto src = pattern(n, 3);
  DeviceBuffer a(n), b(n);
  std::vector<uint8_t> back(n, 0);
  api_->copy(a.ptr, kDev, src.data(), Device::cpu(), n, stream_);  // pageable host memory
  api_->copy(b.ptr, kDev, a.ptr, kDev, n, stream_);
  api_->copy(back.data(), Device::cpu(), b.ptr, kDev, n, stream_);
  api_->synchronize(stream_);
  EXPECT_EQ(back, src);

  // Page-locked memory: asynchronous both ways.
  PinnedBuffer pinned_in(n), pinned_out(n);
  const auto src2 = pattern(n, 99);
  std::memcpy(pinned_in.ptr, src2.data(), n);
  const Device host_pinned{DeviceType::kCUDAHost, 0};
  api_->copy(a.ptr, kDev, pinned_in.ptr, host_pinned, n, stream_);
  api_->copy(pinned_out.ptr, host_pinned, a.ptr, kDev, n, stream_);
  api_->synchronize(stream_);
  EXPECT_EQ(std::memcmp(pinned_out.ptr, src2.data(), n), 0);
  api_->copy(nullptr, kDev, nullptr, kDev, 0, stream_);  // zero bytes: nothing to do
}

TEST_F(CudaDeviceTest, CopyIsOrderedOnTheStream) {
  const size_t n = 4096;
  DeviceBuffer d(n);
  PinnedBuffer out(n);
  std::memset(out.ptr, 0, n);
  const auto src = pattern(n, 5);
  StreamGate gate;
  gate.enqueue(stream_);
  api_->copy(d.ptr, kDev, src.data(), Device::cpu(), n, stream_);
  api_->copy(out.ptr, Device{DeviceType::kCUDAHost, 0}, d.ptr, kDev, n, stream_);
  std::atomic<int> done{0};
  api_->launch_host_func(stream_, &set_flag, &done);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(done.load(), 0) << "work after a blocked host function ran early";
  gate.open();
  api_->synchronize(stream_);
  EXPECT_EQ(done.load(), 1);
  EXPECT_EQ(std::memcmp(out.ptr, src.data(), n), 0);
}

TEST_F(CudaDeviceTest, MemsetSetsEveryByte) {
  const size_t n = 100003;
  DeviceBuffer d(n);
  api_->memset(d.ptr, 0xAB, n, stream_);
  api_->memset(d.ptr, 0x11, 10, stream_);  // a prefix, ordered after the first
  std::vector<uint8_t> back(n);
  api_->copy(back.data(), Device::cpu(), d.ptr, kDev, n, stream_);
  api_->synchronize(stream_);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(back[i], i < 10 ? 0x11 : 0xAB) << "byte " << i;
  }
}

TEST_F(CudaDeviceTest, HostFunctionRunsAfterEarlierWork) {
  const size_t n = 1 << 16;
  DeviceBuffer d(n);
  PinnedBuffer out(n);
  std::memset(out.ptr, 0, n);
  api_->memset(d.ptr, 0x5A, n, stream_);
  api_->copy(out.ptr, Device{DeviceType::kCUDAHost, 0}, d.ptr, kDev, n, stream_);
  struct Check {
    const uint8_t* data;
    size_t n;
    std::atomic<int> result{-1};
  } check{static_cast<const uint8_t*>(out.ptr), n};
  api_->launch_host_func(
      stream_,
      [](void* p) {
        auto* c = static_cast<Check*>(p);
        int ok = 1;
        for (size_t i = 0; i < c->n; ++i) ok &= c->data[i] == 0x5A;
        c->result.store(ok);
      },
      &check);
  api_->synchronize(stream_);
  EXPECT_EQ(check.result.load(), 1) << "the host function saw the copy unfinished";
}

TEST_F(CudaDeviceTest, StreamPrioritiesAreClampedToTheRange) {
  const auto [least, greatest] = api_->stream_priority_range(kDev);
  EXPECT_LE(greatest, least) << "lower numbers are higher priorities";
  int p = 12345;
  Stream high = new_stream(greatest - 100);
  ASSERT_EQ(cudaStreamGetPriority(static_cast<cudaStream_t>(high.handle), &p), cudaSuccess);
  EXPECT_EQ(p, greatest);
  Stream low = new_stream(least + 100);
  ASSERT_EQ(cudaStreamGetPriority(static_cast<cudaStream_t>(low.handle), &p), cudaSuccess);
  EXPECT_EQ(p, least);
  Stream plain = api_->create_stream(kDev);  // the default priority is the least
  extra_.push_back(plain);
  ASSERT_EQ(cudaStreamGetPriority(static_cast<cudaStream_t>(plain.handle), &p), cudaSuccess);
  EXPECT_EQ(p, least);
  EXPECT_NE(high.handle, low.handle);
}

TEST_F(CudaDeviceTest, SetDeviceAndCurrentDevice) {
  api_->set_device(kDev);
  EXPECT_EQ(api_->current_device(), 0);
  int ordinal = -1;
  ASSERT_EQ(cudaGetDevice(&ordinal), cudaSuccess);
  EXPECT_EQ(ordinal, 0);
  if (api_->device_count() >= 2) {
    api_->set_device(Device::cuda(1));
    EXPECT_EQ(api_->current_device(), 1);
    api_->set_device(kDev);
    EXPECT_EQ(api_->current_device(), 0);
  }
  EXPECT_THROW(api_->set_device(Device::cuda(api_->device_count() + 7)), Error);
}

TEST_F(CudaDeviceTest, EventsAreRecycledThroughThePool) {
  void* handle = nullptr;
  {
    Event e = api_->create_event(kDev);
    handle = e.handle();
    ASSERT_NE(handle, nullptr);
    EXPECT_EQ(e.device(), kDev);
  }  // back to the pool
  Event again = api_->create_event(kDev);
  EXPECT_EQ(again.handle(), handle) << "the next event reuses the pooled handle";
  Event other = api_->create_event(kDev);
  EXPECT_NE(other.handle(), handle) << "a handle in use is not handed out twice";
  // A moved-from Event gives nothing back; the moved-to one owns the handle.
  Event moved = std::move(other);
  EXPECT_NE(moved.handle(), nullptr);
}

TEST_F(CudaDeviceTest, EventRecordQuerySynchronizeAndBlock) {
  Stream other = new_stream();
  StreamGate gate;
  gate.enqueue(stream_);
  Event e = api_->create_event(kDev);
  e.record(stream_);
  EXPECT_FALSE(e.query()) << "the event is behind a closed gate";
  e.block(other);  // `other` now waits for stream_ up to the event
  std::atomic<int> after{0};
  api_->launch_host_func(other, &set_flag, &after);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(after.load(), 0) << "a stream blocked on a pending event ran on";
  gate.open();
  e.synchronize();
  EXPECT_TRUE(e.query());
  api_->synchronize(other);
  EXPECT_EQ(after.load(), 1);
  // A recycled event records afresh.
  Event r = api_->create_event(kDev);
  r.record(stream_);
  r.synchronize();
  EXPECT_TRUE(r.query());
}

TEST_F(CudaDeviceTest, PeerCopyBetweenTwoDevices) {
  if (api_->device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const Device dev1 = Device::cuda(1);
  const size_t n = 1 << 20;
  const auto src = pattern(n, 17);
  DeviceBuffer a(n, 0), b(n, 1);
  api_->set_device(kDev);
  api_->copy(a.ptr, kDev, src.data(), Device::cpu(), n, stream_);
  api_->copy(b.ptr, dev1, a.ptr, kDev, n, stream_);  // peer, ordered on cuda:0's stream
  std::vector<uint8_t> back(n, 0);
  api_->copy(back.data(), Device::cpu(), b.ptr, dev1, n, stream_);
  api_->synchronize(stream_);
  EXPECT_EQ(back, src);
}

TEST_F(CudaDeviceTest, FailedCopyNamesTheCallAndTheDevice) {
  std::vector<uint8_t> host(256, 1);
  try {
    api_->copy(nullptr, kDev, host.data(), Device::cpu(), host.size(), stream_);
    FAIL() << "a copy to a null device pointer succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaMemcpyAsync"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
  }
  try {
    api_->memset(nullptr, 0, 64, stream_);
    FAIL() << "a memset of a null pointer succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudaMemsetAsync"), std::string::npos) << what;
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
  }
  // The failure is not sticky: the stream and the runtime still work.
  DeviceBuffer d(host.size());
  std::vector<uint8_t> back(host.size(), 0);
  api_->copy(d.ptr, kDev, host.data(), Device::cpu(), host.size(), stream_);
  api_->copy(back.data(), Device::cpu(), d.ptr, kDev, host.size(), stream_);
  api_->synchronize(stream_);
  EXPECT_EQ(back, host);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaDeviceTest, CreatingAStreamOnAMissingDeviceThrows) {
  EXPECT_THROW(api_->create_stream(Device::cuda(api_->device_count())), Error);
  EXPECT_THROW(api_->create_event(Device::cuda(api_->device_count())), Error);
}

// ---- per-stream cuBLAS / cuDNN handles ---------------------------------------------------------

TEST_F(CudaDeviceTest, HandlesAreBoundToTheirStreamAndKeptPerStream) {
  cuda::StreamHandles& h = cuda::handles_for(stream_);
  ASSERT_NE(h.cublas, nullptr);
  ASSERT_NE(h.cublas_lt, nullptr);
  ASSERT_NE(h.cudnn, nullptr);
  EXPECT_NE(h.blas_workspace, nullptr);
  EXPECT_GT(h.blas_workspace_bytes, 0u);
  EXPECT_EQ(&cuda::handles_for(stream_), &h) << "the same stream gets the same handles";

  cudaStream_t bound = nullptr;
  ASSERT_EQ(cublasGetStream(h.cublas, &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, static_cast<cudaStream_t>(stream_.handle));
  bound = nullptr;
  ASSERT_EQ(cudnnGetStream(h.cudnn, &bound), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(bound, static_cast<cudaStream_t>(stream_.handle));

  Stream other = new_stream();
  cuda::StreamHandles& g = cuda::handles_for(other);
  EXPECT_NE(&g, &h);
  EXPECT_NE(g.cublas, h.cublas);
  EXPECT_NE(g.cudnn, h.cudnn);
  ASSERT_EQ(cublasGetStream(g.cublas, &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, static_cast<cudaStream_t>(other.handle));
}

TEST_F(CudaDeviceTest, ReleasedHandlesAreCreatedAfreshOnTheNextRequest) {
  Stream s = new_stream();
  cuda::StreamHandles& first = cuda::handles_for(s);
  ASSERT_NE(first.cublas, nullptr);
  cuda::release_handles(s);
  cuda::release_handles(s);  // twice, and for a stream without handles: nothing to do
  cuda::StreamHandles& second = cuda::handles_for(s);
  ASSERT_NE(second.cublas, nullptr);
  ASSERT_NE(second.cudnn, nullptr);
  cudaStream_t bound = nullptr;
  ASSERT_EQ(cublasGetStream(second.cublas, &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, static_cast<cudaStream_t>(s.handle));
  // destroy_stream (TearDown) releases them again.
}

TEST_F(CudaDeviceTest, HandlesForAHostStreamThrow) {
  EXPECT_THROW(cuda::handles_for(Stream{Device::cpu(), nullptr}), Error);
}

}  // namespace
}  // namespace weft::testing

#else  // !WEFT_USE_CUDA

namespace weft::testing {
namespace {

TEST(CudaDeviceTest, ThisBuildHasNoCuda) {
  EXPECT_EQ(DeviceAPI::try_get(DeviceType::kCUDA), nullptr);
  EXPECT_THROW(DeviceAPI::get(DeviceType::kCUDA), NotImplemented);
}

}  // namespace
}  // namespace weft::testing

#endif  // WEFT_USE_CUDA
