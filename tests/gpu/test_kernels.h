// Small CUDA kernels the GPU engine tests push as operations (tests/gpu/test_kernels.cu).
#pragma once

#include <cstdint>

namespace weft::testing {

/// dst[i] = dst[i] * 31 + a[i] + b[i] + k (int64 arithmetic, wraps), on `stream`. a or b may be
/// null (then 0). When `spin_cycles` > 0 each thread first busy-waits that many clock cycles, so
/// the kernel is slow enough for a missing wait to show.
void launch_combine(int64_t* dst, const int64_t* a, const int64_t* b, int64_t k, int64_t n,
                    long long spin_cycles, void* stream);
/// Launches a kernel with an invalid configuration (2048 threads per block) and returns the
/// error the launch reported as text ("" when it did not fail).
const char* launch_invalid(void* stream);

}  // namespace weft::testing
