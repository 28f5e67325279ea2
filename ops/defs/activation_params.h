// Param structs of Activation and LeakyReLU, shared by their definitions (ops/defs/activation.cc),
// the CPU kernels (ops/cpu/activation.cc) and the CUDA ones (ops/cuda/cudnn_*.cc).
#pragma once

#include "base/error.h"
#include "ops/params.h"

namespace weft::detail {

enum class ActType { kReLU, kSigmoid, kTanh, kSoftReLU, kSoftSign };

struct ActivationParam {
  ActType act_type = ActType::kReLU;
  static void declare(ParamSchema<ActivationParam>& s) {
    s.enum_field("act_type", &ActivationParam::act_type,
                 {{"relu", ActType::kReLU},
                  {"sigmoid", ActType::kSigmoid},
                  {"tanh", ActType::kTanh},
                  {"softrelu", ActType::kSoftReLU},
                  {"softsign", ActType::kSoftSign}})
        .describe("the activation function");
  }
};

enum class LeakyType { kLeaky, kPReLU, kRReLU, kELU, kSELU, kGELU };

struct LeakyReLUParam {
  LeakyType act_type = LeakyType::kLeaky;
  double slope = 0.25;
  double lower_bound = 0.125;
  double upper_bound = 0.334;
  static void declare(ParamSchema<LeakyReLUParam>& s) {
    s.enum_field("act_type", &LeakyReLUParam::act_type,
                 {{"rrelu", LeakyType::kRReLU},
                  {"leaky", LeakyType::kLeaky},
                  {"prelu", LeakyType::kPReLU},
                  {"elu", LeakyType::kELU},
                  {"selu", LeakyType::kSELU},
                  {"gelu", LeakyType::kGELU}})
        .set_default(LeakyType::kLeaky)
        .describe("the activation function");
    s.field("slope", &LeakyReLUParam::slope)
        .set_default(0.25)
        .describe("negative slope (leaky, elu)");
    s.field("lower_bound", &LeakyReLUParam::lower_bound)
        .set_default(0.125)
        .describe("rrelu slope lower bound");
    s.field("upper_bound", &LeakyReLUParam::upper_bound)
        .set_default(0.334)
        .describe("rrelu slope upper bound");
    s.check([](LeakyReLUParam& p) {
      if (p.act_type == LeakyType::kRReLU) {
        WEFT_CHECK(p.lower_bound <= p.upper_bound)
            << "lower_bound " << p.lower_bound << " > upper_bound " << p.upper_bound;
      }
    });
  }
};

}  // namespace weft::detail
