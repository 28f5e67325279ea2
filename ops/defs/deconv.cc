// Deconvolution (transposed convolution, 1-D/2-D/3-D, grouped, with adj and target_shape) and
// _backward_Deconvolution: the definitions (params, shape inference, geometry, gradient). The
// kernels are in ops/cpu/deconv.cc and ops/cuda/conv.cc.
#include <string>

#include "ops/defs/conv_common.h"
#include "ops/defs/deconv_params.h"

namespace weft::detail {
namespace {

int deconv_num_inputs(const OpAttrs& a) { return a.params<DeconvolutionParam>().no_bias ? 2 : 3; }
std::vector<std::string> deconv_input_names(const OpAttrs& a) {
  if (a.params<DeconvolutionParam>().no_bias) return {"data", "weight"};
  return {"data", "weight", "bias"};
}

int64_t dilated(int64_t k, int64_t d) { return d * (k - 1) + 1; }

/// Effective pad and adj of spatial dim i for input size x (MXNet's InferPad): with a target
/// size, the excess of the full output over the target is split into pad (rounded up) and adj.
void effective_pad(const OpAttrs& attrs, const DeconvolutionParam& p, int i, int64_t x,
                   int64_t* pad, int64_t* adj) {
  if (p.has_target()) {
    const int64_t full = p.stride[i] * (x - 1) + dilated(p.kernel[i], p.dilate[i]);
    const int64_t excess = full - p.target_shape[i];
    if (excess < 0) {
      throw_shape_error(attrs, "target_shape " + p.target_shape.to_string() +
                                   " is too big: at most " + std::to_string(full) +
                                   " in spatial dim " + std::to_string(i));
    }
    *adj = excess % 2;
    *pad = (excess + 1) / 2;
    if (*adj >= p.stride[i]) {
      throw_shape_error(attrs, "target_shape " + p.target_shape.to_string() + " needs adj " +
                                   std::to_string(*adj) + " in spatial dim " + std::to_string(i) +
                                   ", which must be smaller than stride " +
                                   std::to_string(p.stride[i]));
    }
  } else {
    *pad = p.pad[i];
    *adj = p.adj[i];
  }
}

bool deconv_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<DeconvolutionParam>();
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
  if (data[1] < 0 && in[1].rank_known() && in[1].ndim() == nd && in[1][0] >= 0) data[1] = in[1][0];
  if (data[1] >= 0 && data[1] % g != 0) {
    throw_shape_error(attrs, "data channels " + std::to_string(data[1]) +
                                 " are not divisible by num_group " + std::to_string(g));
  }
  Shape w = Shape::filled(nd, -1);
  w[0] = data[1];
  w[1] = p.num_filter / g;
  for (int i = 0; i < nsp; ++i) w[2 + i] = p.kernel[i];
  assign_input_shape(attrs, in, 1, w);
  if (!p.no_bias) assign_input_shape(attrs, in, 2, Shape{p.num_filter});
  if (data[0] < 0) data[0] = o[0];
  if (!p.has_target()) {
    for (int i = 0; i < nsp; ++i) {
      if (data[2 + i] >= 0 || o[2 + i] < 0) continue;
      const int64_t num = o[2 + i] - dilated(p.kernel[i], p.dilate[i]) + 2 * p.pad[i] - p.adj[i];
      if (num >= 0 && num % p.stride[i] == 0) data[2 + i] = num / p.stride[i] + 1;
    }
  }
  assign_input_shape(attrs, in, 0, data);
  Shape os = Shape::filled(nd, -1);
  os[0] = data[0];
  os[1] = p.num_filter;
  for (int i = 0; i < nsp; ++i) {
    const int64_t x = data[2 + i];
    if (x < 0) continue;
    int64_t pad = 0, adj = 0;
    effective_pad(attrs, p, i, x, &pad, &adj);
    const int64_t size = p.stride[i] * (x - 1) + dilated(p.kernel[i], p.dilate[i]) - 2 * pad + adj;
    if (size <= 0) {
      throw_shape_error(attrs, "output size " + std::to_string(size) + " in spatial dim " +
                                   std::to_string(i) + " is not positive (data " +
                                   data.to_string() + ")");
    }
    os[2 + i] = size;
  }
  assign_output_shape(attrs, out, 0, os);
  return all_known(in) && all_known(out);
}

// _backward_Deconvolution: inputs (out_grad, data, weight), outputs (d_data, d_weight[, d_bias]).
bool deconv_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                 std::vector<Shape>& out) {
  const auto& p = attrs.params<DeconvolutionParam>();
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 2, out[1]);
  if (!p.no_bias) assign_output_shape(attrs, out, 2, Shape{p.num_filter});
  return all_known(in) && all_known(out);
}

}  // namespace

ConvGeom deconv_geom(const OpAttrs& attrs, const Shape& data, const Shape& out) {
  const auto& p = attrs.params<DeconvolutionParam>();
  const int nsp = p.kernel.ndim();
  Shape pad = Shape::filled(nsp, 0);
  for (int i = 0; i < nsp; ++i) {
    int64_t adj = 0;
    effective_pad(attrs, p, i, data[2 + i], &pad[i], &adj);
  }
  ConvGeom g;
  g.set_window(p.kernel, p.stride, p.dilate, pad);
  g.batch = data[0];
  g.in_c = p.num_filter;
  g.out_c = data[1];
  g.groups = p.num_group;
  g.set_spatial(out, data);
  return g;
}

void register_deconvolution_ops(OpRegistry& r) {
  r.define_op("Deconvolution")
      .describe(
          "Transposed convolution of data (N, C, *spatial) with weight (C, num_filter/num_group, "
          "*kernel), plus "
          "bias (num_filter,) unless no_bias (default True). Output size s(x-1) + d(k-1) + 1 - 2p "
          "+ adj; a "
          "non-zero target_shape sets the output size and derives pad and adj from it. "
          "NCW/NCHW/NCDHW only.")
      .set_params<DeconvolutionParam>()
      .set_attr<FNumInputs>(deconv_num_inputs)
      .set_attr<FListInputNames>(deconv_input_names)
      .set_attr<FInferShape>(deconv_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        const bool bias = !b.attrs().params<DeconvolutionParam>().no_bias;
        auto g = b.emit_with_forward_attrs("_backward_Deconvolution",
                                           {b.out_grad(0), b.input(0), b.input(1)});
        std::vector<GradEntry> grads{g.at(0), g.at(1)};
        if (bias) grads.push_back(g.at(2));
        return grads;
      });

  r.define_op("_backward_Deconvolution")
      .describe(
          "Gradient of Deconvolution: inputs (out_grad, data, weight); outputs (d_data, d_weight[, "
          "d_bias]).")
      .set_params<DeconvolutionParam>()
      .set_input_names({"out_grad", "data", "weight"})
      .set_attr<FNumOutputs>(deconv_num_inputs)
      .set_attr<FListOutputNames>([](const OpAttrs& a) {
        std::vector<std::string> names{"data_grad", "weight_grad"};
        if (!a.params<DeconvolutionParam>().no_bias) names.push_back("bias_grad");
        return names;
      })
      .set_attr<FInferShape>(deconv_backward_infer_shape);
}

}  // namespace weft::detail
