// DeviceAPI: the one interface per device type through which weft talks to a vendor runtime
// (device count, attributes, streams and events).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "base/device.h"

namespace weft {

/// Device attributes a DeviceAPI can be asked about.
enum class DeviceAttribute {
  kExists,        ///< 1 when the device is present
  kComputeUnits,  ///< CPU: hardware threads; CUDA: streaming multiprocessors
  kTotalMemory,   ///< bytes of memory the device has (CPU: physical RAM)
};

class DeviceAPI;

/// A stream of work on a device: work submitted to one stream runs in order. A value: copying
/// it copies the handle, not the stream. The CPU has a single, trivially ordered stream whose
/// handle is null. Thread-safe to copy.
struct Stream {
  Device device;
  void* handle = nullptr;  ///< vendor handle (cudaStream_t); null for the CPU and default streams
};

/// A point in a stream's work. Recorded on a stream; another stream can wait on it, and it can be
/// queried for completion. The CPU's events are complete as soon as they are recorded.
class Event {
 public:
  Event() = default;
  Event(Device device, void* handle, DeviceAPI* api)
      : device_(device), handle_(handle), api_(api) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept { *this = std::move(other); }
  Event& operator=(Event&& other) noexcept;
  ~Event();

  /// Marks the current end of `stream`'s work. Call from one thread at a time.
  void record(const Stream& stream);
  /// Whether all work before the last record() has completed. Thread-safe.
  bool query() const;
  /// Blocks the calling thread until query() is true.
  void synchronize() const;
  /// Makes `stream` wait (on the device, not the host) until this event completes.
  void block(const Stream& stream) const;

  Device device() const { return device_; }
  void* handle() const { return handle_; }

 private:
  Device device_;
  void* handle_ = nullptr;
  DeviceAPI* api_ = nullptr;
};

// Note [DeviceAPI owns the runtime]
// The vendor runtime (CUDA's cudart) is called from devices/ only: streams, events, copies,
// memory and capture go through the device type's DeviceAPI, so a registered API (a simulated
// device in tests, another backend) serves every layer above, and a runtime error is turned into
// a weft error in one place. The exceptions are the kernels' own work (ops/cuda): kernel launches
// and the libraries that launch kernels (cuBLAS, cuDNN, with handles from cuda_handles.h), on the
// stream the engine hands them.

/// Per-device-type access to the vendor runtime. Implementations are stateless singletons and
/// thread-safe. CPU is always available; CUDA is registered when weft is built with CUDA support.
class DeviceAPI {
 public:
  virtual ~DeviceAPI() = default;

  /// The API for a device type. Throws NotImplemented naming the type when this build has none
  /// (e.g. CUDA in a CPU-only build).
  static DeviceAPI* get(DeviceType type);
  /// Like get(), but returns null instead of throwing.
  static DeviceAPI* try_get(DeviceType type);

  /// Number of devices of this type present (CPU: 1).
  virtual int device_count() = 0;
  /// Queries an attribute; 0 when unknown.
  virtual int64_t attribute(Device device, DeviceAttribute attribute) = 0;

  /// Creates a new stream on `device` (CPU: the single null stream).
  virtual Stream create_stream(Device device) = 0;
  /// Destroys a stream returned by create_stream.
  virtual void destroy_stream(const Stream& stream) = 0;
  /// Blocks the calling thread until all work on `stream` has finished.
  virtual void synchronize(const Stream& stream) = 0;

  /// Creates a stream with a scheduling priority: lower numbers run first (CUDA's convention);
  /// clamped to stream_priority_range(). Devices without priorities ignore it.
  virtual Stream create_stream(Device device, int priority) { return create_stream(device); }
  /// The {least, greatest} priority create_stream accepts, e.g. {0, -5} on CUDA; {0, 0} when
  /// the device has no stream priorities.
  virtual std::pair<int, int> stream_priority_range(Device device) { return {0, 0}; }

  /// Creates an event on `device`. Devices with vendor events keep a pool: an Event's handle
  /// goes back to it when the Event is destroyed, so a hot path does not create one per use.
  virtual Event create_event(Device device) = 0;

  /// The three calls below throw NotImplemented unless the device type's API provides them.
  ///
  /// Copies `bytes` from `src` (memory of `src_device`) to `dst` (of `dst_device`), ordered on
  /// `stream`: host<->device, device<->device on one device, and between two devices (peer).
  /// Asynchronous on devices with streams: the copy has happened once the stream's work up to
  /// here completes (host memory that is not page-locked makes CUDA finish it before returning).
  /// Throws Error naming the call and the devices on failure.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                    const Stream& stream);
  /// Sets `bytes` bytes at `dst` (memory of the stream's device) to `value`, ordered on `stream`.
  virtual void memset(void* dst, int value, size_t bytes, const Stream& stream);
  /// Calls `fn(arg)` on a runtime thread once the stream's work up to here has completed. `fn`
  /// must not call the device runtime (CUDA forbids it in host functions) and must be short: it
  /// only hands work on. The CPU calls it at once.
  virtual void launch_host_func(const Stream& stream, void (*fn)(void*), void* arg);
  /// Allocates `bytes` (> 0) of memory for `device` through the vendor runtime: device memory
  /// (CUDA: cudaMalloc, 256-byte aligned or better) or, on the CUDA API for kCUDAHost, page-locked
  /// host memory (cudaHostAlloc, page-aligned). Returns null when the runtime refuses, with its
  /// reason in `*reason` (the runtime's error state is cleared); allocators turn that into
  /// OutOfMemory. Throws NotImplemented unless the device type's API provides memory. Memory
  /// allocators (memory/) call this, never the runtime (Note [DeviceAPI owns the runtime]).
  virtual void* alloc_data(Device device, size_t bytes, std::string* reason);
  /// Frees memory alloc_data returned for `device`. Never throws: allocator deleters call it.
  virtual void free_data(Device device, void* ptr) noexcept {}
  /// Makes `device` the calling thread's current device (CUDA: cudaSetDevice). The CPU: nothing.
  virtual void set_device(Device device) {}
  /// The calling thread's current device ordinal of this type (0 for the CPU).
  virtual int current_device() { return 0; }

  /// Stream capture (CUDA graphs; Note [CUDA graph capture] in graph/graph_capture.cc). Between
  /// begin_capture and end_capture, the work the calling thread submits to `stream` (and to
  /// streams that wait for events recorded on a capturing stream, which join the capture) is
  /// recorded instead of run; calls that would synchronise the host with the device fail instead.
  /// end_capture returns an executable graph (an opaque handle), or throws Error naming what broke
  /// the capture; either way the stream runs work normally again. launch_graph runs a graph's
  /// work on `stream`, in its order; destroy_graph frees it (its launches may still be running:
  /// the device keeps what they need). These throw NotImplemented unless can_capture().
  virtual bool can_capture() { return false; }
  virtual void begin_capture(const Stream& stream);
  virtual void* end_capture(const Stream& stream);
  virtual void launch_graph(void* graph, const Stream& stream);
  virtual void destroy_graph(Device device, void* graph);

 protected:
  friend class Event;
  virtual void destroy_event(Device device, void* handle) = 0;
  virtual void record_event(void* handle, const Stream& stream) = 0;
  virtual bool query_event(Device device, void* handle) = 0;
  virtual void synchronize_event(Device device, void* handle) = 0;
  virtual void stream_wait_event(const Stream& stream, void* handle) = 0;
};

/// The stream the calling thread submits work for `device` to: the stream of the engine worker
/// running an operation on that device (set with CurrentStreamScope), else the device's null
/// stream. Allocators use it to know where a block is used and freed. Thread-safe (per thread).
Stream current_stream(Device device);

/// Makes `stream` the calling thread's current stream for its device until the scope ends
/// (engine workers set it around the operations they run). Nests.
class CurrentStreamScope {
 public:
  explicit CurrentStreamScope(const Stream& stream);
  ~CurrentStreamScope();
  CurrentStreamScope(const CurrentStreamScope&) = delete;
  CurrentStreamScope& operator=(const CurrentStreamScope&) = delete;

 private:
  const Stream* previous_;
  Stream stream_;
};

/// Registers the API for a device type (used by optional backends such as CUDA at start-up).
/// A registration replaces the one before it and, for CUDA, the built-in API of a CUDA build;
/// registering null removes it again (restoring the built-in one where there is one): tests
/// run the engine on a simulated CUDA device this way (tests/engine/sim_gpu.h). The CPU's API
/// cannot be replaced. Thread-safe; the API must outlive every stream, event and engine made
/// through it.
void register_device_api(DeviceType type, DeviceAPI* api);

/// Number of hardware threads of this machine (at least 1).
int cpu_core_count();

/// Bytes of memory `device` has in total, or 0 when unknown (a device that does not exist, a
/// device type without an API in this build). CPU and pinned host memory: the machine's
/// physical memory (sysconf); CUDA: the device's total memory (cudaMemGetInfo). An array or
/// arena larger than this can never be allocated there: callers check before allocating (see
/// check_fits_device in memory/allocator.h). Cached per device after the first query, so it is
/// cheap enough to call per allocation. Thread-safe.
size_t device_memory_capacity(Device device);

}  // namespace weft
