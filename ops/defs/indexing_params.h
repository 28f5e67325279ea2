// Parameters of slice, slice_axis, broadcast_to, tile, Embedding (ops/defs/indexing_ops.cc) and
// pick, one_hot (ops/defs/pick.cc), shared with the CPU and CUDA kernels, and the slice ranges and
// tile padding that the definitions and the CPU kernels both use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "ops/op.h"
#include "ops/params.h"

namespace weft::detail {

// A tuple of optional integers ("(None, 2, -1)").
inline std::vector<std::optional<int64_t>> parse_optional_tuple(const std::string& text) {
  std::string s = text;
  auto trim = [](std::string t) {
    const auto b = t.find_first_not_of(" \t\n");
    const auto e = t.find_last_not_of(" \t\n");
    return b == std::string::npos ? std::string() : t.substr(b, e - b + 1);
  };
  s = trim(s);
  if (!s.empty() && (s.front() == '(' || s.front() == '[')) {
    const char close = s.front() == '(' ? ')' : ']';
    WEFT_CHECK(s.size() >= 2 && s.back() == close)
        << "expected a tuple like (1, None), got '" << text << "'";
    s = s.substr(1, s.size() - 2);
  }
  std::vector<std::optional<int64_t>> out;
  if (trim(s).empty()) return out;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    const std::string item =
        trim(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) {
      WEFT_CHECK(comma == std::string::npos) << "empty element in '" << text << "'";
    } else if (is_none(item)) {
      out.push_back(std::nullopt);
    } else {
      out.push_back(parse_int(item));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

struct SliceParam {
  std::string begin_text, end_text, step_text;
  std::vector<std::optional<int64_t>> begin, end, step;  // parsed by the check
  static void declare(ParamSchema<SliceParam>& s) {
    s.field("begin", &SliceParam::begin_text)
        .describe("starting indices; None entries start at the edge");
    s.field("end", &SliceParam::end_text)
        .describe("ending indices (exclusive); None entries run to the edge");
    s.field("step", &SliceParam::step_text)
        .set_default("()")
        .describe("steps (default 1); negative walks backwards");
    s.check([](SliceParam& p) {
      p.begin = parse_optional_tuple(p.begin_text);
      p.end = parse_optional_tuple(p.end_text);
      p.step = parse_optional_tuple(p.step_text);
      WEFT_CHECK(p.begin.size() == p.end.size())
          << "begin " << p.begin_text << " and end " << p.end_text << " must have the same length";
      WEFT_CHECK(p.step.empty() || p.step.size() == p.begin.size())
          << "step " << p.step_text << " must be empty or as long as begin";
      for (const auto& s : p.step) WEFT_CHECK(!s || *s != 0) << "step entries cannot be 0";
    });
  }
};

struct SliceAxisParam {
  int64_t axis = 0, begin = 0;
  std::optional<int64_t> end;
  static void declare(ParamSchema<SliceAxisParam>& s) {
    s.field("axis", &SliceAxisParam::axis).describe("axis to slice (negative counts from the end)");
    s.field("begin", &SliceAxisParam::begin).describe("first index (negative counts from the end)");
    s.field("end", &SliceAxisParam::end).describe("end index, exclusive; None runs to the end");
  }
};

struct BroadcastToParam {
  Shape shape;
  static void declare(ParamSchema<BroadcastToParam>& s) {
    s.field("shape", &BroadcastToParam::shape)
        .set_default(Shape(std::vector<int64_t>{}))
        .describe("target shape; 0 keeps the input's dimension");
    s.check([](BroadcastToParam& p) {
      for (int64_t d : p.shape)
        WEFT_CHECK(d >= 0) << "shape entries must be >= 0, got " << format_shape_attr(p.shape);
    });
  }
};

struct TileParam {
  Shape reps;
  static void declare(ParamSchema<TileParam>& s) {
    s.field("reps", &TileParam::reps)
        .describe("repetitions per axis (aligned to the trailing axes)");
    s.check([](TileParam& p) {
      for (int64_t d : p.reps)
        WEFT_CHECK(d >= 1) << "reps entries must be positive, got " << format_shape_attr(p.reps);
    });
  }
};

struct EmbeddingParam {
  int64_t input_dim = 0;
  int64_t output_dim = 0;
  DType dtype = DType::kFloat32;
  bool sparse_grad = false;
  static void declare(ParamSchema<EmbeddingParam>& s) {
    s.field("input_dim", &EmbeddingParam::input_dim)
        .lower_bound(1)
        .describe("vocabulary size (rows of weight)");
    s.field("output_dim", &EmbeddingParam::output_dim)
        .lower_bound(1)
        .describe("embedding size (columns of weight)");
    s.field("dtype", &EmbeddingParam::dtype)
        .set_default(DType::kFloat32)
        .describe("type of weight and output");
    s.field("sparse_grad", &EmbeddingParam::sparse_grad)
        .set_default(false)
        .describe("MXNet: row_sparse weight gradient; here the gradient is always dense");
  }
};

enum class PickMode { kClip, kWrap };

struct PickParam {
  std::optional<int64_t> axis = -1;
  bool keepdims = false;
  PickMode mode = PickMode::kClip;
  static void declare(ParamSchema<PickParam>& s) {
    s.field("axis", &PickParam::axis)
        .set_default(int64_t{-1})
        .describe("axis to pick along (negative counts from the end); None: the flattened array");
    s.field("keepdims", &PickParam::keepdims)
        .set_default(false)
        .describe("keep the picked axis as size 1");
    s.enum_field("mode", &PickParam::mode, {{"clip", PickMode::kClip}, {"wrap", PickMode::kWrap}})
        .set_default(PickMode::kClip)
        .describe("out-of-range indices: clip to the ends, or wrap around (modulo the axis size)");
  }
};

struct OneHotParam {
  int64_t depth = 0;
  double on_value = 1.0;
  double off_value = 0.0;
  DType dtype = DType::kFloat32;
  static void declare(ParamSchema<OneHotParam>& s) {
    s.field("depth", &OneHotParam::depth)
        .lower_bound(0)
        .describe("size of the one-hot dimension (the number of classes)");
    s.field("on_value", &OneHotParam::on_value)
        .set_default(1.0)
        .describe("value at the index position");
    s.field("off_value", &OneHotParam::off_value)
        .set_default(0.0)
        .describe("value everywhere else");
    s.field("dtype", &OneHotParam::dtype)
        .set_default(DType::kFloat32)
        .describe("type of the output");
  }
};

// Per input dim: first index, step and output length (MXNet's GetIndexRange clamping).
struct SliceRange {
  std::vector<int64_t> begin, step, len;
};

/// slice's range for an input of shape `in` (MXNet's clamping).
SliceRange slice_range(const OpAttrs& attrs, const SliceParam& p, const Shape& in);
/// slice_axis's range for an input of shape `in`.
SliceRange slice_axis_range(const OpAttrs& attrs, const Shape& in);
/// tile's input dims and reps, padded with leading 1s to the output rank.
void tile_padded(const Shape& reps, const Shape& in, std::vector<int64_t>* in_p,
                 std::vector<int64_t>* reps_p);

}  // namespace weft::detail
