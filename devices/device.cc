// Device names and parsing.
#include "devices/device.h"

#include <cstdlib>

#include "base/error.h"

namespace weft {

const char* device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU: return "cpu";
    case DeviceType::kCUDA: return "cuda";
    case DeviceType::kCUDAHost: return "cuda_host";
  }
  return "unknown";
}

std::string to_string(const Device& device) {
  return std::string(device_type_name(device.type)) + ":" + std::to_string(device.id);
}

Device parse_device(const std::string& text) {
  std::string type = text;
  int32_t id = 0;
  if (auto colon = text.find(':'); colon != std::string::npos) {
    type = text.substr(0, colon);
    std::string ordinal = text.substr(colon + 1);
    char* end = nullptr;
    long value = std::strtol(ordinal.c_str(), &end, 10);
    WEFT_CHECK(!ordinal.empty() && end != nullptr && *end == '\0' && value >= 0 && value < 1024)
        << "invalid device '" << text << "': the ordinal must be a non-negative integer";
    id = static_cast<int32_t>(value);
  }
  if (type == "cpu") return {DeviceType::kCPU, id};
  if (type == "cuda" || type == "gpu") return {DeviceType::kCUDA, id};
  if (type == "cuda_host" || type == "cpu_pinned") return {DeviceType::kCUDAHost, id};
  WEFT_THROW(ValueError) << "invalid device '" << text
                         << "': expected cpu, cuda or cuda_host, optionally with ':<ordinal>'";
}

}  // namespace weft
