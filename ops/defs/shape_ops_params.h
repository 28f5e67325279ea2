// Parameters of transpose (ops/defs/shape_ops.cc) and Concat, stack, SliceChannel, Crop
// (ops/defs/shape_ops_concat.cc), shared with the CPU and CUDA kernels, and the shape rules that
// the definitions and the CPU kernels both use.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "ops/op.h"
#include "ops/params.h"

namespace weft::detail {

struct TransposeParam {
  Shape axes;
  static void declare(ParamSchema<TransposeParam>& s) {
    s.field("axes", &TransposeParam::axes)
        .set_default(Shape(std::vector<int64_t>{}))
        .describe("permutation of the axes; empty reverses them");
  }
};

struct ConcatParam {
  int64_t num_args = 1;
  int64_t dim = 1;
  static void declare(ParamSchema<ConcatParam>& s) {
    s.field("num_args", &ConcatParam::num_args).lower_bound(1).describe("number of inputs");
    s.field("dim", &ConcatParam::dim)
        .set_default(1)
        .describe("axis to concatenate along (negative counts from the end)");
  }
};

struct StackParam {
  int64_t axis = 0;
  int64_t num_args = 1;
  static void declare(ParamSchema<StackParam>& s) {
    s.field("axis", &StackParam::axis)
        .set_default(0)
        .describe("position of the new axis, in [-ndim-1, ndim]");
    s.field("num_args", &StackParam::num_args).lower_bound(1).describe("number of inputs");
  }
};

struct SliceChannelParam {
  int64_t num_outputs = 1;
  int64_t axis = 1;
  bool squeeze_axis = false;
  static void declare(ParamSchema<SliceChannelParam>& s) {
    s.field("num_outputs", &SliceChannelParam::num_outputs)
        .lower_bound(1)
        .describe("number of equal parts");
    s.field("axis", &SliceChannelParam::axis)
        .set_default(1)
        .describe("axis to split (negative counts from the end)");
    s.field("squeeze_axis", &SliceChannelParam::squeeze_axis)
        .set_default(false)
        .describe("remove the split axis (needs its size to equal num_outputs)");
  }
};

struct CropParam {
  int64_t num_args = 1;
  Shape offset{0, 0};
  Shape h_w{0, 0};
  bool center_crop = false;
  static void declare(ParamSchema<CropParam>& s) {
    s.field("num_args", &CropParam::num_args)
        .describe("1 (crop to h_w) or 2 (crop to crop_like's size)");
    s.field("offset", &CropParam::offset)
        .set_default(Shape{0, 0})
        .describe("(y, x) of the crop's corner");
    s.field("h_w", &CropParam::h_w)
        .set_default(Shape{0, 0})
        .describe("(height, width) when num_args is 1");
    s.field("center_crop", &CropParam::center_crop)
        .set_default(false)
        .describe("centre the crop (ignores offset)");
    s.check([](CropParam& p) {
      WEFT_CHECK(p.num_args == 1 || p.num_args == 2)
          << "num_args must be 1 or 2, got " << p.num_args;
      WEFT_CHECK(p.offset.ndim() == 2 && p.offset[0] >= 0 && p.offset[1] >= 0)
          << "offset must be two non-negative values, got " << format_shape_attr(p.offset);
      WEFT_CHECK(p.h_w.ndim() == 2 && p.h_w[0] >= 0 && p.h_w[1] >= 0)
          << "h_w must be two non-negative values, got " << format_shape_attr(p.h_w);
    });
  }
};

/// transpose's permutation for rank `ndim` (out axis i takes input axis perm[i]); empty `axes`
/// reverse the axes. Throws when `axes` is not a permutation of the `ndim` axes.
std::vector<int> transpose_perm(const OpAttrs& attrs, const Shape& axes, int ndim);
/// stack's new axis (StackParam::axis, negative counting from the end) for inputs of rank
/// `in_ndim`; throws when out of range.
int stack_axis(const OpAttrs& attrs, int in_ndim);
/// Crop's start (y, x) for a data of spatial size (H, W) cropped to (h, w) (CropParam's offset,
/// or centred); throws a ShapeError when the crop does not fit.
std::pair<int64_t, int64_t> crop_start(const OpAttrs& attrs, int64_t H, int64_t W, int64_t h,
                                       int64_t w);

}  // namespace weft::detail
