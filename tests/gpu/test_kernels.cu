// Small CUDA kernels the GPU engine tests push as operations.
#include <cuda_runtime.h>

#include "tests/gpu/test_kernels.h"

namespace weft::testing {

namespace {

__global__ void combine_kernel(int64_t* dst, const int64_t* a, const int64_t* b, int64_t k,
                               int64_t n, long long spin_cycles) {
  if (spin_cycles > 0) {
    long long start = clock64();
    while (clock64() - start < spin_cycles) {
    }
  }
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    uint64_t v = static_cast<uint64_t>(dst[i]) * 31u;
    if (a != nullptr) v += static_cast<uint64_t>(a[i]);
    if (b != nullptr) v += static_cast<uint64_t>(b[i]);
    dst[i] = static_cast<int64_t>(v + static_cast<uint64_t>(k));
  }
}

__global__ void noop_kernel() {}

}  // namespace

void launch_combine(int64_t* dst, const int64_t* a, const int64_t* b, int64_t k, int64_t n,
                    long long spin_cycles, void* stream) {
  int blocks = static_cast<int>((n + 255) / 256);
  if (blocks < 1) blocks = 1;
  if (blocks > 1024) blocks = 1024;
  combine_kernel<<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(dst, a, b, k, n,
                                                                        spin_cycles);
}

const char* launch_invalid(void* stream) {
  noop_kernel<<<1, 2048, 0, static_cast<cudaStream_t>(stream)>>>();
  cudaError_t status = cudaGetLastError();
  return status == cudaSuccess ? "" : cudaGetErrorString(status);
}

}  // namespace weft::testing
