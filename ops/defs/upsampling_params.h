// Param struct of UpSampling, shared by its definition and CPU kernel
// (ops/defs/shape_ops_concat.cc, ops/cpu/shape_ops_concat.cc) and the CUDA one.
#pragma once

#include <cstdint>

#include "base/error.h"
#include "ops/params.h"

namespace weft::detail {

enum class SampleType { kNearest, kBilinear };

enum class MultiInputMode { kConcat, kSum };

struct UpSamplingParam {
  int64_t scale = 1;
  int64_t num_filter = 0;
  SampleType sample_type = SampleType::kNearest;
  MultiInputMode multi_input_mode = MultiInputMode::kConcat;
  int64_t num_args = 1;
  int64_t workspace = 512;
  static void declare(ParamSchema<UpSamplingParam>& s) {
    s.field("scale", &UpSamplingParam::scale).lower_bound(1).describe("up-sampling factor");
    s.field("num_filter", &UpSamplingParam::num_filter)
        .set_default(0)
        .describe("bilinear: channels (0 = the input's)");
    s.enum_field("sample_type", &UpSamplingParam::sample_type,
                 {{"nearest", SampleType::kNearest}, {"bilinear", SampleType::kBilinear}})
        .describe(
            "nearest-neighbour or bilinear (depthwise transposed convolution with a weight input)");
    s.enum_field("multi_input_mode", &UpSamplingParam::multi_input_mode,
                 {{"concat", MultiInputMode::kConcat}, {"sum", MultiInputMode::kSum}})
        .set_default(MultiInputMode::kConcat)
        .describe("nearest with several inputs: concatenate the channels or sum");
    s.field("num_args", &UpSamplingParam::num_args)
        .lower_bound(1)
        .describe("nearest: number of inputs; bilinear: 2 (data, weight)");
    s.field("workspace", &UpSamplingParam::workspace)
        .set_default(512)
        .lower_bound(0)
        .describe("MXNet's workspace limit in MB (unused here)");
    s.check([](UpSamplingParam& p) {
      WEFT_CHECK(p.sample_type != SampleType::kBilinear || p.num_args == 2)
          << "bilinear up-sampling takes 2 inputs (data, weight); num_args is " << p.num_args;
      WEFT_CHECK(p.num_filter >= 0) << "num_filter must be >= 0";
      // The kernel, 2 * scale - scale % 2, and output sizes must not overflow.
      WEFT_CHECK(p.scale <= (int64_t{1} << 30)) << "scale " << p.scale << " is larger than 2^30";
    });
  }
  int64_t kernel() const { return 2 * scale - scale % 2; }
  int64_t pad() const { return scale / 2; }  // = ceil((scale - 1) / 2)
};

}  // namespace weft::detail
