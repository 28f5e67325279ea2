// Own CUDA kernels of the cudnn family (ops/cuda/cudnn_nn.cc), written in cudnn_nn_kernels.cu:
// pooling with MXNet's window rules, the activations, LeakyReLU and dropout. Host launchers; all
// run on `stream` and take OpReq-like `add` flags (true: accumulate into the output).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"

namespace weft::cuda {

/// Pooling geometry with three spatial slots (leading slots trivial), as ops/cpu/pooling.cc's.
struct PoolDims {
  int64_t planes = 0;  // N * C
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1},
          p[3] = {0, 0, 0};
  int type = 0;  // 0 max, 1 avg, 2 sum, 3 lp
  bool include_pad = true;
  int64_t p_value = 1;
};
void pool_forward(DType dtype, const PoolDims& d, const void* x, void* y, bool add,
                  cudaStream_t stream);
/// dx += the gradient; the caller zeroes dx first unless accumulating.
void pool_backward_add(DType dtype, const PoolDims& d, const void* dy, const void* x, const void* y,
                       void* dx, cudaStream_t stream);

/// Activation: kind 0 relu, 1 sigmoid, 2 tanh, 3 softrelu, 4 softsign (ActType's order).
void act_forward(DType dtype, int kind, const void* x, void* y, int64_t n, bool add,
                 cudaStream_t stream);
void act_backward(DType dtype, int kind, const void* dy, const void* x, const void* y, void* dx,
                  int64_t n, bool add, cudaStream_t stream);

/// LeakyReLU of one element per slope: kind is LeakyType's order (0 leaky, 1 prelu, 2 rrelu,
/// 3 elu, 4 selu, 5 gelu). prelu reads slope gamma[(i / inner) % channels] (channels 1: shared);
/// rrelu reads slope mask[i].
struct LeakyArgs {
  int kind = 0;
  double slope = 0.25;
  const void* gamma = nullptr;
  const void* mask = nullptr;
  int64_t channels = 1, inner = 1;
};
void leaky_forward(DType dtype, const LeakyArgs& a, const void* x, void* y, int64_t n, bool add,
                   cudaStream_t stream);
void leaky_backward(DType dtype, const LeakyArgs& a, const void* dy, const void* x, void* dx,
                    int64_t n, bool add, cudaStream_t stream);
/// prelu's slope gradient: dg[c] (=, or +=) Σ dy·x over x ≤ 0 of channel c (all when channels
/// is 1).
void prelu_gamma_grad(DType dtype, const void* dy, const void* x, int64_t n, int64_t channels,
                      int64_t inner, void* dg, bool add, cudaStream_t stream);
/// rrelu's slopes: uniform in [lower, upper] per element from (seed, index).
void rrelu_mask(DType dtype, void* mask, int64_t n, double lower, double upper, uint64_t seed,
                cudaStream_t stream);

/// Broadcast of a mask over data of up to kMaxDims dims: the mask's stride per data dim (0 where
/// the mask has size 1).
constexpr int kMaxDims = 8;
struct BcastDims {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t mstride[kMaxDims] = {};
  bool same = true;  // the mask has the data's shape
};
/// A random kernel's seed: `value` itself; or, inside a captured graph, when `word` is set,
/// seed_word::combine(*word, value), read on the device when the kernel runs (Note [Random
/// numbers in captured graphs] in graph/graph_capture.cc).
struct KernelSeed {
  uint64_t value = 0;
  const uint64_t* word = nullptr;
};
/// Dropout's mask: m[j] = scale when uniform(seed, j) < keep, else 0, for `mn` mask elements.
void dropout_mask(DType dtype, void* mask, int64_t mn, double keep, double scale, KernelSeed seed,
                  cudaStream_t stream);
/// y (=, or +=) x · mask[broadcast index] for n elements. `mask` null: the mask value is drawn
/// on the fly as dropout_mask would.
void dropout_apply(DType dtype, const BcastDims& b, const void* x, const void* mask, void* y,
                   int64_t n, bool add, double keep, double scale, KernelSeed seed,
                   cudaStream_t stream);
/// y[j] = seed_word::next(x[j]) on `n` seed words (`_random_seed_next`); y may be x.
void random_seed_next(const uint64_t* x, uint64_t* y, int64_t n, cudaStream_t stream);
/// y (=, or +=) x, or y = c for `fill`.
void copy_or_add(DType dtype, const void* x, void* y, int64_t n, bool add, cudaStream_t stream);
void fill_value(DType dtype, void* y, int64_t n, double v, cudaStream_t stream);

/// LRN across channels of data viewed (outer, channels, inner): norm = knorm + alpha/nsize · Σ x²
/// over the channel window, y = x · norm^-beta. A null `y` / `norm` is not written; `add_*`
/// accumulate.
struct LrnArgs {
  int64_t outer = 1, channels = 1, inner = 1, nsize = 1;
  double alpha = 1e-4, beta = 0.75, knorm = 2;
};
void lrn_forward(DType dtype, const LrnArgs& a, const void* x, void* y, bool add_y, void* norm,
                 bool add_norm, cudaStream_t stream);
void lrn_backward(DType dtype, const LrnArgs& a, const void* dy, const void* x, const void* norm,
                  void* dx, bool add, cudaStream_t stream);

/// BatchNorm folded into a convolution (float32): s = (fix_gamma ? 1 : gamma[c]) / sqrt(var[c] +
/// eps), w_out = w · s per output channel c (`per` weights each), b_out = beta + (bias - mean) · s
/// (`bias` may be null).
void fold_batch_norm(const float* w, const float* bias, const float* gamma, const float* beta,
                     const float* mean, const float* var, float eps, bool fix_gamma, int64_t oc,
                     int64_t per, float* w_out, float* b_out, cudaStream_t stream);

/// y = a + b with NumPy broadcasting, for y of `y.ndim` dims; a_stride / b_stride are the
/// operands' element strides per y dim (0 where they broadcast).
struct Bcast2 {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t a_stride[kMaxDims] = {};
  int64_t b_stride[kMaxDims] = {};
};
void broadcast_add(DType dtype, const Bcast2& d, const void* a, const void* b, void* y, int64_t n,
                   cudaStream_t stream);

}  // namespace weft::cuda
