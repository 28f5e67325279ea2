// Internals of the op test harness shared by its files: dtype casts of host tensors, and the CUDA
// side (op_harness_cuda.cc: device memory, the harness's stream, the temporary-memory pool).
#pragma once

#include <cstddef>
#include <vector>

#include "base/build_config.h"
#include "devices/device_api.h"
#include "memory/allocator.h"
#include "tests/ops/op_harness.h"

namespace weft::testing::detail {

/// `t` with dtype `to`, its values rounded as a buffer of that dtype would hold them.
HostTensor cast_to(const HostTensor& t, DType to);

#if WEFT_USE_CUDA

/// Whether a CUDA device is present (the build has CUDA).
bool cuda_device_present();

/// Device memory of one harness run on cuda:0, freed when the run ends. Work is ordered on the
/// harness's stream (one per process, created on first use).
class CudaScratch {
 public:
  CudaScratch();
  ~CudaScratch();
  CudaScratch(const CudaScratch&) = delete;
  CudaScratch& operator=(const CudaScratch&) = delete;

  /// `bytes` of zeroed device memory (at least 1 byte, never null).
  void* alloc(size_t bytes);
  /// Host → device and device → host copies on the stream (the download is complete on return).
  void upload(void* device_ptr, const void* host, size_t bytes);
  void download(void* host, const void* device_ptr, size_t bytes);
  /// Waits for the stream; throws Error naming the failure when a kernel failed.
  void synchronize();
  const Stream& stream() const;
  /// A PooledAllocator over make_cuda_allocator(0), kept for the process.
  Allocator* temp_allocator() const;

 private:
  std::vector<void*> buffers_;
};
#endif  // WEFT_USE_CUDA

}  // namespace weft::testing::detail
