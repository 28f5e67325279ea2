// The DeviceAPI registry and Event's forwarding to it.
#include "devices/device_api.h"

#include <array>
#include <atomic>
#include <thread>

#include "base/build_config.h"
#include "base/error.h"

namespace weft {

namespace {
// Indexed by the DeviceType code; written at start-up by backends, read afterwards.
std::array<std::atomic<DeviceAPI*>, 8>& registry() {
  static std::array<std::atomic<DeviceAPI*>, 8> apis{};
  return apis;
}
}  // namespace

DeviceAPI* cpu_device_api();  // cpu_device_api.cc
#if WEFT_USE_CUDA
DeviceAPI* cuda_device_api();  // cuda_device_api.cc
#endif

void register_device_api(DeviceType type, DeviceAPI* api) {
  auto code = static_cast<size_t>(type);
  WEFT_ICHECK(code < registry().size()) << "device type code " << code << " out of range";
  registry()[code].store(api, std::memory_order_release);
}

DeviceAPI* DeviceAPI::try_get(DeviceType type) {
  if (type == DeviceType::kCPU) return cpu_device_api();
  auto code = static_cast<size_t>(type);
  if (code >= registry().size()) return nullptr;
  DeviceAPI* registered = registry()[code].load(std::memory_order_acquire);
#if WEFT_USE_CUDA
  // A registered API replaces the built-in one (tests register a simulated CUDA device).
  if (type == DeviceType::kCUDA && registered == nullptr) return cuda_device_api();
#endif
  return registered;
}

DeviceAPI* DeviceAPI::get(DeviceType type) {
  DeviceAPI* api = try_get(type);
  if (api == nullptr) {
    WEFT_THROW(NotImplemented) << "no device API for '" << device_type_name(type)
                               << "' in this build (CUDA support is not compiled in or has no "
                                  "device backend registered)";
  }
  return api;
}

size_t device_memory_capacity(Device device) {
  // Pinned host memory is the machine's memory.
  const Device asked = device.type == DeviceType::kCUDAHost ? Device::cpu() : device;
  DeviceAPI* api = DeviceAPI::try_get(asked.type);
  if (api == nullptr || asked.id < 0) return 0;
  try {
    const int64_t bytes = api->attribute(asked, DeviceAttribute::kTotalMemory);
    return bytes > 0 ? static_cast<size_t>(bytes) : 0;
  } catch (const Error&) {
    return 0;  // e.g. a CPU ordinal other than 0: unknown, so nothing is refused for it
  }
}

int cpu_core_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (api_ != nullptr && handle_ != nullptr) api_->destroy_event(device_, handle_);
    device_ = other.device_;
    handle_ = other.handle_;
    api_ = other.api_;
    other.handle_ = nullptr;
    other.api_ = nullptr;
  }
  return *this;
}

Event::~Event() {
  if (api_ != nullptr && handle_ != nullptr) api_->destroy_event(device_, handle_);
}

void Event::record(const Stream& stream) {
  if (api_ != nullptr) api_->record_event(handle_, stream);
}

bool Event::query() const { return api_ == nullptr || api_->query_event(device_, handle_); }

void Event::synchronize() const {
  if (api_ != nullptr) api_->synchronize_event(device_, handle_);
}

void Event::block(const Stream& stream) const {
  if (api_ != nullptr) api_->stream_wait_event(stream, handle_);
}

void DeviceAPI::copy(void*, Device dst_device, const void*, Device src_device, size_t,
                     const Stream&) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::copy from " << to_string(src_device) << " to "
                             << to_string(dst_device) << " is not provided by this device API";
}
void* DeviceAPI::alloc_data(Device device, size_t, std::string*) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::alloc_data on " << to_string(device)
                             << ": this device type's API does not provide memory";
}

void DeviceAPI::memset(void*, int, size_t, const Stream& stream) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::memset on " << to_string(stream.device)
                             << " is not provided by this device API";
}
void DeviceAPI::launch_host_func(const Stream& stream, void (*)(void*), void*) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::launch_host_func on " << to_string(stream.device)
                             << " is not provided by this device API";
}

void DeviceAPI::begin_capture(const Stream& stream) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::begin_capture: " << to_string(stream.device)
                             << " has no stream capture";
}
void* DeviceAPI::end_capture(const Stream& stream) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::end_capture: " << to_string(stream.device)
                             << " has no stream capture";
}
void DeviceAPI::launch_graph(void*, const Stream& stream) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::launch_graph: " << to_string(stream.device)
                             << " has no stream capture";
}
void DeviceAPI::destroy_graph(Device device, void*) {
  WEFT_THROW(NotImplemented) << "DeviceAPI::destroy_graph: " << to_string(device)
                             << " has no stream capture";
}

namespace {
thread_local const Stream* t_current_stream = nullptr;
}  // namespace

Stream current_stream(Device device) {
  if (t_current_stream != nullptr && t_current_stream->device == device) return *t_current_stream;
  return Stream{device, nullptr};
}

CurrentStreamScope::CurrentStreamScope(const Stream& stream)
    : previous_(t_current_stream), stream_(stream) {
  t_current_stream = &stream_;
}

CurrentStreamScope::~CurrentStreamScope() { t_current_stream = previous_; }

}  // namespace weft
