// Parameter structs of the creation ops (ops/defs/init_ops.cc), shared with their CPU and CUDA
// kernels (ops/cpu/init_ops.cc, ops/cuda/init_ops.cu).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "base/shape.h"
#include "ops/params.h"

namespace weft::detail {

/// Declares the fields every creation op shares (shape, ctx, dtype) on a param struct P.
template <typename P>
inline void declare_shape_ctx(ParamSchema<P>& s) {
  s.field("shape", &P::shape).set_default(Shape::filled(0, 0)).describe("The shape of the output.");
  s.field("ctx", &P::ctx)
      .set_default(std::string())
      .describe("Context of the output; accepted and ignored.");
}

/// Rejects negative dimensions in a creation op's `shape`, and shapes beyond weft's limits (see
/// Note [Checked sizes]).
inline void check_creation_shape(const Shape& shape) {
  for (int64_t d : shape) WEFT_CHECK(d >= 0) << "shape " << shape << " has a negative dimension";
  WEFT_CHECK(shape.within_limits())
      << "shape " << shape << " is larger than weft's limit for one array (2^56 elements)";
}

/// _zeros / _ones (MXNet InitOpParam).
struct InitParam {
  Shape shape;
  std::string ctx;
  DType dtype = DType::kFloat32;
  static void declare(ParamSchema<InitParam>& s) {
    declare_shape_ctx(s);
    s.field("dtype", &InitParam::dtype)
        .set_default(DType::kFloat32)
        .describe("Element type of the output.");
    s.check([](InitParam& p) { check_creation_shape(p.shape); });
  }
};

/// _full (MXNet InitOpWithScalarParam).
struct FullParam {
  Shape shape;
  std::string ctx;
  DType dtype = DType::kFloat32;
  double value = 0;
  static void declare(ParamSchema<FullParam>& s) {
    declare_shape_ctx(s);
    s.field("dtype", &FullParam::dtype)
        .set_default(DType::kFloat32)
        .describe("Element type of the output.");
    s.field("value", &FullParam::value).describe("Value every element gets.");
    s.check([](FullParam& p) { check_creation_shape(p.shape); });
  }
};

/// _arange (MXNet RangeParam). After parsing, a missing `stop` (without infer_range) means
/// [0, start): start moves to stop and start becomes 0, as MXNet's RangeParamParser does.
struct ArangeParam {
  double start = 0;
  std::optional<double> stop;
  double step = 1;
  int repeat = 1;
  bool infer_range = false;
  std::string ctx;
  DType dtype = DType::kFloat32;
  static void declare(ParamSchema<ArangeParam>& s) {
    s.field("start", &ArangeParam::start).describe("Start of the interval (included).");
    s.field("stop", &ArangeParam::stop)
        .set_default(std::nullopt)
        .describe("End of the interval (excluded).");
    s.field("step", &ArangeParam::step).set_default(1.0).describe("Spacing between values.");
    s.field("repeat", &ArangeParam::repeat)
        .set_default(1)
        .describe("Times each element is repeated.");
    s.field("infer_range", &ArangeParam::infer_range)
        .set_default(false)
        .describe("Infer the stop from start, step, repeat and the output size.");
    s.field("ctx", &ArangeParam::ctx).set_default(std::string()).describe("Accepted and ignored.");
    s.field("dtype", &ArangeParam::dtype)
        .set_default(DType::kFloat32)
        .describe("Element type of the output.");
    s.check([](ArangeParam& p) {
      WEFT_CHECK(p.step != 0) << "step must not be 0";
      WEFT_CHECK(p.repeat > 0) << "repeat must be positive, got " << p.repeat;
      if (!p.infer_range && !p.stop) {
        p.stop = p.start;
        p.start = 0;
      }
      if (p.stop) {
        WEFT_CHECK(p.step > 0 ? p.start < *p.stop : p.start > *p.stop)
            << "invalid range (start, stop, step) = (" << p.start << ", " << *p.stop << ", "
            << p.step << ")";
      }
    });
  }
};

inline const std::vector<std::pair<std::string, DType>> kRandomDTypes = {
    {"float16", DType::kFloat16}, {"float32", DType::kFloat32}, {"float64", DType::kFloat64}};

/// _random_uniform (MXNet SampleUniformParam).
struct UniformParam {
  double low = 0, high = 1;
  Shape shape;
  std::string ctx;
  std::optional<DType> dtype;
  static void declare(ParamSchema<UniformParam>& s) {
    s.field("low", &UniformParam::low)
        .set_default(0.0)
        .describe("Lower bound of the distribution.");
    s.field("high", &UniformParam::high)
        .set_default(1.0)
        .describe("Upper bound of the distribution.");
    declare_shape_ctx(s);
    s.optional_enum_field("dtype", &UniformParam::dtype, kRandomDTypes)
        .set_default(std::nullopt)
        .describe("Element type; None: the output's type when known, else float32.");
    s.check([](UniformParam& p) {
      check_creation_shape(p.shape);
      WEFT_CHECK(p.low <= p.high) << "low (" << p.low << ") must be <= high (" << p.high << ")";
    });
  }
};

/// _random_normal (MXNet SampleNormalParam).
struct NormalParam {
  double loc = 0, scale = 1;
  Shape shape;
  std::string ctx;
  std::optional<DType> dtype;
  static void declare(ParamSchema<NormalParam>& s) {
    s.field("loc", &NormalParam::loc).set_default(0.0).describe("Mean of the distribution.");
    s.field("scale", &NormalParam::scale)
        .set_default(1.0)
        .describe("Standard deviation of the distribution.");
    declare_shape_ctx(s);
    s.optional_enum_field("dtype", &NormalParam::dtype, kRandomDTypes)
        .set_default(std::nullopt)
        .describe("Element type; None: the output's type when known, else float32.");
    s.check([](NormalParam& p) {
      check_creation_shape(p.shape);
      WEFT_CHECK(p.scale > 0) << "scale must be positive, got " << p.scale;
    });
  }
};

}  // namespace weft::detail
