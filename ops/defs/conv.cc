// Convolution (1-D, 2-D, 3-D; grouped, depthwise, dilated) and _backward_Convolution: the
// definitions (params, shape inference, gradient). The kernels are in ops/cpu/conv.cc and
// ops/cuda/conv.cc.
#include <string>

#include "ops/defs/conv_common.h"

namespace weft::detail {
namespace {
int64_t dilated(int64_t k, int64_t d) { return d * (k - 1) + 1; }
}  // namespace

int conv_num_inputs(const OpAttrs& a) { return a.params<ConvolutionParam>().no_bias ? 2 : 3; }
std::vector<std::string> conv_input_names(const OpAttrs& a) {
  if (a.params<ConvolutionParam>().no_bias) return {"data", "weight"};
  return {"data", "weight", "bias"};
}

// ---- shape inference ----------------------------------------------------------------------------

bool conv_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const int nsp = p.kernel.ndim(), nd = nsp + 2;
  check_channel_first_layout(attrs, p.layout, nsp);
  Shape data = in[0].rank_known() ? in[0] : Shape::filled(nd, -1);
  if (data.ndim() != nd) {
    throw_shape_error(attrs, "data must be " + std::to_string(nd) + "-d (N, C, spatial...) for a " +
                                 std::to_string(nsp) + "-d kernel, got " + data.to_string());
  }
  Shape o = out[0].rank_known() ? out[0] : Shape::filled(nd, -1);
  if (o.ndim() != nd)
    throw_shape_error(attrs, "output must be " + std::to_string(nd) + "-d, got " + o.to_string());
  const int64_t g = p.num_group;
  if (data[1] < 0 && in[1].rank_known() && in[1].ndim() == nd && in[1][1] >= 0)
    data[1] = in[1][1] * g;
  if (data[1] >= 0 && data[1] % g != 0) {
    throw_shape_error(attrs, "data channels " + std::to_string(data[1]) +
                                 " are not divisible by num_group " + std::to_string(g));
  }
  Shape w = Shape::filled(nd, -1);
  w[0] = p.num_filter;
  w[1] = data[1] >= 0 ? data[1] / g : -1;
  for (int i = 0; i < nsp; ++i) w[2 + i] = p.kernel[i];
  assign_input_shape(attrs, in, 1, w);
  if (!p.no_bias) assign_input_shape(attrs, in, 2, Shape{p.num_filter});
  if (data[0] < 0) data[0] = o[0];
  for (int i = 0; i < nsp; ++i) {
    // Backward inference is exact only for stride 1 (otherwise several sizes give one output).
    if (data[2 + i] < 0 && o[2 + i] >= 0 && p.stride[i] == 1) {
      const int64_t x = o[2 + i] - 1 + dilated(p.kernel[i], p.dilate[i]) - 2 * p.pad[i];
      if (x > 0) data[2 + i] = x;
    }
  }
  assign_input_shape(attrs, in, 0, data);
  Shape os = Shape::filled(nd, -1);
  os[0] = data[0];
  os[1] = p.num_filter;
  for (int i = 0; i < nsp; ++i) {
    const int64_t x = data[2 + i];
    if (x < 0) continue;
    const int64_t dk = dilated(p.kernel[i], p.dilate[i]);
    if (x + 2 * p.pad[i] < dk) {
      throw_shape_error(
          attrs, "dilated kernel size " + std::to_string(dk) + " exceeds padded input size " +
                     std::to_string(x + 2 * p.pad[i]) + " (data " + data.to_string() + ")");
    }
    os[2 + i] = (x + 2 * p.pad[i] - dk) / p.stride[i] + 1;
  }
  assign_output_shape(attrs, out, 0, os);
  return all_known(in) && all_known(out);
}

ConvGeom conv_geom(const ConvolutionParam& p, const Shape& data, const Shape& out) {
  ConvGeom g;
  g.set_window(p.kernel, p.stride, p.dilate, p.pad);
  g.batch = data[0];
  g.in_c = data[1];
  g.out_c = p.num_filter;
  g.groups = p.num_group;
  g.set_spatial(data, out);
  return g;
}

namespace {

// _backward_Convolution: inputs (out_grad, data, weight), outputs (d_data, d_weight[, d_bias]).
bool conv_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                               std::vector<Shape>& out) {
  const auto& p = attrs.params<ConvolutionParam>();
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 2, out[1]);
  if (!p.no_bias) assign_output_shape(attrs, out, 2, Shape{p.num_filter});
  return all_known(in) && all_known(out);
}

}  // namespace

void register_convolution_ops(OpRegistry& r) {
  r.define_op("Convolution")
      .describe(
          "Cross-correlation of data (N, C, *spatial) with weight (num_filter, C/num_group, "
          "*kernel), plus "
          "bias (num_filter,) unless no_bias. 1-D, 2-D and 3-D; grouped (depthwise when num_group "
          "= C), "
          "strided, padded, dilated. Output size floor((x + 2p - d(k-1) - 1)/s) + 1. "
          "NCW/NCHW/NCDHW only.")
      .set_params<ConvolutionParam>()
      .set_attr<FNumInputs>(conv_num_inputs)
      .set_attr<FListInputNames>(conv_input_names)
      .set_attr<FInferShape>(conv_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        const bool bias = !b.attrs().params<ConvolutionParam>().no_bias;
        auto g = b.emit_with_forward_attrs("_backward_Convolution",
                                           {b.out_grad(0), b.input(0), b.input(1)});
        std::vector<GradEntry> grads{g.at(0), g.at(1)};
        if (bias) grads.push_back(g.at(2));
        return grads;
      });

  r.define_op("_backward_Convolution")
      .describe(
          "Gradient of Convolution: inputs (out_grad, data, weight); outputs (d_data, d_weight[, "
          "d_bias]).")
      .set_params<ConvolutionParam>()
      .set_input_names({"out_grad", "data", "weight"})
      .set_attr<FNumOutputs>(conv_num_inputs)
      .set_attr<FListOutputNames>([](const OpAttrs& a) {
        std::vector<std::string> names{"data_grad", "weight_grad"};
        if (!a.params<ConvolutionParam>().no_bias) names.push_back("bias_grad");
        return names;
      })
      .set_attr<FInferShape>(conv_backward_infer_shape);
}

}  // namespace weft::detail
