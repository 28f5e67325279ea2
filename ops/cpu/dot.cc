// CPU kernels of dot and batch_dot, with _backward_dot / _backward_batch_dot (definitions in
// ops/defs/dot.cc): float32 runs oneDNN's sgemm, float64 the GEMM loops.
#include <string>

#include "ops/cpu/conv_kernels.h"
#include "ops/defs/dot_params.h"

namespace weft::detail {
namespace {

// ---- dot (the matrix views of lhs and rhs: ops/defs/dot.cc, dot_gemm) ---------------------------

template <typename T>
void fill_or_keep(T* p, int64_t n, OpReq req) {
  if (req != OpReq::kAdd) std::fill(p, p + n, T(0));
}

template <typename T>
void dot_forward_typed(const DotGemm& g, bool ta, bool tb, const T* a, const T* b, T* c, OpReq req,
                       int threads) {
  if (g.k == 0) {
    fill_or_keep(c, g.m * g.n, req);
    return;
  }
  gemm<T>(ta, tb, g.m, g.n, g.k, T(1), a, g.ca, b, g.cb, req == OpReq::kAdd ? T(1) : T(0), c, g.n,
          threads);
}

// dA and dB of C = op(A)·op(B) given dC (see Note [dot gradients]).
// Note [dot gradients]: with op(A) M×K and op(B) K×N, d op(A) = dC·op(B)ᵀ and d op(B) = op(A)ᵀ·dC;
// a transposed input gets the transpose of that, which swaps the GEMM's operands.
template <typename T>
void dot_backward_typed(const DotGemm& g, bool ta, bool tb, const T* dc, const T* a, const T* b,
                        T* da, OpReq ra, T* db, OpReq rb, int threads) {
  if (writes(ra)) {
    const T beta = ra == OpReq::kAdd ? T(1) : T(0);
    if (g.n == 0) {
      fill_or_keep(da, g.ra * g.ca, ra);
    } else if (!ta) {
      gemm<T>(false, !tb, g.m, g.k, g.n, T(1), dc, g.n, b, g.cb, beta, da, g.ca, threads);
    } else {
      gemm<T>(tb, true, g.k, g.m, g.n, T(1), b, g.cb, dc, g.n, beta, da, g.ca, threads);
    }
  }
  if (writes(rb)) {
    const T beta = rb == OpReq::kAdd ? T(1) : T(0);
    if (g.m == 0) {
      fill_or_keep(db, g.rb * g.cb, rb);
    } else if (!tb) {
      gemm<T>(!ta, false, g.k, g.n, g.m, T(1), a, g.ca, dc, g.n, beta, db, g.cb, threads);
    } else {
      gemm<T>(true, ta, g.n, g.k, g.m, T(1), dc, g.n, a, g.ca, beta, db, g.cb, threads);
    }
  }
}

void dot_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<DotParam>();
  const DotGemm g = dot_gemm(p, in[0].shape_of(), in[1].shape_of());
  WEFT_FLOAT_SWITCH(
      in[0].dtype(), DT, attrs.where(),
      dot_forward_typed<DT>(g, p.transpose_a, p.transpose_b, in[0].ptr<DT>(), in[1].ptr<DT>(),
                            out[0].ptr<DT>(), req[0], ctx.num_threads));
}

void dot_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DotParam>();
  const DotGemm g = dot_gemm(p, in[1].shape_of(), in[2].shape_of());
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    dot_backward_typed<DT>(g, p.transpose_a, p.transpose_b, in[0].ptr<DT>(),
                                           in[1].ptr<DT>(), in[2].ptr<DT>(), out[0].ptr<DT>(),
                                           req[0], out[1].ptr<DT>(), req[1], ctx.num_threads));
}

// ---- batch_dot ----------------------------------------------------------------------------------

/// Per-batch GEMM sizes of a batch_dot and the batch count.
struct BatchGemm {
  DotGemm g;
  int64_t batch;
};
BatchGemm batch_gemm(const DotParam& p, const Shape& l, const Shape& r) {
  const int nd = l.ndim();
  const Shape lm{l[nd - 2], l[nd - 1]}, rm{r[nd - 2], r[nd - 1]};
  return {dot_gemm(p, lm, rm), l.prod(0, nd - 2)};
}

/// Runs body(b, threads_for_gemm) over the batch: many small products run side by side, a few
/// large ones one after another with all threads inside the GEMM.
template <typename F>
void for_each_batch(const BatchGemm& bg, int threads, F&& body) {
  const int64_t flops = bg.g.m * bg.g.n * std::max<int64_t>(bg.g.k, 1);
  if (threads > 1 && bg.batch >= threads && flops < (1 << 22)) {
    parallel_for(bg.batch, 1, threads, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) body(b, 1);
    });
  } else {
    for (int64_t b = 0; b < bg.batch; ++b) body(b, threads);
  }
}

void batch_dot_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<DotParam>();
  const BatchGemm bg = batch_gemm(p, in[0].shape_of(), in[1].shape_of());
  const DotGemm& g = bg.g;
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const DT* a = in[0].ptr<DT>();
    const DT* b = in[1].ptr<DT>();
    DT* c = out[0].ptr<DT>();
    for_each_batch(bg, ctx.num_threads, [&](int64_t i, int threads) {
      dot_forward_typed<DT>(g, p.transpose_a, p.transpose_b, a + i * g.ra * g.ca,
                            b + i * g.rb * g.cb, c + i * g.m * g.n, req[0], threads);
    });
  });
}

void batch_dot_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DotParam>();
  const BatchGemm bg = batch_gemm(p, in[1].shape_of(), in[2].shape_of());
  const DotGemm& g = bg.g;
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const DT* dc = in[0].ptr<DT>();
    const DT* a = in[1].ptr<DT>();
    const DT* b = in[2].ptr<DT>();
    DT* da = out[0].ptr<DT>();
    DT* db = out[1].ptr<DT>();
    for_each_batch(bg, ctx.num_threads, [&](int64_t i, int threads) {
      dot_backward_typed<DT>(g, p.transpose_a, p.transpose_b, dc + i * g.m * g.n,
                             a + i * g.ra * g.ca, b + i * g.rb * g.cb, da + i * g.ra * g.ca, req[0],
                             db + i * g.rb * g.cb, req[1], threads);
    });
  });
}

}  // namespace

void register_dot_kernels(OpRegistry& r) {
  r.kernels("dot").set_attr<FCompute>(DeviceType::kCPU, dot_forward);
  r.kernels("_backward_dot").set_attr<FCompute>(DeviceType::kCPU, dot_backward);
  r.kernels("batch_dot").set_attr<FCompute>(DeviceType::kCPU, batch_dot_forward);
  r.kernels("_backward_batch_dot").set_attr<FCompute>(DeviceType::kCPU, batch_dot_backward);
}

}  // namespace weft::detail
