// FullyConnected (y = x·Wᵀ + b, flattening or on the last axis), _fused_fc_act and
// _backward_FullyConnected: the definitions (params, shape inference, gradient). The kernels are in
// ops/cpu/fully_connected.cc and ops/cuda/fully_connected.cc.
#include <string>

#include "ops/defs/conv_common.h"
#include "ops/defs/fc_params.h"

namespace weft::detail {
namespace {

int fc_num_inputs(const OpAttrs& a) { return a.params<FullyConnectedParam>().no_bias ? 2 : 3; }
std::vector<std::string> fc_input_names(const OpAttrs& a) {
  if (a.params<FullyConnectedParam>().no_bias) return {"data", "weight"};
  return {"data", "weight", "bias"};
}

bool fc_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<FullyConnectedParam>();
  const int64_t h = p.num_hidden;
  if (!p.no_bias) assign_input_shape(attrs, in, 2, Shape{h});
  Shape& data = in[0];
  // K from the weight when the data does not give it.
  int64_t k = in[1].rank_known() && in[1].ndim() == 2 ? in[1][1] : -1;
  if (!data.rank_known()) {
    if (!p.flatten && out[0].rank_known() && out[0].ndim() >= 1) {
      Shape d = out[0];
      d[d.ndim() - 1] = k;
      assign_input_shape(attrs, in, 0, d);
    }
    if (k >= 0)
      assign_input_shape(attrs, in, 1, Shape{h, k});
    else
      assign_input_shape(attrs, in, 1, Shape{h, -1});
    return false;
  }
  if (data.ndim() < 1)
    throw_shape_error(attrs, "data must have rank >= 1, got " + data.to_string());
  if (p.flatten) {
    bool known = true;
    for (int i = 1; i < data.ndim(); ++i) known = known && data[i] >= 0;
    if (known) k = data.prod(1, data.ndim());  // 1 for 1-d data
    // Backward: a single unknown trailing dim follows from K.
    if (!known && k >= 0 && data.ndim() == 2) {
      Shape d = data;
      d[1] = k;
      assign_input_shape(attrs, in, 0, d);
    }
    assign_input_shape(attrs, in, 1, Shape{h, k});
    assign_output_shape(attrs, out, 0, Shape{data[0], h});
    if (in[0][0] < 0 && out[0][0] >= 0) {
      Shape d = in[0];
      d[0] = out[0][0];
      assign_input_shape(attrs, in, 0, d);
    }
  } else {
    if (data.back() >= 0) k = data.back();
    Shape d = data;
    d[d.ndim() - 1] = k;
    assign_input_shape(attrs, in, 0, d);
    assign_input_shape(attrs, in, 1, Shape{h, k});
    Shape o = in[0];
    o[o.ndim() - 1] = h;
    assign_output_shape(attrs, out, 0, o);
    Shape back = out[0];
    back[back.ndim() - 1] = in[0].back();
    assign_input_shape(attrs, in, 0, back);
  }
  return all_known(in) && all_known(out);
}

// _backward_FullyConnected: inputs (out_grad, data, weight), outputs (d_data, d_weight[, d_bias]).
bool fc_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  const auto& p = attrs.params<FullyConnectedParam>();
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_output_shape(attrs, out, 1, in[2]);
  assign_input_shape(attrs, in, 2, out[1]);
  if (!p.no_bias) assign_output_shape(attrs, out, 2, Shape{p.num_hidden});
  return all_known(in) && all_known(out);
}

}  // namespace

void register_fully_connected_ops(OpRegistry& r) {
  r.define_op("FullyConnected")
      .describe(
          "Dense layer y = x·Wᵀ + b with weight (num_hidden, K) and bias (num_hidden,) unless "
          "no_bias. "
          "flatten=True views data as (N, K = prod(shape[1:])) and outputs (N, num_hidden); "
          "flatten=False "
          "applies to the last axis and outputs shape[:-1] + (num_hidden,).")
      .set_params<FullyConnectedParam>()
      .set_attr<FNumInputs>(fc_num_inputs)
      .set_attr<FListInputNames>(fc_input_names)
      .set_attr<FInferShape>(fc_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        const bool bias = !b.attrs().params<FullyConnectedParam>().no_bias;
        auto g = b.emit_with_forward_attrs("_backward_FullyConnected",
                                           {b.out_grad(0), b.input(0), b.input(1)});
        std::vector<GradEntry> grads{g.at(0), g.at(1)};
        if (bias) grads.push_back(g.at(2));
        return grads;
      });

  r.define_op("_fused_fc_act")
      .describe(
          "FullyConnected followed by an activation applied as its output is written (a oneDNN "
          "post-op). Made by the executor's inference rewrite; inputs as FullyConnected; hidden "
          "attrs __act_type__ (relu, leaky, elu, sigmoid, tanh, softrelu, clip), __act_alpha__, "
          "__act_beta__.")
      .set_params<FullyConnectedParam>()
      .set_attr<FNumInputs>(fc_num_inputs)
      .set_attr<FListInputNames>(fc_input_names)
      .set_attr<FInferShape>(fc_infer_shape);

  r.define_op("_backward_FullyConnected")
      .describe(
          "Gradient of FullyConnected: inputs (out_grad, data, weight); outputs (d_data, "
          "d_weight[, d_bias]).")
      .set_params<FullyConnectedParam>()
      .set_input_names({"out_grad", "data", "weight"})
      .set_attr<FNumOutputs>(fc_num_inputs)
      .set_attr<FListOutputNames>([](const OpAttrs& a) {
        std::vector<std::string> names{"data_grad", "weight_grad"};
        if (!a.params<FullyConnectedParam>().no_bias) names.push_back("bias_grad");
        return names;
      })
      .set_attr<FInferShape>(fc_backward_infer_shape);
}

}  // namespace weft::detail
