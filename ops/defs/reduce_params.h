// Parameters of the reductions (ops/defs/reduce.cc), shared with the CPU and CUDA kernels.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "ops/params.h"

namespace weft::detail {

/// MXNet's ReduceAxesParam.
struct ReduceAxesParam {
  std::optional<Shape> axis;
  bool keepdims = false;
  bool exclude = false;
  static void declare(ParamSchema<ReduceAxesParam>& s) {
    s.field("axis", &ReduceAxesParam::axis)
        .set_default(std::nullopt)
        .describe("axes to reduce (None or () = all; negative counts from the end)");
    s.field("keepdims", &ReduceAxesParam::keepdims)
        .set_default(false)
        .describe("keep reduced axes as size 1");
    s.field("exclude", &ReduceAxesParam::exclude)
        .set_default(false)
        .describe("reduce the axes NOT listed");
  }
};

struct ArgReduceParam {
  std::optional<int64_t> axis;
  bool keepdims = false;
  static void declare(ParamSchema<ArgReduceParam>& s) {
    s.field("axis", &ArgReduceParam::axis)
        .set_default(std::nullopt)
        .describe("axis to search (None: the flattened array)");
    s.field("keepdims", &ArgReduceParam::keepdims)
        .set_default(false)
        .describe("keep the axis as size 1");
  }
};

}  // namespace weft::detail
