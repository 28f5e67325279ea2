// Device names and parsing.
#include "base/device.h"

#include <algorithm>

#include "base/error.h"

namespace weft {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kCUDA:
      return "cuda";
    case DeviceType::kCUDAHost:
      return "cuda_host";
  }
  return "unknown";
}

std::string to_string(const Device& device) {
  return std::string(device_type_name(device.type)) + ":" + std::to_string(device.id);
}

Device parse_device(const std::string& text) {
  constexpr const char* kExpected =
      "expected cpu, cuda or cuda_host (aliases gpu, cpu_pinned), optionally followed by "
      "':<ordinal>'";
  const size_t colon = text.find(':');
  const std::string type = text.substr(0, colon);
  DeviceType device_type = DeviceType::kCPU;
  if (type == "cpu") {
    device_type = DeviceType::kCPU;
  } else if (type == "cuda" || type == "gpu") {
    device_type = DeviceType::kCUDA;
  } else if (type == "cuda_host" || type == "cpu_pinned") {
    device_type = DeviceType::kCUDAHost;
  } else {
    WEFT_THROW(ValueError) << "invalid device '" << text << "': " << kExpected;
  }
  int32_t id = 0;
  if (colon != std::string::npos) {
    // Digits only: no sign, no spaces, nothing after the number (strtol would take " +1" and
    // stoi "1x").
    const std::string ordinal = text.substr(colon + 1);
    const bool digits = !ordinal.empty() && std::all_of(ordinal.begin(), ordinal.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    WEFT_CHECK(digits) << "invalid device '" << text
                       << "': the ordinal after ':' must be a non-negative decimal integer";
    int64_t value = 0;
    for (char c : ordinal) {
      value = value * 10 + (c - '0');
      WEFT_CHECK(value < kMaxDeviceOrdinal)
          << "invalid device '" << text << "': the ordinal is out of range (at most "
          << kMaxDeviceOrdinal - 1 << ")";
    }
    id = static_cast<int32_t>(value);
  }
  WEFT_CHECK(device_type != DeviceType::kCPU || id == 0)
      << "invalid device '" << text << "': the CPU is one device, its ordinal is 0";
  return {device_type, id};
}

}  // namespace weft
