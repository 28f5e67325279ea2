// Own CUDA kernels of the cudnn family; see cudnn_nn_kernels.h.
#include <curand_kernel.h>

#include "ops/cuda/cudnn_nn_kernels.h"
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernel_util.h"
#include "ops/defs/seed_word.h"

namespace weft::cuda {
namespace {

template <typename A>
__device__ __forceinline__ A lowest();
template <>
__device__ __forceinline__ float lowest<float>() {
  return -3.402823466e+38f;
}
template <>
__device__ __forceinline__ double lowest<double>() {
  return -1.7976931348623157e+308;
}

// ---- pooling -----------------------------------------------------------------------------------

struct Span {
  int64_t lo, hi, padded;
};
// One output's window along slot d, as window_span in ops/cpu/pooling.cc.
__device__ __forceinline__ Span span_of(const PoolDims& g, int d, int64_t o, bool max_rule) {
  int64_t start = o * g.s[d] - g.p[d];
  int64_t end = max_rule ? min(start + g.k[d], g.in[d]) : min(start + g.k[d], g.in[d] + g.p[d]);
  const int64_t padded = end - start;
  start = max(start, int64_t{0});
  end = min(end, g.in[d]);
  return {start, max(end, start), padded};
}

template <typename A>
__device__ __forceinline__ A pow_p(A v, int64_t pv) {
  if (pv == 1) return v;
  if (pv == 2) return v * v;
  if (pv == 3) return v * v * v;
  return pow(v, static_cast<A>(pv));
}
template <typename A>
__device__ __forceinline__ A root_p(A v, int64_t pv) {
  if (pv == 1) return v;
  if (pv == 2) return sqrt(v);
  if (pv == 3) return cbrt(v);
  return pow(v, A(1) / static_cast<A>(pv));
}

template <typename T>
__global__ void pool_forward_kernel(PoolDims g, const T* x, T* y, bool add) {
  using A = acc_t<T>;
  const int64_t os = g.out[0] * g.out[1] * g.out[2], is = g.in[0] * g.in[1] * g.in[2];
  WEFT_CUDA_KERNEL_LOOP(i, g.planes * os) {
    const int64_t c = i / os, oi = i % os;
    const int64_t ow = oi % g.out[2], oh = (oi / g.out[2]) % g.out[1],
                  od = oi / (g.out[2] * g.out[1]);
    const bool mx = g.type == 0;
    const Span sd = span_of(g, 0, od, mx), sh = span_of(g, 1, oh, mx), sw = span_of(g, 2, ow, mx);
    const T* xp = x + c * is;
    A v;
    if (mx) {
      v = lowest<A>();
      for (int64_t id = sd.lo; id < sd.hi; ++id)
        for (int64_t ih = sh.lo; ih < sh.hi; ++ih) {
          const T* row = xp + (id * g.in[1] + ih) * g.in[2];
          for (int64_t iw = sw.lo; iw < sw.hi; ++iw) {
            const A e = to_acc(row[iw]);
            v = e > v ? e : v;
          }
        }
    } else {
      A sum = A(0);
      for (int64_t id = sd.lo; id < sd.hi; ++id)
        for (int64_t ih = sh.lo; ih < sh.hi; ++ih) {
          const T* row = xp + (id * g.in[1] + ih) * g.in[2];
          for (int64_t iw = sw.lo; iw < sw.hi; ++iw)
            sum += g.type == 3 ? pow_p(to_acc(row[iw]), g.p_value) : to_acc(row[iw]);
        }
      if (g.type == 1) {
        const int64_t count = g.include_pad ? sd.padded * sh.padded * sw.padded
                                            : (sd.hi - sd.lo) * (sh.hi - sh.lo) * (sw.hi - sw.lo);
        v = count > 0 ? sum / static_cast<A>(count) : A(0);
      } else if (g.type == 3) {
        v = root_p(sum, g.p_value);
      } else {
        v = sum;
      }
    }
    y[i] = from_acc<T>(add ? to_acc(y[i]) + v : v);
  }
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* p, acc_t<T> v) {
  atomicAdd(p, from_acc<T>(v));
}

// Note [Pooling gradient on CUDA]: one thread per output scatters its gradient with atomics
// (windows overlap when the stride is below the kernel). Max pooling gives it to the first input
// of the window equal to the output, like the CPU kernel.
template <typename T>
__global__ void pool_backward_kernel(PoolDims g, const T* dy, const T* x, const T* y, T* dx) {
  using A = acc_t<T>;
  const int64_t os = g.out[0] * g.out[1] * g.out[2], is = g.in[0] * g.in[1] * g.in[2];
  WEFT_CUDA_KERNEL_LOOP(i, g.planes * os) {
    const int64_t c = i / os, oi = i % os;
    const int64_t ow = oi % g.out[2], oh = (oi / g.out[2]) % g.out[1],
                  od = oi / (g.out[2] * g.out[1]);
    const bool mx = g.type == 0;
    const Span sd = span_of(g, 0, od, mx), sh = span_of(g, 1, oh, mx), sw = span_of(g, 2, ow, mx);
    const T* xp = x + c * is;
    T* gp = dx + c * is;
    const A go = to_acc(dy[i]);
    if (mx) {
      const A out = to_acc(y[i]);
      bool done = false;
      for (int64_t id = sd.lo; id < sd.hi && !done; ++id)
        for (int64_t ih = sh.lo; ih < sh.hi && !done; ++ih)
          for (int64_t iw = sw.lo; iw < sw.hi; ++iw) {
            const int64_t idx = (id * g.in[1] + ih) * g.in[2] + iw;
            if (to_acc(xp[idx]) == out) {
              atomic_add(gp + idx, go);
              done = true;
              break;
            }
          }
      continue;
    }
    A scale = A(1);
    if (g.type == 1) {
      const int64_t count = g.include_pad ? sd.padded * sh.padded * sw.padded
                                          : (sd.hi - sd.lo) * (sh.hi - sh.lo) * (sw.hi - sw.lo);
      scale = count > 0 ? A(1) / static_cast<A>(count) : A(0);
    }
    const A out = to_acc(y[i]);
    for (int64_t id = sd.lo; id < sd.hi; ++id)
      for (int64_t ih = sh.lo; ih < sh.hi; ++ih) {
        const int64_t base = (id * g.in[1] + ih) * g.in[2];
        for (int64_t iw = sw.lo; iw < sw.hi; ++iw) {
          A gv = go * scale;
          if (g.type == 3) {
            const A xv = to_acc(xp[base + iw]);
            const int64_t pv = g.p_value;
            gv = go;
            if (pv == 2)
              gv = go * xv / out;
            else if (pv == 3)
              gv = go * xv * xv / (out * out);
            else if (pv != 1)
              gv = go * pow(xv / out, static_cast<A>(pv - 1));
          }
          atomic_add(gp + base + iw, gv);
        }
      }
  }
}

// ---- activations -------------------------------------------------------------------------------

template <typename A>
__device__ __forceinline__ A act_value(int t, A x) {
  switch (t) {
    case 0:
      return x > A(0) ? x : A(0);
    case 1:
      return A(1) / (A(1) + exp(-x));
    case 2:
      return tanh(x);
    case 3:
      return x > A(20) ? x : log1p(exp(x));
    default:
      return x / (A(1) + fabs(x));
  }
}
template <typename A>
__device__ __forceinline__ A act_grad(int t, A x, A y, A dy) {
  switch (t) {
    case 0:
      return x > A(0) ? dy : A(0);
    case 1:
      return dy * y * (A(1) - y);
    case 2:
      return dy * (A(1) - y * y);
    case 3:
      return dy / (A(1) + exp(-x));
    default: {
      const A d = A(1) + fabs(x);
      return dy / (d * d);
    }
  }
}

template <typename T>
__device__ __forceinline__ void put(T* p, bool add, acc_t<T> v) {
  *p = from_acc<T>(add ? to_acc(*p) + v : v);
}

template <typename T>
__global__ void act_forward_kernel(int t, const T* x, T* y, int64_t n, bool add) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { put(y + i, add, act_value(t, to_acc(x[i]))); }
}
template <typename T>
__global__ void act_backward_kernel(int t, const T* dy, const T* x, const T* y, T* dx, int64_t n,
                                    bool add) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    put(dx + i, add, act_grad(t, to_acc(x[i]), to_acc(y[i]), to_acc(dy[i])));
  }
}

// ---- LeakyReLU ---------------------------------------------------------------------------------
// Computed in double like the CPU kernel (leaky_value / leaky_deriv in ops/cpu/activation.cc).
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluLambda = 1.0507009873554804934193349852946;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

template <typename T>
__device__ __forceinline__ double slope_at(const LeakyArgs& a, int64_t i) {
  if (a.kind == 1) {
    const T* g = static_cast<const T*>(a.gamma);
    return static_cast<double>(to_acc(g[a.channels == 1 ? 0 : (i / a.inner) % a.channels]));
  }
  if (a.kind == 2) return static_cast<double>(to_acc(static_cast<const T*>(a.mask)[i]));
  return a.slope;
}

template <typename T>
__global__ void leaky_forward_kernel(LeakyArgs a, const T* x, T* y, int64_t n, bool add) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    const double v = static_cast<double>(to_acc(x[i]));
    double r;
    switch (a.kind) {
      case 3:
        r = v > 0 ? v : a.slope * expm1(v);
        break;
      case 4:
        r = kSeluLambda * (v > 0 ? v : kSeluAlpha * expm1(v));
        break;
      case 5:
        r = 0.5 * v * (1 + erf(v * kSqrtHalf));
        break;
      default:
        r = v > 0 ? v : slope_at<T>(a, i) * v;
    }
    put(y + i, add, static_cast<acc_t<T>>(r));
  }
}

template <typename T>
__global__ void leaky_backward_kernel(LeakyArgs a, const T* dy, const T* x, T* dx, int64_t n,
                                      bool add) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    const double v = static_cast<double>(to_acc(x[i]));
    double d;
    switch (a.kind) {
      case 3:
        d = v > 0 ? 1 : a.slope * exp(v);
        break;
      case 4:
        d = kSeluLambda * (v > 0 ? 1 : kSeluAlpha * exp(v));
        break;
      case 5:
        d = 0.5 * (1 + erf(v * kSqrtHalf)) + v * exp(-0.5 * v * v) * kInvSqrt2Pi;
        break;
      default:
        d = v > 0 ? 1 : slope_at<T>(a, i);
    }
    put(dx + i, add, static_cast<acc_t<T>>(static_cast<double>(to_acc(dy[i])) * d));
  }
}

// One block per channel sums dy·x over the channel's non-positive x; its threads stride over the
// channel's (outer, inner) positions together, so a small inner size still keeps them busy.
template <typename T>
__global__ void prelu_gamma_grad_kernel(const T* dy, const T* x, int64_t n, int64_t channels,
                                        int64_t inner, T* dg, bool add) {
  __shared__ double part[kBlockSize];
  const int64_t c = blockIdx.x;
  const int64_t count = channels == 1 ? n : n / channels;  // positions of channel c
  double sum = 0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    const int64_t idx = channels == 1 ? t : ((t / inner) * channels + c) * inner + t % inner;
    const double v = static_cast<double>(to_acc(x[idx]));
    if (!(v > 0)) sum += static_cast<double>(to_acc(dy[idx])) * v;
  }
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) put(dg + c, add, static_cast<acc_t<T>>(part[0]));
}

// ---- random masks ------------------------------------------------------------------------------

// A uniform in [0, 1) from (seed, index): Philox4x32-10 with the index as its subsequence.
__device__ __forceinline__ double uniform_at(uint64_t seed, int64_t j) {
  curandStatePhilox4_32_10_t st;
  curand_init(seed, static_cast<unsigned long long>(j), 0, &st);
  // curand_uniform_double is in (0, 1]; map to [0, 1).
  return 1.0 - curand_uniform_double(&st);
}

template <typename T>
__global__ void rrelu_mask_kernel(T* m, int64_t n, double lo, double hi, uint64_t seed) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    m[i] = from_acc<T>(static_cast<acc_t<T>>(lo == hi ? lo : lo + (hi - lo) * uniform_at(seed, i)));
  }
}

// The seed a kernel uses: read on the device inside a captured graph (KernelSeed).
__device__ __forceinline__ uint64_t resolve(KernelSeed s) {
  return s.word ? seed_word::combine(*s.word, s.value) : s.value;
}

template <typename T>
__global__ void dropout_mask_kernel(T* m, int64_t n, double keep, double scale, KernelSeed ks) {
  const uint64_t seed = resolve(ks);
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    m[i] = from_acc<T>(static_cast<acc_t<T>>(uniform_at(seed, i) < keep ? scale : 0.0));
  }
}

__device__ __forceinline__ int64_t mask_index(const BcastDims& b, int64_t k) {
  if (b.same) return k;
  int64_t rem = k, mi = 0;
  for (int d = b.ndim - 1; d >= 0; --d) {
    mi += (rem % b.shape[d]) * b.mstride[d];
    rem /= b.shape[d];
  }
  return mi;
}

template <typename T>
__global__ void dropout_apply_kernel(BcastDims b, const T* x, const T* m, T* y, int64_t n, bool add,
                                     double keep, double scale, KernelSeed ks) {
  using A = acc_t<T>;
  const uint64_t seed = m ? 0 : resolve(ks);
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    const int64_t mi = mask_index(b, k);
    const A mv = m ? to_acc(m[mi])
                   : to_acc(from_acc<T>(static_cast<A>(uniform_at(seed, mi) < keep ? scale : 0.0)));
    put(y + k, add, to_acc(x[k]) * mv);
  }
}

template <typename T>
__global__ void copy_or_add_kernel(const T* x, T* y, int64_t n, bool add) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { put(y + i, add, to_acc(x[i])); }
}
template <typename T>
__global__ void fill_kernel(T* y, int64_t n, double v) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { y[i] = from_acc<T>(static_cast<acc_t<T>>(v)); }
}

// ---- LRN ---------------------------------------------------------------------------------------
// In double like the CPU kernel (ops/cpu/layer_norm.cc).

template <typename T>
__global__ void lrn_forward_kernel(LrnArgs a, const T* x, T* y, bool add_y, T* norm,
                                   bool add_norm) {
  const int64_t C = a.channels, inner = a.inner, half = a.nsize / 2;
  const double salpha = a.alpha / static_cast<double>(a.nsize);
  WEFT_CUDA_KERNEL_LOOP(k, a.outer * C * inner) {
    const int64_t i = k % inner, c = (k / inner) % C, n = k / (inner * C);
    const int64_t lo = max(int64_t{0}, c - half), hi = min(C - 1, c + half);
    double sq = 0;
    for (int64_t j = lo; j <= hi; ++j) {
      const double v = static_cast<double>(to_acc(x[(n * C + j) * inner + i]));
      sq += v * v;
    }
    const double nm = a.knorm + salpha * sq;
    if (norm) put(norm + k, add_norm, static_cast<acc_t<T>>(nm));
    if (y) {
      put(y + k, add_y,
          static_cast<acc_t<T>>(static_cast<double>(to_acc(x[k])) * pow(nm, -a.beta)));
    }
  }
}

template <typename T>
__global__ void lrn_backward_kernel(LrnArgs a, const T* dy, const T* x, const T* nmv, T* dx,
                                    bool add) {
  const int64_t C = a.channels, inner = a.inner, half = a.nsize / 2;
  const double coef = 2.0 * a.alpha * a.beta / static_cast<double>(a.nsize);
  WEFT_CUDA_KERNEL_LOOP(k, a.outer * C * inner) {
    const int64_t i = k % inner, c = (k / inner) % C, n = k / (inner * C);
    const int64_t lo = max(int64_t{0}, c - half), hi = min(C - 1, c + half);
    double acc = 0;
    for (int64_t j = lo; j <= hi; ++j) {
      const int64_t idx = (n * C + j) * inner + i;
      acc += static_cast<double>(to_acc(dy[idx])) * static_cast<double>(to_acc(x[idx])) *
             pow(static_cast<double>(to_acc(nmv[idx])), -a.beta - 1);
    }
    const double g =
        static_cast<double>(to_acc(dy[k])) * pow(static_cast<double>(to_acc(nmv[k])), -a.beta) -
        coef * static_cast<double>(to_acc(x[k])) * acc;
    put(dx + k, add, static_cast<acc_t<T>>(g));
  }
}

// ---- _fused_conv_bn_act helpers
// ------------------------------------------------------------------

__global__ void fold_bn_kernel(const float* w, const float* bias, const float* gamma,
                               const float* beta, const float* mean, const float* var, float eps,
                               bool fix_gamma, int64_t oc, int64_t per, float* w_out,
                               float* b_out) {
  WEFT_CUDA_KERNEL_LOOP(i, oc * per) {
    const int64_t c = i / per;
    const float scale = (fix_gamma ? 1.0f : gamma[c]) / sqrtf(var[c] + eps);
    w_out[i] = w[i] * scale;
    if (i % per == 0) b_out[c] = beta[c] + ((bias ? bias[c] : 0.0f) - mean[c]) * scale;
  }
}

template <typename T>
__global__ void broadcast_add_kernel(Bcast2 d, const T* a, const T* b, T* y, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    int64_t rem = k, ai = 0, bi = 0;
    for (int i = d.ndim - 1; i >= 0; --i) {
      const int64_t q = rem % d.shape[i];
      rem /= d.shape[i];
      ai += q * d.a_stride[i];
      bi += q * d.b_stride[i];
    }
    y[k] = from_acc<T>(to_acc(a[ai]) + to_acc(b[bi]));
  }
}

}  // namespace

#define WEFT_LAUNCH_(what, n, ...)                        \
  do {                                                    \
    if ((n) <= 0) return;                                 \
    WEFT_CUDA_FLOAT_SWITCH(dtype, DT, what, __VA_ARGS__); \
  } while (0)

void pool_forward(DType dtype, const PoolDims& d, const void* x, void* y, bool add,
                  cudaStream_t stream) {
  const int64_t n = d.planes * d.out[0] * d.out[1] * d.out[2];
  WEFT_LAUNCH_("Pooling", n,
               pool_forward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   d, static_cast<const DT*>(x), static_cast<DT*>(y), add));
}

void pool_backward_add(DType dtype, const PoolDims& d, const void* dy, const void* x, const void* y,
                       void* dx, cudaStream_t stream) {
  const int64_t n = d.planes * d.out[0] * d.out[1] * d.out[2];
  WEFT_LAUNCH_("_backward_Pooling", n,
               pool_backward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   d, static_cast<const DT*>(dy), static_cast<const DT*>(x),
                   static_cast<const DT*>(y), static_cast<DT*>(dx)));
}

void act_forward(DType dtype, int kind, const void* x, void* y, int64_t n, bool add,
                 cudaStream_t stream) {
  WEFT_LAUNCH_("Activation", n,
               act_forward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   kind, static_cast<const DT*>(x), static_cast<DT*>(y), n, add));
}

void act_backward(DType dtype, int kind, const void* dy, const void* x, const void* y, void* dx,
                  int64_t n, bool add, cudaStream_t stream) {
  WEFT_LAUNCH_("_backward_Activation", n,
               act_backward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   kind, static_cast<const DT*>(dy), static_cast<const DT*>(x),
                   static_cast<const DT*>(y), static_cast<DT*>(dx), n, add));
}

void leaky_forward(DType dtype, const LeakyArgs& a, const void* x, void* y, int64_t n, bool add,
                   cudaStream_t stream) {
  WEFT_LAUNCH_("LeakyReLU", n,
               leaky_forward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   a, static_cast<const DT*>(x), static_cast<DT*>(y), n, add));
}

void leaky_backward(DType dtype, const LeakyArgs& a, const void* dy, const void* x, void* dx,
                    int64_t n, bool add, cudaStream_t stream) {
  WEFT_LAUNCH_(
      "_backward_LeakyReLU", n,
      leaky_backward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
          a, static_cast<const DT*>(dy), static_cast<const DT*>(x), static_cast<DT*>(dx), n, add));
}

void prelu_gamma_grad(DType dtype, const void* dy, const void* x, int64_t n, int64_t channels,
                      int64_t inner, void* dg, bool add, cudaStream_t stream) {
  WEFT_LAUNCH_("_backward_LeakyReLU", channels,
               prelu_gamma_grad_kernel<DT>
               <<<static_cast<unsigned>(channels), kBlockSize, 0, stream>>>(
                   static_cast<const DT*>(dy), static_cast<const DT*>(x), n, channels, inner,
                   static_cast<DT*>(dg), add));
}

void rrelu_mask(DType dtype, void* mask, int64_t n, double lower, double upper, uint64_t seed,
                cudaStream_t stream) {
  WEFT_LAUNCH_("LeakyReLU", n,
               rrelu_mask_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   static_cast<DT*>(mask), n, lower, upper, seed));
}

void dropout_mask(DType dtype, void* mask, int64_t mn, double keep, double scale, KernelSeed seed,
                  cudaStream_t stream) {
  WEFT_LAUNCH_("Dropout", mn,
               dropout_mask_kernel<DT><<<grid_for(mn), kBlockSize, 0, stream>>>(
                   static_cast<DT*>(mask), mn, keep, scale, seed));
}

void dropout_apply(DType dtype, const BcastDims& b, const void* x, const void* mask, void* y,
                   int64_t n, bool add, double keep, double scale, KernelSeed seed,
                   cudaStream_t stream) {
  WEFT_LAUNCH_("Dropout", n,
               dropout_apply_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   b, static_cast<const DT*>(x), static_cast<const DT*>(mask), static_cast<DT*>(y),
                   n, add, keep, scale, seed));
}

__global__ void random_seed_next_kernel(const uint64_t* x, uint64_t* y, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { y[i] = seed_word::next(x[i]); }
}

void random_seed_next(const uint64_t* x, uint64_t* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  random_seed_next_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(x, y, n);
}

void copy_or_add(DType dtype, const void* x, void* y, int64_t n, bool add, cudaStream_t stream) {
  WEFT_LAUNCH_("Dropout", n,
               copy_or_add_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   static_cast<const DT*>(x), static_cast<DT*>(y), n, add));
}

void fill_value(DType dtype, void* y, int64_t n, double v, cudaStream_t stream) {
  WEFT_LAUNCH_("Dropout", n,
               fill_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(static_cast<DT*>(y), n, v));
}

void lrn_forward(DType dtype, const LrnArgs& a, const void* x, void* y, bool add_y, void* norm,
                 bool add_norm, cudaStream_t stream) {
  const int64_t n = a.outer * a.channels * a.inner;
  WEFT_LAUNCH_("LRN", n,
               lrn_forward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   a, static_cast<const DT*>(x), static_cast<DT*>(y), add_y, static_cast<DT*>(norm),
                   add_norm));
}

void lrn_backward(DType dtype, const LrnArgs& a, const void* dy, const void* x, const void* norm,
                  void* dx, bool add, cudaStream_t stream) {
  const int64_t n = a.outer * a.channels * a.inner;
  WEFT_LAUNCH_("_backward_LRN", n,
               lrn_backward_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
                   a, static_cast<const DT*>(dy), static_cast<const DT*>(x),
                   static_cast<const DT*>(norm), static_cast<DT*>(dx), add));
}

void fold_batch_norm(const float* w, const float* bias, const float* gamma, const float* beta,
                     const float* mean, const float* var, float eps, bool fix_gamma, int64_t oc,
                     int64_t per, float* w_out, float* b_out, cudaStream_t stream) {
  const int64_t n = oc * per;
  if (n <= 0) return;
  fold_bn_kernel<<<grid_for(n), kBlockSize, 0, stream>>>(w, bias, gamma, beta, mean, var, eps,
                                                         fix_gamma, oc, per, w_out, b_out);
}

void broadcast_add(DType dtype, const Bcast2& d, const void* a, const void* b, void* y, int64_t n,
                   cudaStream_t stream) {
  WEFT_LAUNCH_(
      "_fused_conv_bn_act", n,
      broadcast_add_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(
          d, static_cast<const DT*>(a), static_cast<const DT*>(b), static_cast<DT*>(y), n));
}

#undef WEFT_LAUNCH_

}  // namespace weft::cuda
