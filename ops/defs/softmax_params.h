// Parameters of the softmax family (definitions in ops/defs/softmax.cc, CPU kernels in
// ops/cpu/softmax.cc), shared with the CUDA kernels.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "ops/params.h"

namespace weft::detail {

struct SoftmaxParam {
  int64_t axis = -1;
  std::optional<double> temperature;
  std::optional<DType> dtype;
  std::optional<bool> use_length = false;
  static void declare(ParamSchema<SoftmaxParam>& s) {
    s.field("axis", &SoftmaxParam::axis).set_default(-1).describe("axis of the softmax");
    s.field("temperature", &SoftmaxParam::temperature)
        .set_default(std::nullopt)
        .describe("None means 1");
    s.optional_enum_field(
         "dtype", &SoftmaxParam::dtype,
         {{"float16", DType::kFloat16}, {"float32", DType::kFloat32}, {"float64", DType::kFloat64}})
        .set_default(std::nullopt)
        .describe("output type (None: the data's)");
    s.field("use_length", &SoftmaxParam::use_length)
        .set_default(false)
        .describe("mask each row past `length` (an extra input)");
    s.check([](SoftmaxParam& p) {
      if (p.temperature) {
        WEFT_CHECK(*p.temperature != 0) << "temperature must be non-zero";
      }
    });
  }
  bool has_length() const { return use_length.value_or(false); }
  double temp() const { return temperature.value_or(1.0); }
};

enum class SoftmaxActMode { kInstance, kChannel };

struct SoftmaxActivationParam {
  SoftmaxActMode mode = SoftmaxActMode::kInstance;
  static void declare(ParamSchema<SoftmaxActivationParam>& s) {
    s.enum_field("mode", &SoftmaxActivationParam::mode,
                 {{"instance", SoftmaxActMode::kInstance}, {"channel", SoftmaxActMode::kChannel}})
        .set_default(SoftmaxActMode::kInstance)
        .describe("instance: over the last axis; channel: over axis 1 at each position");
  }
};

}  // namespace weft::detail
