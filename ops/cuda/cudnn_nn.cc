// CUDA kernels of the cudnn family besides the convolutions (see ops/cuda/register.h): Pooling,
// Activation, LeakyReLU, Dropout and LRN with their backward ops. They run weft's own kernels
// (cudnn_nn_kernels.cu) rather than cuDNN's: MXNet's pooling conventions (full, the avg divisor
// clipped to input + pad, lp) and the LeakyReLU variants have no cuDNN mode, and own kernels
// follow the CPU kernels' arithmetic exactly.
#include <random>

#include "ops/cuda/cudnn_nn_kernels.h"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/register.h"
#include "ops/defs/activation_params.h"
#include "ops/defs/dropout_params.h"
#include "ops/defs/pooling_params.h"

namespace weft::cuda {
namespace {

using namespace weft::detail;  // the param structs

bool adds(OpReq r) { return r == OpReq::kAdd; }

void zero(const OpContext& ctx, const TensorView& t) {
  if (t.size() == 0) return;
  memset_on_stream(ctx, t.raw(), 0, static_cast<size_t>(t.size()) * dtype_size(t.dtype()));
}

// ---- Pooling -----------------------------------------------------------------------------------

PoolDims pool_dims(const PoolingParam& p, const Shape& data, const Shape& out) {
  PoolDims g;
  const int nsp = data.ndim() - 2;
  g.planes = data[0] * data[1];
  for (int i = 0; i < nsp; ++i) {
    const int slot = 3 - nsp + i;
    g.in[slot] = data[2 + i];
    g.out[slot] = out[2 + i];
    if (p.global_pool) {
      g.k[slot] = data[2 + i];
    } else {
      g.k[slot] = p.kernel[i];
      g.s[slot] = p.stride[i];
      g.p[slot] = p.pad[i];
    }
  }
  g.type = static_cast<int>(p.pool_type);
  g.include_pad = p.count_include_pad.value_or(true);
  g.p_value = p.p_value.value_or(1);
  return g;
}

void pool_fwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
              std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const PoolDims g = pool_dims(attrs.params<PoolingParam>(), in[0].shape_of(), out[0].shape_of());
  pool_forward(in[0].dtype(), g, in[0].raw(), out[0].raw(), adds(req[0]), stream_of(ctx));
  check_launch("Pooling", ctx);
}

// in: out_grad, data, output.
void pool_bwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
              std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const PoolDims g = pool_dims(attrs.params<PoolingParam>(), in[1].shape_of(), in[0].shape_of());
  if (!adds(req[0])) zero(ctx, out[0]);
  pool_backward_add(in[0].dtype(), g, in[0].raw(), in[1].raw(), in[2].raw(), out[0].raw(),
                    stream_of(ctx));
  check_launch("_backward_Pooling", ctx);
}

// ---- Activation --------------------------------------------------------------------------------

void act_fwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
             std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const int kind = static_cast<int>(attrs.params<ActivationParam>().act_type);
  act_forward(in[0].dtype(), kind, in[0].raw(), out[0].raw(), in[0].size(), adds(req[0]),
              stream_of(ctx));
  check_launch("Activation", ctx);
}

// in: out_grad, data, output.
void act_bwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
             std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const int kind = static_cast<int>(attrs.params<ActivationParam>().act_type);
  act_backward(in[1].dtype(), kind, in[0].raw(), in[1].raw(), in[2].raw(), out[0].raw(),
               in[1].size(), adds(req[0]), stream_of(ctx));
  check_launch("_backward_Activation", ctx);
}

// ---- LeakyReLU ---------------------------------------------------------------------------------

/// The slope layout of prelu: per channel (axis 1) or one shared value.
void prelu_layout(const TensorView& data, const TensorView& gamma, LeakyArgs* a) {
  a->gamma = gamma.raw();
  if (gamma.size() == 1 || data.ndim < 2) {
    a->channels = 1;
    a->inner = 1;
    return;
  }
  a->channels = data.shape[1];
  int64_t inner = 1;
  for (int d = 2; d < data.ndim; ++d) inner *= data.shape[d];
  a->inner = inner;
}

// in: data[, gamma]; out: output[, mask (rrelu)].
void leaky_fwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
               std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LeakyReLUParam>();
  const DType dt = in[0].dtype();
  const int64_t n = in[0].size();
  LeakyArgs a;
  a.kind = static_cast<int>(p.act_type);
  a.slope = p.slope;
  if (p.act_type == LeakyType::kPReLU) prelu_layout(in[0], in[1], &a);
  if (p.act_type == LeakyType::kRReLU) {
    // The slopes go to the hidden output: random in training, the midpoint at inference.
    if (ctx.is_train) {
      WEFT_CHECK(ctx.random != nullptr) << attrs.where() << ": no random resource";
      rrelu_mask(dt, out[1].raw(), n, p.lower_bound, p.upper_bound, ctx.random->engine(),
                 stream_of(ctx));
    } else {
      fill_value(dt, out[1].raw(), n, (p.lower_bound + p.upper_bound) / 2, stream_of(ctx));
    }
    check_launch("LeakyReLU mask", ctx);
    a.mask = out[1].raw();
  }
  if (req[0] == OpReq::kNull) return;
  leaky_forward(dt, a, in[0].raw(), out[0].raw(), n, adds(req[0]), stream_of(ctx));
  check_launch("LeakyReLU", ctx);
}

// in: out_grad, data, then gamma (prelu) or mask (rrelu); out: d_data[, d_gamma (prelu)].
void leaky_bwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
               std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<LeakyReLUParam>();
  const DType dt = in[1].dtype();
  const int64_t n = in[1].size();
  LeakyArgs a;
  a.kind = static_cast<int>(p.act_type);
  a.slope = p.slope;
  if (p.act_type == LeakyType::kPReLU) prelu_layout(in[1], in[2], &a);
  if (p.act_type == LeakyType::kRReLU) a.mask = in[2].raw();
  if (req[0] != OpReq::kNull) {
    leaky_backward(dt, a, in[0].raw(), in[1].raw(), out[0].raw(), n, adds(req[0]), stream_of(ctx));
    check_launch("_backward_LeakyReLU", ctx);
  }
  if (p.act_type == LeakyType::kPReLU && req[1] != OpReq::kNull) {
    prelu_gamma_grad(dt, in[0].raw(), in[1].raw(), n, a.channels, a.inner, out[1].raw(),
                     adds(req[1]), stream_of(ctx));
    check_launch("_backward_LeakyReLU gamma", ctx);
  }
}

// ---- Dropout -----------------------------------------------------------------------------------

BcastDims bcast_dims(const TensorView& data, const TensorView& mask) {
  BcastDims b;
  b.same = mask.size() == data.size();
  if (b.same) return b;
  WEFT_CHECK(data.ndim <= kMaxDims) << "Dropout on CUDA: at most " << kMaxDims << " dims";
  b.ndim = data.ndim;
  int64_t stride = 1;
  for (int d = data.ndim - 1; d >= 0; --d) {
    b.shape[d] = data.shape[d];
    b.mstride[d] = mask.shape[d] == 1 && data.shape[d] != 1 ? 0 : stride;
    stride *= mask.shape[d];
  }
  return b;
}

// Note [Dropout on CUDA]: the mask is a function of (seed, mask index): one 64-bit seed is drawn
// from the device's generator per call (ordered like the CPU's draws by the random resource), and
// Philox gives each mask element its uniform. Without a stored mask (its output not requested)
// the forward recomputes the same values on the fly.
void dropout_fwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DropoutParam>();
  const DType dt = in[0].dtype();
  const int64_t n = in[0].size(), mn = out[1].size();
  const bool active = (ctx.is_train || p.mode == DropoutMode::kAlways) && p.p > 0;
  if (!active) {
    if (req[1] != OpReq::kNull) fill_value(dt, out[1].raw(), mn, 1.0, stream_of(ctx));
    if (req[0] != OpReq::kNull && (adds(req[0]) || out[0].raw() != in[0].raw()))
      copy_or_add(dt, in[0].raw(), out[0].raw(), n, adds(req[0]), stream_of(ctx));
    check_launch("Dropout", ctx);
    return;
  }
  // Inside a captured graph the seed comes from the pass's word on the device (Note [Random
  // numbers in captured graphs]); otherwise one draw from the device's generator.
  KernelSeed seed{ctx.seed_offset, ctx.device_seed};
  if (seed.word == nullptr) {
    WEFT_CHECK(ctx.random != nullptr) << attrs.where() << ": no random resource";
    seed.value = ctx.random->engine();
  }
  const double keep = std::max(0.0, 1.0 - p.p);
  const double scale = p.p >= 1 ? 0.0 : 1.0 / (1.0 - p.p);
  const void* mask = nullptr;
  if (req[1] != OpReq::kNull) {
    dropout_mask(dt, out[1].raw(), mn, keep, scale, seed, stream_of(ctx));
    mask = out[1].raw();
  }
  if (req[0] != OpReq::kNull)
    dropout_apply(dt, bcast_dims(in[0], out[1]), in[0].raw(), mask, out[0].raw(), n, adds(req[0]),
                  keep, scale, seed, stream_of(ctx));
  check_launch("Dropout", ctx);
}

void random_seed_next_fwd(const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                          std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_CHECK(req[0] != OpReq::kAdd) << "_random_seed_next: seed words cannot be added to";
  random_seed_next(static_cast<const uint64_t*>(in[0].raw()), static_cast<uint64_t*>(out[0].raw()),
                   in[0].size(), stream_of(ctx));
  check_launch("_random_seed_next", ctx);
}

// in: out_grad, mask.
void dropout_bwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  dropout_apply(in[0].dtype(), bcast_dims(in[0], in[1]), in[0].raw(), in[1].raw(), out[0].raw(),
                in[0].size(), adds(req[0]), 0, 0, KernelSeed{}, stream_of(ctx));
  check_launch("_backward_Dropout", ctx);
}

// ---- LRN ---------------------------------------------------------------------------------------
// LRN's four attributes are read from the dict with the defaults of LRNParam
// (ops/defs/norm_params.h; the definition validated them when the attrs were made).

LrnArgs lrn_args(const OpAttrs& attrs, const TensorView& data) {
  LrnArgs a;
  auto get = [&](const char* key, double fallback) {
    auto it = attrs.dict.find(key);
    return it == attrs.dict.end() ? fallback : parse_float(it->second);
  };
  a.alpha = get("alpha", 1e-4);
  a.beta = get("beta", 0.75);
  a.knorm = get("knorm", 2.0);
  a.nsize = static_cast<int64_t>(get("nsize", 1));
  a.outer = data.shape[0];
  a.channels = data.shape[1];
  a.inner = 1;
  for (int d = 2; d < data.ndim; ++d) a.inner *= data.shape[d];
  return a;
}

// out: output, tmp_norm.
void lrn_fwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
             std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull && req[1] == OpReq::kNull) return;
  lrn_forward(in[0].dtype(), lrn_args(attrs, in[0]), in[0].raw(),
              req[0] == OpReq::kNull ? nullptr : out[0].raw(), adds(req[0]),
              req[1] == OpReq::kNull ? nullptr : out[1].raw(), adds(req[1]), stream_of(ctx));
  check_launch("LRN", ctx);
}

// in: out_grad, data, tmp_norm.
void lrn_bwd(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
             std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  lrn_backward(in[1].dtype(), lrn_args(attrs, in[1]), in[0].raw(), in[1].raw(), in[2].raw(),
               out[0].raw(), adds(req[0]), stream_of(ctx));
  check_launch("_backward_LRN", ctx);
}

}  // namespace

void register_cudnn_nn_kernels(OpRegistry& r) {
  r.kernels("Pooling").set_attr<FCompute>(DeviceType::kCUDA, pool_fwd);
  r.kernels("_backward_Pooling").set_attr<FCompute>(DeviceType::kCUDA, pool_bwd);
  r.kernels("Activation").set_attr<FCompute>(DeviceType::kCUDA, act_fwd);
  r.kernels("_backward_Activation").set_attr<FCompute>(DeviceType::kCUDA, act_bwd);
  r.kernels("LeakyReLU").set_attr<FCompute>(DeviceType::kCUDA, leaky_fwd);
  r.kernels("_backward_LeakyReLU").set_attr<FCompute>(DeviceType::kCUDA, leaky_bwd);
  r.kernels("Dropout").set_attr<FCompute>(DeviceType::kCUDA, dropout_fwd);
  r.kernels("_backward_Dropout").set_attr<FCompute>(DeviceType::kCUDA, dropout_bwd);
  r.kernels("_random_seed_next").set_attr<FCompute>(DeviceType::kCUDA, random_seed_next_fwd);
  r.kernels("LRN").set_attr<FCompute>(DeviceType::kCUDA, lrn_fwd);
  r.kernels("_backward_LRN").set_attr<FCompute>(DeviceType::kCUDA, lrn_bwd);
}

}  // namespace weft::cuda
