// The definitions of Activation (relu, sigmoid, tanh, softrelu, softsign) and LeakyReLU (leaky,
// prelu, elu, selu, gelu, rrelu) with their backward ops: shapes, resources, gradients. The CPU
// kernels are in ops/cpu/activation.cc.
#include "ops/defs/activation_params.h"
#include "ops/defs/norm_common.h"

namespace weft::detail {
namespace {

// ---- LeakyReLU
// -----------------------------------------------------------------------------------

bool leaky_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<LeakyReLUParam>();
  Shape d = in[0];
  for (const auto& o : out) merge_shape(&d, o);
  if (!d.rank_known()) return false;
  assign_input_shape(attrs, in, 0, d);
  for (size_t i = 0; i < out.size(); ++i)
    assign_output_shape(attrs, out, static_cast<int>(i), in[0]);
  if (p.act_type == LeakyType::kPReLU) {
    const Shape& g = in[1];
    const bool shared = g.rank_known() && g.ndim() == 1 && g[0] == 1;
    if (!shared) {
      if (d.ndim() >= 2) {
        assign_input_shape(attrs, in, 1, Shape{d[1]});
        Shape dd = Shape::filled(d.ndim(), -1);
        dd[1] = in[1][0];
        assign_input_shape(attrs, in, 0, dd);
        for (size_t i = 0; i < out.size(); ++i)
          assign_output_shape(attrs, out, static_cast<int>(i), in[0]);
      } else {
        assign_input_shape(attrs, in, 1, Shape{1});
      }
    }
  }
  return all_known(in) && all_known(out);
}

bool leaky_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                std::vector<Shape>& out) {
  const auto& p = attrs.params<LeakyReLUParam>();
  Shape d;
  merge_shape(&d, in[0]);
  merge_shape(&d, in[1]);
  merge_shape(&d, out[0]);
  if (p.act_type == LeakyType::kRReLU) merge_shape(&d, in[2]);
  if (!d.rank_known()) return false;
  assign_input_shape(attrs, in, 0, d);
  assign_input_shape(attrs, in, 1, d);
  assign_output_shape(attrs, out, 0, d);
  if (p.act_type == LeakyType::kRReLU) assign_input_shape(attrs, in, 2, d);
  if (p.act_type == LeakyType::kPReLU && in[2].rank_known())
    assign_output_shape(attrs, out, 1, in[2]);
  if (p.act_type == LeakyType::kPReLU && out[1].rank_known())
    assign_input_shape(attrs, in, 2, out[1]);
  return all_known(in) && all_known(out);
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  r.define_op("Activation")
      .describe(
          "Elementwise activation: relu max(x, 0), sigmoid 1/(1+exp(-x)), tanh, softrelu "
          "log(1+exp(x)) "
          "(x itself for x > 20), softsign x/(1+|x|).")
      .set_params<ActivationParam>()
      .set_input_names({"data"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(norm::inplace_first)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_Activation",
                                      {b.out_grad(0), b.input(0), b.output(0)})
                .at(0)};
      });
  r.define_op("_backward_Activation")
      .describe("Gradient of Activation with respect to data.")
      .set_params<ActivationParam>()
      .set_input_names({"out_grad", "data", "output"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(infer_same_shape);

  r.define_op("LeakyReLU")
      .describe(
          "Leaky rectifiers: leaky x>0?x:slope*x; prelu x>0?x:gamma*x with gamma (C,) on axis 1 or "
          "(1,); "
          "elu x>0?x:slope*(exp(x)-1); selu; gelu 0.5*x*(1+erf(x/sqrt(2))); rrelu x>0?x:s*x with s "
          "uniform in [lower_bound, upper_bound] per element in training and (lower+upper)/2 at "
          "inference (a hidden second output holds s).")
      .set_params<LeakyReLUParam>()
      .set_attr<FNumInputs>([](const OpAttrs& a) {
        return a.params<LeakyReLUParam>().act_type == LeakyType::kPReLU ? 2 : 1;
      })
      .set_attr<FListInputNames>([](const OpAttrs& a) {
        return a.params<LeakyReLUParam>().act_type == LeakyType::kPReLU
                   ? std::vector<std::string>{"data", "gamma"}
                   : std::vector<std::string>{"data"};
      })
      .set_attr<FNumOutputs>([](const OpAttrs& a) {
        return a.params<LeakyReLUParam>().act_type == LeakyType::kRReLU ? 2 : 1;
      })
      .set_attr<FListOutputNames>([](const OpAttrs& a) {
        return a.params<LeakyReLUParam>().act_type == LeakyType::kRReLU
                   ? std::vector<std::string>{"output", "mask"}
                   : std::vector<std::string>{"output"};
      })
      .set_attr<FNumVisibleOutputs>([](const OpAttrs&) { return 1; })
      .set_attr<FInferShape>(leaky_infer_shape)
      .set_attr<FInplaceOption>(norm::inplace_first)
      .set_attr<FResourceRequest>(
          [](const OpAttrs& a, const std::vector<Shape>&, const std::vector<Shape>&) {
            std::vector<ResourceRequest> res;
            if (a.params<LeakyReLUParam>().act_type == LeakyType::kRReLU) {
              res.push_back({ResourceRequest::Kind::kRandom, 0});
            }
            return res;
          })
      .set_attr<FGradient>([](GradBuilder& b) {
        const LeakyType t = b.attrs().params<LeakyReLUParam>().act_type;
        std::vector<GradEntry> ins{b.out_grad(0), b.input(0)};
        if (t == LeakyType::kPReLU) ins.push_back(b.input(1));
        if (t == LeakyType::kRReLU) ins.push_back(b.output(1));
        auto g = b.emit_with_forward_attrs("_backward_LeakyReLU", ins);
        if (t == LeakyType::kPReLU) return std::vector<GradEntry>{g.at(0), g.at(1)};
        return std::vector<GradEntry>{g.at(0)};
      });
  r.define_op("_backward_LeakyReLU")
      .describe("Gradient of LeakyReLU with respect to data (and gamma for prelu).")
      .set_params<LeakyReLUParam>()
      .set_attr<FNumInputs>([](const OpAttrs& a) {
        const LeakyType t = a.params<LeakyReLUParam>().act_type;
        return (t == LeakyType::kPReLU || t == LeakyType::kRReLU) ? 3 : 2;
      })
      .set_attr<FListInputNames>([](const OpAttrs& a) {
        const LeakyType t = a.params<LeakyReLUParam>().act_type;
        if (t == LeakyType::kPReLU) return std::vector<std::string>{"out_grad", "data", "gamma"};
        if (t == LeakyType::kRReLU) return std::vector<std::string>{"out_grad", "data", "mask"};
        return std::vector<std::string>{"out_grad", "data"};
      })
      .set_attr<FNumOutputs>([](const OpAttrs& a) {
        return a.params<LeakyReLUParam>().act_type == LeakyType::kPReLU ? 2 : 1;
      })
      .set_attr<FListOutputNames>([](const OpAttrs& a) {
        return a.params<LeakyReLUParam>().act_type == LeakyType::kPReLU
                   ? std::vector<std::string>{"data_grad", "gamma_grad"}
                   : std::vector<std::string>{"data_grad"};
      })
      .set_attr<FInferShape>(leaky_backward_infer_shape);
}

}  // namespace weft::detail
