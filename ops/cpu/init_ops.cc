// CPU kernels of the creation ops: _zeros, _ones, _full, _arange and the random samplers
// _random_uniform / _random_normal (definitions in ops/defs/init_ops.cc).
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/cpu/register.h"
#include "ops/defs/init_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {
namespace {

// ---- kernels
// --------------------------------------------------------------------------------------

constexpr int64_t kGrain = 1 << 15;

/// Writes (or adds, for kAdd) `value(i)` into every element of `out`.
template <typename DT, typename F>
void fill_with(const OpContext& ctx, OpReq req, const TensorView& out, F value) {
  DT* y = out.ptr<DT>();
  const bool add = req == OpReq::kAdd;
  parallel_for(out.size(), kGrain, ctx.num_threads, [&](int64_t begin, int64_t end) {
    if (add) {
      for (int64_t i = begin; i < end; ++i) y[i] = static_cast<DT>(y[i] + value(i));
    } else {
      for (int64_t i = begin; i < end; ++i) y[i] = static_cast<DT>(value(i));
    }
  });
}

/// Fills with a constant; zeros with kWrite is a memset and works for every dtype.
void fill_constant(const OpAttrs& attrs, const OpContext& ctx, OpReq req, const TensorView& out,
                   double value) {
  if (req == OpReq::kNull) return;
  if (value == 0 && req != OpReq::kAdd) {
    std::memset(out.raw(), 0, out.bytes());
    return;
  }
  if (value == 0) return;  // adding zero
  WEFT_DTYPE_SWITCH(out.dtype(), DT, attrs.where(), {
    const DT v = static_cast<DT>(value);
    fill_with<DT>(ctx, req, out, [v](int64_t) { return v; });
  });
}

void zeros_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  fill_constant(attrs, ctx, req[0], out[0], 0.0);
}

void ones_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  fill_constant(attrs, ctx, req[0], out[0], 1.0);
}

void full_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  fill_constant(attrs, ctx, req[0], out[0], attrs.params<FullParam>().value);
}

void arange_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<ArangeParam>();
  const int64_t repeat = p.repeat;
  WEFT_DTYPE_SWITCH(out[0].dtype(), DT, attrs.where(), {
    // Like MXNet: start and step are cast to the element type first, so integer ranges step by
    // whole numbers (unsigned types take the truncated value, never a negative float).
    double start = p.start, step = p.step;
    if constexpr (std::is_integral_v<DT>) {
      start = static_cast<double>(static_cast<int64_t>(start));
      step = static_cast<double>(static_cast<int64_t>(step));
    }
    const DT start_t = static_cast<DT>(start), step_t = static_cast<DT>(step);
    fill_with<DT>(ctx, req[0], out[0], [=](int64_t i) {
      return static_cast<DT>(start_t + static_cast<DT>(i / repeat) * step_t);
    });
  });
}

// Note [Reproducible sampling]
// Draws come from ctx.random->engine, which the engine orders through its var. To fill large
// outputs on several threads and still get the same values for a seed whatever the thread count,
// the output is cut into fixed chunks of kSampleChunk elements; one 64-bit seed per chunk is
// drawn serially from the engine, and each chunk is filled from its own mt19937_64.
constexpr int64_t kSampleChunk = 1 << 14;

template <typename DT, typename Dist>
void sample_into(const OpContext& ctx, OpReq req, const TensorView& out, const Dist& proto) {
  const int64_t n = out.size();
  const int64_t chunks = (n + kSampleChunk - 1) / kSampleChunk;
  std::vector<uint64_t> seeds(static_cast<size_t>(chunks));
  for (auto& s : seeds) s = ctx.random->engine();
  DT* y = out.ptr<DT>();
  const bool add = req == OpReq::kAdd;
  parallel_for(chunks, 1, ctx.num_threads, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      std::mt19937_64 gen(seeds[c]);
      Dist dist = proto;
      const int64_t begin = c * kSampleChunk, end = std::min(n, begin + kSampleChunk);
      for (int64_t i = begin; i < end; ++i) {
        const DT v = static_cast<DT>(dist(gen));
        y[i] = add ? static_cast<DT>(y[i] + v) : v;
      }
    }
  });
}

/// Uniform on [low, high) in DT: draws in double and keeps a value that rounds up to `high`
/// (possible after the cast to float) strictly below it.
template <typename DT>
struct HalfOpenUniform {
  double low, high;
  template <typename Gen>
  DT operator()(Gen& gen) const {
    const DT v = static_cast<DT>(std::uniform_real_distribution<double>(low, high)(gen));
    const DT hi = static_cast<DT>(high);
    return v >= hi && high > low ? std::nextafter(hi, static_cast<DT>(low)) : v;
  }
};

void check_random(const OpAttrs& attrs, const OpContext& ctx) {
  WEFT_CHECK_AS(InternalError, ctx.random != nullptr)
      << attrs.where() << ": no random state (kRandom)";
}

void uniform_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  check_random(attrs, ctx);
  const auto& p = attrs.params<UniformParam>();
  WEFT_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    sample_into<DT>(ctx, req[0], out[0], HalfOpenUniform<DT>{p.low, p.high});
  });
}

void normal_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  check_random(attrs, ctx);
  const auto& p = attrs.params<NormalParam>();
  WEFT_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    sample_into<DT>(ctx, req[0], out[0],
                    std::normal_distribution<DT>(static_cast<DT>(p.loc), static_cast<DT>(p.scale)));
  });
}

}  // namespace
}  // namespace weft::detail

namespace weft::cpu {

void register_init_kernels(OpRegistry& r) {
  using namespace detail;
  r.kernels("_zeros").set_attr<FCompute>(DeviceType::kCPU, zeros_forward);
  r.kernels("_ones").set_attr<FCompute>(DeviceType::kCPU, ones_forward);
  r.kernels("_full").set_attr<FCompute>(DeviceType::kCPU, full_forward);
  r.kernels("_arange").set_attr<FCompute>(DeviceType::kCPU, arange_forward);
  r.kernels("_random_uniform").set_attr<FCompute>(DeviceType::kCPU, uniform_forward);
  r.kernels("_random_normal").set_attr<FCompute>(DeviceType::kCPU, normal_forward);
}

}  // namespace weft::cpu
