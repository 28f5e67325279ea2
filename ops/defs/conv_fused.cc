// _fused_conv_bn_act: the convolution the executor's inference rewrite (graph/fuse.cc) makes of
// Convolution [→ BatchNorm] [→ add] [→ activation] chains, and the activation the fused ops share
// (FusedAct): the definitions (inputs, shape inference, op state). The kernels are in
// ops/cpu/conv_fused.cc and ops/cuda/conv_fused.cc.
#include <atomic>
#include <string>

#include "ops/defs/conv_common.h"
#include "ops/defs/conv_fused_state.h"
#include "ops/defs/elemwise.h"

namespace weft::detail {

// ---- the fused activation -----------------------------------------------------------------------

namespace {
std::string hidden(const OpAttrs& a, const char* key, const char* fallback) {
  auto it = a.dict.find(key);
  return it == a.dict.end() ? fallback : it->second;
}
}  // namespace

std::string FusedAct::key() const {
  if (kind == Kind::kNone) return "";
  return "|act" + std::to_string(static_cast<int>(kind)) + "," + std::to_string(alpha) + "," +
         std::to_string(beta);
}

FusedAct fused_act_from_attrs(const OpAttrs& attrs) {
  static const std::pair<const char*, FusedAct::Kind> kNames[] = {
      {"none", FusedAct::Kind::kNone},         {"relu", FusedAct::Kind::kRelu},
      {"leaky", FusedAct::Kind::kLeaky},       {"elu", FusedAct::Kind::kElu},
      {"sigmoid", FusedAct::Kind::kSigmoid},   {"tanh", FusedAct::Kind::kTanh},
      {"softrelu", FusedAct::Kind::kSoftRelu}, {"clip", FusedAct::Kind::kClip},
      {"prelu", FusedAct::Kind::kPRelu}};
  const std::string type = hidden(attrs, "__act_type__", "none");
  FusedAct a;
  bool found = false;
  for (const auto& [name, kind] : kNames) {
    if (type == name) {
      a.kind = kind;
      found = true;
    }
  }
  WEFT_CHECK(found) << attrs.where() << ": unknown __act_type__ '" << type
                    << "' (none, relu, leaky, elu, sigmoid, tanh, softrelu, clip, prelu)";
  a.alpha = static_cast<float>(parse_float(hidden(attrs, "__act_alpha__", "0")));
  a.beta = static_cast<float>(parse_float(hidden(attrs, "__act_beta__", "0")));
  return a;
}

// ---- _fused_conv_bn_act -------------------------------------------------------------------------
// Made only by the graph executor's inference rewrite (graph/fuse.cc). Conv params as Convolution;
// the rest travels as hidden attributes:
//   __with_bn__ (default True): a BatchNorm (inference) follows; inputs gamma, beta, moving_mean,
//     moving_var after the convolution's; __bn_eps__, __bn_fix_gamma__ as BatchNorm's eps and
//     fix_gamma. It is folded into the weights and bias: w' = w * s, b' = beta + (b - mean) * s
//     with s = gamma / sqrt(var + eps). The folded copies are kept in the op state and recomputed
//     only when one of their inputs changes (storage id and version, OpContext).
//   __with_sum__ (default False): the result is added to a last input, `addend` (an elementwise
//     add after the convolution/BatchNorm). Same shape: oneDNN's sum post-op accumulates into the
//     output, which holds the addend (in place when the planner lets the output take the addend's
//     memory, a copy otherwise). __sum_broadcast__ (from broadcast_add): the shapes may differ and
//     the add broadcasts them (NumPy rules) in a second pass.
//   __act_type__ / __act_alpha__ / __act_beta__: the activation applied last (FusedAct); prelu
//     takes its slopes as a last input, `act_gamma` ((C,) or (1,), as LeakyReLU's gamma).
// Inputs: data, weight, [bias], [gamma, beta, moving_mean, moving_var], [addend], [act_gamma].

uint64_t next_fused_weight_id() {
  static std::atomic<uint64_t> ids{uint64_t{1} << 62};  // disjoint from storage ids
  return ids.fetch_add(1);
}

FusedInputs fused_inputs(const OpAttrs& a) {
  FusedInputs f;
  f.nconv = conv_num_inputs(a);
  f.bn = parse_bool(hidden(a, "__with_bn__", "True"));
  f.sum = parse_bool(hidden(a, "__with_sum__", "False"));
  f.broadcast = f.sum && parse_bool(hidden(a, "__sum_broadcast__", "False"));
  f.prelu = hidden(a, "__act_type__", "none") == "prelu";
  return f;
}

namespace {

int fused_num_inputs(const OpAttrs& a) { return fused_inputs(a).total(); }
std::vector<std::string> fused_input_names(const OpAttrs& a) {
  const FusedInputs f = fused_inputs(a);
  std::vector<std::string> n = conv_input_names(a);
  if (f.bn) {
    for (const char* s : {"gamma", "beta", "moving_mean", "moving_var"}) n.push_back(s);
  }
  if (f.sum) n.push_back("addend");
  if (f.prelu) n.push_back("act_gamma");
  return n;
}

bool fused_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const FusedInputs f = fused_inputs(attrs);
  std::vector<Shape> conv_in(in.begin(), in.begin() + f.nconv);
  std::vector<Shape> conv_out = f.broadcast ? std::vector<Shape>(1) : out;
  if (f.sum && !f.broadcast && in[f.addend()].rank_known())
    assign_output_shape(attrs, conv_out, 0, in[f.addend()]);
  conv_infer_shape(attrs, conv_in, conv_out);
  std::copy(conv_in.begin(), conv_in.end(), in.begin());
  const Shape c{attrs.params<ConvolutionParam>().num_filter};
  if (f.bn) {
    for (int i = f.bn0(); i < f.bn0() + 4; ++i) assign_input_shape(attrs, in, i, c);
  }
  // PReLU's slopes: one per channel, or one shared (1,).
  const Shape& slopes = f.prelu ? in[f.slopes()] : c;
  if (f.prelu && !(slopes.rank_known() && slopes.ndim() == 1 && slopes[0] == 1))
    assign_input_shape(attrs, in, f.slopes(), c);
  if (!f.broadcast) {
    assign_output_shape(attrs, out, 0, conv_out[0]);
    if (f.sum) assign_input_shape(attrs, in, f.addend(), out[0]);
  } else if (conv_out[0].rank_known() && in[f.addend()].rank_known()) {
    Shape o;
    if (!broadcast_shapes(conv_out[0], in[f.addend()], &o)) {
      throw_shape_error(attrs, "cannot broadcast the convolution's output " +
                                   conv_out[0].to_string() + " with the addend " +
                                   in[f.addend()].to_string());
    }
    assign_output_shape(attrs, out, 0, o);
  }
  return all_known(in) && all_known(out);
}

// One type for every input and the output, as unfused convolutions have. A 16-bit type is
// refused here, at inference, rather than when the kernel's state is made: the kernels fold
// BatchNorm and convolve in float32 only, and the rewrite runs before types are known, so a
// 16-bit graph binds unfused (Note [Reduced-precision binds] in graph/precision.cc).
bool fused_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = DType::kUnknown;
  for (const auto* types : {&in, &out}) {
    for (DType d : *types) {
      WEFT_CHECK_AS(NotImplemented, d != DType::kFloat16 && d != DType::kBFloat16)
          << attrs.where() << ": the fused convolution runs in float32 (BatchNorm folded in "
          << "float32), got " << dtype_name(d)
          << "; bind 16-bit graphs unfused (BindOptions::fuse = false, graph/precision.h)";
      if (t == DType::kUnknown) t = d;
    }
  }
  if (t == DType::kUnknown) return false;
  for (size_t i = 0; i < in.size(); ++i) assign_input_type(attrs, in, static_cast<int>(i), t);
  for (size_t o = 0; o < out.size(); ++o) assign_output_type(attrs, out, static_cast<int>(o), t);
  return true;
}

std::shared_ptr<OpState> fused_create_state(const OpAttrs& attrs, Device,
                                            const std::vector<Shape>& in,
                                            const std::vector<DType>& types) {
  WEFT_CHECK_AS(NotImplemented, types[0] == DType::kFloat32)
      << attrs.where() << ": the fused convolution is float32 only, got " << dtype_name(types[0]);
  auto s = std::make_shared<FusedConvState>();
  s->p = attrs.params<ConvolutionParam>();
  s->io = fused_inputs(attrs);
  check_channel_first_layout(attrs, s->p.layout, s->p.kernel.ndim());
  s->eps = static_cast<float>(parse_float(hidden(attrs, "__bn_eps__", "0.001")));
  s->fix_gamma = parse_bool(hidden(attrs, "__bn_fix_gamma__", "True"));
  s->act = fused_act_from_attrs(attrs);
  if (s->io.bn) {
    s->w_shape = in[1];
    s->b_shape = Shape{s->p.num_filter};
    s->w.resize(static_cast<size_t>(in[1].size()));
    s->b.resize(static_cast<size_t>(s->b_shape[0]));
  }
  return s;
}

}  // namespace

void register_fused_conv_ops(OpRegistry& r) {
  r.define_op("_fused_conv_bn_act")
      .describe(
          "Convolution followed by an optional inference BatchNorm (folded into weight and bias), "
          "an optional elementwise add of another tensor (a oneDNN sum post-op) and an optional "
          "activation post-op. Made by the executor's inference rewrite; inputs data, weight, "
          "[bias], [gamma, beta, moving_mean, moving_var], [addend], [act_gamma]; hidden attrs "
          "__with_bn__, __bn_eps__, __bn_fix_gamma__, __with_sum__, __sum_broadcast__, "
          "__act_type__ (none, relu, leaky, elu, sigmoid, tanh, softrelu, clip, prelu: slopes "
          "act_gamma), __act_alpha__, __act_beta__.")
      .set_params<ConvolutionParam>()
      .set_attr<FNumInputs>(fused_num_inputs)
      .set_attr<FListInputNames>(fused_input_names)
      .set_attr<FInferShape>(fused_infer_shape)
      .set_attr<FInferType>(fused_infer_type)
      .set_attr<FInplaceOption>([](const OpAttrs& a) {
        // The output may take the addend's memory: the sum post-op then reads it in place.
        const FusedInputs f = fused_inputs(a);
        return f.sum && !f.broadcast ? std::vector<std::pair<int, int>>{{f.addend(), 0}}
                                     : std::vector<std::pair<int, int>>{};
      })
      .set_attr<FCreateOpState>(fused_create_state);
}

}  // namespace weft::detail
