// Host-side helpers for CUDA kernels: the op's stream and device, its library handles, scratch
// memory, launch sizes and launch checks. Included by ops/cuda/ sources only (CUDA builds).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "devices/cuda_check.h"
#include "devices/cuda_handles.h"
#include "devices/device_api.h"
#include "memory/allocator.h"
#include "ops/op.h"

namespace weft::cuda {

/// The stream an op's work goes to (the engine's worker owns it for the call).
inline cudaStream_t stream_of(const OpContext& ctx) {
  return static_cast<cudaStream_t>(ctx.run.stream.handle);
}
/// The op's device ordinal.
inline int device_of(const OpContext& ctx) { return ctx.run.device.id; }

// Memory operations of a kernel, queued on the op's stream through the CUDA DeviceAPI, the one
// caller of the runtime's memset, copy and synchronisation (Note [DeviceAPI owns the runtime] in
// devices/device_api.h); kernels launch and call cuBLAS/cuDNN on the stream they are given, and
// nothing else. Each throws Error naming the call and the device on failure.

/// The CUDA DeviceAPI (looked up per call: tests may register their own).
inline DeviceAPI& cuda_api() { return *DeviceAPI::get(DeviceType::kCUDA); }
/// Sets `bytes` bytes at `dst` (memory of the op's device) to `value`.
inline void memset_on_stream(const OpContext& ctx, void* dst, int value, size_t bytes) {
  cuda_api().memset(dst, value, bytes, ctx.run.stream);
}
/// Copies `bytes` between two buffers of the op's device.
inline void copy_on_stream(const OpContext& ctx, void* dst, const void* src, size_t bytes) {
  cuda_api().copy(dst, ctx.run.device, src, ctx.run.device, bytes, ctx.run.stream);
}
/// Copies `bytes` of host memory to the op's device. From pageable memory the runtime stages the
/// data before returning, so `src` may go once this returns.
inline void copy_from_host(const OpContext& ctx, void* dst, const void* src, size_t bytes) {
  cuda_api().copy(dst, ctx.run.device, src, Device::cpu(), bytes, ctx.run.stream);
}
/// Copies `bytes` of the op's device memory to the host and waits for the stream, so `dst` holds
/// them on return (a kernel that needs device data on the host to size its work).
inline void copy_to_host_sync(const OpContext& ctx, void* dst, const void* src, size_t bytes) {
  cuda_api().copy(dst, Device::cpu(), src, ctx.run.device, bytes, ctx.run.stream);
  cuda_api().synchronize(ctx.run.stream);
}

/// cuBLAS/cuBLASLt/cuDNN handles bound to the op's stream.
inline StreamHandles& handles(const OpContext& ctx) { return handles_for(ctx.run.stream); }

/// Checks the launch of the kernel just issued: configuration errors (too many threads, no
/// kernel image for this GPU) surface here as an Error naming `kernel`; faults inside a kernel
/// surface at the next call that waits for the stream.
inline void check_launch(const char* kernel, const OpContext& ctx) {
  check(cudaGetLastError(), kernel, device_of(ctx));
}

/// Threads per block of the elementwise kernels.
constexpr int kBlockSize = 256;

/// Blocks for a grid-stride loop over `n` items with `block` threads each: enough to fill the
/// GPU, capped so that huge arrays loop instead of launching millions of blocks.
inline unsigned grid_for(int64_t n, int block = kBlockSize) {
  int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 16));
}

/// Temporary device memory for one kernel call: the op's declared workspace when it is large
/// enough, else a block of the device pool (OpContext::temp_allocator) taken on the op's stream.
/// Freed when the Scratch goes out of scope, after the kernels using it were launched: the pool
/// hands it out again on the same stream only behind them.
class Scratch {
 public:
  Scratch(const OpContext& ctx, size_t bytes) {
    if (bytes == 0) return;
    if (ctx.workspace != nullptr && ctx.workspace_bytes >= bytes) {
      ptr_ = ctx.workspace;
      return;
    }
    WEFT_CHECK(ctx.temp_allocator != nullptr)
        << "a CUDA kernel needs " << bytes
        << " bytes of scratch memory, and its caller gave neither a workspace nor a pool";
    owned_ = ctx.temp_allocator->allocate_on(bytes, ctx.run.stream);
    ptr_ = owned_.get();
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  DataPtr owned_;
  void* ptr_ = nullptr;
};

}  // namespace weft::cuda
