// Parameter structs of the elementwise ops (ops/defs/elemwise.cc, ops/defs/elemwise_scalar.cc),
// shared with their CPU and CUDA kernels (ops/cpu/elemwise*.cc, ops/cuda/elemwise*.cu).
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "base/error.h"
#include "ops/params.h"

namespace weft::detail {

/// MXNet's scalar-op parameters (the same struct for every op of this file).
struct ScalarParam {
  double scalar = 1.0;
  bool is_int = true;
  static void declare(ParamSchema<ScalarParam>& s) {
    s.field("scalar", &ScalarParam::scalar).set_default(1.0).describe("scalar operand");
    s.field("is_int", &ScalarParam::is_int)
        .set_default(true)
        .describe("for integer inputs: truncate the scalar to an integer (else compute in double)");
  }
};

struct AddNParam {
  int64_t num_args = 1;
  static void declare(ParamSchema<AddNParam>& s) {
    s.field("num_args", &AddNParam::num_args).lower_bound(1).describe("number of inputs to sum");
  }
};

struct ClipParam {
  double a_min = 0, a_max = 0;
  static void declare(ParamSchema<ClipParam>& s) {
    s.field("a_min", &ClipParam::a_min).describe("minimum value");
    s.field("a_max", &ClipParam::a_max).describe("maximum value");
    s.check([](ClipParam& p) {
      WEFT_CHECK(p.a_min <= p.a_max)
          << "a_min (" << p.a_min << ") must not exceed a_max (" << p.a_max << ")";
    });
  }
};

struct CastParam {
  DType dtype = DType::kFloat32;
  static void declare(ParamSchema<CastParam>& s) {
    s.field("dtype", &CastParam::dtype).describe("output type");
  }
};

enum class LossNorm { kNull, kBatch, kValid };

struct MakeLossParam {
  double grad_scale = 1.0;
  double valid_thresh = 0.0;
  LossNorm normalization = LossNorm::kNull;
  static void declare(ParamSchema<MakeLossParam>& s) {
    s.field("grad_scale", &MakeLossParam::grad_scale).set_default(1.0).describe("gradient scale");
    s.field("valid_thresh", &MakeLossParam::valid_thresh)
        .set_default(0.0)
        .describe("elements above this count as valid (normalization=valid)");
    s.enum_field(
         "normalization", &MakeLossParam::normalization,
         {{"null", LossNorm::kNull}, {"batch", LossNorm::kBatch}, {"valid", LossNorm::kValid}})
        .set_default(LossNorm::kNull)
        .describe("divide the gradient by nothing, the batch size or the valid count");
  }
};

}  // namespace weft::detail
