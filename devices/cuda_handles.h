// Per-stream library handles: cuBLAS, cuBLASLt and cuDNN bound to one CUDA stream, with the
// workspace cuBLAS(Lt) uses there. CUDA builds only.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#include <cstddef>

#include "devices/device_api.h"

namespace weft::cuda {

/// The handles of one stream. Created on the first request for that stream (cuDNN's handle
/// takes a while to create) and kept until release_handles(stream). Work submitted through them
/// is ordered on the stream. One thread at a time uses a stream (the engine gives each stream
/// to one worker), so the handles need no lock.
struct StreamHandles {
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublas_lt = nullptr;
  cudnnHandle_t cudnn = nullptr;
  /// Device memory for cuBLAS/cuBLASLt (set with cublasSetWorkspace), reserved with the handles.
  void* blas_workspace = nullptr;
  size_t blas_workspace_bytes = 0;
};

/// The handles of `stream` (a CUDA stream). Thread-safe; throws Error naming the library call
/// when a handle cannot be created.
StreamHandles& handles_for(const Stream& stream);

/// Destroys the handles of `stream`, if any (call before destroying the stream). Thread-safe.
void release_handles(const Stream& stream);

}  // namespace weft::cuda
