// Param struct of FullyConnected and _fused_fc_act, shared by the definitions
// (ops/defs/fully_connected.cc), the CPU kernels (ops/cpu/fully_connected.cc) and the CUDA ones
// (ops/cuda/blas.cc).
#pragma once

#include <cstdint>

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

}  // namespace weft::detail
