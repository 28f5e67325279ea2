// The definition of BatchNorm (MXNet semantics: moving statistics at inference, batch statistics
// in training with an in-place update of moving_mean/moving_var) and its backward op: shapes,
// types, gradient. The CPU kernels are in ops/cpu/batch_norm.cc.
#include "ops/defs/norm_common.h"
#include "ops/defs/norm_params.h"

namespace weft::detail {
namespace {

// Infers data <-> out and the (C,) shapes of gamma, beta, moving stats and the mean/var outputs.
// `n_vec_in` vector inputs follow data at 1.., `n_vec_out` vector outputs follow out at 1...
bool infer_channel_shapes(const OpAttrs& attrs, int64_t axis_param, std::vector<Shape>& in,
                          int data_in, int first_vec_in, int n_vec_in, std::vector<Shape>& out,
                          int first_vec_out, int n_vec_out, int same_out) {
  if (!in[data_in].rank_known() && out[same_out].rank_known())
    assign_input_shape(attrs, in, data_in, out[same_out]);
  if (!in[data_in].rank_known()) {
    // Without the data rank nothing else can be placed; still unify the channel vectors.
    Shape c;
    for (int i = first_vec_in; i < first_vec_in + n_vec_in; ++i) {
      if (in[i].rank_known()) c = in[i];
    }
    for (int k = 0; k < 2 && c.rank_known(); ++k) {
      for (int i = first_vec_in; i < first_vec_in + n_vec_in; ++i) {
        assign_input_shape(attrs, in, i, c);
        c = in[i];
      }
      for (int i = first_vec_out; i < first_vec_out + n_vec_out; ++i) {
        assign_output_shape(attrs, out, i, c);
        c = out[i];
      }
    }
    return false;
  }
  assign_output_shape(attrs, out, same_out, in[data_in]);
  assign_input_shape(attrs, in, data_in, out[same_out]);
  const int ndim = in[data_in].ndim();
  WEFT_CHECK_AS(ShapeError, ndim >= 1)
      << attrs.where() << ": data must have at least one dimension, got "
      << in[data_in].to_string();
  const int axis = normalize_axis(attrs, axis_param, ndim);
  Shape c{in[data_in][axis]};
  for (int k = 0; k < 2; ++k) {
    for (int i = first_vec_in; i < first_vec_in + n_vec_in; ++i) {
      assign_input_shape(attrs, in, i, c);
      c = in[i];
    }
    for (int i = first_vec_out; i < first_vec_out + n_vec_out; ++i) {
      assign_output_shape(attrs, out, i, c);
      c = out[i];
    }
  }
  Shape d = Shape::filled(ndim, -1);
  d[axis] = c[0];
  assign_input_shape(attrs, in, data_in, d);
  assign_output_shape(attrs, out, same_out, in[data_in]);
  return all_known(in) && all_known(out);
}

bool bn_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  return infer_channel_shapes(attrs, attrs.params<BatchNormParam>().axis, in, 0, 1, 4, out, 1, 2,
                              0);
}

// Throws ValueError naming the op and the input when `in[i]`'s type is known and not `param`, the
// parameter type for `data` data.
void check_param_type(const OpAttrs& attrs, const std::vector<DType>& in, int i, DType data,
                      DType param) {
  if (in[i] == DType::kUnknown || in[i] == param) return;
  WEFT_THROW(ValueError) << attrs.where() << ": input '" << attrs.op->input_names(attrs)[i]
                         << "' has dtype " << dtype_name(in[i]) << ", but " << dtype_name(data)
                         << " data needs " << dtype_name(param)
                         << " gamma, beta and moving statistics";
}

// Data and output share one floating type; gamma, beta, the moving statistics and the mean/var
// outputs have batch_norm_param_type of it: float32 for float16/bfloat16 data (MXNet's mixed
// precision), the data's type otherwise. `data_in`/`first_param_in` index the inputs, `out0` the
// output with the data's type; the other outputs are parameter-typed. Without the data's type only
// a float64 parameter fixes it (a float32 one fits float32, float16 and bfloat16 data alike).
bool bn_types(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out,
              std::vector<int> data_in, int first_param_in) {
  DType t = DType::kUnknown;
  for (int i : data_in)
    if (t == DType::kUnknown) t = in[i];
  if (t == DType::kUnknown) t = out[0];
  if (t == DType::kUnknown) {
    DType p = DType::kUnknown;
    for (size_t i = first_param_in; i < in.size() && p == DType::kUnknown; ++i) p = in[i];
    for (size_t o = 1; o < out.size() && p == DType::kUnknown; ++o) p = out[o];
    if (p == DType::kUnknown) return false;
    norm::check_float_type(attrs, p, "BatchNorm gamma/beta/moving statistics");
    if (p == DType::kFloat32) {
      for (size_t i = first_param_in; i < in.size(); ++i)
        assign_input_type(attrs, in, static_cast<int>(i), p);
      for (size_t o = 1; o < out.size(); ++o)
        assign_output_type(attrs, out, static_cast<int>(o), p);
      return false;
    }
    t = p;
  }
  norm::check_any_float_type(attrs, t, "BatchNorm data");
  const DType pt = batch_norm_param_type(t);
  for (size_t i = first_param_in; i < in.size(); ++i)
    check_param_type(attrs, in, static_cast<int>(i), t, pt);
  for (int i : data_in) assign_input_type(attrs, in, i, t);
  assign_output_type(attrs, out, 0, t);
  for (size_t i = first_param_in; i < in.size(); ++i)
    assign_input_type(attrs, in, static_cast<int>(i), pt);
  for (size_t o = 1; o < out.size(); ++o) assign_output_type(attrs, out, static_cast<int>(o), pt);
  return true;
}

bool bn_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  return bn_types(attrs, in, out, {0}, 1);
}

// ---- backward ----------------------------------------------------------------------------------
// Inputs: out_grad, data, gamma, mean, var, moving_mean, moving_var (the forward's outputs 1 and 2
// are the batch statistics). Outputs: data, gamma, beta gradients.

// out_grad and data have the data's type, the other inputs and the gamma/beta gradients the
// parameter type (bn_types).
bool bn_backward_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  return bn_types(attrs, in, out, {1, 0}, 2);
}

bool bn_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  // out_grad, data and d_data share a shape; the other inputs and d_gamma, d_beta are (C,).
  if (!in[1].rank_known() && in[0].rank_known()) assign_input_shape(attrs, in, 1, in[0]);
  if (!in[1].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 1, out[0]);
  if (in[1].rank_known()) assign_input_shape(attrs, in, 0, in[1]);
  const bool ok =
      infer_channel_shapes(attrs, attrs.params<BatchNormParam>().axis, in, 1, 2, 5, out, 1, 2, 0);
  if (in[1].rank_known()) assign_input_shape(attrs, in, 0, in[1]);
  return ok && all_known(in);
}

}  // namespace

void register_batch_norm_ops(OpRegistry& r) {
  r.define_op("BatchNorm")
      .describe(
          "Batch normalization over the channel axis `axis`. Inference (and use_global_stats) uses "
          "moving_mean/moving_var; training uses the batch mean and biased variance, writes them "
          "to "
          "the outputs mean/var and updates the moving statistics in place "
          "(moving = moving*momentum + batch*(1-momentum)). fix_gamma uses gamma = 1. With "
          "float16/bfloat16 data, gamma, beta, the moving statistics and mean/var are float32.")
      .set_params<BatchNormParam>()
      .set_input_names({"data", "gamma", "beta", "moving_mean", "moving_var"})
      .set_output_names({"output", "mean", "var"})
      .set_attr<FNumVisibleOutputs>(
          [](const OpAttrs& a) { return a.params<BatchNormParam>().output_mean_var ? 3 : 1; })
      // The forward pass updates the moving statistics (Note [BatchNorm statistics] in
      // ops/cpu/batch_norm.cc).
      .set_attr<FMutateInputs>([](const OpAttrs&) {
        return std::vector<int>{3, 4};
      })
      .set_attr<FInferShape>(bn_infer_shape)
      .set_attr<FInferType>(bn_infer_type)
      .set_attr<FInplaceOption>(norm::inplace_first)
      .set_attr<FGradient>([](GradBuilder& b) {
        auto g = b.emit_with_forward_attrs(
            "_backward_BatchNorm", {b.out_grad(0), b.input(0), b.input(1), b.output(1), b.output(2),
                                    b.input(3), b.input(4)});
        return std::vector<GradEntry>{g.at(0), g.at(1), g.at(2), GradBuilder::none(),
                                      GradBuilder::none()};
      });

  r.define_op("_backward_BatchNorm")
      .describe("Gradient of BatchNorm with respect to data, gamma and beta.")
      .set_params<BatchNormParam>()
      .set_input_names({"out_grad", "data", "gamma", "mean", "var", "moving_mean", "moving_var"})
      .set_output_names({"data_grad", "gamma_grad", "beta_grad"})
      .set_attr<FInferShape>(bn_backward_infer_shape)
      .set_attr<FInferType>(bn_backward_infer_type);
}

}  // namespace weft::detail
