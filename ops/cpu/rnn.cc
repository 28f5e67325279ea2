// CPU kernels of the fused RNN operator and its backward `_backward_RNN` (recompute + BPTT): they
// read the inputs and lay the workspace out for the passes in ops/cpu/rnn_cell.h.
#include <algorithm>
#include <random>
#include <vector>

#include "ops/cpu/rnn_cell.h"
#include "ops/defs/rnn_packing.h"
#include "ops/defs/rnn_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

#if WEFT_USE_ONEDNN
#include "ops/cpu/dnnl_util.h"
#endif

namespace weft::detail {
namespace {

// ---- kernels ------------------------------------------------------------------------------------

/// Reads sequence_length (any supported dtype) into `lens`, checking 0 <= len <= T.
void read_lengths(const OpAttrs& attrs, const TensorView& v, int64_t T,
                  std::vector<int64_t>& lens) {
  lens.resize(static_cast<size_t>(v.size()));
  WEFT_DTYPE_SWITCH(v.dtype(), LT, attrs.where() + " sequence_length", {
    const LT* src = v.ptr<LT>();
    for (size_t n = 0; n < lens.size(); ++n) lens[n] = static_cast<int64_t>(src[n]);
  });
  for (size_t n = 0; n < lens.size(); ++n) {
    WEFT_CHECK(lens[n] >= 0 && lens[n] <= T) << attrs.where() << ": sequence_length[" << n
                                             << "] = " << lens[n] << " is outside [0, " << T << "]";
  }
}

/// Points `a` at the forward inputs in `in` (laid out as forward_inputs(p)).
template <typename DT>
rnn::ForwardArgs<DT> forward_args(const RnnParam& p, std::span<const TensorView> in,
                                  const std::vector<int64_t>& lens) {
  const RnnInputs ix = forward_inputs(p);
  rnn::ForwardArgs<DT> a;
  a.data = in[ix.data].ptr<DT>();
  a.params = in[ix.params].ptr<DT>();
  a.hx = in[ix.state].ptr<DT>();
  if (ix.cell >= 0) a.cx = in[ix.cell].ptr<DT>();
  if (ix.lens >= 0) a.lens = lens.data();
  return a;
}

void check_req_write(const OpAttrs& attrs, std::span<const OpReq> req) {
  for (OpReq r : req) {
    WEFT_CHECK_AS(NotImplemented, r != OpReq::kAdd)
        << attrs.where() << ": req kAdd is not supported for outputs";
  }
}

template <typename DT>
void rnn_forward_typed(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const RnnInputs ix = forward_inputs(p);
  const rnn::RnnDims d = rnn::dims_of(p, in[ix.data].shape_of());
  std::vector<int64_t> lens;
  if (ix.lens >= 0) read_lengths(attrs, in[ix.lens], d.T, lens);
  rnn::ForwardArgs<DT> a = forward_args<DT>(p, in, lens);
  const int nvis = visible_outputs(p);
  if (p.has_mask()) {
    const TensorView& mask = out[nvis];
    DT* m = mask.ptr<DT>();
    const int64_t n = mask.size();
    if (ctx.is_train) {
      WEFT_CHECK_AS(InternalError, ctx.random != nullptr)
          << attrs.where() << ": no random state (kRandom)";
      std::uniform_real_distribution<double> u(0.0, 1.0);
      const DT keep = p.p < 1 ? static_cast<DT>(1.0 / (1.0 - p.p)) : DT(0);
      for (int64_t i = 0; i < n; ++i) m[i] = u(ctx.random->engine) < p.p ? DT(0) : keep;
      a.mask = m;
    } else {
      std::fill(m, m + n, DT(1));
    }
  }
  if (req[0] != OpReq::kNull) a.y = out[0].ptr<DT>();
  if (nvis > 1 && req[1] != OpReq::kNull) a.hy = out[1].ptr<DT>();
  if (nvis > 2 && req[2] != OpReq::kNull) a.cy = out[2].ptr<DT>();
  rnn::Carver carver(ctx.workspace);
  const rnn::RnnOptions opt = rnn::options_of(p, ctx.num_threads);
  rnn::RnnBuffers<DT> b = rnn::layout_buffers<DT>(carver, d, p.has_mask(), opt.clip, false);
  WEFT_CHECK_AS(InternalError, carver.used() <= ctx.workspace_bytes)
      << attrs.where() << ": workspace too small";
  rnn::forward(d, opt, a, b);
}

void rnn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  rnn::check_implemented(attrs);
  check_req_write(attrs, req);
#if WEFT_USE_ONEDNN
  dnnl_util::ScopedThreads threads(ctx.num_threads);
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    rnn_forward_typed<DT>(attrs, ctx, in, req, out));
}

/// Writes (kWrite/kInplace) or adds (kAdd) `n` values of `src` into `dst`.
template <typename DT>
void store_grad(OpReq req, const DT* src, const TensorView& dst) {
  if (req == OpReq::kNull) return;
  DT* y = dst.ptr<DT>();
  const int64_t n = dst.size();
  if (req == OpReq::kAdd) {
    for (int64_t i = 0; i < n; ++i) y[i] += src[i];
  } else {
    std::copy(src, src + n, y);
  }
}

template <typename DT>
void rnn_backward_typed(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const RnnBackwardInputs ix = backward_inputs(p);
  const rnn::RnnDims d = rnn::dims_of(p, in[ix.fwd.data].shape_of());
  std::vector<int64_t> lens;
  if (ix.fwd.lens >= 0) read_lengths(attrs, in[ix.fwd.lens], d.T, lens);
  rnn::ForwardArgs<DT> a = forward_args<DT>(p, in, lens);
  if (ix.mask >= 0) a.mask = in[ix.mask].ptr<DT>();
  rnn::BackwardArgs<DT> ga;
  ga.dy = in[ix.dy].ptr<DT>();
  if (ix.dhy >= 0) ga.dhy = in[ix.dhy].ptr<DT>();
  if (ix.dcy >= 0) ga.dcy = in[ix.dcy].ptr<DT>();
  rnn::Carver carver(ctx.workspace);
  const rnn::RnnOptions opt = rnn::options_of(p, ctx.num_threads);
  rnn::RnnBuffers<DT> b = rnn::layout_buffers<DT>(carver, d, p.has_mask(), opt.clip, true);
  WEFT_CHECK_AS(InternalError, carver.used() <= ctx.workspace_bytes)
      << attrs.where() << ": workspace too small";
  rnn::forward(d, opt, a, b);
  rnn::backward(d, opt, a, ga, b);
  store_grad(req[0], b.ddata, out[0]);
  store_grad(req[1], b.dparams, out[1]);
  store_grad(req[2], b.dhx, out[2]);
  if (p.lstm()) store_grad(req[3], b.dcx, out[3]);
}

void rnn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  rnn::check_implemented(attrs);
#if WEFT_USE_ONEDNN
  dnnl_util::ScopedThreads threads(ctx.num_threads);
#endif
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    rnn_backward_typed<DT>(attrs, ctx, in, req, out));
}

}  // namespace
}  // namespace weft::detail

namespace weft::cpu {

void register_rnn_kernels(OpRegistry& r) {
  r.kernels("RNN").set_attr<FCompute>(DeviceType::kCPU, detail::rnn_forward);
  r.kernels("_backward_RNN").set_attr<FCompute>(DeviceType::kCPU, detail::rnn_backward);
}

}  // namespace weft::cpu
