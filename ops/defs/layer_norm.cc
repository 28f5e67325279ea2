// The definitions of LayerNorm (normalisation along one axis, outputs out/mean/std) and LRN (local
// response normalisation across channels), with their backward ops: shapes, gradients. The CPU
// kernels are in ops/cpu/layer_norm.cc.
#include "ops/defs/norm_common.h"
#include "ops/defs/norm_params.h"

namespace weft::detail {
namespace {

// ---- LayerNorm ----------------------------------------------------------------------------------

// in: data, gamma, beta (or for backward: out_grad, data, gamma, mean, std); out: out, mean, std
// (or data/gamma/beta gradients). `data` is input `di`; vectors (D,) at `vec_in`, `vec_out`; the
// reduced (axis = 1) shapes at `red_in`, `red_out`.
bool ln_infer(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out, int di,
              std::vector<int> same_in, std::vector<int> same_out, std::vector<int> vec_in,
              std::vector<int> vec_out, std::vector<int> red_in, std::vector<int> red_out) {
  Shape d = in[di];
  for (int i : same_in) merge_shape(&d, in[i]);
  for (int i : same_out) merge_shape(&d, out[i]);
  if (!d.rank_known()) return false;
  for (int i : same_in) assign_input_shape(attrs, in, i, d);
  for (int i : same_out) assign_output_shape(attrs, out, i, d);
  assign_input_shape(attrs, in, di, d);
  d = in[di];
  const int ndim = d.ndim();
  WEFT_CHECK_AS(ShapeError, ndim >= 1)
      << attrs.where() << ": data must have at least one dimension";
  const int axis = normalize_axis(attrs, attrs.params<LayerNormParam>().axis, ndim);
  Shape v{d[axis]};
  for (int k = 0; k < 2; ++k) {
    for (int i : vec_in) {
      assign_input_shape(attrs, in, i, v);
      v = in[i];
    }
    for (int i : vec_out) {
      assign_output_shape(attrs, out, i, v);
      v = out[i];
    }
  }
  Shape dd = Shape::filled(ndim, -1);
  dd[axis] = v[0];
  assign_input_shape(attrs, in, di, dd);
  d = in[di];
  for (int i : same_in) assign_input_shape(attrs, in, i, d);
  for (int i : same_out) assign_output_shape(attrs, out, i, d);
  Shape red = d;
  red[axis] = 1;
  for (int i : red_in) assign_input_shape(attrs, in, i, red);
  for (int i : red_out) assign_output_shape(attrs, out, i, red);
  return all_known(in) && all_known(out);
}

bool ln_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  return ln_infer(attrs, in, out, 0, {}, {0}, {1, 2}, {}, {}, {1, 2});
}
bool ln_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  return ln_infer(attrs, in, out, 1, {0}, {0}, {2}, {1, 2}, {3, 4}, {});
}

// ---- LRN ----------------------------------------------------------------------------------------

bool lrn_check_rank(const OpAttrs& attrs, const Shape& s) {
  if (!s.rank_known()) return false;
  WEFT_CHECK_AS(ShapeError, s.ndim() >= 2)
      << attrs.where() << ": data must be at least 2-D (N, C, ...), got " << s.to_string();
  return true;
}

bool lrn_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const bool ok = infer_same_shape(attrs, in, out);
  for (const auto& s : in) lrn_check_rank(attrs, s);
  return ok;
}

// One floating type for data, gamma, beta and every output, float16/bfloat16 included (MXNet's
// LayerNorm has no mixed precision: its parameters take the data's type).
bool ln_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  return norm::infer_one_float_type(attrs, in, out, "LayerNorm data");
}

}  // namespace

void register_layer_norm_ops(OpRegistry& r) {
  r.define_op("LayerNorm")
      .describe(
          "Layer normalization along `axis`: out = (x - mean) / std * gamma + beta with std = "
          "sqrt(var + eps); gamma and beta have shape (data.shape[axis],). Outputs out, mean, std "
          "(mean and std have data's shape with the axis set to 1; visible with output_mean_var).")
      .set_params<LayerNormParam>()
      .set_input_names({"data", "gamma", "beta"})
      .set_output_names({"output", "mean", "std"})
      .set_attr<FNumVisibleOutputs>(
          [](const OpAttrs& a) { return a.params<LayerNormParam>().output_mean_var ? 3 : 1; })
      .set_attr<FInferShape>(ln_infer_shape)
      .set_attr<FInferType>(ln_infer_type)
      .set_attr<FGradient>([](GradBuilder& b) {
        auto g = b.emit_with_forward_attrs(
            "_backward_LayerNorm",
            {b.out_grad(0), b.input(0), b.input(1), b.output(1), b.output(2)});
        return std::vector<GradEntry>{g.at(0), g.at(1), g.at(2)};
      });
  r.define_op("_backward_LayerNorm")
      .describe("Gradient of LayerNorm with respect to data, gamma and beta.")
      .set_params<LayerNormParam>()
      .set_input_names({"out_grad", "data", "gamma", "mean", "std"})
      .set_output_names({"data_grad", "gamma_grad", "beta_grad"})
      .set_attr<FInferShape>(ln_backward_infer_shape)
      .set_attr<FInferType>(ln_infer_type);

  r.define_op("LRN")
      .describe(
          "Local response normalization across channels (axis 1): out = x * (knorm + alpha/nsize * "
          "sum of x^2 over the nsize channels centred on c)^-beta. A hidden second output holds "
          "the "
          "normaliser.")
      .set_params<LRNParam>()
      .set_input_names({"data"})
      .set_output_names({"output", "tmp_norm"})
      .set_attr<FNumVisibleOutputs>([](const OpAttrs&) { return 1; })
      .set_attr<FInferShape>(lrn_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_LRN", {b.out_grad(0), b.input(0), b.output(1)})
                .at(0)};
      });
  r.define_op("_backward_LRN")
      .describe("Gradient of LRN with respect to data.")
      .set_params<LRNParam>()
      .set_input_names({"out_grad", "data", "tmp_norm"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(lrn_infer_shape);
}

}  // namespace weft::detail
