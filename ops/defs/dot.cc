// dot (1-D, 2-D and MXNet's N-D rule) and batch_dot, with _backward_dot / _backward_batch_dot: the
// definitions (params, shape inference, gradient). The kernels are in ops/cpu/dot.cc and
// ops/cuda/dot.cc.
#include <string>

#include "ops/defs/conv_common.h"
#include "ops/defs/dot_params.h"

namespace weft::detail {
namespace {

// ---- dot ----------------------------------------------------------------------------------------
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

// _backward_dot: inputs (out_grad, lhs, rhs), outputs (lhs_grad, rhs_grad).
bool dot_like_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                   std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_input_shape(attrs, in, 2, out[1]);
  return all_known(in) && all_known(out);
}

// ---- batch_dot ----------------------------------------------------------------------------------

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

std::vector<std::string> dot_grad_names(const OpAttrs&) { return {"lhs_grad", "rhs_grad"}; }

}  // namespace

void register_dot_ops(OpRegistry& r) {
  r.define_op("dot")
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
      .set_attr<FGradient>([](GradBuilder& b) {
        return b.emit_with_forward_attrs("_backward_dot", {b.out_grad(0), b.input(0), b.input(1)});
      });

  r.define_op("_backward_dot")
      .describe("Gradient of dot: inputs (out_grad, lhs, rhs); outputs (lhs_grad, rhs_grad).")
      .set_params<DotParam>()
      .set_input_names({"out_grad", "lhs", "rhs"})
      .set_attr<FNumOutputs>([](const OpAttrs&) { return 2; })
      .set_attr<FListOutputNames>(dot_grad_names)
      .set_attr<FInferShape>(dot_like_backward_infer_shape);

  r.define_op("batch_dot")
      .describe(
          "Batched matrix product of lhs (B..., M, K) and rhs (B..., K, N) into (B..., M, N); "
          "transpose_a / "
          "transpose_b transpose each batch's matrix. Inputs have one rank >= 3 and equal batch "
          "dims.")
      .set_params<DotParam>()
      .set_input_names({"lhs", "rhs"})
      .set_attr<FInferShape>(batch_dot_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        return b.emit_with_forward_attrs("_backward_batch_dot",
                                         {b.out_grad(0), b.input(0), b.input(1)});
      });

  r.define_op("_backward_batch_dot")
      .describe("Gradient of batch_dot: inputs (out_grad, lhs, rhs); outputs (lhs_grad, rhs_grad).")
      .set_params<DotParam>()
      .set_input_names({"out_grad", "lhs", "rhs"})
      .set_attr<FNumOutputs>([](const OpAttrs&) { return 2; })
      .set_attr<FListOutputNames>(dot_grad_names)
      .set_attr<FInferShape>(dot_like_backward_infer_shape);
}

}  // namespace weft::detail
