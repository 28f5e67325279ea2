// BatchNorm, LayerNorm, LRN, Dropout and CTCLoss: forward values against naive references in the
// test, gradients against finite differences, shape inference and parameter validation.
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
using testing::op_gradient;
using testing::run_op;
using testing::run_op_mutating;
using testing::RunOptions;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

// ---- BatchNorm ----------------------------------------------------------------------------------

struct BnInputs {
  std::vector<HostTensor> t;  // data, gamma, beta, moving_mean, moving_var
};

BnInputs bn_inputs(Shape data, int64_t c, DType type, uint64_t seed = 1) {
  BnInputs b;
  b.t.push_back(HostTensor::random(data, seed, -2.0, 3.0, type));
  b.t.push_back(HostTensor::random(Shape{c}, seed + 1, 0.5, 1.5, type));
  b.t.push_back(HostTensor::random(Shape{c}, seed + 2, -0.5, 0.5, type));
  b.t.push_back(HostTensor::random(Shape{c}, seed + 3, -0.3, 0.3, type));
  b.t.push_back(HostTensor::random(Shape{c}, seed + 4, 0.5, 2.0, type));
  return b;
}

// Naive BatchNorm along `axis` with given per-channel mean/var.
HostTensor bn_ref(const HostTensor& x, int axis, const std::vector<double>& mean,
                  const std::vector<double>& var, const HostTensor& gamma, const HostTensor& beta,
                  double eps, bool fix_gamma) {
  HostTensor y = x;
  int64_t inner = 1;
  for (int d = axis + 1; d < x.shape.ndim(); ++d) inner *= x.shape[d];
  const int64_t C = x.shape[axis];
  for (int64_t k = 0; k < x.size(); ++k) {
    const int64_t c = (k / inner) % C;
    const double g = fix_gamma ? 1.0 : gamma.data[c];
    y.data[k] = (x.data[k] - mean[c]) / std::sqrt(var[c] + eps) * g + beta.data[c];
  }
  return y;
}

void batch_stats(const HostTensor& x, int axis, std::vector<double>& mean,
                 std::vector<double>& var) {
  int64_t inner = 1;
  for (int d = axis + 1; d < x.shape.ndim(); ++d) inner *= x.shape[d];
  const int64_t C = x.shape[axis];
  const double m = static_cast<double>(x.size() / C);
  mean.assign(C, 0.0);
  var.assign(C, 0.0);
  for (int64_t k = 0; k < x.size(); ++k) mean[(k / inner) % C] += x.data[k] / m;
  for (int64_t k = 0; k < x.size(); ++k) {
    const double d = x.data[k] - mean[(k / inner) % C];
    var[(k / inner) % C] += d * d / m;
  }
}

TEST(NormBatchNorm, InferenceUsesMovingStatistics) {
  for (DType type : {kF32, kF64}) {
    auto b = bn_inputs(Shape{2, 3, 2, 2}, 3, type);
    auto out = run_op("BatchNorm", {{"fix_gamma", "False"}, {"eps", "0.001"}}, b.t);
    ASSERT_EQ(out.size(), 3u);
    std::vector<double> mm(b.t[3].data), mv(b.t[4].data);
    EXPECT_TRUE(
        all_close(out[0], bn_ref(b.t[0], 1, mm, mv, b.t[1], b.t[2], 1e-3, false), 1e-5, 1e-5))
        << dtype_name(type);
  }
}

TEST(NormBatchNorm, FixGammaIgnoresGamma) {
  for (DType type : {kF32, kF64}) {
    auto b = bn_inputs(Shape{3, 4, 5}, 4, type);
    auto out = run_op("BatchNorm", {}, b.t);  // fix_gamma defaults to True
    std::vector<double> mm(b.t[3].data), mv(b.t[4].data);
    EXPECT_TRUE(
        all_close(out[0], bn_ref(b.t[0], 1, mm, mv, b.t[1], b.t[2], 1e-3, true), 1e-5, 1e-5));
  }
}

TEST(NormBatchNorm, TrainingUsesBatchStatisticsAndUpdatesMovingStatistics) {
  for (DType type : {kF32, kF64}) {
    auto b = bn_inputs(Shape{4, 3, 2, 3}, 3, type, 11);
    const auto before = b.t;
    RunOptions opt;
    opt.is_train = true;
    auto out = run_op_mutating(
        "BatchNorm", {{"fix_gamma", "False"}, {"momentum", "0.8"}, {"eps", "1e-5"}}, b.t, opt);
    std::vector<double> mean, var;
    batch_stats(before[0], 1, mean, var);
    EXPECT_TRUE(all_close(
        out[0], bn_ref(before[0], 1, mean, var, before[1], before[2], 1e-5, false), 1e-4, 1e-4));
    EXPECT_TRUE(all_close(out[1], HostTensor::of(Shape{3}, mean, type), 1e-5, 1e-5));
    EXPECT_TRUE(
        all_close(out[2], HostTensor::of(Shape{3}, var, type), 1e-5, 1e-5));  // biased variance
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(b.t[3].data[c], before[3].data[c] * 0.8 + mean[c] * 0.2, 1e-5);
      EXPECT_NEAR(b.t[4].data[c], before[4].data[c] * 0.8 + var[c] * 0.2, 1e-5);
    }
  }
}

TEST(NormBatchNorm, UseGlobalStatsInTrainingKeepsMovingStatistics) {
  auto b = bn_inputs(Shape{2, 3, 4}, 3, kF32);
  const auto before = b.t;
  RunOptions opt;
  opt.is_train = true;
  auto out = run_op_mutating("BatchNorm", {{"use_global_stats", "True"}, {"fix_gamma", "False"}},
                             b.t, opt);
  std::vector<double> mm(before[3].data), mv(before[4].data);
  EXPECT_TRUE(all_close(out[0], bn_ref(before[0], 1, mm, mv, before[1], before[2], 1e-3, false),
                        1e-5, 1e-5));
  EXPECT_TRUE(all_close(b.t[3], before[3], 0, 0));
  EXPECT_TRUE(all_close(b.t[4], before[4], 0, 0));
}

TEST(NormBatchNorm, NegativeAxisNormalizesTheLastAxis) {
  for (DType type : {kF32, kF64}) {
    auto b = bn_inputs(Shape{5, 2, 3}, 3, type, 5);
    const auto before = b.t;
    RunOptions opt;
    opt.is_train = true;
    auto out = run_op_mutating("BatchNorm", {{"axis", "-1"}, {"fix_gamma", "False"}}, b.t, opt);
    std::vector<double> mean, var;
    batch_stats(before[0], 2, mean, var);
    EXPECT_TRUE(all_close(
        out[0], bn_ref(before[0], 2, mean, var, before[1], before[2], 1e-3, false), 1e-4, 1e-4));
    auto inf = run_op("BatchNorm", {{"axis", "-1"}, {"fix_gamma", "False"}}, before);
    std::vector<double> mm(before[3].data), mv(before[4].data);
    EXPECT_TRUE(all_close(inf[0], bn_ref(before[0], 2, mm, mv, before[1], before[2], 1e-3, false),
                          1e-5, 1e-5));
  }
}

TEST(NormBatchNorm, GradientInTrainingModeMatchesFiniteDifferences) {
  auto b = bn_inputs(Shape{3, 2, 2, 2}, 2, kF64, 21);
  GradCheckOptions o;
  o.is_train = true;
  o.eps = 1e-5;
  o.rtol = 1e-4;
  o.atol = 1e-6;
  o.check_inputs = {0, 1, 2};
  o.no_grad_inputs = {3, 4};
  EXPECT_TRUE(check_gradient("BatchNorm", {{"fix_gamma", "False"}}, b.t, o));
  EXPECT_TRUE(check_gradient("BatchNorm", {{"fix_gamma", "False"}, {"axis", "-1"}}, b.t, o));
}

TEST(NormBatchNorm, GradientWithMovingStatisticsMatchesFiniteDifferences) {
  auto b = bn_inputs(Shape{2, 3, 2}, 3, kF64, 31);
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-5;
  o.atol = 1e-7;
  o.check_inputs = {0, 1, 2};
  o.no_grad_inputs = {3, 4};
  EXPECT_TRUE(check_gradient("BatchNorm", {{"fix_gamma", "False"}}, b.t, o));  // inference
  o.is_train = true;
  EXPECT_TRUE(
      check_gradient("BatchNorm", {{"fix_gamma", "False"}, {"use_global_stats", "True"}}, b.t, o));
}

TEST(NormBatchNorm, FixGammaGivesZeroGammaGradient) {
  auto b = bn_inputs(Shape{3, 2, 2}, 2, kF64, 41);
  RunOptions opt;
  opt.is_train = true;
  auto g =
      op_gradient("BatchNorm", {}, b.t, {HostTensor::random(Shape{3, 2, 2}, 9, -1, 1, kF64)}, opt);
  ASSERT_FALSE(g[1].empty());
  for (double v : g[1].data) EXPECT_EQ(v, 0.0);
  EXPECT_TRUE(g[3].empty());
  EXPECT_TRUE(g[4].empty());
  GradCheckOptions o;
  o.is_train = true;
  o.eps = 1e-5;
  o.rtol = 1e-4;
  o.atol = 1e-6;
  o.check_inputs = {0, 2};
  EXPECT_TRUE(check_gradient("BatchNorm", {}, b.t, o));
}

TEST(NormBatchNorm, OutputMeanVarMakesThreeVisibleOutputs) {
  const Op& op = get_op("BatchNorm");
  EXPECT_EQ(op.num_outputs(op.make_attrs({})), 3);
  EXPECT_EQ(op.num_visible_outputs(op.make_attrs({})), 1);
  EXPECT_EQ(op.num_visible_outputs(op.make_attrs({{"output_mean_var", "True"}})), 3);
  EXPECT_EQ(op.attr<FMutateInputs>()(op.make_attrs({})), (std::vector<int>{3, 4}));
}

TEST(NormBatchNorm, InfersDataFromOutputAndChannelVectors) {
  auto [in, out] = infer_shapes("BatchNorm", {}, {Shape(), Shape(), Shape(), Shape(), Shape()},
                                {Shape{2, 5, 3}});
  EXPECT_EQ(in[0], (Shape{2, 5, 3}));
  for (int i = 1; i < 5; ++i) EXPECT_EQ(in[i], (Shape{5}));
  EXPECT_EQ(out[1], (Shape{5}));
  EXPECT_EQ(out[2], (Shape{5}));
  // A partially known data shape takes C from gamma.
  auto [in2, out2] =
      infer_shapes("BatchNorm", {}, {Shape{4, -1}, Shape{7}, Shape(), Shape(), Shape()});
  EXPECT_EQ(in2[0], (Shape{4, 7}));
  EXPECT_EQ(out2[0], (Shape{4, 7}));
}

TEST(NormBatchNorm, MismatchedGammaIsAShapeError) {
  EXPECT_THROW(infer_shapes("BatchNorm", {}, {Shape{2, 3, 4}, Shape{4}, Shape(), Shape(), Shape()}),
               ShapeError);
  EXPECT_THROW(infer_shapes("BatchNorm", {}, {Shape{2, 3}, Shape{3}, Shape{3}, Shape{3}, Shape{2}}),
               ShapeError);
}

TEST(NormBatchNorm, InvalidAttributesAreValueErrors) {
  const Op& op = get_op("BatchNorm");
  EXPECT_THROW(op.make_attrs({{"eps", "-1"}}), ValueError);
  EXPECT_THROW(op.make_attrs({{"fix_gamma", "maybe"}}), ValueError);
  EXPECT_THROW(op.make_attrs({{"momentun", "0.9"}}), ValueError);
  EXPECT_THROW(
      infer_shapes("BatchNorm", {{"axis", "3"}}, {Shape{2, 3}, Shape(), Shape(), Shape(), Shape()}),
      ValueError);
  EXPECT_NO_THROW(op.make_attrs(
      {{"cudnn_off", "True"}, {"min_calib_range", "None"}, {"max_calib_range", "2.5"}}));
}

// ---- LayerNorm ----------------------------------------------------------------------------------

// Naive LayerNorm of x along `axis`; returns {out, mean, std}.
std::vector<HostTensor> ln_ref(const HostTensor& x, int axis, const HostTensor& g,
                               const HostTensor& b, double eps) {
  int64_t inner = 1, outer = 1;
  for (int d = axis + 1; d < x.shape.ndim(); ++d) inner *= x.shape[d];
  for (int d = 0; d < axis; ++d) outer *= x.shape[d];
  const int64_t D = x.shape[axis];
  Shape red = x.shape;
  red[axis] = 1;
  HostTensor y = x, mean = HostTensor::filled(red, 0, x.dtype),
             sd = HostTensor::filled(red, 0, x.dtype);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = 0, v = 0;
      for (int64_t d = 0; d < D; ++d) m += x.data[(o * D + d) * inner + i] / D;
      for (int64_t d = 0; d < D; ++d) v += std::pow(x.data[(o * D + d) * inner + i] - m, 2) / D;
      const double s = std::sqrt(v + eps);
      for (int64_t d = 0; d < D; ++d) {
        const int64_t k = (o * D + d) * inner + i;
        y.data[k] = (x.data[k] - m) / s * g.data[d] + b.data[d];
      }
      mean.data[o * inner + i] = m;
      sd.data[o * inner + i] = s;
    }
  return {y, mean, sd};
}

TEST(NormLayerNorm, ForwardMatchesNaiveFormulaOnLastAndMiddleAxes) {
  for (DType type : {kF32, kF64}) {
    HostTensor x = HostTensor::random(Shape{2, 3, 4}, 3, -2, 2, type);
    HostTensor g4 = HostTensor::random(Shape{4}, 4, 0.5, 1.5, type),
               b4 = HostTensor::random(Shape{4}, 5, -1, 1, type);
    auto out = run_op("LayerNorm", {}, {x, g4, b4});
    auto ref = ln_ref(x, 2, g4, b4, 1e-5);
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(all_close(out[k], ref[k], 1e-4, 1e-5)) << k;
    HostTensor g3 = HostTensor::random(Shape{3}, 6, 0.5, 1.5, type),
               b3 = HostTensor::random(Shape{3}, 7, -1, 1, type);
    out = run_op("LayerNorm", {{"axis", "1"}, {"eps", "0.01"}}, {x, g3, b3});
    ref = ln_ref(x, 1, g3, b3, 0.01);
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(all_close(out[k], ref[k], 1e-4, 1e-5)) << k;
  }
}

TEST(NormLayerNorm, GradientMatchesFiniteDifferences) {
  HostTensor x = HostTensor::random(Shape{2, 3, 4}, 13, -2, 2, kF64);
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-5;
  o.atol = 1e-7;
  EXPECT_TRUE(check_gradient("LayerNorm", {},
                             {x, HostTensor::random(Shape{4}, 14, 0.5, 1.5, kF64),
                              HostTensor::random(Shape{4}, 15, -1, 1, kF64)},
                             o));
  EXPECT_TRUE(check_gradient("LayerNorm", {{"axis", "1"}},
                             {x, HostTensor::random(Shape{3}, 16, 0.5, 1.5, kF64),
                              HostTensor::random(Shape{3}, 17, -1, 1, kF64)},
                             o));
}

TEST(NormLayerNorm, ShapeInferenceFillsGammaAndStatistics) {
  auto [in, out] =
      infer_shapes("LayerNorm", {{"output_mean_var", "True"}}, {Shape{2, 5, 6}, Shape(), Shape()});
  EXPECT_EQ(in[1], (Shape{6}));
  EXPECT_EQ(in[2], (Shape{6}));
  EXPECT_EQ(out[1], (Shape{2, 5, 1}));
  EXPECT_EQ(out[2], (Shape{2, 5, 1}));
  auto [in2, out2] = infer_shapes("LayerNorm", {}, {Shape(), Shape(), Shape()}, {Shape{3, 4}});
  EXPECT_EQ(in2[0], (Shape{3, 4}));
  EXPECT_EQ(in2[1], (Shape{4}));
  EXPECT_THROW(infer_shapes("LayerNorm", {}, {Shape{2, 5}, Shape{4}, Shape()}), ShapeError);
  EXPECT_THROW(get_op("LayerNorm").make_attrs({{"eps", "-0.1"}}), ValueError);
  const Op& op = get_op("LayerNorm");
  EXPECT_EQ(op.num_visible_outputs(op.make_attrs({})), 1);
  EXPECT_EQ(op.num_visible_outputs(op.make_attrs({{"output_mean_var", "1"}})), 3);
}

// ---- LRN ----------------------------------------------------------------------------------------

HostTensor lrn_ref(const HostTensor& x, int n, double alpha, double beta, double k) {
  const int64_t N = x.shape[0], C = x.shape[1];
  const int64_t inner = x.size() / (N * C);
  HostTensor y = x;
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        double sq = 0;
        for (int64_t j = c - n / 2; j <= c + n / 2; ++j)
          if (j >= 0 && j < C) sq += std::pow(x.data[(b * C + j) * inner + i], 2);
        const int64_t idx = (b * C + c) * inner + i;
        y.data[idx] = x.data[idx] / std::pow(k + alpha / n * sq, beta);
      }
  return y;
}

TEST(NormLRN, ForwardMatchesFormula) {
  for (DType type : {kF32, kF64}) {
    HostTensor x = HostTensor::random(Shape{2, 6, 3, 2}, 8, -3, 3, type);
    auto out =
        run_op("LRN", {{"nsize", "3"}, {"alpha", "0.5"}, {"beta", "0.75"}, {"knorm", "1.5"}}, {x});
    EXPECT_TRUE(all_close(out[0], lrn_ref(x, 3, 0.5, 0.75, 1.5), 1e-5, 1e-6)) << dtype_name(type);
    out = run_op("LRN", {{"nsize", "5"}}, {x});
    EXPECT_TRUE(all_close(out[0], lrn_ref(x, 5, 1e-4, 0.75, 2.0), 1e-5, 1e-6)) << dtype_name(type);
  }
}

TEST(NormLRN, GradientMatchesFiniteDifferences) {
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-5;
  o.atol = 1e-7;
  EXPECT_TRUE(check_gradient("LRN",
                             {{"nsize", "3"}, {"alpha", "0.9"}, {"beta", "0.6"}, {"knorm", "1"}},
                             {HostTensor::random(Shape{2, 5, 2, 2}, 18, -2, 2, kF64)}, o));
}

TEST(NormLRN, InvalidAttributesAndShapes) {
  EXPECT_THROW(get_op("LRN").make_attrs({}), ValueError);                // nsize is required
  EXPECT_THROW(get_op("LRN").make_attrs({{"nsize", "4"}}), ValueError);  // must be odd
  EXPECT_THROW(infer_shapes("LRN", {{"nsize", "3"}}, {Shape{5}}), ShapeError);
  auto [in, out] = infer_shapes("LRN", {{"nsize", "3"}}, {Shape()}, {Shape{1, 2, 3, 3}});
  EXPECT_EQ(in[0], (Shape{1, 2, 3, 3}));
  EXPECT_EQ(out[1], (Shape{1, 2, 3, 3}));
}

// ---- Dropout ------------------------------------------------------------------------------------

TEST(DropoutForward, DropsAboutPAndScalesKeptValues) {
  HostTensor x = HostTensor::random(Shape{100, 100}, 2, 0.5, 1.5);
  RunOptions opt;
  opt.is_train = true;
  opt.seed = 42;
  auto out = run_op("Dropout", {{"p", "0.3"}}, {x}, opt);
  int64_t dropped = 0;
  for (int64_t k = 0; k < x.size(); ++k) {
    if (out[0].data[k] == 0) {
      ++dropped;
      EXPECT_EQ(out[1].data[k], 0.0);
    } else {
      EXPECT_NEAR(out[0].data[k], x.data[k] / 0.7, 1e-5);
      EXPECT_NEAR(out[1].data[k], 1 / 0.7, 1e-6);
    }
  }
  EXPECT_NEAR(static_cast<double>(dropped) / x.size(), 0.3, 0.03);
}

TEST(DropoutForward, SameSeedGivesSameMask) {
  HostTensor x = HostTensor::random(Shape{50, 20}, 3);
  RunOptions a, b, c;
  a.is_train = b.is_train = c.is_train = true;
  a.seed = b.seed = 7;
  c.seed = 8;
  auto ra = run_op("Dropout", {}, {x}, a), rb = run_op("Dropout", {}, {x}, b),
       rc = run_op("Dropout", {}, {x}, c);
  EXPECT_TRUE(all_close(ra[1], rb[1], 0, 0));
  EXPECT_FALSE(all_close(ra[1], rc[1], 0, 0));
}

TEST(DropoutForward, InferenceIsIdentityUnlessModeAlways) {
  HostTensor x = HostTensor::random(Shape{10, 10}, 4);
  auto out = run_op("Dropout", {{"p", "0.9"}}, {x});
  EXPECT_TRUE(all_close(out[0], x, 0, 0));
  EXPECT_TRUE(all_close(out[1], HostTensor::filled(Shape{10, 10}, 1.0), 0, 0));
  out = run_op("Dropout", {{"p", "0.5"}, {"mode", "always"}}, {x});
  int64_t dropped = 0;
  for (double v : out[0].data) dropped += v == 0;
  EXPECT_GT(dropped, 20);
  EXPECT_LT(dropped, 80);
  const Op& op = get_op("Dropout");
  EXPECT_EQ(op.attr<FInplaceIdentity>()(op.make_attrs({})), std::vector<bool>{true});
  EXPECT_EQ(op.num_visible_outputs(op.make_attrs({})), 1);
}

TEST(DropoutForward, AxesShareTheMask) {
  HostTensor x = HostTensor::random(Shape{4, 5, 6}, 5, 0.5, 1.5);
  RunOptions opt;
  opt.is_train = true;
  auto out = run_op("Dropout", {{"axes", "(1,)"}}, {x}, opt);
  ASSERT_EQ(out[1].shape, (Shape{4, 1, 6}));
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t k = 0; k < 6; ++k) {
      const double m = out[1].at({n, 0, k});
      for (int64_t c = 0; c < 5; ++c) EXPECT_NEAR(out[0].at({n, c, k}), x.at({n, c, k}) * m, 1e-5);
    }
}

TEST(DropoutForward, WorksWhenTheMaskOutputIsNotRequested) {
  HostTensor x = HostTensor::random(Shape{8, 5, 6}, 9, 0.5, 1.5);
  RunOptions opt;
  opt.is_train = true;
  opt.req = {OpReq::kWrite, OpReq::kNull};
  auto out = run_op("Dropout", {{"p", "0.5"}}, {x}, opt);
  int64_t dropped = 0;
  for (int64_t k = 0; k < x.size(); ++k) {
    if (out[0].data[k] == 0) {
      ++dropped;
    } else {
      EXPECT_NEAR(out[0].data[k], 2 * x.data[k], 1e-5);
    }
  }
  EXPECT_GT(dropped, x.size() / 4);
  EXPECT_LT(dropped, 3 * x.size() / 4);
  auto shared = run_op("Dropout", {{"p", "0.5"}, {"axes", "(1,)"}}, {x}, opt);
  for (int64_t n = 0; n < 8; ++n)
    for (int64_t k = 0; k < 6; ++k) {
      const bool kept = shared[0].at({n, 0, k}) != 0;
      for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(shared[0].at({n, c, k}) != 0, kept);
    }
}

TEST(DropoutGradient, IsOutGradTimesMask) {
  HostTensor x = HostTensor::random(Shape{6, 5}, 6, -1, 1, kF64);
  GradCheckOptions o;
  o.is_train = true;
  o.eps = 1e-5;
  o.rtol = 1e-6;
  o.atol = 1e-8;
  EXPECT_TRUE(check_gradient("Dropout", {{"p", "0.4"}}, {x}, o));
  EXPECT_TRUE(check_gradient("Dropout", {{"p", "0.4"}, {"axes", "(0,)"}}, {x}, o));
  o.is_train = false;
  EXPECT_TRUE(check_gradient("Dropout", {{"p", "0.4"}}, {x}, o));
}

TEST(DropoutParams, InvalidValuesAreRejected) {
  EXPECT_THROW(get_op("Dropout").make_attrs({{"p", "1.5"}}), ValueError);
  EXPECT_THROW(get_op("Dropout").make_attrs({{"mode", "sometimes"}}), ValueError);
  EXPECT_THROW(infer_shapes("Dropout", {{"axes", "(3,)"}}, {Shape{2, 3}}), ValueError);
  auto [in, out] = infer_shapes("Dropout", {}, {Shape()}, {Shape{2, 3}});
  EXPECT_EQ(in[0], (Shape{2, 3}));
  EXPECT_THROW(infer_shapes("Dropout", {}, {Shape{2, 3}}, {Shape{3, 2}}), ShapeError);
}

// ---- CTC loss -----------------------------------------------------------------------------------

// -log p(label | x) by enumerating every alignment of length T (blank = `blank`).
double ctc_brute_force(const HostTensor& x, int64_t n, int64_t T, const std::vector<int64_t>& label,
                       int64_t blank) {
  const int64_t N = x.shape[1], A = x.shape[2];
  std::vector<std::vector<double>> prob(T, std::vector<double>(A));
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0;
    for (int64_t a = 0; a < A; ++a) sum += std::exp(x.data[(t * N + n) * A + a]);
    for (int64_t a = 0; a < A; ++a) prob[t][a] = std::exp(x.data[(t * N + n) * A + a]) / sum;
  }
  double total = 0;
  std::vector<int64_t> path(T, 0);
  int64_t count = 1;
  for (int64_t t = 0; t < T; ++t) count *= A;
  for (int64_t id = 0; id < count; ++id) {
    int64_t rem = id;
    for (int64_t t = 0; t < T; ++t) {
      path[t] = rem % A;
      rem /= A;
    }
    std::vector<int64_t> collapsed;
    for (int64_t t = 0; t < T; ++t) {
      if (path[t] == blank) continue;
      if (t > 0 && path[t] == path[t - 1]) continue;
      collapsed.push_back(path[t]);
    }
    if (collapsed != label) continue;
    double p = 1;
    for (int64_t t = 0; t < T; ++t) p *= prob[t][path[t]];
    total += p;
  }
  return -std::log(total);
}

TEST(CtcLoss, MatchesBruteForceOverAlignments) {
  HostTensor x = HostTensor::random(Shape{4, 3, 3}, 77, -1, 1, kF64);
  HostTensor label = HostTensor::of(Shape{3, 2}, {1, 1, 2, 0, 2, 1}, kF64);
  auto out = run_op("_contrib_CTCLoss", {}, {x, label});
  ASSERT_EQ(out[0].shape, (Shape{3}));
  ASSERT_EQ(out[1].shape, (Shape{4, 3, 3}));
  EXPECT_NEAR(out[0].data[0], ctc_brute_force(x, 0, 4, {1, 1}, 0), 1e-9);
  EXPECT_NEAR(out[0].data[1], ctc_brute_force(x, 1, 4, {2}, 0), 1e-9);
  EXPECT_NEAR(out[0].data[2], ctc_brute_force(x, 2, 4, {2, 1}, 0), 1e-9);
}

TEST(CtcLoss, BlankLastAndLengthsMatchBruteForce) {
  HostTensor x = HostTensor::random(Shape{4, 2, 3}, 78, -1, 1, kF64);
  // blank = channel 2, padding -1.
  HostTensor label = HostTensor::of(Shape{2, 2}, {0, 1, 1, -1}, kF64);
  auto out = run_op("CTCLoss", {{"blank_label", "last"}}, {x, label});
  EXPECT_NEAR(out[0].data[0], ctc_brute_force(x, 0, 4, {0, 1}, 2), 1e-9);
  EXPECT_NEAR(out[0].data[1], ctc_brute_force(x, 1, 4, {1}, 2), 1e-9);
  // data and label lengths.
  HostTensor label2 = HostTensor::of(Shape{2, 2}, {1, 2, 2, 2}, kF64);
  HostTensor dlen = HostTensor::of(Shape{2}, {4, 3}, kF64),
             llen = HostTensor::of(Shape{2}, {2, 1}, kF64);
  out = run_op("ctc_loss", {{"use_data_lengths", "True"}, {"use_label_lengths", "True"}},
               {x, label2, dlen, llen});
  EXPECT_NEAR(out[0].data[0], ctc_brute_force(x, 0, 4, {1, 2}, 0), 1e-9);
  EXPECT_NEAR(out[0].data[1], ctc_brute_force(x, 1, 3, {2}, 0), 1e-9);
  for (int64_t a = 0; a < 3; ++a) EXPECT_EQ(out[1].at({3, 1, a}), 0.0);  // past the data length
}

TEST(CtcLoss, GradientMatchesFiniteDifferences) {
  HostTensor x = HostTensor::random(Shape{5, 2, 4}, 79, -1, 1, kF64);
  HostTensor label = HostTensor::of(Shape{2, 3}, {1, 3, 3, 2, 0, 0}, kF64);
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-5;
  o.atol = 1e-7;
  o.check_inputs = {0};
  o.no_grad_inputs = {1};
  EXPECT_TRUE(check_gradient("_contrib_CTCLoss", {}, {x, label}, o));
  HostTensor dlen = HostTensor::of(Shape{2}, {5, 3}, kF64);
  EXPECT_TRUE(
      check_gradient("_contrib_CTCLoss", {{"use_data_lengths", "True"}}, {x, label, dlen}, o));
}

TEST(CtcLoss, ShapesAliasesAndErrors) {
  auto [in, out] = infer_shapes("CTCLoss", {}, {Shape{7, 3, 5}, Shape{3, 4}});
  EXPECT_EQ(out[0], (Shape{3}));
  EXPECT_EQ(out[1], (Shape{7, 3, 5}));
  auto [in2, out2] = infer_shapes("CTCLoss", {}, {Shape(), Shape{3, 4}}, {Shape(), Shape{7, 3, 5}});
  EXPECT_EQ(in2[0], (Shape{7, 3, 5}));
  EXPECT_THROW(infer_shapes("CTCLoss", {}, {Shape{7, 3, 5}, Shape{2, 4}}), ShapeError);
  EXPECT_THROW(infer_shapes("CTCLoss", {}, {Shape{7, 3}, Shape{3, 4}}), ShapeError);
  EXPECT_THROW(get_op("CTCLoss").make_attrs({{"blank_label", "middle"}}), ValueError);
  EXPECT_EQ(&get_op("CTCLoss"), &get_op("_contrib_CTCLoss"));
  EXPECT_EQ(&get_op("_contrib_ctc_loss"), &get_op("_contrib_CTCLoss"));
  EXPECT_EQ(&get_op("ctc_loss"), &get_op("_contrib_CTCLoss"));
  const Op& op = get_op("CTCLoss");
  EXPECT_EQ(op.num_inputs(op.make_attrs({{"use_label_lengths", "1"}})), 3);
  // A label value outside the alphabet is a clear error.
  EXPECT_THROW(run_op("CTCLoss", {},
                      {HostTensor::random(Shape{3, 1, 3}, 1), HostTensor::of(Shape{1, 1}, {5})}),
               ValueError);
}

TEST(CtcLoss, InfeasibleSequenceHasInfiniteLossAndNoGradient) {
  // Label [1, 1] needs at least 3 frames; with 2 it is impossible.
  HostTensor x = HostTensor::random(Shape{2, 1, 3}, 80, -1, 1, kF64);
  auto out = run_op("CTCLoss", {}, {x, HostTensor::of(Shape{1, 2}, {1, 1}, kF64)});
  EXPECT_TRUE(std::isinf(out[0].data[0]));
  for (double v : out[1].data) EXPECT_EQ(v, 0.0);
}

// ---- threads and accumulation
// ---------------------------------------------------------------------

TEST(NormKernels, MultiThreadedRunsMatchSingleThreaded) {
  auto b = bn_inputs(Shape{4, 3, 8, 8}, 3, kF32, 51);
  HostTensor x = HostTensor::random(Shape{6, 5, 7}, 52, -2, 2, kF64);
  struct Case {
    std::string op;
    AttrMap attrs;
    std::vector<HostTensor> in;
    bool train;
  };
  std::vector<Case> cases{
      {"BatchNorm", {{"fix_gamma", "False"}}, b.t, true},
      {"BatchNorm",
       {{"fix_gamma", "False"}, {"axis", "2"}},
       bn_inputs(Shape{4, 3, 8, 8}, 8, kF64).t,
       true},
      {"LayerNorm",
       {{"axis", "1"}},
       {x, HostTensor::random(Shape{5}, 53, 0, 1, kF64),
        HostTensor::random(Shape{5}, 54, 0, 1, kF64)},
       false},
      {"LRN", {{"nsize", "3"}}, {x}, false},
      {"softmax", {{"axis", "1"}}, {x}, false},
  };
  for (const auto& c : cases) {
    RunOptions one, many;
    one.is_train = many.is_train = c.train;
    many.num_threads = 4;
    auto a = run_op(c.op, c.attrs, c.in, one);
    auto m = run_op(c.op, c.attrs, c.in, many);
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_TRUE(all_close(m[k], a[k], 1e-6, 1e-6)) << c.op << " output " << k;
  }
}

TEST(NormKernels, BackwardKernelsHonourAddRequests) {
  HostTensor x = HostTensor::random(Shape{3, 4, 2}, 61, -2, 2, kF64);
  HostTensor dy = HostTensor::random(Shape{3, 4, 2}, 62, -1, 1, kF64);
  HostTensor g = HostTensor::random(Shape{4}, 63, 0.5, 1.5, kF64);
  HostTensor stat = HostTensor::random(Shape{4}, 64, 0.5, 1.5, kF64);
  HostTensor red = HostTensor::random(Shape{3, 1, 2}, 65, 0.5, 1.5, kF64);
  struct Case {
    std::string op;
    AttrMap attrs;
    std::vector<HostTensor> in;
  };
  std::vector<Case> cases{
      {"_backward_BatchNorm", {{"fix_gamma", "False"}}, {dy, x, g, stat, stat, stat, stat}},
      {"_backward_LayerNorm", {{"axis", "1"}}, {dy, x, g, red, red}},
      {"_backward_LRN",
       {{"nsize", "3"}},
       {dy, x, HostTensor::random(Shape{3, 4, 2}, 66, 1, 2, kF64)}},
      {"_backward_Dropout", {}, {dy, HostTensor::random(Shape{3, 4, 2}, 67, 0, 2, kF64)}},
      {"_backward_softmax", {}, {dy, x, HostTensor::random(Shape{3, 4, 2}, 68, 0, 1, kF64)}},
  };
  for (const auto& c : cases) {
    auto w = run_op(c.op, c.attrs, c.in);
    RunOptions add;
    for (const auto& t : w) {
      add.req.push_back(OpReq::kAdd);
      add.initial_outputs.push_back(HostTensor::random(t.shape, 70, -1, 1, t.dtype));
    }
    auto a = run_op(c.op, c.attrs, c.in, add);
    for (size_t k = 0; k < w.size(); ++k) {
      HostTensor expect = w[k];
      for (int64_t j = 0; j < expect.size(); ++j) expect.data[j] += add.initial_outputs[k].data[j];
      EXPECT_TRUE(all_close(a[k], expect, 1e-12, 1e-12)) << c.op << " output " << k;
    }
  }
}

TEST(NormKernels, UnknownRankInputsLeaveShapesUnknownWithoutThrowing) {
  const std::vector<std::pair<std::string, AttrMap>> cases = {
      {"BatchNorm", {}},
      {"_backward_BatchNorm", {}},
      {"LayerNorm", {}},
      {"_backward_LayerNorm", {}},
      {"LRN", {{"nsize", "3"}}},
      {"_backward_LRN", {{"nsize", "3"}}},
      {"softmax", {{"use_length", "True"}}},
      {"_backward_log_softmax", {}},
      {"SoftmaxActivation", {{"mode", "channel"}}},
      {"SoftmaxOutput", {{"multi_output", "True"}}},
      {"_backward_SoftmaxOutput", {}},
      {"LinearRegressionOutput", {}},
      {"Activation", {{"act_type", "relu"}}},
      {"LeakyReLU", {{"act_type", "prelu"}}},
      {"_backward_LeakyReLU", {{"act_type", "rrelu"}}},
      {"Dropout", {{"axes", "(1,)"}}},
      {"_backward_Dropout", {}},
      {"_contrib_CTCLoss", {{"use_data_lengths", "True"}}},
      {"_backward_CTCLoss", {}},
  };
  for (const auto& [name, attrs] : cases) {
    OpAttrs a = get_op(name).make_attrs(attrs, "n");
    std::vector<Shape> in(a.op->num_inputs(a)), out(a.op->num_outputs(a));
    bool known = true;
    EXPECT_NO_THROW(known = a.op->infer_shape(a, in, out)) << name;
    EXPECT_FALSE(known) << name;
    EXPECT_FALSE(out.at(0).known()) << name;
  }
}

}  // namespace
}  // namespace weft
