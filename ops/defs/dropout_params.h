// Param struct of Dropout, shared by its definition (ops/defs/dropout.cc), the CPU kernels
// (ops/cpu/dropout.cc) and the CUDA ones (ops/cuda/cudnn_*.cc).
#pragma once

#include <optional>

#include "base/shape.h"
#include "ops/params.h"

namespace weft::detail {

enum class DropoutMode { kTraining, kAlways };

struct DropoutParam {
  double p = 0.5;
  DropoutMode mode = DropoutMode::kTraining;
  Shape axes = Shape(std::vector<int64_t>{});
  std::optional<bool> cudnn_off = false;
  static void declare(ParamSchema<DropoutParam>& s) {
    s.field("p", &DropoutParam::p)
        .set_default(0.5)
        .lower_bound(0)
        .upper_bound(1)
        .describe("drop probability");
    s.enum_field("mode", &DropoutParam::mode,
                 {{"training", DropoutMode::kTraining}, {"always", DropoutMode::kAlways}})
        .set_default(DropoutMode::kTraining)
        .describe("training: identity at inference; always: drop at inference too");
    s.field("axes", &DropoutParam::axes)
        .set_default(Shape(std::vector<int64_t>{}))
        .describe("axes along which the mask is shared");
    s.field("cudnn_off", &DropoutParam::cudnn_off).set_default(false).describe("ignored on CPU");
  }
};

}  // namespace weft::detail
