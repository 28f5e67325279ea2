// Param structs of _image_normalize and the random flips, shared by their CPU kernels
// (ops/image.cc) and the CUDA ones.
#pragma once

#include <vector>

#include "base/error.h"
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

}  // namespace weft::detail
