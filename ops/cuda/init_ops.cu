// CUDA kernels of the init family (see ops/cuda/register.h): _zeros, _ones, _full, _arange and
// the samplers _random_uniform / _random_normal (a counter-based Philox generator).
#include <cmath>

#include "ops/cuda/elemwise_kernels.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/init_params.h"

namespace weft::cuda {
namespace {

// ---- constants ----------------------------------------------------------------------------------

void zeros_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_CUDA_ALL_SWITCH(out[0].dtype(), DT, attrs.where(),
                       launch_fill<DT>(ctx, "_zeros", out[0], 0.0, req[0]));
}

void ones_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_CUDA_ALL_SWITCH(out[0].dtype(), DT, attrs.where(),
                       launch_fill<DT>(ctx, "_ones", out[0], 1.0, req[0]));
}

void full_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const double value = attrs.params<detail::FullParam>().value;
  WEFT_CUDA_ALL_SWITCH(out[0].dtype(), DT, attrs.where(),
                       launch_fill<DT>(ctx, "_full", out[0], value, req[0]));
}

// ---- arange -------------------------------------------------------------------------------------

// out[i] = start + (i / repeat) * step, in the computation type of T (as the CPU kernel: in T
// itself for the standard types).
template <bool kAdd, typename T>
__global__ void arange_kernel(int64_t n, acc_t<T> start, acc_t<T> step, int64_t repeat, T* out) {
  using C = acc_t<T>;
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    put<kAdd>(out, i, static_cast<C>(start + static_cast<C>(i / repeat) * step));
  }
}

void arange_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t n = out[0].size();
  if (req[0] == OpReq::kNull || n == 0) return;
  const auto& p = attrs.params<detail::ArangeParam>();
  cudaStream_t s = stream_of(ctx);
  WEFT_CUDA_ALL_SWITCH(out[0].dtype(), DT, attrs.where(), {
    using C = acc_t<DT>;
    double start = p.start, step = p.step;
    if constexpr (std::is_integral_v<DT>) {
      start = static_cast<double>(static_cast<int64_t>(start));
      step = static_cast<double>(static_cast<int64_t>(step));
    }
    // Start and step are cast to the element type first (the CPU kernel's rounding).
    C start_c, step_c;
    if constexpr (kIsFloat16<DT>) {
      start_c = static_cast<float>(start);
      step_c = static_cast<float>(step);
    } else {
      start_c = static_cast<DT>(start);
      step_c = static_cast<DT>(step);
    }
    if (req[0] == OpReq::kAdd) {
      arange_kernel<true, DT>
          <<<grid_for(n), kBlockSize, 0, s>>>(n, start_c, step_c, p.repeat, dptr<DT>(out[0]));
    } else {
      arange_kernel<false, DT>
          <<<grid_for(n), kBlockSize, 0, s>>>(n, start_c, step_c, p.repeat, dptr<DT>(out[0]));
    }
  });
  check_launch("_arange", ctx);
}

// ---- random sampling ----------------------------------------------------------------------------

// Note [CUDA sampling]
// The samplers use Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): a keyed bijection of a 128-bit counter, so element groups are drawn independently and
// in any order. The key is the device RandomState's seed; each call draws one 64-bit offset from
// the state's engine (ordered by the engine var like every other draw) for the high half of the
// counter, and the low half is the index of the group of elements a thread fills. A given seed
// and sequence of calls therefore gives the same values whatever the launch configuration. A
// counter yields four 32-bit words: four float samples, or two double ones (53 bits from two
// words each).

struct Philox {
  uint32_t c[4];
};

__device__ __forceinline__ Philox philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return Philox{{c0, c1, c2, c3}};
}

struct PhiloxKey {
  uint32_t k0, k1;  // the seed
  uint32_t o0, o1;  // the call's offset
};

__device__ __forceinline__ Philox draw(const PhiloxKey& key, uint64_t group) {
  return philox4x32_10(static_cast<uint32_t>(group), static_cast<uint32_t>(group >> 32), key.o0,
                       key.o1, key.k0, key.k1);
}

/// Uniform in [0, 1) from 24 / 53 random bits; in (0, 1] with `open_low`.
__device__ __forceinline__ float unit_float(uint32_t w, bool open_low) {
  return (static_cast<float>(w >> 8) + (open_low ? 1.0f : 0.0f)) * 0x1.0p-24f;
}
__device__ __forceinline__ double unit_double(uint32_t a, uint32_t b, bool open_low) {
  const uint64_t bits = ((static_cast<uint64_t>(a) << 32) | b) >> 11;
  return (static_cast<double>(bits) + (open_low ? 1.0 : 0.0)) * 0x1.0p-53;
}

/// The largest value of T below `hi` (hi > low guaranteed by the caller).
template <typename T>
__device__ __forceinline__ T value_below(T hi) {
  if constexpr (std::is_same_v<T, double>) {
    return nextafter(hi, -INFINITY);
  } else if constexpr (std::is_same_v<T, float>) {
    return nextafterf(hi, -INFINITY);
  } else {
    // 16-bit sign-magnitude floats: one step toward -inf in the bit pattern.
    const float h = to_acc<T>(hi);
    uint16_t bits;
    memcpy(&bits, &hi, sizeof(bits));
    if (h > 0.0f) {
      --bits;
    } else if (h == 0.0f) {
      bits = 0x8001u;
    } else {
      ++bits;
    }
    T r;
    memcpy(&r, &bits, sizeof(bits));
    return r;
  }
}

template <typename T>
struct UniformSampler {
  acc_t<T> low, high;  // high - low in the computation type
  T high_t;
  static constexpr int kPerDraw = std::is_same_v<T, double> ? 2 : 4;
  __device__ void operator()(const Philox& r, acc_t<T>* v) const {
    for (int e = 0; e < kPerDraw; ++e) {
      acc_t<T> u;
      if constexpr (std::is_same_v<T, double>) {
        u = unit_double(r.c[2 * e], r.c[2 * e + 1], false);
      } else {
        u = unit_float(r.c[e], false);
      }
      T x = convert<T>(low + (high - low) * u);
      // Keep a value that rounds up to `high` strictly below it (half-open interval).
      if (to_acc<T>(x) >= to_acc<T>(high_t) && high > low) x = value_below(high_t);
      v[e] = to_acc<T>(x);
    }
  }
};

template <typename T>
struct NormalSampler {
  acc_t<T> loc, scale;
  static constexpr int kPerDraw = std::is_same_v<T, double> ? 2 : 4;
  __device__ void operator()(const Philox& r, acc_t<T>* v) const {
    if constexpr (std::is_same_v<T, double>) {
      const double u1 = unit_double(r.c[0], r.c[1], true), u2 = unit_double(r.c[2], r.c[3], false);
      const double rad = sqrt(-2.0 * log(u1));
      double sn, cs;
      sincospi(2.0 * u2, &sn, &cs);
      v[0] = loc + scale * rad * cs;
      v[1] = loc + scale * rad * sn;
    } else {
      for (int pair = 0; pair < 2; ++pair) {
        const float u1 = unit_float(r.c[2 * pair], true), u2 = unit_float(r.c[2 * pair + 1], false);
        const float rad = sqrtf(-2.0f * logf(u1));
        float sn, cs;
        sincospif(2.0f * u2, &sn, &cs);
        v[2 * pair] = loc + scale * rad * cs;
        v[2 * pair + 1] = loc + scale * rad * sn;
      }
    }
  }
};

// Thread `group` fills elements [group * kPerDraw, group * kPerDraw + kPerDraw) from one draw.
template <bool kAdd, typename T, typename Sampler>
__global__ void sample_kernel(int64_t n, PhiloxKey key, Sampler sampler, T* out) {
  constexpr int kPer = Sampler::kPerDraw;
  const int64_t groups = (n + kPer - 1) / kPer;
  WEFT_CUDA_KERNEL_LOOP(grp, groups) {
    acc_t<T> v[kPer];
    sampler(draw(key, static_cast<uint64_t>(grp)), v);
    const int64_t base = grp * kPer;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      if (base + e < n) put<kAdd>(out, base + e, v[e]);
    }
  }
}

PhiloxKey next_key(const OpAttrs& attrs, const OpContext& ctx) {
  WEFT_CHECK_AS(InternalError, ctx.random != nullptr)
      << attrs.where() << ": no random state (kRandom)";
  const uint64_t seed = ctx.random->seed;
  const uint64_t offset = ctx.random->engine();
  return PhiloxKey{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                   static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
}

template <typename T, typename Sampler>
void launch_sample(const OpContext& ctx, const char* name, const PhiloxKey& key,
                   const Sampler& sampler, OpReq req, const TensorView& out) {
  const int64_t n = out.size();
  const int64_t groups = (n + Sampler::kPerDraw - 1) / Sampler::kPerDraw;
  if (req == OpReq::kAdd) {
    sample_kernel<true, T>
        <<<grid_for(groups), kBlockSize, 0, stream_of(ctx)>>>(n, key, sampler, dptr<T>(out));
  } else {
    sample_kernel<false, T>
        <<<grid_for(groups), kBlockSize, 0, stream_of(ctx)>>>(n, key, sampler, dptr<T>(out));
  }
  check_launch(name, ctx);
}

template <typename T>
acc_t<T> to_compute(double v) {
  return static_cast<acc_t<T>>(v);
}

void uniform_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const PhiloxKey key = next_key(attrs, ctx);  // one draw per call, whatever the size
  if (out[0].size() == 0) return;
  const auto& p = attrs.params<detail::UniformParam>();
  WEFT_CUDA_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    DT high_t;
    if constexpr (kIsFloat16<DT>) {
      high_t = DT(static_cast<float>(p.high));
    } else {
      high_t = static_cast<DT>(p.high);
    }
    launch_sample<DT>(ctx, "_random_uniform", key,
                      UniformSampler<DT>{to_compute<DT>(p.low), to_compute<DT>(p.high), high_t},
                      req[0], out[0]);
  });
}

void normal_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const PhiloxKey key = next_key(attrs, ctx);
  if (out[0].size() == 0) return;
  const auto& p = attrs.params<detail::NormalParam>();
  WEFT_CUDA_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    launch_sample<DT>(ctx, "_random_normal", key,
                      NormalSampler<DT>{to_compute<DT>(p.loc), to_compute<DT>(p.scale)}, req[0],
                      out[0]);
  });
}

}  // namespace

void register_init_kernels(OpRegistry& r) {
  r.kernels("_zeros").set_attr(DeviceType::kCUDA, FCompute(zeros_forward));
  r.kernels("_ones").set_attr(DeviceType::kCUDA, FCompute(ones_forward));
  r.kernels("_full").set_attr(DeviceType::kCUDA, FCompute(full_forward));
  r.kernels("_arange").set_attr(DeviceType::kCUDA, FCompute(arange_forward));
  r.kernels("_random_uniform").set_attr(DeviceType::kCUDA, FCompute(uniform_forward));
  r.kernels("_random_normal").set_attr(DeviceType::kCUDA, FCompute(normal_forward));
}

}  // namespace weft::cuda
