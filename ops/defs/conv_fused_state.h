// The op state of _fused_conv_bn_act (ops/defs/conv_fused.cc), shared with its CUDA kernel
// (ops/cuda/conv_fused.cc): the convolution's params, which optional inputs the application has,
// the BatchNorm and activation constants, and the folded weight and bias of the CPU kernel.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ops/defs/conv_common.h"

namespace weft::detail {

/// Where the optional inputs of a _fused_conv_bn_act application are: data, weight, [bias],
/// [gamma, beta, moving_mean, moving_var], [addend], [act_gamma].
struct FusedInputs {
  int nconv = 2;
  bool bn = true, sum = false, broadcast = false, prelu = false;
  int bn0() const { return nconv; }
  int addend() const { return nconv + (bn ? 4 : 0); }
  int slopes() const { return addend() + (sum ? 1 : 0); }  // prelu's
  int total() const { return slopes() + (prelu ? 1 : 0); }
};
/// The optional inputs of an application, from its hidden attributes (ops/defs/conv_fused.cc).
FusedInputs fused_inputs(const OpAttrs& a);

/// A fresh identity for a state's folded weight (disjoint from storage ids). Thread-safe.
uint64_t next_fused_weight_id();

/// Made by FCreateOpState for either device; `w`, `b` and the identity fields are the CPU
/// kernel's (host copies of the folded weight and bias).
struct FusedConvState final : OpState {
  ConvolutionParam p;
  FusedInputs io;
  float eps = 1e-3f;
  bool fix_gamma = true;
  FusedAct act;
  std::vector<float> w, b;
  Shape w_shape, b_shape;
  std::vector<std::pair<uint64_t, uint64_t>> seen;  // identity of the inputs folded last
  uint64_t id = next_fused_weight_id();
  uint64_t version = 0;
};

}  // namespace weft::detail
