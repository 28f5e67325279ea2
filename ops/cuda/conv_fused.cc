// CUDA kernel of _fused_conv_bn_act (see ops/defs/conv_fused.cc for its inputs and hidden
// attributes), part of the cudnn family: the BatchNorm is folded into a copy of the weight and bias
// on the device at every call (one small pass), then the cuDNN convolution, the bias, the addend
// and the activation follow as separate passes: y = act(conv(x, w') + b' + addend).
#include "ops/cuda/blas_kernels.h"
#include "ops/cuda/cudnn_conv.h"
#include "ops/cuda/cudnn_nn_kernels.h"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/register.h"
#include "ops/defs/conv_fused_state.h"

namespace weft::cuda {
namespace {

using detail::ConvGeom;
using detail::FusedAct;
using detail::FusedConvState;

/// The convolution's own output shape (differs from the op's output only with a broadcast sum).
Shape conv_output_shape(const detail::ConvolutionParam& p, const Shape& data) {
  Shape o = data;
  o[1] = p.num_filter;
  for (int i = 0; i < p.kernel.ndim(); ++i) {
    const int64_t dk = p.dilate[i] * (p.kernel[i] - 1) + 1;
    o[2 + i] = (data[2 + i] + 2 * p.pad[i] - dk) / p.stride[i] + 1;
  }
  return o;
}

/// Strides of `op` per dim of `y` under NumPy broadcasting (0 where it broadcasts).
void bcast_strides(const Shape& y, const Shape& op, int64_t* out) {
  const int nd = y.ndim(), off = nd - op.ndim();
  int64_t stride = 1;
  for (int i = nd - 1; i >= 0; --i) {
    const int j = i - off;
    if (j < 0) {
      out[i] = 0;
      continue;
    }
    out[i] = op[j] == 1 && y[i] != 1 ? 0 : stride;
    stride *= op[j];
  }
}

// Note [Scratch slices]: Scratch hands out the op's workspace whenever it is large enough, so two
// live Scratch objects could alias. The folded weight and the convolution's temporary share one
// Scratch; the convolution's own (cuDNN) scratch is taken with a context whose workspace starts
// past them.
void fused_forward(OpState& state, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  auto& s = static_cast<FusedConvState&>(state);
  if (req[0] == OpReq::kNull) return;
  const TensorView& x = in[0];
  const TensorView& y = out[0];
  WEFT_CHECK_AS(NotImplemented, x.dtype() == DType::kFloat32 && req[0] != OpReq::kAdd)
      << "_fused_conv_bn_act on CUDA: float32 only, never accumulating";
  const cudaStream_t stream = stream_of(ctx);
  const bool has_bias = !s.p.no_bias;
  const Shape cshape = conv_output_shape(s.p, x.shape_of());
  const bool plain_sum =
      s.io.sum &&
      (!s.io.broadcast || (in[s.io.addend()].shape_of() == y.shape_of() && cshape == y.shape_of()));
  const bool broadcast_sum = s.io.sum && !plain_sum;

  const int64_t oc = s.p.num_filter, wn = in[1].size();
  const size_t w_bytes = detail::align64(static_cast<size_t>(wn) * sizeof(float));
  const size_t b_bytes = detail::align64(static_cast<size_t>(oc) * sizeof(float));
  const size_t t_bytes =
      broadcast_sum ? detail::align64(static_cast<size_t>(cshape.size()) * sizeof(float)) : 0;
  const size_t fold_bytes = s.io.bn ? w_bytes + b_bytes : 0;
  Scratch scratch(ctx, fold_bytes + t_bytes);
  char* base = scratch.as<char>();
  OpContext c = ctx;
  if (base != nullptr && base == ctx.workspace) {
    const size_t used = fold_bytes + t_bytes;
    c.workspace = ctx.workspace_bytes > used ? base + used : nullptr;
    c.workspace_bytes = ctx.workspace_bytes > used ? ctx.workspace_bytes - used : 0;
  }

  const void* w = in[1].raw();
  const void* b = has_bias ? in[2].raw() : nullptr;
  if (s.io.bn) {
    const int bn0 = s.io.bn0();
    auto* wf = reinterpret_cast<float*>(base);
    auto* bf = reinterpret_cast<float*>(base + w_bytes);
    fold_batch_norm(in[1].ptr<float>(), has_bias ? in[2].ptr<float>() : nullptr,
                    in[bn0].ptr<float>(), in[bn0 + 1].ptr<float>(), in[bn0 + 2].ptr<float>(),
                    in[bn0 + 3].ptr<float>(), s.eps, s.fix_gamma, oc, oc > 0 ? wn / oc : 0, wf, bf,
                    stream);
    check_launch("_fused_conv_bn_act fold", ctx);
    w = wf;
    b = bf;
  }

  // The convolution (and bias) into t: the output itself, or a temporary for a broadcast sum.
  void* t = broadcast_sum ? base + fold_bytes : y.raw();
  bool add = false;
  if (plain_sum) {
    const TensorView& a = in[s.io.addend()];
    if (a.raw() != y.raw()) {
      copy_on_stream(ctx, y.raw(), a.raw(), static_cast<size_t>(y.size()) * 4);
    }
    add = true;
  }
  const ConvGeom g = detail::conv_geom(s.p, x.shape_of(), cshape);
  cudnn_conv_forward(c, g, DType::kFloat32, x.raw(), w, t, add);
  if (b) cudnn_add_channel_bias(c, DType::kFloat32, t, b, g.batch, g.out_c, g.out_size());
  if (broadcast_sum) {
    const TensorView& a = in[s.io.addend()];
    const Shape ys = y.shape_of();
    WEFT_CHECK(ys.ndim() <= kMaxDims)
        << "_fused_conv_bn_act on CUDA: at most " << kMaxDims << " dims";
    Bcast2 d;
    d.ndim = ys.ndim();
    for (int i = 0; i < d.ndim; ++i) d.shape[i] = ys[i];
    bcast_strides(ys, cshape, d.a_stride);
    bcast_strides(ys, a.shape_of(), d.b_stride);
    broadcast_add(DType::kFloat32, d, t, a.raw(), y.raw(), y.size(), stream);
    check_launch("_fused_conv_bn_act sum", ctx);
  }

  if (s.act.kind == FusedAct::Kind::kPRelu) {
    const TensorView& slopes = in[s.io.slopes()];
    LeakyArgs la;
    la.kind = 1;  // prelu
    la.gamma = slopes.raw();
    if (slopes.size() != 1 && y.ndim >= 2) {
      la.channels = y.shape[1];
      la.inner = y.size() / (y.shape[0] * y.shape[1]);
    }
    leaky_forward(DType::kFloat32, la, y.raw(), y.raw(), y.size(), false, stream);
  } else if (!s.act.none()) {
    fused_act_inplace(DType::kFloat32, static_cast<int>(s.act.kind), s.act.alpha, s.act.beta,
                      y.raw(), y.size(), stream);
  }
  check_launch("_fused_conv_bn_act activation", ctx);
}

}  // namespace

void register_cudnn_fused_kernels(OpRegistry& r) {
  r.kernels("_fused_conv_bn_act").set_attr<FStatefulCompute>(DeviceType::kCUDA, fused_forward);
}

}  // namespace weft::cuda
