// Device identity: a device type (codes aligned with DLPack's DLDeviceType) and an ordinal.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace weft {

/// Device types. The numeric codes equal DLPack's DLDeviceType so a weft Device converts to a
/// DLDevice by a cast.
enum class DeviceType : int32_t {
  kCPU = 1,       ///< kDLCPU
  kCUDA = 2,      ///< kDLCUDA
  kCUDAHost = 3,  ///< kDLCUDAHost: page-locked host memory visible to CUDA
};

/// A device: a type and an ordinal (0 for the CPU). A small value type; thread-safe to copy.
struct Device {
  DeviceType type = DeviceType::kCPU;
  int32_t id = 0;

  static constexpr Device cpu() { return {DeviceType::kCPU, 0}; }
  static constexpr Device cuda(int32_t ordinal) { return {DeviceType::kCUDA, ordinal}; }

  friend constexpr bool operator==(const Device&, const Device&) = default;
};

/// "cpu", "cuda", "cuda_host".
const char* device_type_name(DeviceType type);

/// "cpu:0", "cuda:1", ...
std::string to_string(const Device& device);

/// Device ordinals parse_device() accepts are below this.
constexpr int32_t kMaxDeviceOrdinal = 1024;

/// Parses "cpu", "cpu:0", "cuda", "cuda:1", "cuda_host:0" (and the aliases "gpu", "cpu_pinned"):
/// a type name, optionally ':' and a decimal ordinal below kMaxDeviceOrdinal (0 for the CPU).
/// Anything else (signs, spaces, trailing text, unknown types) throws ValueError naming the text.
/// Says nothing about whether the device exists: ask its DeviceAPI. Thread-safe.
Device parse_device(const std::string& text);

}  // namespace weft

template <>
struct std::hash<weft::Device> {
  size_t operator()(const weft::Device& d) const noexcept {
    return std::hash<int64_t>()((static_cast<int64_t>(d.type) << 32) | static_cast<uint32_t>(d.id));
  }
};
