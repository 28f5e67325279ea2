// Optimizer update ops (sgd_update, sgd_mom_update, adam_update, adamw_update): several steps
// against plain double-precision references with the states carried across steps, clipping,
// rescaling and weight decay, the in-place path through invoke (output = weight), state mutation,
// and shape, type and parameter errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ndarray/ndarray.h"
#include "ops/op.h"
#include "tests/ops/op_harness.h"

namespace weft {
namespace {

using testing::all_close;
using testing::HostTensor;
using testing::infer_shapes;
using testing::infer_types;
using testing::run_op_mutating;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

// Hyper-parameters; `attrs` writes only those the op takes.
struct Config {
  double lr = 0.1, wd = 0, rescale = 1, clip = -1;
  double momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, eta = 1;
};

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

AttrMap attrs_for(const std::string& op, const Config& c) {
  AttrMap a{{"lr", num(c.lr)},
            {"wd", num(c.wd)},
            {"rescale_grad", num(c.rescale)},
            {"clip_gradient", num(c.clip)}};
  if (op == "sgd_mom_update") a["momentum"] = num(c.momentum);
  if (op == "adam_update" || op == "adamw_update") {
    a["beta1"] = num(c.beta1);
    a["beta2"] = num(c.beta2);
    a["epsilon"] = num(c.eps);
  }
  if (op == "adamw_update") a["eta"] = num(c.eta);
  return a;
}

int num_states(const std::string& op) {
  return op == "sgd_update" ? 0 : op == "sgd_mom_update" ? 1 : 2;
}

double clipped(double g, double bound) {
  if (bound < 0) return g;
  if (g > bound) return bound;
  if (g < -bound) return -bound;
  return g;
}

// One step of the reference, element by element, in double. `s` holds the states (mom, or mean
// and var). Returns the new weight; updates `s`.
std::vector<double> reference_step(const std::string& op, const Config& c,
                                   const std::vector<double>& w, const std::vector<double>& g,
                                   std::vector<std::vector<double>>& s) {
  std::vector<double> out(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    if (op == "sgd_update") {
      const double gi = clipped(c.rescale * g[i], c.clip);
      out[i] = w[i] - c.lr * (gi + c.wd * w[i]);
    } else if (op == "sgd_mom_update") {
      const double gi = clipped(c.rescale * g[i], c.clip);
      s[0][i] = c.momentum * s[0][i] - c.lr * (gi + c.wd * w[i]);
      out[i] = w[i] + s[0][i];
    } else if (op == "adam_update") {
      // MXNet adds the weight decay to the gradient before clipping.
      const double gi = clipped(c.rescale * g[i] + c.wd * w[i], c.clip);
      s[0][i] = c.beta1 * s[0][i] + (1 - c.beta1) * gi;
      s[1][i] = c.beta2 * s[1][i] + (1 - c.beta2) * gi * gi;
      out[i] = w[i] - c.lr * s[0][i] / (std::sqrt(s[1][i]) + c.eps);
    } else {
      const double gi = clipped(c.rescale * g[i], c.clip);
      s[0][i] = c.beta1 * s[0][i] + (1 - c.beta1) * gi;
      s[1][i] = c.beta2 * s[1][i] + (1 - c.beta2) * gi * gi;
      out[i] = w[i] - c.eta * (c.lr * s[0][i] / (std::sqrt(s[1][i]) + c.eps) + c.wd * w[i]);
    }
  }
  return out;
}

// Runs `steps` updates through the op (states mutated in place, the output fed back as the next
// weight) and through the reference; compares the weight and every state after each step.
void check_steps(const std::string& op, const Config& c, DType type, int steps = 5) {
  SCOPED_TRACE(op + (type == kF32 ? " float32" : " float64"));
  const Shape shape{4, 5};
  const double rtol = type == kF32 ? 2e-5 : 1e-12, atol = type == kF32 ? 1e-6 : 1e-14;
  HostTensor w = HostTensor::random(shape, 11, -1.5, 1.5, type);
  std::vector<HostTensor> states;
  std::vector<std::vector<double>> ref_states;
  for (int k = 0; k < num_states(op); ++k) {
    // Nonzero starting states; var must be non-negative.
    states.push_back(HostTensor::random(shape, 20 + k, k == 1 ? 0.0 : -0.5, 0.5, type));
    ref_states.push_back(states.back().data);
  }
  std::vector<double> ref_w = w.data;
  const AttrMap attrs = attrs_for(op, c);
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const HostTensor g = HostTensor::random(shape, 100 + step, -2.0, 2.0, type);
    std::vector<HostTensor> inputs{w, g};
    for (const auto& s : states) inputs.push_back(s);
    const auto out = run_op_mutating(op, attrs, inputs);
    ASSERT_EQ(out.size(), 1u);
    ref_w = reference_step(op, c, ref_w, g.data, ref_states);
    EXPECT_TRUE(all_close(out[0], HostTensor::of(shape, ref_w, type), rtol, atol));
    for (size_t k = 0; k < states.size(); ++k) {
      EXPECT_TRUE(all_close(inputs[2 + k], HostTensor::of(shape, ref_states[k], type), rtol, atol))
          << "state " << k;
      states[k] = inputs[2 + k];
    }
    // The weight input itself is not an output of the op: it must be unchanged.
    EXPECT_EQ(inputs[0].data, w.data);
    w = out[0];
  }
}

const char* const kOps[] = {"sgd_update", "sgd_mom_update", "adam_update", "adamw_update"};

TEST(Optimizer, PlainStepsMatchTheReference) {
  for (const char* op : kOps) {
    Config c;
    c.lr = 0.05;
    c.momentum = 0.9;
    check_steps(op, c, kF32);
  }
}

TEST(Optimizer, ClipRescaleAndWeightDecayMatchTheReference) {
  // Gradients are in [-2, 2] and rescale_grad is 1.5, so about 3/4 of the rescaled gradients lie
  // outside the clip range of 0.7.
  Config c;
  c.lr = 0.03;
  c.wd = 0.05;
  c.rescale = 1.5;
  c.clip = 0.7;
  c.momentum = 0.8;
  c.beta1 = 0.85;
  c.beta2 = 0.99;
  c.eps = 1e-6;
  c.eta = 0.6;
  for (const char* op : kOps) {
    check_steps(op, c, kF32);
    check_steps(op, c, kF64);
  }
  // clip_gradient = 0 clips every gradient to 0 (only the weight decay moves the weight).
  Config z;
  z.lr = 0.1;
  z.wd = 0.5;
  z.clip = 0;
  check_steps("sgd_update", z, kF64, 2);
}

TEST(Optimizer, ClippingChangesTheResult) {
  // Guards the reference: with clipping the SGD step differs from the unclipped one.
  const HostTensor w = HostTensor::of(Shape{3}, {1.0, -1.0, 0.5});
  const HostTensor g = HostTensor::of(Shape{3}, {4.0, -0.1, -3.0});
  std::vector<HostTensor> in{w, g};
  const auto out = run_op_mutating(
      "sgd_update", {{"lr", "0.5"}, {"clip_gradient", "1"}, {"rescale_grad", "0.5"}}, in);
  EXPECT_TRUE(all_close(out[0], HostTensor::of(Shape{3}, {0.5, -0.975, 1.0})));
}

TEST(Optimizer, AdamWSkipsTheStepWhenRescaleIsNotFinite) {
  for (const char* rescale : {"0", "inf", "nan"}) {
    SCOPED_TRACE(rescale);
    const HostTensor w = HostTensor::random(Shape{6}, 1);
    const HostTensor m = HostTensor::random(Shape{6}, 2);
    const HostTensor v = HostTensor::random(Shape{6}, 3, 0.1, 1.0);
    std::vector<HostTensor> in{w, HostTensor::random(Shape{6}, 4), m, v};
    const auto out =
        run_op_mutating("adamw_update", {{"lr", "0.1"}, {"rescale_grad", rescale}}, in);
    EXPECT_EQ(out[0].data, w.data);
    EXPECT_EQ(in[2].data, m.data);
    EXPECT_EQ(in[3].data, v.data);
  }
}

// ---- the in-place path through invoke --------------------------------------------------------

NDArray array_of(const Shape& shape, const std::vector<double>& v) {
  std::vector<float> f(v.begin(), v.end());
  return NDArray::from_vector<float>(shape, f);
}

TEST(Optimizer, InvokeWithTheWeightAsOutputUpdatesInPlace) {
  const Shape shape{3, 7};
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    Config c;
    c.lr = 0.04;
    c.wd = 0.01;
    c.momentum = 0.7;
    c.clip = 1.0;
    const auto attrs = make_op_attrs(op, attrs_for(op, c));
    std::vector<double> ref_w = HostTensor::random(shape, 5).data;
    NDArray weight = array_of(shape, ref_w);
    const void* storage = weight.storage().get();
    std::vector<NDArray> states;
    std::vector<std::vector<double>> ref_states;
    for (int k = 0; k < num_states(op); ++k) {
      ref_states.push_back(HostTensor::random(shape, 30 + k, k == 1 ? 0.0 : -0.5, 0.5).data);
      states.push_back(array_of(shape, ref_states.back()));
    }
    // Several steps pushed without waiting: the engine orders them through the weight's and the
    // states' variables.
    for (int step = 0; step < 4; ++step) {
      const std::vector<double> g = HostTensor::random(shape, 200 + step, -2, 2).data;
      std::vector<NDArray> inputs{weight, array_of(shape, g)};
      for (const auto& s : states) inputs.push_back(s);
      InvokeOptions options;
      options.outputs = {weight};
      const auto out = invoke(attrs, inputs, options);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].storage().get(), storage);
      ref_w = reference_step(op, c, ref_w, g, ref_states);
    }
    EXPECT_TRUE(all_close(HostTensor::of(shape, weight.to_doubles()), HostTensor::of(shape, ref_w),
                          2e-5, 1e-6));
    for (size_t k = 0; k < states.size(); ++k) {
      EXPECT_TRUE(all_close(HostTensor::of(shape, states[k].to_doubles()),
                            HostTensor::of(shape, ref_states[k]), 2e-5, 1e-6))
          << "state " << k;
    }
  }
}

TEST(Optimizer, InvokeWithoutOutputLeavesTheWeightAndMutatesTheStates) {
  const Shape shape{5};
  NDArray w = array_of(shape, {1, 2, 3, 4, 5});
  NDArray g = array_of(shape, {1, 1, 1, 1, 1});
  NDArray mom = NDArray::zeros(shape);
  const auto out = invoke("sgd_mom_update", {w, g, mom}, {{"lr", "0.1"}, {"momentum", "0.9"}});
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(all_close(HostTensor::of(shape, mom.to_doubles()),
                        HostTensor::of(shape, {-0.1, -0.1, -0.1, -0.1, -0.1})));
  EXPECT_TRUE(all_close(HostTensor::of(shape, out[0].to_doubles()),
                        HostTensor::of(shape, {0.9, 1.9, 2.9, 3.9, 4.9})));
}

// ---- registration, shapes, types, params -----------------------------------------------------

TEST(Optimizer, RegistrationDeclaresInPlaceAndMutatedInputs) {
  const std::vector<std::vector<int>> mutated{{}, {2}, {2, 3}, {2, 3}};
  for (int k = 0; k < 4; ++k) {
    const Op& op = get_op(kOps[k]);
    const OpAttrs attrs = op.make_attrs({{"lr", "0.1"}});
    SCOPED_TRACE(op.name());
    ASSERT_TRUE(static_cast<bool>(op.attr<FInplaceOption>()));
    EXPECT_EQ(op.attr<FInplaceOption>()(attrs), (std::vector<std::pair<int, int>>{{0, 0}}));
    const auto& mutate = op.attr<FMutateInputs>();
    EXPECT_EQ(mutate ? mutate(attrs) : std::vector<int>{}, mutated[k]);
    EXPECT_FALSE(static_cast<bool>(op.attr<FGradient>()));
    EXPECT_NE(op.description().find("output"), std::string::npos);
  }
}

TEST(Optimizer, ShapeMismatchNamesTheInputAndBothShapes) {
  const Shape w{3, 4}, bad{4, 3};
  struct Case {
    const char* op;
    int slot;
    const char* name;
  };
  for (const Case& c : {Case{"sgd_update", 1, "grad"}, Case{"sgd_mom_update", 2, "mom"},
                        Case{"adam_update", 3, "var"}, Case{"adamw_update", 2, "mean"}}) {
    SCOPED_TRACE(c.op);
    std::vector<Shape> in(static_cast<size_t>(2 + num_states(c.op)), w);
    in[static_cast<size_t>(c.slot)] = bad;
    try {
      infer_shapes(c.op, {{"lr", "0.1"}}, in);
      ADD_FAILURE() << "no error";
    } catch (const ShapeError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.op), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string("'") + c.name + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find(w.to_string()), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad.to_string()), std::string::npos) << msg;
    }
  }
  // A shape known only from a state propagates to the weight, the gradient and the output.
  const auto [in, out] = infer_shapes("adam_update", {{"lr", "0.1"}},
                                      {Shape(), Shape(), Shape{2, 3}, Shape()}, {Shape()});
  for (const Shape& s : in) EXPECT_EQ(s, (Shape{2, 3}));
  EXPECT_EQ(out[0], (Shape{2, 3}));
  EXPECT_THROW(infer_shapes("sgd_update", {{"lr", "0.1"}}, {w, w}, {bad}), ShapeError);
}

TEST(Optimizer, TypesMustBeOneFloatingType) {
  const auto [in, out] =
      infer_types("sgd_mom_update", {{"lr", "0.1"}}, {kF64, DType::kUnknown, DType::kUnknown});
  EXPECT_EQ(in, (std::vector<DType>{kF64, kF64, kF64}));
  EXPECT_EQ(out, (std::vector<DType>{kF64}));
  EXPECT_THROW(infer_types("sgd_update", {{"lr", "0.1"}}, {DType::kInt32, DType::kInt32}),
               ValueError);
  EXPECT_THROW(infer_types("adam_update", {{"lr", "0.1"}}, {kF32, kF64, kF32, kF32}), Error);
}

TEST(Optimizer, HalfTypesAreInferredAndRefusedByTheCpuKernels) {
  // float16/bfloat16 weights, gradients and states run on CUDA (tests/ops/cuda_half_norm_test.cc);
  // the CPU kernels refuse them with an error naming the op and the dtype.
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (const char* op : kOps) {
      SCOPED_TRACE(std::string(op) + " " + dtype_name(dt));
      std::vector<DType> types(static_cast<size_t>(2 + num_states(op)), DType::kUnknown);
      types[0] = dt;
      const auto [in, out] = infer_types(op, {{"lr", "0.1"}}, types);
      EXPECT_EQ(in, std::vector<DType>(types.size(), dt));
      EXPECT_EQ(out, (std::vector<DType>{dt}));
      std::vector<HostTensor> inputs(types.size(), HostTensor::filled(Shape{3}, 0.5, dt));
      try {
        run_op_mutating(op, {{"lr", "0.1"}}, inputs);
        ADD_FAILURE() << "the CPU kernel ran";
      } catch (const NotImplemented& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(op), std::string::npos) << msg;
        EXPECT_NE(msg.find(dtype_name(dt)), std::string::npos) << msg;
      }
    }
  }
}

TEST(Optimizer, ParamsFollowMXNet) {
  for (const char* op : kOps) EXPECT_THROW(get_op(op).make_attrs({}), ValueError) << op;
  EXPECT_NO_THROW(get_op("sgd_update").make_attrs({{"lr", "0.1"}, {"lazy_update", "False"}}));
  EXPECT_NO_THROW(get_op("adam_update").make_attrs({{"lr", "0.1"}, {"lazy_update", "True"}}));
  EXPECT_THROW(get_op("adamw_update").make_attrs({{"lr", "0.1"}, {"lazy_update", "True"}}),
               ValueError);
  EXPECT_THROW(get_op("sgd_update").make_attrs({{"lr", "0.1"}, {"momentum", "0.9"}}), ValueError);
}

}  // namespace
}  // namespace weft
