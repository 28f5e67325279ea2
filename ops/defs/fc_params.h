// Param struct of FullyConnected and _fused_fc_act, shared by the definitions
// (ops/defs/fully_connected.cc), the CPU kernels (ops/cpu/fully_connected.cc) and the CUDA ones
// (ops/cuda/fully_connected.cc).
#pragma once

#include <cstdint>

#include "base/tensor_view.h"
#include "ops/params.h"

namespace weft::detail {

struct FullyConnectedParam {
  int64_t num_hidden = 0;
  bool no_bias = false;
  bool flatten = true;
  static void declare(ParamSchema<FullyConnectedParam>& s) {
    using P = FullyConnectedParam;
    s.field("num_hidden", &P::num_hidden).lower_bound(1).describe("number of output units");
    s.field("no_bias", &P::no_bias).set_default(false).describe("whether to omit the bias input");
    s.field("flatten", &P::flatten)
        .set_default(true)
        .describe("True: view data as (N, prod(rest)); False: apply to the last axis");
  }
};

/// FullyConnected's GEMM sizes, the same for every device: m rows of data, k inputs, h outputs.
struct FcDims {
  int64_t m, k, h;
};
/// The sizes for `data` (flatten: all dims after the first are inputs; else only the last).
inline FcDims fc_dims(const FullyConnectedParam& p, const TensorView& data) {
  const Shape s = data.shape_of();
  if (p.flatten) return {s[0], s.prod(1, s.ndim()), p.num_hidden};
  return {s.prod(0, s.ndim() - 1), s[s.ndim() - 1], p.num_hidden};
}

}  // namespace weft::detail
