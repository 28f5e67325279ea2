// Param struct of Pooling, shared by the definitions (ops/defs/pooling.cc), the CPU kernels
// (ops/cpu/pooling.cc) and the CUDA ones (ops/cuda/cudnn_*.cc).
#pragma once

#include <optional>

#include "ops/defs/conv_common.h"

namespace weft::detail {

enum class PoolType { kMax, kAvg, kSum, kLp };
enum class PoolConvention { kValid, kFull, kSame };

struct PoolingParam {
  Shape kernel;
  PoolType pool_type = PoolType::kMax;
  bool global_pool = false;
  bool cudnn_off = false;
  PoolConvention pooling_convention = PoolConvention::kValid;
  Shape stride, pad;
  std::optional<int64_t> p_value;
  std::optional<bool> count_include_pad;
  std::optional<SpatialLayout> layout;
  std::optional<Shape> output_size;

  static void declare(ParamSchema<PoolingParam>& s) {
    using P = PoolingParam;
    const Shape empty(std::vector<int64_t>{});
    s.field("kernel", &P::kernel)
        .set_default(empty, "[]")
        .describe("pooling window: (w,), (h, w) or (d, h, w); required unless global_pool");
    s.enum_field("pool_type", &P::pool_type,
                 {{"max", PoolType::kMax},
                  {"avg", PoolType::kAvg},
                  {"sum", PoolType::kSum},
                  {"lp", PoolType::kLp}})
        .set_default(PoolType::kMax)
        .describe("pooling function");
    s.field("global_pool", &P::global_pool)
        .set_default(false)
        .describe("pool over all spatial positions (kernel, stride and pad are ignored)");
    s.field("cudnn_off", &P::cudnn_off)
        .set_default(false)
        .describe("turn off cuDNN (ignored on CPU)");
    s.enum_field("pooling_convention", &P::pooling_convention,
                 {{"valid", PoolConvention::kValid},
                  {"full", PoolConvention::kFull},
                  {"same", PoolConvention::kSame}})
        .set_default(PoolConvention::kValid)
        .describe(
            "output size rule: valid = floor, full = ceil (Caffe), same = ceil(x/s) (1-D only)");
    s.field("stride", &P::stride)
        .set_default(empty, "[]")
        .describe("stride per spatial dim (default 1)");
    s.field("pad", &P::pad)
        .set_default(empty, "[]")
        .describe("padding per spatial dim (default 0)");
    s.field("p_value", &P::p_value)
        .set_default(std::nullopt)
        .describe("p of Lp pooling (required for lp)");
    s.field("count_include_pad", &P::count_include_pad)
        .set_default(std::nullopt)
        .describe("avg pooling divides by the window including padding (None = True)");
    s.optional_enum_field("layout", &P::layout, spatial_layout_names())
        .set_default(std::nullopt)
        .describe("data layout; None means NCW/NCHW/NCDHW");
    s.field("output_size", &P::output_size)
        .set_default(std::nullopt)
        .describe("output size of adaptive pooling (not supported)");
    s.check([](P& p) {
      const int nsp = p.kernel.ndim() > 0 ? p.kernel.ndim() : 0;
      if (!p.global_pool) {
        WEFT_CHECK(nsp >= 1) << "kernel is required unless global_pool is set";
      }
      if (nsp > 0) {
        WEFT_CHECK(nsp <= 3) << "kernel must have 1, 2 or 3 entries, got " << p.kernel.to_string();
        fill_spatial_tuple(p.stride, nsp, 1, "stride");
        fill_spatial_tuple(p.pad, nsp, 0, "pad");
        for (int i = 0; i < nsp; ++i) {
          WEFT_CHECK(p.global_pool || p.kernel[i] > 0)
              << "kernel " << p.kernel.to_string() << " must be positive";
          WEFT_CHECK(p.stride[i] > 0) << "stride " << p.stride.to_string() << " must be positive";
          WEFT_CHECK(p.pad[i] >= 0) << "pad " << p.pad.to_string() << " must be non-negative";
        }
      }
      if (p.pool_type == PoolType::kLp) {
        WEFT_CHECK(p.p_value.has_value()) << "p_value is required for lp pooling";
        WEFT_CHECK(*p.p_value >= 1) << "p_value must be at least 1, got " << *p.p_value;
      }
      if (p.pooling_convention == PoolConvention::kSame) {
        for (int i = 0; i < p.pad.ndim(); ++i)
          WEFT_CHECK(p.pad[i] == 0)
              << "the 'same' pooling convention does not take pad, got " << p.pad.to_string();
      }
    });
  }
};

}  // namespace weft::detail
