// Reshape-like ops (Reshape, Flatten, expand_dims, squeeze) and transpose: their definitions and
// those of their backward ops, and register_shape_ops (which registers the rest of the group from
// ops/defs/shape_ops_concat.cc and ops/defs/indexing_ops.cc). The kernels are in ops/cpu/.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/shape_ops_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

void register_shape_concat_ops(OpRegistry& r);
void register_indexing_ops(OpRegistry& r);

namespace {

// ---- small helpers -------------------------------------------------------------------------

std::vector<std::pair<int, int>> inplace_first(const OpAttrs&) { return {{0, 0}}; }
std::vector<bool> inplace_identity(const OpAttrs&) { return {true}; }

// Number of unknown dims; fills `prod` with the product of the known ones.
int count_unknown(const Shape& s, int64_t* prod, int* where) {
  int n = 0;
  *prod = 1;
  for (int i = 0; i < s.ndim(); ++i) {
    if (s[i] < 0) {
      ++n;
      *where = i;
    } else {
      *prod = mul_dims(*prod, s[i]);
    }
  }
  return n;
}

// Fills the single unknown dim of `in` so that its size equals `out`'s (both ranks known).
void fill_one_unknown(const OpAttrs& attrs, std::vector<Shape>& in, int i, const Shape& out) {
  if (!out.known() || !in[i].rank_known() || in[i].known()) return;
  int64_t prod = 1;
  int where = -1;
  if (count_unknown(in[i], &prod, &where) != 1) return;
  if (prod == 0 || out.size() % prod != 0) {
    throw_shape_error(attrs, "input " + in[i].to_string() + " cannot hold the " +
                                 std::to_string(out.size()) + " elements of output " +
                                 out.to_string());
  }
  Shape s = in[i];
  s[where] = out.size() / prod;
  assign_input_shape(attrs, in, i, s);
}

void check_same_size(const OpAttrs& attrs, const Shape& in, const Shape& out) {
  if (in.known() && out.known() && in.size() != out.size()) {
    throw_shape_error(attrs, "input " + in.to_string() + " has " + std::to_string(in.size()) +
                                 " elements but output " + out.to_string() + " has " +
                                 std::to_string(out.size()));
  }
}

// ---- Reshape -------------------------------------------------------------------------------

struct ReshapeParam {
  Shape shape;
  bool reverse = false;
  Shape target_shape;
  bool keep_highest = false;
  static void declare(ParamSchema<ReshapeParam>& s) {
    s.field("shape", &ReshapeParam::shape)
        .set_default(Shape(std::vector<int64_t>{}))
        .describe("target shape; may contain the codes 0, -1, -2, -3, -4");
    s.field("reverse", &ReshapeParam::reverse)
        .set_default(false)
        .describe("apply the special codes right to left");
    s.field("target_shape", &ReshapeParam::target_shape)
        .set_default(Shape(std::vector<int64_t>{}))
        .describe(
            "deprecated: target shape with at most one 0 (inferred); used only when shape is "
            "empty");
    s.field("keep_highest", &ReshapeParam::keep_highest)
        .set_default(false)
        .describe("deprecated: with target_shape, keep dimension 0 of the input");
    s.check([](ReshapeParam& p) {
      std::vector<int64_t> codes = p.shape.to_vector();
      if (p.reverse) std::reverse(codes.begin(), codes.end());
      int infer = 0;
      for (size_t i = 0; i < codes.size(); ++i) {
        const int64_t c = codes[i];
        WEFT_CHECK(c >= -4) << "shape entry " << c
                            << " is neither a dimension nor one of the codes 0, -1, -2, -3, -4";
        if (c == -1) ++infer;
        if (c == -4) {
          WEFT_CHECK(i + 2 < codes.size()) << "-4 in shape must be followed by two dimensions";
          const int64_t a = codes[i + 1], b = codes[i + 2];
          WEFT_CHECK((a > 0 || a == -1) && (b > 0 || b == -1))
              << "the dimensions after -4 must be positive or -1, got " << a << ", " << b;
          WEFT_CHECK(a != -1 || b != -1) << "the dimensions after -4 cannot both be -1";
          i += 2;
        }
      }
      WEFT_CHECK(infer <= 1) << "at most one -1 may appear in shape " << format_shape_attr(p.shape);
      int zeros = 0;
      for (int i = p.keep_highest ? 1 : 0; i < p.target_shape.ndim(); ++i) {
        WEFT_CHECK(p.target_shape[i] >= 0) << "target_shape entries must be >= 0";
        zeros += p.target_shape[i] == 0;
      }
      WEFT_CHECK(zeros <= 1) << "at most one 0 may appear in target_shape";
    });
  }
};

// MXNet's InferReshapeShape. Unknown input dims (-1) give unknown output dims. The -1 code is
// filled at its position in the output (MXNet indexes by code position, which misplaces it when
// a -2/-4 comes first; the documented meaning is the output position).
Shape reshape_from_codes(const OpAttrs& attrs, const ReshapeParam& p, const Shape& in) {
  std::vector<int64_t> codes = p.shape.to_vector(), src = in.to_vector();
  if (p.reverse) {
    std::reverse(codes.begin(), codes.end());
    std::reverse(src.begin(), src.end());
  }
  auto fail = [&](const std::string& why) {
    throw_shape_error(attrs, "cannot reshape " + in.to_string() +
                                 " with shape=" + format_shape_attr(p.shape) +
                                 (p.reverse ? " (reverse)" : "") + ": " + why);
  };
  std::vector<int64_t> out;
  size_t cur = 0;
  int inferred = -1;
  for (size_t i = 0; i < codes.size(); ++i) {
    const int64_t c = codes[i];
    if (c == 0) {
      if (cur >= src.size()) fail("code 0 has no input dimension left to copy");
      out.push_back(src[cur++]);
    } else if (c == -1) {
      inferred = static_cast<int>(out.size());
      out.push_back(1);
      ++cur;
    } else if (c == -2) {
      while (cur < src.size()) out.push_back(src[cur++]);
    } else if (c == -3) {
      if (cur + 1 >= src.size()) fail("code -3 needs two input dimensions");
      const int64_t d1 = src[cur++], d2 = src[cur++];
      out.push_back(d1 < 0 || d2 < 0 ? -1 : mul_dims(d1, d2));
    } else if (c == -4) {
      if (cur >= src.size()) fail("code -4 has no input dimension left to split");
      const int64_t d0 = src[cur++];
      int64_t a = codes[++i], b = codes[++i];
      if (d0 >= 0 && a == -1) {
        if (d0 % b != 0) fail(std::to_string(b) + " does not divide " + std::to_string(d0));
        a = d0 / b;
      } else if (d0 >= 0 && b == -1) {
        if (d0 % a != 0) fail(std::to_string(a) + " does not divide " + std::to_string(d0));
        b = d0 / a;
      }
      if (d0 >= 0 && mul_dims(a, b) != d0) {
        fail("split dims " + std::to_string(a) + ", " + std::to_string(b) + " do not multiply to " +
             std::to_string(d0));
      }
      out.push_back(a);
      out.push_back(b);
    } else {
      out.push_back(c);
      ++cur;
    }
  }
  if (inferred >= 0) {
    if (in.known()) {
      int64_t rest = 1;
      for (size_t k = 0; k < out.size(); ++k)
        if (static_cast<int>(k) != inferred) rest = mul_dims(rest, out[k]);
      if (rest == 0 || in.size() % rest != 0) fail("the -1 dimension cannot be inferred");
      out[inferred] = in.size() / rest;
    } else {
      out[inferred] = -1;
    }
  }
  if (p.reverse) std::reverse(out.begin(), out.end());
  return Shape(out);
}

// The deprecated target_shape rule.
Shape reshape_from_target(const OpAttrs& attrs, const ReshapeParam& p, const Shape& in) {
  Shape o = p.target_shape;
  const int start = p.keep_highest ? 1 : 0;
  if (p.keep_highest) {
    if (in.ndim() < 1 || o.ndim() < 1)
      throw_shape_error(attrs, "keep_highest needs at least one dimension");
    o[0] = in[0];
  }
  int zero = -1;
  for (int i = start; i < o.ndim(); ++i)
    if (o[i] == 0) zero = i;
  if (zero >= 0) {
    if (in.known() && o[0] >= 0) {
      int64_t rest = 1;
      for (int i = 0; i < o.ndim(); ++i)
        if (i != zero) rest = mul_dims(rest, o[i]);
      if (rest == 0 || in.size() % rest != 0) {
        throw_shape_error(attrs, "cannot infer the 0 of target_shape " +
                                     format_shape_attr(p.target_shape) + " for input " +
                                     in.to_string());
      }
      o[zero] = in.size() / rest;
    } else {
      o[zero] = -1;
    }
  }
  return o;
}

bool reshape_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<ReshapeParam>();
  auto forward = [&] {
    if (!in[0].rank_known()) return;
    if (p.shape.ndim() > 0) {
      assign_output_shape(attrs, out, 0, reshape_from_codes(attrs, p, in[0]));
    } else if (p.target_shape.ndim() > 0) {
      assign_output_shape(attrs, out, 0, reshape_from_target(attrs, p, in[0]));
    }
  };
  forward();
  if (!in[0].known() && out[0].known()) {
    fill_one_unknown(attrs, in, 0, out[0]);
    if (in[0].known()) forward();
  }
  check_same_size(attrs, in[0], out[0]);
  return in[0].known() && out[0].known();
}

// ---- Flatten -------------------------------------------------------------------------------

bool flatten_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].rank_known()) {
    if (in[0].ndim() < 1)
      throw_shape_error(attrs, "needs an input of at least 1 dimension, got ()");
    Shape rest(in[0].begin() + 1, in[0].end());
    assign_output_shape(attrs, out, 0, Shape{in[0][0], rest.known() ? rest.size() : -1});
    if (out[0].rank_known()) {
      Shape s = in[0];
      s[0] = out[0][0];
      assign_input_shape(attrs, in, 0, s);
    }
  }
  if (!in[0].known() && out[0].known()) fill_one_unknown(attrs, in, 0, out[0]);
  if (in[0].known()) {
    Shape rest(in[0].begin() + 1, in[0].end());
    assign_output_shape(attrs, out, 0, Shape{in[0][0], rest.size()});
  }
  return in[0].known() && out[0].known();
}

// ---- expand_dims ---------------------------------------------------------------------------

struct ExpandDimsParam {
  int64_t axis = 0;
  static void declare(ParamSchema<ExpandDimsParam>& s) {
    s.field("axis", &ExpandDimsParam::axis)
        .describe("position of the new axis, in [-ndim-1, ndim]");
  }
};

int expand_axis(const OpAttrs& attrs, int64_t axis, int in_ndim) {
  WEFT_CHECK(axis >= -in_ndim - 1 && axis <= in_ndim)
      << attrs.where() << ": axis " << axis << " is out of range for a " << in_ndim << "-d input";
  return static_cast<int>(axis < 0 ? axis + in_ndim + 1 : axis);
}

bool expand_dims_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  const int64_t axis = attrs.params<ExpandDimsParam>().axis;
  if (!in[0].rank_known() && out[0].rank_known()) {
    if (out[0].ndim() < 1) throw_shape_error(attrs, "output must have at least 1 dimension");
    const int a = expand_axis(attrs, axis, out[0].ndim() - 1);
    std::vector<int64_t> s = out[0].to_vector();
    s.erase(s.begin() + a);
    assign_input_shape(attrs, in, 0, Shape(s));
  }
  if (!in[0].rank_known()) return false;
  const int a = expand_axis(attrs, axis, in[0].ndim());
  std::vector<int64_t> s = in[0].to_vector();
  s.insert(s.begin() + a, 1);
  assign_output_shape(attrs, out, 0, Shape(s));
  s = out[0].to_vector();
  s.erase(s.begin() + a);
  assign_input_shape(attrs, in, 0, Shape(s));
  return in[0].known() && out[0].known();
}

// ---- squeeze -------------------------------------------------------------------------------

struct SqueezeParam {
  std::optional<Shape> axis;
  static void declare(ParamSchema<SqueezeParam>& s) {
    s.field("axis", &SqueezeParam::axis)
        .set_default(std::nullopt)
        .describe("axes of size 1 to remove; None removes every axis of size 1");
  }
};

// Normalised, sorted, distinct squeeze axes for an input of rank ndim.
std::vector<int> squeeze_axes(const OpAttrs& attrs, const Shape& axes, int ndim) {
  std::vector<int> out;
  for (int64_t a : axes) out.push_back(normalize_axis(attrs, a, ndim));
  std::sort(out.begin(), out.end());
  WEFT_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end())
      << attrs.where() << ": axis " << format_shape_attr(axes) << " names an axis twice";
  return out;
}

bool squeeze_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<SqueezeParam>();
  if (!in[0].rank_known()) {
    // Backward: with explicit axes the input is the output with 1s re-inserted, unless every
    // axis was removed (the (1,) output then does not tell the rank).
    if (!p.axis || !out[0].rank_known() || (out[0].ndim() == 1 && out[0][0] == 1)) return false;
    const int nd = out[0].ndim() + p.axis->ndim();
    std::vector<int> axes = squeeze_axes(attrs, *p.axis, nd);
    Shape s = Shape::filled(nd, -1);
    for (int a : axes) s[a] = 1;
    for (int k = 0, j = 0; k < nd; ++k)
      if (s[k] != 1) s[k] = out[0][j++];
    assign_input_shape(attrs, in, 0, s);
  }
  const int nd = in[0].ndim();
  Shape s = in[0];
  std::vector<bool> drop(nd, false);
  if (p.axis) {
    for (int a : squeeze_axes(attrs, *p.axis, nd)) {
      if (s[a] > 1 || s[a] == 0) {
        throw_shape_error(attrs, "cannot squeeze axis " + std::to_string(a) + " of size " +
                                     std::to_string(s[a]) + " in input " + in[0].to_string());
      }
      s[a] = 1;
      drop[a] = true;
    }
    assign_input_shape(attrs, in, 0, s);
  } else {
    for (int k = 0; k < nd; ++k) {
      if (s[k] < 0) return false;  // cannot tell whether it is removed
      drop[k] = s[k] == 1;
    }
  }
  std::vector<int64_t> o;
  for (int k = 0; k < nd; ++k)
    if (!drop[k]) o.push_back(s[k]);
  const bool all_removed = o.empty();
  if (all_removed) o.push_back(1);  // MXNet (non-numpy mode) keeps a (1,) shape
  assign_output_shape(attrs, out, 0, Shape(o));
  if (!all_removed) {
    Shape back = in[0];
    for (int k = 0, j = 0; k < nd; ++k)
      if (!drop[k]) back[k] = out[0][j++];
    assign_input_shape(attrs, in, 0, back);
  }
  return in[0].known() && out[0].known();
}

// ---- backward of the reshape-like ops: (out_grad, data) -> grad shaped like data -----------

bool like_data_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  return in[0].known() && in[1].known() && out[0].known();
}

bool reshape_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                  std::vector<Shape>& out) {
  const bool known = like_data_infer_shape(attrs, in, out);
  check_same_size(attrs, in[0], out[0]);
  return known;
}

template <typename P>
void register_reshape_backward(OpRegistry& r, const std::string& name) {
  Op& op = r.define_op(name);
  op.set_params<P>();
  op.describe("Gradient of a reshape-like op: the output gradient viewed in the input's shape.")
      .set_input_names({"out_grad", "data"})
      .set_attr<FInferShape>(reshape_backward_infer_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity);
}

template <typename P>
Op& register_reshape_like(OpRegistry& r, const std::string& name, FInferShape infer) {
  Op& op = r.define_op(name);
  op.set_params<P>();
  return op.set_input_names({"data"})
      .set_attr<FInferShape>(std::move(infer))
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity)
      .set_attr<FGradient>([name](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_" + name, {b.out_grad(0), b.input(0)})};
      });
}

}  // namespace

// ---- transpose -----------------------------------------------------------------------------

// The permutation for rank ndim (out axis i takes input axis perm[i]).
std::vector<int> transpose_perm(const OpAttrs& attrs, const Shape& axes, int ndim) {
  std::vector<int> perm(ndim);
  if (axes.ndim() == 0) {
    for (int i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
    return perm;
  }
  if (axes.ndim() != ndim) {
    throw_shape_error(attrs, "axes " + format_shape_attr(axes) + " do not match a " +
                                 std::to_string(ndim) + "-d input");
  }
  std::vector<bool> seen(ndim, false);
  for (int i = 0; i < ndim; ++i) {
    perm[i] = normalize_axis(attrs, axes[i], ndim);
    WEFT_CHECK(!seen[perm[i]]) << attrs.where() << ": axes " << format_shape_attr(axes)
                               << " is not a permutation";
    seen[perm[i]] = true;
  }
  return perm;
}

namespace {

bool transpose_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<TransposeParam>();
  const int nd = in[0].rank_known() ? in[0].ndim() : out[0].rank_known() ? out[0].ndim() : -1;
  if (nd < 0) return false;
  const std::vector<int> perm = transpose_perm(attrs, p.axes, nd);
  Shape s_in = in[0].rank_known() ? in[0] : Shape::filled(nd, -1);
  Shape s_out = Shape::filled(nd, -1);
  for (int i = 0; i < nd; ++i) s_out[i] = s_in[perm[i]];
  assign_output_shape(attrs, out, 0, s_out);
  for (int i = 0; i < nd; ++i) s_in[perm[i]] = out[0][i];
  assign_input_shape(attrs, in, 0, s_in);
  return in[0].known() && out[0].known();
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  register_reshape_like<ReshapeParam>(r, "Reshape", reshape_infer_shape)
      .describe(
          "Reshapes the input. `shape` may hold the codes 0 (copy a dim), -1 (infer one dim), -2 "
          "(copy the "
          "rest), -3 (merge two dims) and -4 a b (split a dim); `reverse` applies them right to "
          "left. "
          "The deprecated `target_shape` (one 0 inferred) and `keep_highest` apply when `shape` is "
          "empty.");
  r.add_alias("reshape", "Reshape");
  register_reshape_backward<ReshapeParam>(r, "_backward_Reshape");

  register_reshape_like<NoParams>(r, "Flatten", flatten_infer_shape)
      .describe("Flattens the input to 2-D: (d0, d1*...*dn).");
  r.add_alias("flatten", "Flatten");
  register_reshape_backward<NoParams>(r, "_backward_Flatten");

  register_reshape_like<ExpandDimsParam>(r, "expand_dims", expand_dims_infer_shape)
      .describe("Inserts an axis of size 1 at `axis`.");
  register_reshape_backward<ExpandDimsParam>(r, "_backward_expand_dims");

  register_reshape_like<SqueezeParam>(r, "squeeze", squeeze_infer_shape)
      .describe(
          "Removes axes of size 1 (all of them when axis is None); a result with no axes is (1,).");
  register_reshape_backward<SqueezeParam>(r, "_backward_squeeze");

  r.define_op("transpose")
      .describe("Permutes the axes (out axis i is input axis axes[i]); empty axes reverse them.")
      .set_params<TransposeParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(transpose_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        const Shape& axes = b.attrs().params<TransposeParam>().axes;
        Shape inverse = axes;
        for (int i = 0; i < axes.ndim(); ++i) {
          const int64_t a = axes[i] < 0 ? axes[i] + axes.ndim() : axes[i];
          inverse[static_cast<int>(a)] = i;
        }
        return std::vector<GradEntry>{
            b.emit1("transpose", {b.out_grad(0)}, {{"axes", format_shape_attr(inverse)}})};
      });

  register_shape_concat_ops(r);
  register_indexing_ops(r);
}

}  // namespace weft::detail