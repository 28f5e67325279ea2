// Indexing and repetition ops: slice (alias crop), slice_axis, broadcast_to, tile and Embedding
// (row lookup with clipped indices), with their backward ops: the definitions, and the slice
// ranges and tile padding their kernels share (the CPU kernels are in ops/cpu/indexing_ops.cc).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/indexing_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// ---- helpers -------------------------------------------------------------------------------

// (out_grad, data) -> a gradient shaped like data.
bool like_data_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  return in[0].known() && in[1].known() && out[0].known();
}

// ---- slice ---------------------------------------------------------------------------------

}  // namespace

SliceRange slice_range(const OpAttrs& attrs, const SliceParam& p, const Shape& in) {
  const int nd = in.ndim();
  if (static_cast<int>(p.begin.size()) > nd) {
    throw_shape_error(attrs, "begin " + p.begin_text + " has more entries than input " +
                                 in.to_string() + " has dims");
  }
  SliceRange r;
  for (int i = 0; i < nd; ++i) {
    const int64_t len = in[i];
    if (i >= static_cast<int>(p.begin.size())) {
      r.begin.push_back(0);
      r.step.push_back(1);
      r.len.push_back(len);
      continue;
    }
    const int64_t s = p.step.empty() || !p.step[i] ? 1 : *p.step[i];
    r.step.push_back(s);
    if (len < 0) {
      r.begin.push_back(0);
      r.len.push_back(-1);
      continue;
    }
    if (len == 0) {
      r.begin.push_back(0);
      r.len.push_back(0);
      continue;
    }
    int64_t b = p.begin[i] ? *p.begin[i] : (s < 0 ? len - 1 : 0);
    int64_t e = p.end[i] ? *p.end[i] : (s < 0 ? -1 : len);
    if (b < 0) b += len;
    if (e < 0 && p.end[i]) e += len;
    if (b < 0 && s > 0) b = 0;
    if (b > len - 1 && s < 0) b = len - 1;
    if (b < 0 || b > len - 1) b = -1;
    e = std::min(std::max<int64_t>(e, -1), len);
    int64_t n = 0;
    if (e != b && b >= 0)
      n = s > 0 ? (e > b ? (e - b - 1) / s + 1 : 0) : (e < b ? (b - e - 1) / (-s) + 1 : 0);
    r.begin.push_back(std::max<int64_t>(b, 0));
    r.len.push_back(n);
  }
  return r;
}

namespace {

bool slice_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known()) return false;
  const auto& p = attrs.params<SliceParam>();
  const SliceRange r = slice_range(attrs, p, in[0]);
  assign_output_shape(attrs, out, 0, Shape(r.len));
  Shape back = in[0];  // dims past `begin` pass through unchanged
  for (int i = static_cast<int>(p.begin.size()); i < back.ndim(); ++i) back[i] = out[0][i];
  assign_input_shape(attrs, in, 0, back);
  return in[0].known() && out[0].known();
}

// ---- slice_axis ----------------------------------------------------------------------------

}  // namespace

SliceRange slice_axis_range(const OpAttrs& attrs, const Shape& in) {
  const auto& p = attrs.params<SliceAxisParam>();
  const int nd = in.ndim();
  const int axis = normalize_axis(attrs, p.axis, nd);
  SliceRange r;
  for (int i = 0; i < nd; ++i) {
    r.begin.push_back(0);
    r.step.push_back(1);
    r.len.push_back(in[i]);
  }
  const int64_t size = in[axis];
  if (size < 0) return r;
  int64_t b = p.begin, e = 0;
  if (b < 0) b += size;
  if (size > 0) {
    e = p.end ? *p.end : size;
    if (e < 0) e += size;
    if (e > size || b >= e || b < 0) {
      throw_shape_error(
          attrs, "invalid range begin=" + std::to_string(p.begin) +
                     ", end=" + (p.end ? std::to_string(*p.end) : std::string("None")) +
                     " for axis " + std::to_string(axis) + " of size " + std::to_string(size));
    }
  } else {
    b = 0;
  }
  r.begin[axis] = b;
  r.len[axis] = e - b;
  return r;
}

namespace {

bool slice_axis_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const int nd = in[0].rank_known() ? in[0].ndim() : out[0].rank_known() ? out[0].ndim() : -1;
  if (nd < 0) return false;
  const int axis = normalize_axis(attrs, attrs.params<SliceAxisParam>().axis, nd);
  if (!in[0].rank_known()) {
    Shape s = out[0];
    s[axis] = -1;
    assign_input_shape(attrs, in, 0, s);
  }
  assign_output_shape(attrs, out, 0, Shape(slice_axis_range(attrs, in[0]).len));
  Shape back = out[0];
  back[axis] = in[0][axis];
  assign_input_shape(attrs, in, 0, back);
  return in[0].known() && out[0].known();
}

// ---- broadcast_to --------------------------------------------------------------------------

bool broadcast_to_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                              std::vector<Shape>& out) {
  const Shape& target = attrs.params<BroadcastToParam>().shape;
  const int nd = target.ndim();
  if (in[0].rank_known() && in[0].ndim() != nd) {
    throw_shape_error(attrs, "input " + in[0].to_string() + " does not have the " +
                                 std::to_string(nd) + " dims of shape " +
                                 format_shape_attr(target));
  }
  Shape s_in = in[0].rank_known() ? in[0] : Shape::filled(nd, -1);
  Shape s_out = Shape::filled(nd, -1);
  for (int i = 0; i < nd; ++i) {
    if (target[i] == 0) {
      s_out[i] = s_in[i];
    } else {
      if (s_in[i] >= 0 && s_in[i] != 1 && s_in[i] != target[i]) {
        throw_shape_error(attrs, "cannot broadcast input " + in[0].to_string() + " to " +
                                     format_shape_attr(target));
      }
      s_out[i] = target[i];
    }
  }
  assign_output_shape(attrs, out, 0, s_out);
  for (int i = 0; i < nd; ++i)
    if (target[i] == 0) s_in[i] = out[0][i];
  assign_input_shape(attrs, in, 0, s_in);
  return in[0].known() && out[0].known();
}

// ---- tile ----------------------------------------------------------------------------------

}  // namespace

// Input dims and reps padded with leading 1s to the output rank.
void tile_padded(const Shape& reps, const Shape& in, std::vector<int64_t>* in_p,
                 std::vector<int64_t>* reps_p) {
  const int nd = std::max(in.ndim(), reps.ndim());
  in_p->assign(nd, 1);
  reps_p->assign(nd, 1);
  for (int i = 0; i < in.ndim(); ++i) (*in_p)[nd - in.ndim() + i] = in[i];
  for (int i = 0; i < reps.ndim(); ++i) (*reps_p)[nd - reps.ndim() + i] = reps[i];
}

namespace {

bool tile_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].rank_known()) return false;
  const Shape& reps = attrs.params<TileParam>().reps;
  std::vector<int64_t> ip, rp;
  tile_padded(reps, in[0], &ip, &rp);
  Shape s_out = Shape::filled(static_cast<int>(ip.size()), -1);
  for (size_t i = 0; i < ip.size(); ++i) s_out[i] = ip[i] < 0 ? -1 : ip[i] * rp[i];
  assign_output_shape(attrs, out, 0, s_out);
  Shape back = in[0];
  const int lead = out[0].ndim() - in[0].ndim();
  for (int i = 0; i < back.ndim(); ++i) {
    const int64_t o = out[0][lead + i], r = rp[lead + i];
    if (back[i] < 0 && o >= 0) {
      if (o % r != 0)
        throw_shape_error(
            attrs, "output " + out[0].to_string() + " is not a tiling of " + in[0].to_string());
      back[i] = o / r;
    }
  }
  assign_input_shape(attrs, in, 0, back);
  return in[0].known() && out[0].known();
}

// Registers `_backward_<name>` taking (out_grad, data) and giving data's gradient.
template <typename P>
Op& register_like_data_backward(OpRegistry& r, const std::string& name) {
  Op& op = r.define_op("_backward_" + name);
  op.set_params<P>();
  return op.describe("Gradient of " + name + " with respect to its data input.")
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(like_data_infer_shape);
}

FGradient grad_via_backward(const std::string& name) {
  return [name](GradBuilder& b) {
    return std::vector<GradEntry>{
        b.emit_with_forward_attrs("_backward_" + name, {b.out_grad(0), b.input(0)})};
  };
}

// ---- Embedding ---------------------------------------------------------------------------

bool embedding_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<EmbeddingParam>();
  assign_input_shape(attrs, in, 1, Shape{p.input_dim, p.output_dim});
  if (!in[0].rank_known() && out[0].rank_known()) {
    if (out[0].ndim() < 1) throw_shape_error(attrs, "output must have at least 1 dimension");
    assign_input_shape(attrs, in, 0, Shape(out[0].begin(), out[0].end() - 1));
  }
  if (!in[0].rank_known()) return false;
  std::vector<int64_t> o = in[0].to_vector();
  o.push_back(p.output_dim);
  assign_output_shape(attrs, out, 0, Shape(o));
  assign_input_shape(attrs, in, 0, Shape(out[0].begin(), out[0].end() - 1));
  return all_known(in) && out[0].known();
}

// Weight and output share one type (the weight's when known, else `dtype`); the indices keep
// theirs (any numeric type; float indices are usual) and default to that type.
bool embedding_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = in[1] != DType::kUnknown    ? in[1]
            : out[0] != DType::kUnknown ? out[0]
                                        : attrs.params<EmbeddingParam>().dtype;
  assign_input_type(attrs, in, 1, t);
  assign_output_type(attrs, out, 0, t);
  if (in[0] == DType::kUnknown) in[0] = t;
  return true;
}

bool embedding_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                    std::vector<Shape>& out) {
  const auto& p = attrs.params<EmbeddingParam>();
  assign_output_shape(attrs, out, 0, Shape{p.input_dim, p.output_dim});
  if (in[1].rank_known()) {
    std::vector<int64_t> o = in[1].to_vector();
    o.push_back(p.output_dim);
    assign_input_shape(attrs, in, 0, Shape(o));
  }
  return all_known(in);
}

bool embedding_backward_infer_type(const OpAttrs& attrs, std::vector<DType>& in,
                                   std::vector<DType>& out) {
  assign_output_type(attrs, out, 0, in[0]);
  assign_input_type(attrs, in, 0, out[0]);
  return in[0] != DType::kUnknown && in[1] != DType::kUnknown;
}

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  r.define_op("slice")
      .describe(
          "Slices a region: begin/end/step per leading axis, None entries and negative values as "
          "in "
          "Python; axes past len(begin) are kept whole.")
      .set_params<SliceParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(slice_infer_shape)
      .set_attr<FGradient>(grad_via_backward("slice"));
  r.add_alias("crop", "slice");
  register_like_data_backward<SliceParam>(r, "slice");

  r.define_op("slice_axis")
      .describe(
          "Slices [begin, end) along one axis (negative indices count from the end; end None = to "
          "the end).")
      .set_params<SliceAxisParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(slice_axis_infer_shape)
      .set_attr<FGradient>(grad_via_backward("slice_axis"));
  register_like_data_backward<SliceAxisParam>(r, "slice_axis");

  r.define_op("broadcast_to")
      .describe("Broadcasts size-1 axes to `shape` (0 keeps the input's dimension).")
      .set_params<BroadcastToParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(broadcast_to_infer_shape)
      .set_attr<FGradient>(grad_via_backward("broadcast_to"));
  register_like_data_backward<BroadcastToParam>(r, "broadcast_to");

  r.define_op("tile")
      .describe(
          "Repeats the input `reps` times per axis (NumPy tile: the shorter of input rank and reps "
          "is "
          "padded with leading 1s).")
      .set_params<TileParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(tile_infer_shape)
      .set_attr<FGradient>(grad_via_backward("tile"));
  register_like_data_backward<TileParam>(r, "tile");

  r.define_op("Embedding")
      .describe(
          "Looks up rows of weight (input_dim, output_dim) for each index in data (cast to int and "
          "clipped to [0, input_dim-1]); output is data.shape + (output_dim,). Gradient flows to "
          "the "
          "weight only.")
      .set_params<EmbeddingParam>()
      .set_input_names({"data", "weight"})
      .set_attr<FInferShape>(embedding_infer_shape)
      .set_attr<FInferType>(embedding_infer_type)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            GradBuilder::none(),
            b.emit_with_forward_attrs("_backward_Embedding", {b.out_grad(0), b.input(0)}).at(0)};
      });
  r.define_op("_backward_Embedding")
      .describe(
          "Gradient of Embedding with respect to its weight: output-gradient rows summed per "
          "index.")
      .set_params<EmbeddingParam>()
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(embedding_backward_infer_shape)
      .set_attr<FInferType>(embedding_backward_infer_type);
}

}  // namespace weft::detail