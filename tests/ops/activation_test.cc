// Activation and LeakyReLU: forward values against naive formulas, gradients against finite
// differences, rrelu's random slopes, shape inference and parameter validation.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/op.h"
#include "tests/ops/op_harness.h"

namespace weft {
namespace {

using testing::all_close;
using testing::check_gradient;
using testing::GradCheckOptions;
using testing::HostTensor;
using testing::infer_shapes;
using testing::run_op;
using testing::RunOptions;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

HostTensor map_ref(const HostTensor& a, const std::function<double(double)>& f) {
  HostTensor r = a;
  for (auto& v : r.data) v = f(v);
  return r;
}

GradCheckOptions tight() {
  GradCheckOptions o;
  o.eps = 1e-6;
  o.rtol = 1e-5;
  o.atol = 1e-7;
  return o;
}

// Inputs that stay away from the kink at 0.
HostTensor away_from_zero(Shape s, uint64_t seed, DType type) {
  HostTensor x = HostTensor::random(std::move(s), seed, -3, 3, type);
  for (auto& v : x.data)
    if (std::abs(v) < 0.05) v = 0.3;
  return x;
}

struct ActCase {
  std::string name;
  std::function<double(double)> f;
};

std::vector<ActCase> activation_cases() {
  return {
      {"relu", [](double x) { return x > 0 ? x : 0; }},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"softrelu", [](double x) { return x > 20 ? x : std::log(1 + std::exp(x)); }},
      {"softsign", [](double x) { return x / (1 + std::abs(x)); }},
  };
}

TEST(ActivationForward, EveryTypeMatchesItsFormula) {
  for (DType type : {kF32, kF64}) {
    HostTensor x = HostTensor::random(Shape{3, 4, 5}, 1, -5, 5, type);
    x.data[0] = 25;  // softrelu's linear branch
    for (const auto& c : activation_cases()) {
      EXPECT_TRUE(all_close(run_op("Activation", {{"act_type", c.name}}, {x})[0], map_ref(x, c.f),
                            1e-5, 1e-6))
          << c.name << " " << dtype_name(type);
    }
  }
}

TEST(ActivationForward, AddRequestAccumulates) {
  HostTensor x = HostTensor::random(Shape{4, 4}, 2, -2, 2);
  HostTensor init = HostTensor::random(Shape{4, 4}, 3, -1, 1);
  RunOptions opt;
  opt.req = {OpReq::kAdd};
  opt.initial_outputs = {init};
  auto y = run_op("Activation", {{"act_type", "tanh"}}, {x}, opt);
  HostTensor ref = init;
  for (int64_t k = 0; k < 16; ++k) ref.data[k] += std::tanh(x.data[k]);
  EXPECT_TRUE(all_close(y[0], ref, 1e-5, 1e-6));
}

TEST(ActivationGradient, EveryTypeMatchesFiniteDifferences) {
  HostTensor x = away_from_zero(Shape{2, 3, 4}, 4, kF64);
  for (const auto& c : activation_cases()) {
    EXPECT_TRUE(check_gradient("Activation", {{"act_type", c.name}}, {x}, tight())) << c.name;
  }
}

TEST(ActivationParams, ActTypeIsRequiredAndValidated) {
  EXPECT_THROW(get_op("Activation").make_attrs({}), ValueError);
  EXPECT_THROW(get_op("Activation").make_attrs({{"act_type", "swish"}}), ValueError);
  auto [in, out] = infer_shapes("Activation", {{"act_type", "relu"}}, {Shape()}, {Shape{2, 3}});
  EXPECT_EQ(in[0], (Shape{2, 3}));
  EXPECT_THROW(infer_shapes("Activation", {{"act_type", "relu"}}, {Shape{2, 3}}, {Shape{3, 2}}),
               ShapeError);
}

// ---- LeakyReLU
// -----------------------------------------------------------------------------------

constexpr double kAlpha = 1.6732632423543772848170429916717;
constexpr double kLambda = 1.0507009873554804934193349852946;

TEST(ActivationLeakyReLU, FixedVariantsMatchTheirFormulas) {
  for (DType type : {kF32, kF64}) {
    HostTensor x = HostTensor::random(Shape{2, 3, 4}, 5, -3, 3, type);
    EXPECT_TRUE(all_close(run_op("LeakyReLU", {}, {x})[0],
                          map_ref(x, [](double v) { return v > 0 ? v : 0.25 * v; }), 1e-5, 1e-6));
    EXPECT_TRUE(all_close(run_op("LeakyReLU", {{"act_type", "leaky"}, {"slope", "0.1"}}, {x})[0],
                          map_ref(x, [](double v) { return v > 0 ? v : 0.1 * v; }), 1e-5, 1e-6));
    EXPECT_TRUE(all_close(run_op("LeakyReLU", {{"act_type", "elu"}, {"slope", "0.7"}}, {x})[0],
                          map_ref(x, [](double v) { return v > 0 ? v : 0.7 * (std::exp(v) - 1); }),
                          1e-5, 1e-6));
    EXPECT_TRUE(all_close(
        run_op("LeakyReLU", {{"act_type", "selu"}}, {x})[0],
        map_ref(x, [](double v) { return kLambda * (v > 0 ? v : kAlpha * (std::exp(v) - 1)); }),
        1e-5, 1e-6));
    EXPECT_TRUE(
        all_close(run_op("LeakyReLU", {{"act_type", "gelu"}}, {x})[0],
                  map_ref(x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }),
                  1e-5, 1e-6));
  }
}

TEST(ActivationLeakyReLU, PReLUUsesPerChannelOrSharedGamma) {
  HostTensor x = HostTensor::random(Shape{2, 3, 2}, 6, -3, 3, kF64);
  HostTensor g = HostTensor::of(Shape{3}, {0.1, 0.2, 0.3}, kF64);
  auto y = run_op("LeakyReLU", {{"act_type", "prelu"}}, {x, g});
  HostTensor ref = x;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t s = 0; s < 2; ++s) {
        const double v = x.at({n, c, s});
        ref.at({n, c, s}) = v > 0 ? v : g.data[c] * v;
      }
  EXPECT_TRUE(all_close(y[0], ref, 1e-12, 1e-12));
  auto y1 =
      run_op("LeakyReLU", {{"act_type", "prelu"}}, {x, HostTensor::of(Shape{1}, {0.4}, kF64)});
  EXPECT_TRUE(
      all_close(y1[0], map_ref(x, [](double v) { return v > 0 ? v : 0.4 * v; }), 1e-12, 1e-12));
  auto [in, out] = infer_shapes("LeakyReLU", {{"act_type", "prelu"}}, {Shape{4, 7, 2}, Shape()});
  EXPECT_EQ(in[1], (Shape{7}));
  EXPECT_THROW(infer_shapes("LeakyReLU", {{"act_type", "prelu"}}, {Shape{4, 7, 2}, Shape{6}}),
               ShapeError);
}

TEST(ActivationLeakyReLU, GradientsMatchFiniteDifferences) {
  HostTensor x = away_from_zero(Shape{2, 3, 2}, 7, kF64);
  for (const char* t : {"leaky", "elu", "selu", "gelu"}) {
    EXPECT_TRUE(check_gradient("LeakyReLU", {{"act_type", t}, {"slope", "0.3"}}, {x}, tight()))
        << t;
  }
  EXPECT_TRUE(check_gradient("LeakyReLU", {{"act_type", "prelu"}},
                             {x, HostTensor::of(Shape{3}, {0.1, 0.5, 0.9}, kF64)}, tight()));
  EXPECT_TRUE(check_gradient("LeakyReLU", {{"act_type", "prelu"}},
                             {x, HostTensor::of(Shape{1}, {0.2}, kF64)}, tight()));
  GradCheckOptions train = tight();
  train.is_train = true;  // fixed seed: the same random slopes on every evaluation
  EXPECT_TRUE(check_gradient("LeakyReLU", {{"act_type", "rrelu"}}, {x}, train));
  EXPECT_TRUE(check_gradient("LeakyReLU", {{"act_type", "rrelu"}}, {x}, tight()));
}

TEST(ActivationLeakyReLU, RReLUDrawsSlopesInTrainingAndUsesTheMidpointAtInference) {
  HostTensor x = HostTensor::random(Shape{20, 10}, 8, -3, 3);
  const AttrMap attrs{{"act_type", "rrelu"}, {"lower_bound", "0.1"}, {"upper_bound", "0.3"}};
  auto inf = run_op("LeakyReLU", attrs, {x});
  ASSERT_EQ(inf.size(), 2u);
  EXPECT_TRUE(
      all_close(inf[0], map_ref(x, [](double v) { return v > 0 ? v : 0.2 * v; }), 1e-6, 1e-7));
  RunOptions opt;
  opt.is_train = true;
  opt.seed = 3;
  auto tr = run_op("LeakyReLU", attrs, {x}, opt);
  double lo = 1, hi = 0;
  for (int64_t k = 0; k < x.size(); ++k) {
    const double s = tr[1].data[k];
    lo = std::min(lo, s);
    hi = std::max(hi, s);
    EXPECT_NEAR(tr[0].data[k], x.data[k] > 0 ? x.data[k] : s * x.data[k], 1e-6);
  }
  EXPECT_GE(lo, 0.1 - 1e-7);
  EXPECT_LE(hi, 0.3 + 1e-7);
  EXPECT_LT(lo, 0.12);
  EXPECT_GT(hi, 0.28);
  auto again = run_op("LeakyReLU", attrs, {x}, opt);
  EXPECT_TRUE(all_close(again[1], tr[1], 0, 0));
  const Op& op = get_op("LeakyReLU");
  EXPECT_EQ(op.num_outputs(op.make_attrs(attrs)), 2);
  EXPECT_EQ(op.num_visible_outputs(op.make_attrs(attrs)), 1);
  EXPECT_EQ(op.num_inputs(op.make_attrs({{"act_type", "prelu"}})), 2);
}

TEST(ActivationLeakyReLU, InvalidAttributesAreValueErrors) {
  EXPECT_THROW(get_op("LeakyReLU").make_attrs({{"act_type", "swish"}}), ValueError);
  EXPECT_THROW(
      get_op("LeakyReLU")
          .make_attrs({{"act_type", "rrelu"}, {"lower_bound", "0.5"}, {"upper_bound", "0.1"}}),
      ValueError);
  EXPECT_THROW(get_op("LeakyReLU").make_attrs({{"slope", "abc"}}), ValueError);
}

}  // namespace
}  // namespace weft
