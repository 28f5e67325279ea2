// CudaDeviceGuard: makes a CUDA device current for a scope (CUDA builds only).
#pragma once

#include <cuda_runtime_api.h>

namespace weft {

/// Sets the calling thread's current CUDA device to `ordinal` and restores the previous one at
/// scope exit. Call from one thread.
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int ordinal) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != ordinal) cudaSetDevice(ordinal);
  }
  ~CudaDeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace weft
