// Param structs of _image_normalize, the random flips, _image_crop and _image_resize, shared by
// their definitions (ops/defs/image.cc, ops/defs/image_resize.cc), their CPU kernels
// (ops/cpu/image.cc, ops/cpu/image_resize.cc) and the CUDA ones.
#pragma once

#include <vector>

#include "base/error.h"
#include "base/shape.h"
#include "ops/params.h"

namespace weft::detail {

struct ImageNormalizeParam {
  std::vector<double> mean{0.0};
  std::vector<double> std{1.0};
  static void declare(ParamSchema<ImageNormalizeParam>& s) {
    s.field("mean", &ImageNormalizeParam::mean)
        .set_default({0.0}, "0")
        .describe("per-channel means, or one value for every channel");
    s.field("std", &ImageNormalizeParam::std)
        .set_default({1.0}, "1")
        .describe("per-channel standard deviations, or one value for every channel");
    s.check([](ImageNormalizeParam& p) {
      if (p.mean.empty() || p.std.empty()) {
        WEFT_THROW(ValueError) << "mean and std need at least one value";
      }
    });
  }
};

struct RandomFlipParam {
  double p = 0.5;
  static void declare(ParamSchema<RandomFlipParam>& s) {
    s.field("p", &RandomFlipParam::p)
        .set_default(0.5)
        .lower_bound(0.0)
        .upper_bound(1.0)
        .describe("probability of flipping (MXNet 2.0's parameter; 1.9.1 always uses 0.5)");
  }
};

struct ImageCropParam {
  int64_t x = 0, y = 0, width = 0, height = 0;
  static void declare(ParamSchema<ImageCropParam>& s) {
    s.field("x", &ImageCropParam::x).lower_bound(0).describe("left column of the window");
    s.field("y", &ImageCropParam::y).lower_bound(0).describe("top row of the window");
    s.field("width", &ImageCropParam::width).lower_bound(1).describe("width of the window");
    s.field("height", &ImageCropParam::height).lower_bound(1).describe("height of the window");
  }
};

struct ImageResizeParam {
  Shape size;
  bool keep_ratio = false;
  int64_t interp = 1;
  static void declare(ParamSchema<ImageResizeParam>& s) {
    s.field("size", &ImageResizeParam::size)
        .set_default(Shape{}, "()")
        .describe("new size: (width, height), or one value (see keep_ratio)");
    s.field("keep_ratio", &ImageResizeParam::keep_ratio)
        .set_default(false)
        .describe(
            "with a single size: resize the short edge to it keeping the aspect ratio "
            "(False: both edges)");
    s.field("interp", &ImageResizeParam::interp)
        .set_default(1)
        .describe(
            "OpenCV interpolation: 0 nearest, 1 bilinear (2 bicubic, 3 area and 4 Lanczos "
            "are not implemented)");
    s.check([](ImageResizeParam& p) {
      if (p.size.ndim() != 1 && p.size.ndim() != 2) {
        WEFT_THROW(ValueError) << "size must have 1 or 2 values, (width, height) or (size,), got "
                               << format_shape_attr(p.size);
      }
      for (int i = 0; i < p.size.ndim(); ++i) {
        if (p.size[i] <= 0) {
          WEFT_THROW(ValueError) << "size must be positive, got " << format_shape_attr(p.size);
        }
      }
      if (p.interp < 0 || p.interp > 4) {
        WEFT_THROW(ValueError) << "interp must be an OpenCV interpolation in [0, 4], got "
                               << p.interp;
      }
    });
  }
};

}  // namespace weft::detail
