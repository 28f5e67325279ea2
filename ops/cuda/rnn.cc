// CUDA kernels: the rnn family (see ops/cuda/register.h): the fused `RNN` and `_backward_RNN`.
// cuDNN runs them when it computes what weft does (ops/cuda/cudnn_rnn.cc, Note [cuDNN RNN
// coverage]); this file holds the dispatch and the fallback, weft's own kernels. Their structure
// is ops/cpu/rnn_cell.h's, step for step: cuBLAS GEMMs for the input projections of all time
// steps at once and for the recurrent projection of each step, an own kernel for each step's
// gates (ops/cuda/rnn_kernels.cu), and BPTT in `_backward_RNN`, which recomputes the forward pass
// with a trace exactly as the CPU kernel does. The fallback takes float32 and float64.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <type_traits>

#include "ops/cuda/cudnn_nn_kernels.h"
#include "ops/cuda/cudnn_rnn.h"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/register.h"
#include "ops/cuda/rnn_kernels.h"
#include "ops/defs/rnn_params.h"

namespace weft::cuda {
namespace {

using detail::RnnParam;
namespace rnn = detail::rnn;

// Note [RNN on CUDA]: the dropout mask between layers is drawn on the device from one 64-bit
// seed of the device's random state (as Dropout on CUDA does), so a seed does not give the CPU's
// mask; `_backward_RNN` reads the mask the forward returned, as on CPU. sequence_length is not
// range-checked on the device (that would need a synchronisation): a length above T acts as T,
// one below 0 as 0.

/// Row-major C (m × n) = op(A)·op(B) (+ C with `add`), on the op's stream.
template <typename DT>
void gemm(const OpContext& ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const DT* a,
          int64_t lda, const DT* b, int64_t ldb, bool add, DT* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!add) {
      WEFT_CUDA_CALL(cudaMemset2DAsync(c, static_cast<size_t>(ldc) * sizeof(DT), 0,
                                       static_cast<size_t>(n) * sizeof(DT), static_cast<size_t>(m),
                                       stream_of(ctx)),
                     device_of(ctx));
    }
    return;
  }
  constexpr bool dbl = std::is_same_v<DT, double>;
  const DT one = 1, beta = add ? 1 : 0;
  const cudaDataType_t t = dbl ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute = dbl ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  WEFT_CHECK(n <= INT32_MAX && m <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX &&
             ldb <= INT32_MAX && ldc <= INT32_MAX)
      << "RNN: GEMM dimensions exceed cuBLAS's 32-bit sizes";
  // Row-major C is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands.
  WEFT_CUDA_CALL(cublasGemmEx(handles(ctx).cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                              static_cast<int>(m), static_cast<int>(k), &one, b, t,
                              static_cast<int>(ldb), a, t, static_cast<int>(lda), &beta, c, t,
                              static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT),
                 device_of(ctx));
}

template <typename DT>
void copy(const OpContext& ctx, DT* dst, const DT* src, int64_t n) {
  if (n <= 0) return;
  copy_on_stream(ctx, dst, src, static_cast<size_t>(n) * sizeof(DT));
}

template <typename DT>
void zero(const OpContext& ctx, DT* dst, int64_t n) {
  if (n <= 0) return;
  memset_on_stream(ctx, dst, 0, static_cast<size_t>(n) * sizeof(DT));
}

rnn::RnnDims dims_of(const RnnParam& p, const Shape& data) {
  rnn::RnnDims d;
  d.mode = p.mode;
  d.T = data[0], d.N = data[1], d.I = data[2];
  d.H = p.state_size, d.L = p.num_layers, d.D = p.dirs();
  return d;
}

rnn::RnnOptions options_of(const RnnParam& p) {
  rnn::RnnOptions o;
  o.clip = p.lstm() && p.lstm_state_clip_min.has_value();
  o.clip_min = p.lstm_state_clip_min.value_or(0);
  o.clip_max = p.lstm_state_clip_max.value_or(0);
  o.clip_nan = p.lstm_state_clip_nan;
  return o;
}

/// The device buffers: ops/defs/rnn_packing.h's layout, then the int64 sequence lengths and a row
/// of ones (the bias gradients are GEMMs with it), all carved from one Scratch (a Scratch may hand
/// out the op's workspace, so two of them could overlap).
template <typename DT>
struct Buffers {
  rnn::RnnBuffers<DT> b;
  int64_t* lens = nullptr;
  DT* ones = nullptr;
};

template <typename DT>
void carve(rnn::Carver& carver, const rnn::RnnDims& d, const RnnParam& p, bool backward,
           Buffers<DT>& out) {
  out.b = rnn::layout_buffers<DT>(carver, d, p.has_mask(), options_of(p).clip, backward);
  out.lens = carver.take<int64_t>(d.N);
  out.ones = carver.take<DT>(backward ? d.T * d.N : 0);
}

template <typename DT>
void forward(const OpContext& ctx, const rnn::RnnDims& d, const rnn::RnnOptions& opt,
             const rnn::ForwardArgs<DT>& a, rnn::RnnBuffers<DT>& b) {
  cudaStream_t s = stream_of(ctx);
  const int64_t T = d.T, N = d.N, H = d.H, GH = d.GH(), DH = d.D * H, TN = T * N;
  const bool lstm = d.mode == rnn::RnnMode::kLstm, gru = d.mode == rnn::RnnMode::kGru;
  for (int64_t l = 0; l < d.L; ++l) {
    const int64_t in = d.layer_input(l);
    DT* y_layer = b.trace ? b.y[l] : b.y[l % 2];
    const DT* x_layer = a.data;
    if (l > 0) {
      const DT* y_prev = b.trace ? b.y[l - 1] : b.y[(l - 1) % 2];
      x_layer = y_prev;
      if (a.mask) {
        DT* x = b.trace ? b.x[l] : b.x[0];
        rnn_mul<DT>(y_prev, a.mask + (l - 1) * TN * DH, x, TN * DH, s);
        x_layer = x;
      }
    }
    for (int64_t dir = 0; dir < d.D; ++dir) {
      const int64_t k = b.trace ? l * d.D + dir : 0;
      const rnn::ParamOffsets off = rnn::param_offsets(d, l, dir);
      const DT* w_h2h = a.params + off.w_h2h;
      DT* gates = b.gates[k];
      gemm<DT>(ctx, false, true, TN, GH, in, x_layer, in, a.params + off.w_i2h, in, false, gates,
               GH);
      rnn_add_bias_rows<DT>(gates, a.params + off.b_i2h, TN, GH, s);
      const int64_t state = (l * d.D + dir) * N * H;
      copy<DT>(ctx, b.h, a.hx + state, N * H);
      if (lstm) copy<DT>(ctx, b.c, a.cx + state, N * H);
      for (int64_t st = 0; st < T; ++st) {
        const int64_t t = dir == 0 ? st : T - 1 - st;
        const int64_t row = t * N * H;
        if (b.trace) {
          copy<DT>(ctx, b.hprev[k] + row, b.h, N * H);
          if (lstm) copy<DT>(ctx, b.cprev[k] + row, b.c, N * H);
        }
        gemm<DT>(ctx, false, true, N, GH, H, b.h, H, w_h2h, H, false, b.hproj, GH);
        RnnStepFwd<DT> f;
        f.mode = static_cast<int>(d.mode);
        f.N = N, f.H = H, f.DH = DH, f.t = t, f.dir = dir;
        f.lens = a.lens;
        f.g = gates + t * N * GH;
        f.hproj = b.hproj;
        f.b_h2h = a.params + off.b_h2h;
        f.h = b.h;
        f.c = b.c;
        f.y_layer = y_layer;
        if (b.trace) {
          if (lstm) f.cell = b.cell[k] + row;
          if (lstm && b.craw[k]) f.craw = b.craw[k] + row;
          if (gru) f.hn = b.hn[k] + row;
        }
        f.clip = opt.clip, f.clip_nan = opt.clip_nan;
        f.lo = opt.clip_min, f.hi = opt.clip_max;
        rnn_forward_step<DT>(f, s);
      }
      if (a.hy) copy<DT>(ctx, a.hy + state, b.h, N * H);
      if (lstm && a.cy) copy<DT>(ctx, a.cy + state, b.c, N * H);
    }
  }
  const DT* y_last = b.trace ? b.y[d.L - 1] : b.y[(d.L - 1) % 2];
  if (a.y) copy<DT>(ctx, a.y, y_last, TN * DH);
}

template <typename DT>
void backward(const OpContext& ctx, const rnn::RnnDims& d, const rnn::RnnOptions& opt,
              const rnn::ForwardArgs<DT>& a, const rnn::BackwardArgs<DT>& ga,
              rnn::RnnBuffers<DT>& b, const DT* ones) {
  cudaStream_t s = stream_of(ctx);
  const int64_t T = d.T, N = d.N, H = d.H, GH = d.GH(), DH = d.D * H, TN = T * N;
  const bool lstm = d.mode == rnn::RnnMode::kLstm, gru = d.mode == rnn::RnnMode::kGru;
  zero<DT>(ctx, b.dparams, rnn::param_size(d.mode, d.L, d.D, d.I, d.H));
  copy<DT>(ctx, b.dy, ga.dy, TN * DH);
  for (int64_t l = d.L - 1; l >= 0; --l) {
    const int64_t in = d.layer_input(l);
    const DT* x_layer = l == 0 ? a.data : a.mask ? b.x[l] : b.y[l - 1];
    DT* dx = l == 0 ? b.ddata : b.dx;
    for (int64_t dir = 0; dir < d.D; ++dir) {
      const int64_t k = l * d.D + dir;
      const rnn::ParamOffsets off = rnn::param_offsets(d, l, dir);
      const DT* w_h2h = a.params + off.w_h2h;
      const int64_t state = k * N * H;
      if (ga.dhy) {
        copy<DT>(ctx, b.dh, ga.dhy + state, N * H);
      } else {
        zero<DT>(ctx, b.dh, N * H);
      }
      if (lstm) {
        if (ga.dcy) {
          copy<DT>(ctx, b.dc, ga.dcy + state, N * H);
        } else {
          zero<DT>(ctx, b.dc, N * H);
        }
      }
      for (int64_t st = T - 1; st >= 0; --st) {
        const int64_t t = dir == 0 ? st : T - 1 - st;
        const int64_t row = t * N * H;
        RnnStepBwd<DT> g;
        g.mode = static_cast<int>(d.mode);
        g.N = N, g.H = H, g.DH = DH, g.t = t, g.dir = dir;
        g.lens = a.lens;
        g.g = b.gates[k] + t * N * GH;
        g.dy_layer = b.dy;
        g.dgx = b.dgx + t * N * GH;
        g.dgh = b.dgh + t * N * GH;
        g.dh = b.dh;
        g.dc = b.dc;
        if (lstm) {
          g.cell = b.cell[k] + row;
          g.cprev = b.cprev[k] + row;
          if (opt.clip && b.craw[k]) g.craw = b.craw[k] + row;
        }
        if (gru) g.hn = b.hn[k] + row;
        g.hprev = b.hprev[k] + row;
        g.lo = opt.clip_min, g.hi = opt.clip_max;
        rnn_backward_step<DT>(g, s);
        // dh_prev += dG_h(t) · W_h2h (rows of skipped steps have dG = 0 and keep their dh).
        gemm<DT>(ctx, false, false, N, H, GH, b.dgh + t * N * GH, GH, w_h2h, H, true, b.dh, H);
      }
      copy<DT>(ctx, b.dhx + state, b.dh, N * H);
      if (lstm) copy<DT>(ctx, b.dcx + state, b.dc, N * H);
      // Weight and bias gradients over all steps at once.
      gemm<DT>(ctx, true, false, GH, in, TN, b.dgx, GH, x_layer, in, true, b.dparams + off.w_i2h,
               in);
      gemm<DT>(ctx, true, false, GH, H, TN, b.dgh, GH, b.hprev[k], H, true, b.dparams + off.w_h2h,
               H);
      gemm<DT>(ctx, false, false, 1, GH, TN, ones, TN, b.dgx, GH, true, b.dparams + off.b_i2h, GH);
      gemm<DT>(ctx, false, false, 1, GH, TN, ones, TN, b.dgh, GH, true, b.dparams + off.b_h2h, GH);
      // Gradient of the layer input, summed over directions.
      gemm<DT>(ctx, false, false, TN, in, GH, b.dgx, GH, a.params + off.w_i2h, in, dir != 0, dx,
               in);
    }
    if (l > 0) {
      if (a.mask) {
        rnn_mul<DT>(b.dx, a.mask + (l - 1) * TN * DH, b.dy, TN * DH, s);
      } else {
        copy<DT>(ctx, b.dy, b.dx, TN * DH);
      }
    }
  }
}

/// Points `a` at the forward inputs in `in` (laid out as forward_inputs(p)); converts the
/// sequence lengths into `lens`.
template <typename DT>
rnn::ForwardArgs<DT> forward_args(const OpContext& ctx, const RnnParam& p,
                                  std::span<const TensorView> in, int64_t* lens) {
  const detail::RnnInputs ix = detail::forward_inputs(p);
  rnn::ForwardArgs<DT> a;
  a.data = in[ix.data].ptr<DT>();
  a.params = in[ix.params].ptr<DT>();
  a.hx = in[ix.state].ptr<DT>();
  if (ix.cell >= 0) a.cx = in[ix.cell].ptr<DT>();
  if (ix.lens >= 0) {
    rnn_lengths_to_i64(in[ix.lens].dtype(), in[ix.lens].raw(), lens, in[ix.lens].size(),
                       stream_of(ctx));
    a.lens = lens;
  }
  return a;
}

void check_implemented(const OpAttrs& attrs) {
  WEFT_CHECK_AS(NotImplemented, !attrs.params<RnnParam>().projection_size.has_value())
      << attrs.where() << ": projection_size (LSTMP) is not implemented";
}

template <typename DT>
void rnn_forward_typed(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const detail::RnnInputs ix = detail::forward_inputs(p);
  const rnn::RnnDims d = dims_of(p, in[ix.data].shape_of());
  rnn::Carver sizer(nullptr);
  Buffers<DT> sized;
  carve<DT>(sizer, d, p, false, sized);
  Scratch scratch(ctx, sizer.used() + 64);
  rnn::Carver carver(scratch.get());
  Buffers<DT> bufs;
  carve<DT>(carver, d, p, false, bufs);
  rnn::ForwardArgs<DT> a = forward_args<DT>(ctx, p, in, bufs.lens);
  const int nvis = detail::visible_outputs(p);
  if (p.has_mask()) {
    const TensorView& mask = out[nvis];
    DT* m = mask.ptr<DT>();
    if (ctx.is_train) {
      WEFT_CHECK_AS(InternalError, ctx.random != nullptr)
          << attrs.where() << ": no random state (kRandom)";
      const double keep = 1.0 - p.p, scale = p.p < 1 ? 1.0 / (1.0 - p.p) : 0.0;
      dropout_mask(mask.dtype(), m, mask.size(), keep, scale, KernelSeed{ctx.random->engine()},
                   stream_of(ctx));
      a.mask = m;
    } else {
      rnn_fill<DT>(m, mask.size(), 1.0, stream_of(ctx));
    }
  }
  if (req[0] != OpReq::kNull) a.y = out[0].ptr<DT>();
  if (nvis > 1 && req[1] != OpReq::kNull) a.hy = out[1].ptr<DT>();
  if (nvis > 2 && req[2] != OpReq::kNull) a.cy = out[2].ptr<DT>();
  forward<DT>(ctx, d, options_of(p), a, bufs.b);
}

void rnn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  check_implemented(attrs);
  for (OpReq r : req) {
    WEFT_CHECK_AS(NotImplemented, r != OpReq::kAdd)
        << attrs.where() << ": req kAdd is not supported for outputs";
  }
  if (cudnn_rnn_forward(attrs, ctx, in, req, out)) return;
  count_rnn_fallback();
  switch (in[0].dtype()) {
    case DType::kFloat32:
      rnn_forward_typed<float>(attrs, ctx, in, req, out);
      break;
    case DType::kFloat64:
      rnn_forward_typed<double>(attrs, ctx, in, req, out);
      break;
    default:
      WEFT_THROW(NotImplemented) << attrs.where() << ": no CUDA kernel for dtype "
                                 << dtype_name(in[0].dtype());
  }
}

/// Writes (kWrite/kInplace) or adds (kAdd) `src` into `dst`.
template <typename DT>
void store_grad(const OpContext& ctx, OpReq req, const DT* src, const TensorView& dst) {
  if (req == OpReq::kNull) return;
  if (req == OpReq::kAdd) {
    rnn_add<DT>(src, dst.ptr<DT>(), dst.size(), stream_of(ctx));
  } else {
    copy<DT>(ctx, dst.ptr<DT>(), src, dst.size());
  }
}

template <typename DT>
void rnn_backward_typed(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const detail::RnnBackwardInputs ix = detail::backward_inputs(p);
  const rnn::RnnDims d = dims_of(p, in[ix.fwd.data].shape_of());
  rnn::Carver sizer(nullptr);
  Buffers<DT> sized;
  carve<DT>(sizer, d, p, true, sized);
  Scratch scratch(ctx, sizer.used() + 64);
  rnn::Carver carver(scratch.get());
  Buffers<DT> bufs;
  carve<DT>(carver, d, p, true, bufs);
  rnn_fill<DT>(bufs.ones, d.T * d.N, 1.0, stream_of(ctx));
  rnn::ForwardArgs<DT> a = forward_args<DT>(ctx, p, in, bufs.lens);
  if (ix.mask >= 0) a.mask = in[ix.mask].ptr<DT>();
  rnn::BackwardArgs<DT> ga;
  ga.dy = in[ix.dy].ptr<DT>();
  if (ix.dhy >= 0) ga.dhy = in[ix.dhy].ptr<DT>();
  if (ix.dcy >= 0) ga.dcy = in[ix.dcy].ptr<DT>();
  const rnn::RnnOptions opt = options_of(p);
  forward<DT>(ctx, d, opt, a, bufs.b);
  backward<DT>(ctx, d, opt, a, ga, bufs.b, bufs.ones);
  store_grad<DT>(ctx, req[0], bufs.b.ddata, out[0]);
  store_grad<DT>(ctx, req[1], bufs.b.dparams, out[1]);
  store_grad<DT>(ctx, req[2], bufs.b.dhx, out[2]);
  if (p.lstm()) store_grad<DT>(ctx, req[3], bufs.b.dcx, out[3]);
}

void rnn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  check_implemented(attrs);
  if (cudnn_rnn_backward(attrs, ctx, in, req, out)) return;
  count_rnn_fallback();
  switch (in[0].dtype()) {
    case DType::kFloat32:
      rnn_backward_typed<float>(attrs, ctx, in, req, out);
      break;
    case DType::kFloat64:
      rnn_backward_typed<double>(attrs, ctx, in, req, out);
      break;
    default:
      WEFT_THROW(NotImplemented) << attrs.where() << ": no CUDA kernel for dtype "
                                 << dtype_name(in[0].dtype());
  }
}

}  // namespace

void register_rnn_kernels(OpRegistry& r) {
  // One implementation in the kernel slot: cuDNN declines per application (by returning false),
  // which the slot's ordered list cannot express (its first kernel always runs), so the dispatch
  // is inside; rnn_path_counts() tells which path ran.
  r.kernels("RNN").set_attr<FCompute>(DeviceType::kCUDA, rnn_forward);
  r.kernels("_backward_RNN").set_attr<FCompute>(DeviceType::kCUDA, rnn_backward);
}

}  // namespace weft::cuda
