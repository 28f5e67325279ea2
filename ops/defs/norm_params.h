// Param structs of BatchNorm, LayerNorm, LRN, SoftmaxOutput and the regression heads, shared by
// their definitions (ops/defs/batch_norm.cc, layer_norm.cc, nn_norm.cc), their CPU kernels (the
// files of the same names in ops/cpu/) and the CUDA ones.
#pragma once

#include <cstdint>
#include <optional>

#include "base/dtype.h"
#include "base/error.h"
#include "ops/params.h"

namespace weft::detail {

struct BatchNormParam {
  double eps = 1e-3;
  double momentum = 0.9;
  bool fix_gamma = true;
  bool use_global_stats = false;
  bool output_mean_var = false;
  int64_t axis = 1;
  bool cudnn_off = false;
  std::optional<double> min_calib_range;
  std::optional<double> max_calib_range;
  static void declare(ParamSchema<BatchNormParam>& s) {
    s.field("eps", &BatchNormParam::eps)
        .set_default(1e-3)
        .lower_bound(0)
        .describe("added to the variance");
    s.field("momentum", &BatchNormParam::momentum)
        .set_default(0.9)
        .describe("moving-average momentum");
    s.field("fix_gamma", &BatchNormParam::fix_gamma)
        .set_default(true)
        .describe("use gamma = 1, no gamma gradient");
    s.field("use_global_stats", &BatchNormParam::use_global_stats)
        .set_default(false)
        .describe("use the moving statistics in training too");
    s.field("output_mean_var", &BatchNormParam::output_mean_var)
        .set_default(false)
        .describe("make mean, var visible");
    s.field("axis", &BatchNormParam::axis)
        .set_default(1)
        .describe("channel axis (negative counts from the end)");
    s.field("cudnn_off", &BatchNormParam::cudnn_off).set_default(false).describe("ignored on CPU");
    s.field("min_calib_range", &BatchNormParam::min_calib_range)
        .set_default(std::nullopt)
        .describe("quantization calibration only; ignored");
    s.field("max_calib_range", &BatchNormParam::max_calib_range)
        .set_default(std::nullopt)
        .describe("quantization calibration only; ignored");
    s.check([](BatchNormParam& p) {
      if (p.min_calib_range && p.max_calib_range) {
        WEFT_CHECK(*p.min_calib_range <= *p.max_calib_range) << "min_calib_range > max_calib_range";
      }
    });
  }
};

/// The dtype of BatchNorm's gamma, beta, moving statistics and mean/var outputs for data of type
/// `data`: float32 for float16/bfloat16 data (mixed precision, as MXNet), the data's type
/// otherwise.
inline DType batch_norm_param_type(DType data) {
  return data == DType::kFloat16 || data == DType::kBFloat16 ? DType::kFloat32 : data;
}

struct LayerNormParam {
  int64_t axis = -1;
  double eps = 1e-5;
  bool output_mean_var = false;
  static void declare(ParamSchema<LayerNormParam>& s) {
    s.field("axis", &LayerNormParam::axis)
        .set_default(-1)
        .describe("normalised axis (negative counts from the end)");
    s.field("eps", &LayerNormParam::eps)
        .set_default(1e-5)
        .lower_bound(0)
        .describe("added to the variance");
    s.field("output_mean_var", &LayerNormParam::output_mean_var)
        .set_default(false)
        .describe("make mean, std visible");
  }
};

struct LRNParam {
  double alpha = 1e-4;
  double beta = 0.75;
  double knorm = 2;
  int64_t nsize = 1;
  static void declare(ParamSchema<LRNParam>& s) {
    s.field("alpha", &LRNParam::alpha).set_default(1e-4).describe("variance scaling");
    s.field("beta", &LRNParam::beta).set_default(0.75).describe("power");
    s.field("knorm", &LRNParam::knorm).set_default(2.0).describe("additive constant k");
    s.field("nsize", &LRNParam::nsize).lower_bound(1).describe("channels in the window (odd)");
    s.check([](LRNParam& p) {
      WEFT_CHECK(p.nsize % 2 == 1) << "LRN nsize must be odd, got " << p.nsize;
    });
  }
};

enum class LossNorm { kNull, kBatch, kValid };

struct SoftmaxOutputParam {
  double grad_scale = 1;
  double ignore_label = -1;
  bool multi_output = false;
  bool use_ignore = false;
  bool preserve_shape = false;
  LossNorm normalization = LossNorm::kNull;
  bool out_grad = false;
  double smooth_alpha = 0;
  static void declare(ParamSchema<SoftmaxOutputParam>& s) {
    s.field("grad_scale", &SoftmaxOutputParam::grad_scale)
        .set_default(1.0)
        .describe("scales the gradient");
    s.field("ignore_label", &SoftmaxOutputParam::ignore_label)
        .set_default(-1.0)
        .describe("label whose rows get no gradient (with use_ignore)");
    s.field("multi_output", &SoftmaxOutputParam::multi_output)
        .set_default(false)
        .describe("softmax over axis 1 of (N, C, ...) at each position");
    s.field("use_ignore", &SoftmaxOutputParam::use_ignore)
        .set_default(false)
        .describe("honour ignore_label");
    s.field("preserve_shape", &SoftmaxOutputParam::preserve_shape)
        .set_default(false)
        .describe("softmax over the last axis");
    s.enum_field(
         "normalization", &SoftmaxOutputParam::normalization,
         {{"null", LossNorm::kNull}, {"batch", LossNorm::kBatch}, {"valid", LossNorm::kValid}})
        .set_default(LossNorm::kNull)
        .describe(
            "gradient divided by 1, the batch size, or the number of non-ignored labels "
            "(multi_output: null and batch also divide by the positions per sample, as MXNet)");
    s.field("out_grad", &SoftmaxOutputParam::out_grad)
        .set_default(false)
        .describe("multiply by the head gradient");
    s.field("smooth_alpha", &SoftmaxOutputParam::smooth_alpha)
        .set_default(0.0)
        .lower_bound(0)
        .upper_bound(1)
        .describe("label smoothing");
  }
};

struct RegressionParam {
  double grad_scale = 1;
  static void declare(ParamSchema<RegressionParam>& s) {
    s.field("grad_scale", &RegressionParam::grad_scale)
        .set_default(1.0)
        .describe("scales the gradient");
  }
};

}  // namespace weft::detail
