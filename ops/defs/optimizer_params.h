// Param structs of the optimizer updates (ops/defs/optimizer.cc), shared by the CPU kernels
// (ops/cpu/optimizer.cc) and the CUDA ones.
#pragma once

#include "ops/params.h"

namespace weft::detail {

template <typename P>
void declare_scaling(ParamSchema<P>& s) {
  s.field("lr", &P::lr).describe("learning rate");
  s.field("wd", &P::wd).set_default(0.0).describe("weight decay");
  s.field("rescale_grad", &P::rescale_grad)
      .set_default(1.0)
      .describe("the gradient is multiplied by this first");
  s.field("clip_gradient", &P::clip_gradient)
      .set_default(-1.0)
      .describe("clip the rescaled gradient to [-clip_gradient, clip_gradient]; < 0: no clipping");
}

template <typename P>
void declare_lazy_update(ParamSchema<P>& s) {
  s.field("lazy_update", &P::lazy_update)
      .set_default(true)
      .describe("accepted for MXNet compatibility; ignored (gradients are dense)");
}

struct SgdParam {
  double lr = 0, wd = 0, rescale_grad = 1, clip_gradient = -1;
  bool lazy_update = true;
  static void declare(ParamSchema<SgdParam>& s) {
    declare_scaling(s);
    declare_lazy_update(s);
  }
};

struct SgdMomParam {
  double lr = 0, wd = 0, rescale_grad = 1, clip_gradient = -1;
  double momentum = 0;
  bool lazy_update = true;
  static void declare(ParamSchema<SgdMomParam>& s) {
    declare_scaling(s);
    s.field("momentum", &SgdMomParam::momentum).set_default(0.0).describe("momentum decay");
    declare_lazy_update(s);
  }
};

template <typename P>
void declare_adam_moments(ParamSchema<P>& s) {
  s.field("beta1", &P::beta1).set_default(0.9).describe("decay of the first moment (mean)");
  s.field("beta2", &P::beta2).set_default(0.999).describe("decay of the second moment (var)");
  s.field("epsilon", &P::epsilon)
      .set_default(1e-8)
      .describe("added to sqrt(var) in the denominator");
}

struct AdamParam {
  double lr = 0, wd = 0, rescale_grad = 1, clip_gradient = -1;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  bool lazy_update = true;
  static void declare(ParamSchema<AdamParam>& s) {
    declare_scaling(s);
    declare_adam_moments(s);
    declare_lazy_update(s);
  }
};

struct AdamWParam {
  double lr = 0, wd = 0, rescale_grad = 1, clip_gradient = -1;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double eta = 1;
  static void declare(ParamSchema<AdamWParam>& s) {
    declare_scaling(s);
    declare_adam_moments(s);
    s.field("eta", &AdamWParam::eta)
        .set_default(1.0)
        .describe("learning-rate schedule multiplier (applies to the weight decay too)");
  }
};

}  // namespace weft::detail
