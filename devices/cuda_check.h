// Error checks for the CUDA runtime, cuBLAS and cuDNN: a failed call becomes a weft Error that
// names the call, the device and the library's own message. CUDA builds only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace weft::cuda {

/// Throws Error "<call> on cuda:<device> failed: <message>" unless `status` is success. Clears
/// the thread's last-error state first, so a recoverable failure does not poison later calls.
void check(cudaError_t status, const char* call, int device);
/// Likewise for cuBLAS and cuBLASLt statuses.
void check(cublasStatus_t status, const char* call, int device);
/// Likewise for cuDNN statuses (with cuDNN's last error message when it has one).
void check(cudnnStatus_t status, const char* call, int device);

}  // namespace weft::cuda

/// Checks a CUDA, cuBLAS or cuDNN call on device `dev`: WEFT_CUDA_CALL(cudaMemsetAsync(...), 0).
#define WEFT_CUDA_CALL(expr, dev) ::weft::cuda::check((expr), #expr, (dev))
