// WEFT_HOST_DEVICE: marks a function that both the host compiler (ops/cpu/) and nvcc's device
// pass (ops/cuda/) compile, for the arithmetic and geometry written once for both devices.
#pragma once

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif
