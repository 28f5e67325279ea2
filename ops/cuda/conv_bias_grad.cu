// The bias gradient of Convolution and Deconvolution: db[c] (=, or += with kAdd) the sum of
// dy[n, c, s] over the batch and the spatial positions. cuDNN's cudnnConvolutionBackwardBias
// answers NOT_SUPPORTED for bfloat16, so weft reduces itself, the same way for every type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/cuda/conv_bias_grad.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernel_util.h"

namespace weft::cuda {

namespace {

constexpr int kThreads = 256;

// One block per channel: each thread sums a strided share of the batch × spatial elements in
// the accumulation type, then the block reduces in shared memory.
template <typename T>
__global__ void channel_sum_kernel(const T* dy, int64_t batch, int64_t channels, int64_t size,
                                   T* db, bool add) {
  using A = acc_t<T>;
  __shared__ A partial[kThreads];
  const int64_t c = blockIdx.x;
  const int64_t total = batch * size;
  A sum = A(0);
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int64_t n = i / size, s = i - n * size;
    sum += to_acc(dy[(n * channels + c) * size + s]);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    A value = partial[0];
    if (add) value += to_acc(db[c]);
    db[c] = from_acc<T>(value);
  }
}

}  // namespace

void channel_bias_grad(const OpContext& ctx, DType dtype, const void* dy, int64_t batch,
                       int64_t channels, int64_t size, void* db, bool add) {
  if (channels == 0) return;
  WEFT_CUDA_FLOAT_SWITCH(dtype, DT, "Convolution bias gradient", {
    channel_sum_kernel<DT><<<static_cast<unsigned>(channels), kThreads, 0, stream_of(ctx)>>>(
        static_cast<const DT*>(dy), batch, channels, size, static_cast<DT*>(db), add);
  });
  check_launch("channel_sum_kernel", ctx);
}

}  // namespace weft::cuda
