// Device identity (DLPack codes, names, parsing) and the CPU DeviceAPI.
#include "base/device.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

#include "base/error.h"
#include "devices/device_api.h"

namespace weft::testing {
namespace {

// DLPack's DLDeviceType values (dlpack.h v0.8+), written out as the independent reference.
constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAHost = 3;

TEST(DeviceTest, DeviceTypeCodesEqualDlpackCodes) {
  EXPECT_EQ(static_cast<int32_t>(DeviceType::kCPU), kDLCPU);
  EXPECT_EQ(static_cast<int32_t>(DeviceType::kCUDA), kDLCUDA);
  EXPECT_EQ(static_cast<int32_t>(DeviceType::kCUDAHost), kDLCUDAHost);
}

TEST(DeviceTest, FactoriesAndEquality) {
  EXPECT_EQ(Device::cpu(), (Device{DeviceType::kCPU, 0}));
  EXPECT_EQ(Device::cuda(3), (Device{DeviceType::kCUDA, 3}));
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
  EXPECT_NE(Device::cpu(), (Device{DeviceType::kCUDAHost, 0}));
  EXPECT_EQ(Device{}, Device::cpu());
}

TEST(DeviceTest, TypeNames) {
  EXPECT_STREQ(device_type_name(DeviceType::kCPU), "cpu");
  EXPECT_STREQ(device_type_name(DeviceType::kCUDA), "cuda");
  EXPECT_STREQ(device_type_name(DeviceType::kCUDAHost), "cuda_host");
}

TEST(DeviceTest, ToStringNamesTypeAndOrdinal) {
  EXPECT_EQ(to_string(Device::cpu()), "cpu:0");
  EXPECT_EQ(to_string(Device::cuda(1)), "cuda:1");
  EXPECT_EQ(to_string(Device{DeviceType::kCUDAHost, 0}), "cuda_host:0");
}

TEST(DeviceTest, ParseDeviceRoundTripsToString) {
  for (Device d : {Device::cpu(), Device::cuda(0), Device::cuda(7),
                   Device{DeviceType::kCUDAHost, 0}, Device{DeviceType::kCUDAHost, 2}}) {
    SCOPED_TRACE(to_string(d));
    EXPECT_EQ(parse_device(to_string(d)), d);
  }
}

TEST(DeviceTest, ParseDeviceWithoutOrdinalMeansZero) {
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  EXPECT_EQ(parse_device("cuda"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda_host"), (Device{DeviceType::kCUDAHost, 0}));
}

TEST(DeviceTest, ParseDeviceRejectsBadTextWithValueErrorNamingIt) {
  for (const char* bad :
       {"", "tpu", "tpu:0", "cpu:", "cpu:-1", "cpu:x", "cuda:1x", "cuda::1", "CPU0", ":0"}) {
    SCOPED_TRACE(bad);
    try {
      Device d = parse_device(bad);
      ADD_FAILURE() << "parsed as " << to_string(d);
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

// The hardening issue's cases: a sign, spaces, a non-number, trailing text after the ordinal,
// an ordinal that overflows int (stoi threw std::out_of_range, strtol saturated), another CPU.
TEST(DeviceTest, ParseDeviceRejectsSignsSpacesOverflowAndOtherCpus) {
  for (const char* bad :
       {"cuda:-1", "cuda:+1", "cuda: 1", "cuda:1 ", " cuda:0", "cuda :0", "cuda:x", "cuda:0x1",
        "cuda:1.0", "cuda:1024", "cuda:2147483648", "cuda:99999999999999999999999", "cuda_host:x",
        "cuda_host:-1", "cpu:1", "cudax", "cuda_hostx:0", "cpu:0:0"}) {
    SCOPED_TRACE(bad);
    try {
      Device d = parse_device(bad);
      ADD_FAILURE() << "parsed as " << to_string(d);
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(DeviceTest, ParseDeviceKeepsTypeAndTakesLargestOrdinal) {
  EXPECT_EQ(parse_device("cuda_host:0").type, DeviceType::kCUDAHost);
  EXPECT_EQ(parse_device("cpu_pinned").type, DeviceType::kCUDAHost);
  EXPECT_EQ(parse_device("gpu:2"), Device::cuda(2));
  EXPECT_EQ(parse_device("cuda:1023"), Device::cuda(kMaxDeviceOrdinal - 1));
  EXPECT_EQ(parse_device("cuda:007"), Device::cuda(7));
  EXPECT_EQ(parse_device("cpu:0"), Device::cpu());
}

TEST(DeviceTest, HashSeparatesTypeAndOrdinal) {
  std::unordered_set<Device> set = {Device::cpu(), Device::cuda(0), Device::cuda(1),
                                    Device{DeviceType::kCUDAHost, 0}, Device{DeviceType::kCPU, 1}};
  EXPECT_EQ(set.size(), 5u);
  EXPECT_EQ(set.count(Device::cuda(1)), 1u);
  EXPECT_EQ(set.count(Device::cuda(2)), 0u);
}

TEST(DeviceApiTest, CpuApiIsAlwaysAvailable) {
  DeviceAPI* api = DeviceAPI::get(DeviceType::kCPU);
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(DeviceAPI::try_get(DeviceType::kCPU), api);
  EXPECT_EQ(api->device_count(), 1);
  EXPECT_EQ(api->attribute(Device::cpu(), DeviceAttribute::kExists), 1);
  EXPECT_GE(api->attribute(Device::cpu(), DeviceAttribute::kComputeUnits), 1);
  EXPECT_EQ(api->attribute(Device::cpu(), DeviceAttribute::kComputeUnits), cpu_core_count());
  EXPECT_GT(api->attribute(Device::cpu(), DeviceAttribute::kTotalMemory), 0);
  EXPECT_GE(cpu_core_count(), 1);
}

TEST(DeviceApiTest, CpuApiRejectsOtherDevices) {
  DeviceAPI* api = DeviceAPI::get(DeviceType::kCPU);
  EXPECT_THROW(api->attribute(Device::cuda(0), DeviceAttribute::kExists), ValueError);
  EXPECT_THROW(api->attribute(Device{DeviceType::kCPU, 1}, DeviceAttribute::kExists), ValueError);
  EXPECT_THROW(api->create_stream(Device::cuda(0)), ValueError);
}

TEST(DeviceApiTest, CpuStreamIsNullAndEventsCompleteAtOnce) {
  DeviceAPI* api = DeviceAPI::get(DeviceType::kCPU);
  Stream stream = api->create_stream(Device::cpu());
  EXPECT_EQ(stream.device, Device::cpu());
  EXPECT_EQ(stream.handle, nullptr);
  Event event = api->create_event(Device::cpu());
  EXPECT_EQ(event.device(), Device::cpu());
  event.record(stream);
  EXPECT_TRUE(event.query());
  event.synchronize();
  event.block(stream);
  api->synchronize(stream);
  // Events move; the moved-from one is empty and still answers.
  Event moved = std::move(event);
  EXPECT_TRUE(moved.query());
  Event other;
  other = std::move(moved);
  EXPECT_TRUE(other.query());
  api->destroy_stream(stream);
}

TEST(DeviceApiTest, DefaultEventIsComplete) {
  Event event;
  EXPECT_TRUE(event.query());
  event.synchronize();
}

TEST(DeviceApiTest, MissingCudaApiThrowsNotImplemented) {
  if (DeviceAPI::try_get(DeviceType::kCUDA) != nullptr) {
    GTEST_SKIP() << "a CUDA device API is registered in this build";
  }
  try {
    DeviceAPI::get(DeviceType::kCUDA);
    ADD_FAILURE() << "no error";
  } catch (const NotImplemented& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(DeviceApiTest, CudaApiWhenPresentReportsDevicesAndCompletesEvents) {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  if (api == nullptr) GTEST_SKIP() << "no CUDA device API in this build";
  EXPECT_EQ(DeviceAPI::get(DeviceType::kCUDA), api);
  const int count = api->device_count();
  ASSERT_GE(count, 0);
  EXPECT_EQ(api->attribute(Device::cuda(count), DeviceAttribute::kExists), 0)
      << "cuda:" << count << " is one past the last device";
  if (count == 0) GTEST_SKIP() << "no CUDA device on this machine";
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(api->attribute(gpu, DeviceAttribute::kExists), 1);
  EXPECT_GE(api->attribute(gpu, DeviceAttribute::kComputeUnits), 1);
  EXPECT_GT(api->attribute(gpu, DeviceAttribute::kTotalMemory), 0);
  Stream stream = api->create_stream(gpu);
  EXPECT_EQ(stream.device, gpu);
  EXPECT_NE(stream.handle, nullptr);
  Stream other = api->create_stream(gpu);
  {
    Event event = api->create_event(gpu);
    EXPECT_EQ(event.device(), gpu);
    EXPECT_NE(event.handle(), nullptr);
    event.record(stream);
    event.block(other);
    event.synchronize();
    EXPECT_TRUE(event.query());
    api->synchronize(other);
  }
  api->destroy_stream(other);
  api->destroy_stream(stream);
}

}  // namespace
}  // namespace weft::testing
