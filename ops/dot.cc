// dot (1-D, 2-D and MXNet's N-D rule) and batch_dot, with _backward_dot / _backward_batch_dot;
// float32 runs oneDNN's sgemm, float64 the GEMM loops.
#include <string>

#include "ops/conv_common.h"
#include "ops/defs/dot_params.h"

namespace weft::detail {
namespace {

// ---- dot ---------------------------------------------------------------------------------------
// lhs is viewed as a matrix (prod(l[:-1]), l[-1]), or (l[0], prod(l[1:])) transposed; rhs as
// (r[0], prod(r[1:])), or (prod(r[:-1]), r[-1]) transposed. The contracted dim is therefore l[-1]
// (l[0] when transpose_a) and r[0] (r[-1] when transpose_b); the output keeps the rest.

int lhs_contract_axis(const DotParam& p, int nd) { return p.transpose_a ? 0 : nd - 1; }
int rhs_contract_axis(const DotParam& p, int nd) { return p.transpose_b ? nd - 1 : 0; }

bool dot_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<DotParam>();
  if (!in[0].rank_known() || !in[1].rank_known()) return false;
  const int ln = in[0].ndim(), rn = in[1].ndim();
  if (ln < 1 || rn < 1)
    throw_shape_error(attrs, "inputs must have rank >= 1, got " + in[0].to_string() + " and " +
                                 in[1].to_string());
  if (ln == 1 && rn == 1 && (p.transpose_a || p.transpose_b)) {
    WEFT_THROW(ValueError) << attrs.where() << ": cannot transpose vectors";
  }
  const int la = lhs_contract_axis(p, ln), ra = rhs_contract_axis(p, rn);
  int64_t k = in[0][la] >= 0 ? in[0][la] : in[1][ra];
  if (in[0][la] >= 0 && in[1][ra] >= 0 && in[0][la] != in[1][ra]) {
    throw_shape_error(attrs, "contracted dims differ: lhs " + in[0].to_string() + " x rhs " +
                                 in[1].to_string() + (p.transpose_a ? " (transpose_a)" : "") +
                                 (p.transpose_b ? " (transpose_b)" : ""));
  }
  Shape l = in[0], r = in[1];
  l[la] = k;
  r[ra] = k;
  // Output = lhs's kept dims (when rank > 1) followed by rhs's kept dims (when rank > 1).
  std::vector<int64_t> o;
  std::vector<std::pair<int, int>> where;  // (input, axis) of each output dim
  if (ln > 1) {
    for (int i = 0; i < ln; ++i)
      if (i != la) {
        o.push_back(l[i]);
        where.push_back({0, i});
      }
  }
  if (rn > 1) {
    for (int i = 0; i < rn; ++i)
      if (i != ra) {
        o.push_back(r[i]);
        where.push_back({1, i});
      }
  }
  if (o.empty()) o.push_back(1);
  assign_output_shape(attrs, out, 0, Shape(o));
  for (size_t j = 0; j < where.size(); ++j) {
    Shape& s = where[j].first == 0 ? l : r;
    if (s[where[j].second] < 0) s[where[j].second] = out[0][static_cast<int>(j)];
  }
  assign_input_shape(attrs, in, 0, l);
  assign_input_shape(attrs, in, 1, r);
  return all_known(in) && all_known(out);
}

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

// _backward_dot: inputs (out_grad, lhs, rhs), outputs (lhs_grad, rhs_grad).
bool dot_like_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                   std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_input_shape(attrs, in, 2, out[1]);
  return all_known(in) && all_known(out);
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

// ---- batch_dot ---------------------------------------------------------------------------------

bool batch_dot_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<DotParam>();
  int nd = -1;
  for (const Shape* s : {&in[0], &in[1], &out[0]})
    if (s->rank_known()) nd = s->ndim();
  if (nd < 0) return false;
  for (const Shape* s : {&in[0], &in[1], &out[0]}) {
    if (s->rank_known() && s->ndim() != nd) {
      throw_shape_error(attrs, "lhs, rhs and output must have one rank, got " + in[0].to_string() +
                                   ", " + in[1].to_string() + ", " + out[0].to_string());
    }
  }
  if (nd < 3)
    throw_shape_error(
        attrs, "inputs must have rank >= 3 (batch..., rows, cols), got rank " + std::to_string(nd));
  Shape l = in[0].rank_known() ? in[0] : Shape::filled(nd, -1);
  Shape r = in[1].rank_known() ? in[1] : Shape::filled(nd, -1);
  Shape o = out[0].rank_known() ? out[0] : Shape::filled(nd, -1);
  auto merge = [&](std::initializer_list<int64_t*> dims, const char* what) {
    int64_t v = -1;
    for (int64_t* d : dims) {
      if (*d < 0) continue;
      if (v >= 0 && *d != v) {
        throw_shape_error(attrs, std::string(what) + " differ: lhs " + in[0].to_string() +
                                     ", rhs " + in[1].to_string() + ", output " +
                                     out[0].to_string() + (p.transpose_a ? " (transpose_a)" : "") +
                                     (p.transpose_b ? " (transpose_b)" : ""));
      }
      v = *d;
    }
    for (int64_t* d : dims) *d = v;
  };
  for (int i = 0; i < nd - 2; ++i) merge({&l[i], &r[i], &o[i]}, "batch dims");
  const int a1 = nd - 2, a2 = nd - 1;
  merge({&l[p.transpose_a ? a2 : a1], &o[a1]}, "output rows");
  merge({&r[p.transpose_b ? a1 : a2], &o[a2]}, "output cols");
  merge({&l[p.transpose_a ? a1 : a2], &r[p.transpose_b ? a2 : a1]}, "contracted dims");
  assign_input_shape(attrs, in, 0, l);
  assign_input_shape(attrs, in, 1, r);
  assign_output_shape(attrs, out, 0, o);
  return all_known(in) && all_known(out);
}

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

std::vector<std::string> dot_grad_names(const OpAttrs&) { return {"lhs_grad", "rhs_grad"}; }

}  // namespace

void register_dot_ops(OpRegistry& r) {
  r.register_op("dot")
      .describe(
          "Matrix product. 1-D·1-D is the inner product (shape (1,)); otherwise the last axis of "
          "lhs (the "
          "first when transpose_a) is contracted with the first axis of rhs (the last when "
          "transpose_b), and the "
          "output is the remaining lhs dims followed by the remaining rhs dims. forward_stype is "
          "accepted; "
          "outputs are dense.")
      .set_params<DotParam>()
      .set_input_names({"lhs", "rhs"})
      .set_attr<FInferShape>(dot_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, dot_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        return b.emit_with_forward_attrs("_backward_dot", {b.out_grad(0), b.input(0), b.input(1)});
      });

  r.register_op("_backward_dot")
      .describe("Gradient of dot: inputs (out_grad, lhs, rhs); outputs (lhs_grad, rhs_grad).")
      .set_params<DotParam>()
      .set_input_names({"out_grad", "lhs", "rhs"})
      .set_attr<FNumOutputs>([](const OpAttrs&) { return 2; })
      .set_attr<FListOutputNames>(dot_grad_names)
      .set_attr<FInferShape>(dot_like_backward_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, dot_backward);

  r.register_op("batch_dot")
      .describe(
          "Batched matrix product of lhs (B..., M, K) and rhs (B..., K, N) into (B..., M, N); "
          "transpose_a / "
          "transpose_b transpose each batch's matrix. Inputs have one rank >= 3 and equal batch "
          "dims.")
      .set_params<DotParam>()
      .set_input_names({"lhs", "rhs"})
      .set_attr<FInferShape>(batch_dot_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, batch_dot_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        return b.emit_with_forward_attrs("_backward_batch_dot",
                                         {b.out_grad(0), b.input(0), b.input(1)});
      });

  r.register_op("_backward_batch_dot")
      .describe("Gradient of batch_dot: inputs (out_grad, lhs, rhs); outputs (lhs_grad, rhs_grad).")
      .set_params<DotParam>()
      .set_input_names({"out_grad", "lhs", "rhs"})
      .set_attr<FNumOutputs>([](const OpAttrs&) { return 2; })
      .set_attr<FListOutputNames>(dot_grad_names)
      .set_attr<FInferShape>(dot_like_backward_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, batch_dot_backward);
}

}  // namespace weft::detail
