// Joining and splitting shape ops: Concat, stack, SliceChannel, the legacy Crop, and UpSampling
// (nearest, and bilinear as a depthwise transposed convolution), with their backward ops: the
// definitions (the kernels are in ops/cpu/shape_ops_concat.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/shape_ops_params.h"
#include "ops/defs/upsampling_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

std::vector<std::string> numbered_names(const std::string& prefix, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

// ---- Concat --------------------------------------------------------------------------------

// Fills the input shapes `parts` and the output `whole` (the parts joined along axis_param)
// from each other: shared dims both ways, one unknown part's axis from the output.
bool concat_shapes(const OpAttrs& attrs, int64_t axis_param, std::vector<Shape>& parts,
                   Shape& whole) {
  int nd = whole.ndim();
  for (const auto& p : parts)
    if (p.rank_known()) nd = p.ndim();
  if (nd < 0) return false;
  if (nd == 0) throw_shape_error(attrs, "cannot concatenate 0-d arrays");
  const int axis = normalize_axis(attrs, axis_param, nd);
  // Every dim but axis is shared.
  Shape common = Shape::filled(nd, -1);
  auto merge_common = [&](const Shape& s, const std::string& what) {
    if (!s.rank_known()) return;
    if (s.ndim() != nd)
      throw_shape_error(attrs,
                        what + " " + s.to_string() + " has a different rank from the others");
    Shape t = s;
    t[axis] = -1;
    if (!merge_shape(&common, t)) {
      throw_shape_error(attrs, what + " " + s.to_string() + " differs from " + common.to_string() +
                                   " outside axis " + std::to_string(axis));
    }
  };
  for (size_t i = 0; i < parts.size(); ++i) merge_common(parts[i], "shape");
  merge_common(whole, "shape");
  int64_t sum = 0;
  int unknown = 0, which = -1;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int64_t d = parts[i].rank_known() ? parts[i][axis] : -1;
    if (d < 0) {
      ++unknown;
      which = static_cast<int>(i);
    } else {
      sum = add_dims(sum, d);
    }
  }
  std::vector<Shape> w{whole};
  for (size_t i = 0; i < parts.size(); ++i) {
    Shape s = common;
    s[axis] = parts[i].rank_known() ? parts[i][axis] : -1;
    if (unknown == 1 && static_cast<int>(i) == which && whole.rank_known() && whole[axis] >= 0) {
      if (whole[axis] < sum)
        throw_shape_error(attrs, "output " + whole.to_string() + " is smaller than its inputs");
      s[axis] = whole[axis] - sum;
    }
    assign_input_shape(attrs, parts, static_cast<int>(i), s);
  }
  Shape s = common;
  s[axis] = unknown == 0 ? sum : (whole.rank_known() ? whole[axis] : -1);
  assign_output_shape(attrs, w, 0, s);
  whole = w[0];
  return all_known(parts) && whole.known();
}

bool concat_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  return concat_shapes(attrs, attrs.params<ConcatParam>().dim, in, out[0]);
}

// _backward_Concat: (out_grad, arg0, ...) -> one gradient per arg.
bool concat_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                 std::vector<Shape>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    assign_output_shape(attrs, out, static_cast<int>(i), in[i + 1]);
    assign_input_shape(attrs, in, static_cast<int>(i + 1), out[i]);
  }
  return all_known(in) && all_known(out);
}

}  // namespace

// ---- stack ---------------------------------------------------------------------------------

int stack_axis(const OpAttrs& attrs, int in_ndim) {
  const int64_t axis = attrs.params<StackParam>().axis;
  WEFT_CHECK(axis >= -in_ndim - 1 && axis <= in_ndim)
      << attrs.where() << ": axis " << axis << " is out of range for " << in_ndim << "-d inputs";
  return static_cast<int>(axis < 0 ? axis + in_ndim + 1 : axis);
}

namespace {

bool stack_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const int64_t n = static_cast<int64_t>(in.size());
  Shape common;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!merge_shape(&common, in[i])) {
      throw_shape_error(attrs, "input " + std::to_string(i) + " " + in[i].to_string() +
                                   " differs from " + common.to_string() +
                                   "; stacked inputs must have one shape");
    }
  }
  if (!common.rank_known() && out[0].rank_known()) {
    if (out[0].ndim() < 1) throw_shape_error(attrs, "output must have at least 1 dimension");
    std::vector<int64_t> s = out[0].to_vector();
    s.erase(s.begin() + stack_axis(attrs, out[0].ndim() - 1));
    common = Shape(s);
  }
  if (!common.rank_known()) return false;
  const int axis = stack_axis(attrs, common.ndim());
  std::vector<int64_t> o = common.to_vector();
  o.insert(o.begin() + axis, n);
  assign_output_shape(attrs, out, 0, Shape(o));
  std::vector<int64_t> back = out[0].to_vector();
  back.erase(back.begin() + axis);
  for (size_t i = 0; i < in.size(); ++i)
    assign_input_shape(attrs, in, static_cast<int>(i), Shape(back));
  return all_known(in) && out[0].known();
}

bool stack_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                std::vector<Shape>& out) {
  if (!in[0].rank_known()) return false;
  if (in[0].ndim() < 1) throw_shape_error(attrs, "out_grad must have at least 1 dimension");
  const int axis = stack_axis(attrs, in[0].ndim() - 1);
  std::vector<int64_t> s = in[0].to_vector();
  s.erase(s.begin() + axis);
  for (size_t i = 0; i < out.size(); ++i)
    assign_output_shape(attrs, out, static_cast<int>(i), Shape(s));
  return in[0].known();
}

// ---- SliceChannel --------------------------------------------------------------------------

bool slice_channel_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                               std::vector<Shape>& out) {
  const auto& p = attrs.params<SliceChannelParam>();
  const int64_t n = p.num_outputs;
  int nd = in[0].ndim();
  if (nd < 0) {
    for (const auto& o : out)
      if (o.rank_known()) nd = o.ndim() + (p.squeeze_axis ? 1 : 0);
  }
  if (nd < 0) return false;
  if (nd == 0) throw_shape_error(attrs, "cannot split a 0-d array");
  const int axis = normalize_axis(attrs, p.axis, nd);
  // Gather everything in the input's coordinates.
  Shape s_in = in[0].rank_known() ? in[0] : Shape::filled(nd, -1);
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].rank_known()) continue;
    std::vector<int64_t> o = out[i].to_vector();
    if (p.squeeze_axis) {
      if (static_cast<int>(o.size()) != nd - 1)
        throw_shape_error(attrs, "output " + out[i].to_string() + " has the wrong rank");
      o.insert(o.begin() + axis, n);
    } else {
      if (static_cast<int>(o.size()) != nd)
        throw_shape_error(attrs, "output " + out[i].to_string() + " has the wrong rank");
      if (o[axis] >= 0) o[axis] = mul_dims(o[axis], n);
    }
    if (!merge_shape(&s_in, Shape(o))) {
      throw_shape_error(attrs, "output " + std::to_string(i) + " " + out[i].to_string() +
                                   " does not match input " + s_in.to_string() + " split " +
                                   std::to_string(n) + " ways on axis " + std::to_string(axis));
    }
  }
  const int64_t d = s_in[axis];
  if (d >= 0 && d % n != 0) {
    throw_shape_error(attrs, "axis " + std::to_string(axis) + " of input " + s_in.to_string() +
                                 " does not divide into " + std::to_string(n) + " parts");
  }
  if (p.squeeze_axis && d >= 0 && d != n) {
    throw_shape_error(attrs, "squeeze_axis needs axis " + std::to_string(axis) + " of input " +
                                 s_in.to_string() + " to equal num_outputs " + std::to_string(n));
  }
  if (p.squeeze_axis) s_in[axis] = n;
  assign_input_shape(attrs, in, 0, s_in);
  std::vector<int64_t> o = s_in.to_vector();
  if (p.squeeze_axis) {
    o.erase(o.begin() + axis);
  } else if (o[axis] >= 0) {
    o[axis] /= n;
  }
  for (size_t i = 0; i < out.size(); ++i)
    assign_output_shape(attrs, out, static_cast<int>(i), Shape(o));
  return in[0].known() && all_known(out);
}

}  // namespace

// ---- Crop (legacy) -------------------------------------------------------------------------

// The crop's start (y, x) for a data of spatial size (H, W) cropped to (h, w).
std::pair<int64_t, int64_t> crop_start(const OpAttrs& attrs, int64_t H, int64_t W, int64_t h,
                                       int64_t w) {
  const auto& p = attrs.params<CropParam>();
  const int64_t y = p.center_crop ? (H - h) / 2 : p.offset[0];
  const int64_t x = p.center_crop ? (W - w) / 2 : p.offset[1];
  // Compared without sums: offsets come from attributes and may be anything non-negative.
  if (h > H || w > W || y > H - h || x > W - w) {
    throw_shape_error(attrs, "crop of " + std::to_string(h) + "x" + std::to_string(w) + " at (" +
                                 std::to_string(y) + ", " + std::to_string(x) +
                                 ") does not fit in " + std::to_string(H) + "x" +
                                 std::to_string(W));
  }
  return {y, x};
}

namespace {

bool crop_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<CropParam>();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].rank_known() && in[i].ndim() != 4)
      throw_shape_error(attrs, "inputs must be 4-D (N, C, H, W), got " + in[i].to_string());
  }
  if (out[0].rank_known() && out[0].ndim() != 4)
    throw_shape_error(attrs, "output must be 4-D, got " + out[0].to_string());
  Shape o = Shape::filled(4, -1);
  if (in[0].rank_known()) {
    o[0] = in[0][0];
    o[1] = in[0][1];
  }
  if (p.num_args == 2) {
    if (in[1].rank_known()) {
      o[2] = in[1][2];
      o[3] = in[1][3];
    }
  } else {
    o[2] = p.h_w[0];
    o[3] = p.h_w[1];
  }
  assign_output_shape(attrs, out, 0, o);
  Shape back = Shape::filled(4, -1);
  back[0] = out[0][0];
  back[1] = out[0][1];
  assign_input_shape(attrs, in, 0, back);
  if (in[0].known() && out[0].known()) crop_start(attrs, in[0][2], in[0][3], out[0][2], out[0][3]);
  return all_known(in) && out[0].known();
}

bool like_data_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  return in[0].known() && in[1].known() && out[0].known();
}

// ---- UpSampling ----------------------------------------------------------------------------

bool upsampling_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<UpSamplingParam>();
  const int64_t s = p.scale;
  for (size_t i = 0; i < in.size(); ++i) {
    if (p.sample_type == SampleType::kBilinear && i == 1) continue;
    if (in[i].rank_known() && in[i].ndim() != 4)
      throw_shape_error(attrs, "inputs must be 4-D (N, C, H, W), got " + in[i].to_string());
  }
  if (out[0].rank_known() && out[0].ndim() != 4)
    throw_shape_error(attrs, "output must be 4-D, got " + out[0].to_string());
  // Backward: the first input from the output.
  if (out[0].rank_known()) {
    Shape b = Shape::filled(4, -1);
    b[0] = out[0][0];
    if (p.sample_type == SampleType::kBilinear || in.size() == 1 ||
        p.multi_input_mode == MultiInputMode::kSum)
      b[1] = out[0][1];
    for (int k = 2; k < 4; ++k) {
      if (out[0][k] >= 0) {
        if (out[0][k] % s != 0)
          throw_shape_error(attrs, "output " + out[0].to_string() + " is not a multiple of scale");
        b[k] = out[0][k] / s;
      }
    }
    assign_input_shape(attrs, in, 0, b);
  }
  if (!in[0].rank_known()) return false;
  const Shape& d = in[0];
  Shape o = Shape::filled(4, -1);
  o[0] = d[0];
  o[2] = d[2] < 0 ? -1 : mul_dims(d[2], s);
  o[3] = d[3] < 0 ? -1 : mul_dims(d[3], s);
  if (p.sample_type == SampleType::kBilinear) {
    o[1] = d[1];
    if (p.num_filter > 0 && d[1] >= 0 && d[1] != p.num_filter) {
      throw_shape_error(attrs, "bilinear up-sampling is depthwise: num_filter " +
                                   std::to_string(p.num_filter) + " must equal the channels of " +
                                   d.to_string());
    }
    const int64_t c = d[1] >= 0 ? d[1] : (p.num_filter > 0 ? p.num_filter : -1);
    assign_input_shape(attrs, in, 1, Shape{c, 1, p.kernel(), p.kernel()});
    if (in[1][0] >= 0 && d[1] < 0) {
      Shape b = d;
      b[1] = in[1][0];
      assign_input_shape(attrs, in, 0, b);
      o[1] = in[1][0];
    }
  } else {
    int64_t channels = p.multi_input_mode == MultiInputMode::kSum ? -1 : 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const Shape& x = in[i];
      if (!x.rank_known()) {
        if (p.multi_input_mode == MultiInputMode::kConcat) channels = -1;
        continue;
      }
      if (x[0] >= 0 && d[0] >= 0 && x[0] != d[0])
        throw_shape_error(attrs, "inputs have different batch sizes");
      for (int k = 2; k < 4; ++k) {
        if (x[k] >= 0 && o[k] >= 0 && (x[k] == 0 || o[k] % x[k] != 0)) {
          throw_shape_error(attrs, "input " + std::to_string(i) + " " + x.to_string() +
                                       " does not divide the output size " + o.to_string());
        }
      }
      if (p.multi_input_mode == MultiInputMode::kSum) {
        if (x[1] >= 0 && channels >= 0 && x[1] != channels) {
          throw_shape_error(attrs,
                            "multi_input_mode=sum needs equal channels, got " + x.to_string());
        }
        if (x[1] >= 0) channels = x[1];
      } else if (channels >= 0) {
        channels = x[1] < 0 ? -1 : add_dims(channels, x[1]);
      }
    }
    o[1] = channels;
  }
  assign_output_shape(attrs, out, 0, o);
  return all_known(in) && out[0].known();
}

// _backward_UpSampling: (out_grad, inputs...) -> one gradient per input.
bool upsampling_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                     std::vector<Shape>& out) {
  for (size_t i = 0; i < out.size(); ++i) {
    assign_output_shape(attrs, out, static_cast<int>(i), in[i + 1]);
    assign_input_shape(attrs, in, static_cast<int>(i + 1), out[i]);
  }
  return all_known(in) && all_known(out);
}

int upsampling_num_inputs(const OpAttrs& a) {
  return static_cast<int>(a.params<UpSamplingParam>().num_args);
}

std::vector<std::string> upsampling_input_names(const OpAttrs& a) {
  const auto& p = a.params<UpSamplingParam>();
  if (p.sample_type == SampleType::kBilinear) return {"data", "weight"};
  return numbered_names("arg", static_cast<int>(p.num_args));
}

}  // namespace

void register_shape_concat_ops(OpRegistry& r) {
  auto concat_inputs = [](const OpAttrs& a) {
    return static_cast<int>(a.params<ConcatParam>().num_args);
  };
  r.define_op("Concat")
      .describe("Concatenates num_args inputs along `dim`; all other dimensions must agree.")
      .set_params<ConcatParam>()
      .set_attr<FNumInputs>(concat_inputs)
      .set_attr<FListInputNames>(
          [concat_inputs](const OpAttrs& a) { return numbered_names("arg", concat_inputs(a)); })
      .set_attr<FInferShape>(concat_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        const int n = static_cast<int>(b.attrs().params<ConcatParam>().num_args);
        std::vector<GradEntry> in{b.out_grad(0)};
        for (int i = 0; i < n; ++i) in.push_back(b.input(i));
        return b.emit_with_forward_attrs("_backward_Concat", in);
      });
  r.add_alias("concat", "Concat");
  r.add_alias("_rnn_param_concat", "Concat");
  r.define_op("_backward_Concat")
      .describe("Gradient of Concat: splits the output gradient back into the inputs' shapes.")
      .set_params<ConcatParam>()
      .set_attr<FNumInputs>([concat_inputs](const OpAttrs& a) { return concat_inputs(a) + 1; })
      .set_attr<FNumOutputs>(concat_inputs)
      .set_attr<FInferShape>(concat_backward_infer_shape);

  auto stack_inputs = [](const OpAttrs& a) {
    return static_cast<int>(a.params<StackParam>().num_args);
  };
  r.define_op("stack")
      .describe("Joins num_args equal-shaped inputs along a new axis `axis`.")
      .set_params<StackParam>()
      .set_attr<FNumInputs>(stack_inputs)
      .set_attr<FListInputNames>(
          [stack_inputs](const OpAttrs& a) { return numbered_names("arg", stack_inputs(a)); })
      .set_attr<FInferShape>(stack_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        return b.emit_with_forward_attrs("_backward_stack", {b.out_grad(0)});
      });
  r.define_op("_backward_stack")
      .describe("Gradient of stack: unstacks the output gradient.")
      .set_params<StackParam>()
      .set_input_names({"out_grad"})
      .set_attr<FNumOutputs>(stack_inputs)
      .set_attr<FInferShape>(stack_backward_infer_shape);

  r.define_op("SliceChannel")
      .describe(
          "Splits the input into num_outputs equal parts along `axis`; squeeze_axis drops that "
          "axis.")
      .set_params<SliceChannelParam>()
      .set_input_names({"data"})
      .set_attr<FNumOutputs>([](const OpAttrs& a) {
        return static_cast<int>(a.params<SliceChannelParam>().num_outputs);
      })
      .set_attr<FInferShape>(slice_channel_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        const auto& p = b.attrs().params<SliceChannelParam>();
        std::vector<GradEntry> parts;
        for (int i = 0; i < p.num_outputs; ++i) {
          GradEntry g = b.out_grad(i);
          if (p.squeeze_axis) g = b.emit1("expand_dims", {g}, {{"axis", std::to_string(p.axis)}});
          parts.push_back(g);
        }
        // expand_dims counts a negative axis against the output rank, which is the input's rank.
        return std::vector<GradEntry>{b.emit1(
            "Concat", parts,
            {{"num_args", std::to_string(p.num_outputs)}, {"dim", std::to_string(p.axis)}})};
      });
  r.add_alias("split", "SliceChannel");

  r.define_op("Crop")
      .describe(
          "Legacy crop of NCHW data to h_w (num_args=1) or to crop_like's H and W (num_args=2), at "
          "`offset` or centred. Not the lower-case `crop` (an alias of slice).")
      .set_params<CropParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return static_cast<int>(a.params<CropParam>().num_args); })
      .set_attr<FListInputNames>([](const OpAttrs& a) {
        return a.params<CropParam>().num_args == 2 ? std::vector<std::string>{"data", "crop_like"}
                                                   : std::vector<std::string>{"data"};
      })
      .set_attr<FInferShape>(crop_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        std::vector<GradEntry> g{
            b.emit_with_forward_attrs("_backward_Crop", {b.out_grad(0), b.input(0)}).at(0)};
        if (b.attrs().params<CropParam>().num_args == 2) g.push_back(GradBuilder::none());
        return g;
      });
  // _backward_Crop is emitted with the forward attrs so center_crop/offset carry over.
  r.define_op("_backward_Crop")
      .describe("Gradient of Crop: the output gradient placed in the crop window, zeros elsewhere.")
      .set_params<CropParam>()
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(like_data_infer_shape);

  r.define_op("UpSampling")
      .describe(
          "Up-samples NCHW inputs by `scale`: nearest (several inputs, concatenated or summed) or "
          "bilinear (a depthwise transposed convolution with the weight input, kernel 2s - s%2, "
          "stride s, pad ceil((s-1)/2)).")
      .set_params<UpSamplingParam>()
      .set_attr<FNumInputs>(upsampling_num_inputs)
      .set_attr<FListInputNames>(upsampling_input_names)
      .set_attr<FInferShape>(upsampling_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        const int n = upsampling_num_inputs(b.attrs());
        std::vector<GradEntry> in{b.out_grad(0)};
        for (int i = 0; i < n; ++i) in.push_back(b.input(i));
        return b.emit_with_forward_attrs("_backward_UpSampling", in);
      });
  r.define_op("_backward_UpSampling")
      .describe(
          "Gradient of UpSampling with respect to every input (the bilinear weight included).")
      .set_params<UpSamplingParam>()
      .set_attr<FNumInputs>([](const OpAttrs& a) { return upsampling_num_inputs(a) + 1; })
      .set_attr<FNumOutputs>(upsampling_num_inputs)
      .set_attr<FInferShape>(upsampling_backward_infer_shape);
}

}  // namespace weft::detail