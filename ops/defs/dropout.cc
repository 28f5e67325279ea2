// The definition of Dropout (inverted dropout with an optional mask shared along `axes`) and its
// backward op: shapes, in-place options, resources, gradient; and `_random_seed_next`, which
// advances the seed words of captured graphs. The CPU kernels are in ops/cpu/dropout.cc.
#include "ops/defs/dropout_params.h"
#include "ops/defs/norm_common.h"

namespace weft::detail {
namespace {

/// The mask shape: data's shape with every axis in `axes` set to 1.
Shape mask_shape(const OpAttrs& attrs, const Shape& d) {
  Shape m = d;
  for (int64_t a : attrs.params<DropoutParam>().axes) m[normalize_axis(attrs, a, d.ndim())] = 1;
  return m;
}

bool dropout_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  assign_output_shape(attrs, out, 1, mask_shape(attrs, in[0]));
  return all_known(in) && all_known(out);
}

bool dropout_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                  std::vector<Shape>& out) {
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  assign_input_shape(attrs, in, 1, mask_shape(attrs, in[0]));
  return all_known(in) && all_known(out);
}

}  // namespace

void register_dropout_ops(OpRegistry& r) {
  r.define_op("Dropout")
      .describe(
          "Inverted dropout: in training (or with mode=always) each element (or each mask element, "
          "shared along `axes`) is kept with probability 1-p and scaled by 1/(1-p), else zeroed; "
          "identity otherwise. The hidden second output is the mask (1/(1-p) or 0; ones when "
          "inactive).")
      .set_params<DropoutParam>()
      .set_input_names({"data"})
      .set_output_names({"output", "mask"})
      .set_attr<FNumVisibleOutputs>([](const OpAttrs&) { return 1; })
      .set_attr<FInferShape>(dropout_infer_shape)
      .set_attr<FInplaceOption>(norm::inplace_first)
      // Identity at inference for mode=training (the kernel still handles the in-place case).
      .set_attr<FInplaceIdentity>([](const OpAttrs& a) {
        return std::vector<bool>{a.params<DropoutParam>().mode == DropoutMode::kTraining};
      })
      .set_attr<FResourceRequest>(
          [](const OpAttrs& a, const std::vector<Shape>& in, const std::vector<Shape>& out) {
            // Its CUDA kernel takes a device seed inside captured graphs (OpContext::device_seed);
            // with mode=training it draws nothing at inference.
            const bool train_only = a.params<DropoutParam>().mode == DropoutMode::kTraining;
            std::vector<ResourceRequest> res{{ResourceRequest::Kind::kRandom, 0, true, train_only}};
            // A broadcast mask needs storage when its output is not kept; 8 bytes covers float64.
            if (!a.params<DropoutParam>().axes.to_vector().empty() && out.size() > 1 &&
                out[1].known()) {
              res.push_back(
                  {ResourceRequest::Kind::kWorkspace, static_cast<size_t>(out[1].size()) * 8});
            }
            return res;
          })
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_Dropout", {b.out_grad(0), b.output(1)}).at(0)};
      });
  r.define_op("_backward_Dropout")
      .describe("Gradient of Dropout: out_grad times the mask.")
      .set_params<DropoutParam>()
      .set_input_names({"out_grad", "mask"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(dropout_backward_infer_shape);
  r.define_op("_random_seed_next")
      .describe(
          "The next word of each seed word's sequence: data + 0x9E3779B97F4A7C15, wrapping, on "
          "int64 words. A captured CUDA graph advances its random seed with it on the device, once "
          "per replay (Note [Random numbers in captured graphs]).")
      .set_input_names({"data"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(
          [](const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
            if (in[0].rank_known()) assign_output_shape(attrs, out, 0, in[0]);
            if (out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
            return all_known(in) && all_known(out);
          })
      .set_attr<FInferType>(
          [](const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
            for (DType* t : {&in[0], &out[0]}) {
              WEFT_CHECK_AS(ValueError, *t == DType::kUnknown || *t == DType::kInt64)
                  << attrs.where() << ": seed words are int64, got " << dtype_name(*t);
              *t = DType::kInt64;
            }
            return true;
          })
      .set_attr<FInplaceOption>(norm::inplace_first);
}

}  // namespace weft::detail
