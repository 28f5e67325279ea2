// softmax, log_softmax, SoftmaxActivation, SoftmaxOutput and the regression heads: forward values
// and gradients against naive references in the test, shape/type inference and validation.
#include <gtest/gtest.h>

#include <cmath>
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
using testing::infer_types;
using testing::op_gradient;
using testing::run_op;

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

// Naive softmax of x / temp along `axis`, rows masked past lengths (when given) to 0.
HostTensor softmax_ref(const HostTensor& x, int axis, double temp = 1.0, bool log = false,
                       const std::vector<double>& lengths = {}) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int d = axis + 1; d < x.shape.ndim(); ++d) inner *= x.shape[d];
  const int64_t D = x.shape[axis];
  HostTensor y = x;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t len = lengths.empty() ? D : static_cast<int64_t>(lengths[o * inner + i]);
      double sum = 0;
      for (int64_t d = 0; d < len; ++d) sum += std::exp(x.data[(o * D + d) * inner + i] / temp);
      for (int64_t d = 0; d < D; ++d) {
        const int64_t k = (o * D + d) * inner + i;
        if (d >= len) {
          y.data[k] = 0;
        } else {
          y.data[k] = log ? x.data[k] / temp - std::log(sum) : std::exp(x.data[k] / temp) / sum;
        }
      }
    }
  return y;
}

TEST(SoftmaxForward, MatchesNaiveSoftmaxOnAnyAxis) {
  for (DType type : {kF32, kF64}) {
    HostTensor x = HostTensor::random(Shape{2, 3, 4}, 1, -3, 3, type);
    EXPECT_TRUE(all_close(run_op("softmax", {}, {x})[0], softmax_ref(x, 2), 1e-5, 1e-6));
    EXPECT_TRUE(
        all_close(run_op("softmax", {{"axis", "1"}}, {x})[0], softmax_ref(x, 1), 1e-5, 1e-6));
    EXPECT_TRUE(
        all_close(run_op("softmax", {{"axis", "0"}}, {x})[0], softmax_ref(x, 0), 1e-5, 1e-6));
    EXPECT_TRUE(
        all_close(run_op("log_softmax", {}, {x})[0], softmax_ref(x, 2, 1, true), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(run_op("log_softmax", {{"axis", "-2"}}, {x})[0],
                          softmax_ref(x, 1, 1, true), 1e-5, 1e-5));
  }
}

TEST(SoftmaxForward, TemperatureDividesTheLogits) {
  HostTensor x = HostTensor::random(Shape{3, 5}, 2, -3, 3);
  EXPECT_TRUE(all_close(run_op("softmax", {{"temperature", "2.5"}}, {x})[0], softmax_ref(x, 1, 2.5),
                        1e-5, 1e-6));
  EXPECT_TRUE(all_close(run_op("log_softmax", {{"temperature", "0.5"}}, {x})[0],
                        softmax_ref(x, 1, 0.5, true), 1e-5, 1e-5));
  EXPECT_TRUE(all_close(run_op("softmax", {{"temperature", "None"}}, {x})[0], softmax_ref(x, 1),
                        1e-5, 1e-6));
}

TEST(SoftmaxForward, LengthMasksPositionsPastEachRowsLength) {
  HostTensor x = HostTensor::random(Shape{2, 5, 3}, 3, -2, 2, kF64);
  HostTensor len = HostTensor::of(Shape{2, 3}, {5, 2, 1, 3, 4, 0}, DType::kInt32);
  auto y = run_op("softmax", {{"axis", "1"}, {"use_length", "True"}}, {x, len});
  EXPECT_TRUE(all_close(y[0], softmax_ref(x, 1, 1, false, len.data), 1e-12, 1e-12));
  auto ly = run_op("log_softmax", {{"axis", "1"}, {"use_length", "True"}}, {x, len});
  EXPECT_TRUE(all_close(ly[0], softmax_ref(x, 1, 1, true, len.data), 1e-12, 1e-12));
}

TEST(SoftmaxForward, DtypeParameterSetsTheOutputType) {
  HostTensor x = HostTensor::random(Shape{2, 4}, 4);
  auto y = run_op("softmax", {{"dtype", "float64"}}, {x});
  EXPECT_EQ(y[0].dtype, kF64);
  EXPECT_TRUE(all_close(y[0], softmax_ref(x, 1), 1e-6, 1e-7));
  auto [in, out] = infer_types("softmax", {{"dtype", "float64"}}, {kF32});
  EXPECT_EQ(out[0], kF64);
  // The gradient comes back in the data's type.
  auto g = op_gradient("softmax", {{"dtype", "float64"}}, {x},
                       {HostTensor::random(Shape{2, 4}, 5, -1, 1, kF64)});
  EXPECT_EQ(g[0].dtype, kF32);
}

TEST(SoftmaxGradient, MatchesFiniteDifferences) {
  HostTensor x = HostTensor::random(Shape{2, 3, 4}, 6, -2, 2, kF64);
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-5;
  o.atol = 1e-8;
  EXPECT_TRUE(check_gradient("softmax", {}, {x}, o));
  EXPECT_TRUE(check_gradient("softmax", {{"axis", "1"}, {"temperature", "1.7"}}, {x}, o));
  EXPECT_TRUE(check_gradient("log_softmax", {{"axis", "0"}}, {x}, o));
  EXPECT_TRUE(check_gradient("log_softmax", {{"temperature", "0.6"}}, {x}, o));
  HostTensor len = HostTensor::of(Shape{2, 4}, {3, 1, 2, 3, 2, 2, 0, 1}, DType::kInt32);
  o.no_grad_inputs = {1};
  EXPECT_TRUE(check_gradient("softmax", {{"axis", "1"}, {"use_length", "True"}}, {x, len}, o));
  EXPECT_TRUE(check_gradient("log_softmax", {{"axis", "1"}, {"use_length", "True"}}, {x, len}, o));
}

TEST(SoftmaxShapes, InferenceAndErrors) {
  auto [in, out] = infer_shapes("softmax", {{"axis", "1"}, {"use_length", "True"}},
                                {Shape(), Shape()}, {Shape{2, 3, 4}});
  EXPECT_EQ(in[0], (Shape{2, 3, 4}));
  EXPECT_EQ(in[1], (Shape{2, 4}));
  EXPECT_THROW(infer_shapes("softmax", {{"use_length", "True"}}, {Shape{2, 3}, Shape{3}}),
               ShapeError);
  EXPECT_THROW(infer_shapes("softmax", {}, {Shape{2, 3}}, {Shape{2, 4}}), ShapeError);
  EXPECT_THROW(infer_shapes("softmax", {{"axis", "2"}}, {Shape{2, 3}}), ValueError);
  EXPECT_THROW(get_op("softmax").make_attrs({{"temperature", "0"}}), ValueError);
  EXPECT_THROW(get_op("log_softmax").make_attrs({{"dtype", "int8"}}), ValueError);
  const Op& op = get_op("softmax");
  EXPECT_EQ(op.num_inputs(op.make_attrs({{"use_length", "True"}})), 2);
  EXPECT_EQ(op.num_inputs(op.make_attrs({})), 1);
}

// ---- SoftmaxActivation
// ---------------------------------------------------------------------------

TEST(SoftmaxActivation, InstanceAndChannelModes) {
  for (DType type : {kF32, kF64}) {
    HostTensor x = HostTensor::random(Shape{2, 3, 2, 2}, 7, -2, 2, type);
    EXPECT_TRUE(all_close(run_op("SoftmaxActivation", {}, {x})[0], softmax_ref(x, 3), 1e-5, 1e-6));
    EXPECT_TRUE(all_close(run_op("SoftmaxActivation", {{"mode", "channel"}}, {x})[0],
                          softmax_ref(x, 1), 1e-5, 1e-6));
  }
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-5;
  o.atol = 1e-8;
  HostTensor x = HostTensor::random(Shape{2, 3, 2}, 8, -2, 2, kF64);
  EXPECT_TRUE(check_gradient("SoftmaxActivation", {}, {x}, o));
  EXPECT_TRUE(check_gradient("SoftmaxActivation", {{"mode", "channel"}}, {x}, o));
  EXPECT_THROW(infer_shapes("SoftmaxActivation", {{"mode", "channel"}}, {Shape{2, 3}}), ShapeError);
  EXPECT_THROW(get_op("SoftmaxActivation").make_attrs({{"mode", "batch"}}), ValueError);
}

// ---- SoftmaxOutput
// -------------------------------------------------------------------------------

TEST(SoftmaxOutputForward, AxisDependsOnTheFlags) {
  HostTensor x = HostTensor::random(Shape{2, 3, 2}, 9, -2, 2, kF64);
  // default: every non-batch element jointly
  HostTensor flat = x;
  flat.shape = Shape{2, 6};
  HostTensor ref = softmax_ref(flat, 1);
  ref.shape = x.shape;
  EXPECT_TRUE(all_close(run_op("SoftmaxOutput", {}, {x, HostTensor::filled(Shape{2}, 0, kF64)})[0],
                        ref, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(run_op("SoftmaxOutput", {{"preserve_shape", "True"}},
                               {x, HostTensor::filled(Shape{2, 3}, 0, kF64)})[0],
                        softmax_ref(x, 2), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(run_op("Softmax", {{"multi_output", "True"}},
                               {x, HostTensor::filled(Shape{2, 2}, 0, kF64)})[0],
                        softmax_ref(x, 1), 1e-12, 1e-12));
}

TEST(SoftmaxOutputShapes, LabelShapeFollowsTheMode) {
  auto [a, ao] = infer_shapes("SoftmaxOutput", {}, {Shape{4, 3, 2}, Shape()});
  EXPECT_EQ(a[1], (Shape{4}));
  auto [b, bo] =
      infer_shapes("SoftmaxOutput", {{"preserve_shape", "True"}}, {Shape{4, 3, 5}, Shape()});
  EXPECT_EQ(b[1], (Shape{4, 3}));
  auto [c, co] =
      infer_shapes("SoftmaxOutput", {{"multi_output", "True"}}, {Shape{4, 3, 5, 6}, Shape()});
  EXPECT_EQ(c[1], (Shape{4, 5, 6}));
  auto [d, dout] = infer_shapes("SoftmaxOutput", {}, {Shape(), Shape()}, {Shape{4, 7}});
  EXPECT_EQ(d[0], (Shape{4, 7}));
  EXPECT_EQ(d[1], (Shape{4}));
  auto [e, eo] =
      infer_shapes("SoftmaxOutput", {}, {Shape{4, 7}, Shape{4, 7}});  // probability labels
  EXPECT_EQ(e[1], (Shape{4, 7}));
  EXPECT_THROW(infer_shapes("SoftmaxOutput", {}, {Shape{4, 7}, Shape{5}}), ShapeError);
  EXPECT_THROW(get_op("SoftmaxOutput").make_attrs({{"normalization", "mean"}}), ValueError);
  EXPECT_THROW(get_op("SoftmaxOutput").make_attrs({{"smooth_alpha", "2"}}), ValueError);
}

// Naive SoftmaxOutput gradient for 2-D data and class labels.
HostTensor softmax_output_grad_ref(const HostTensor& x, const std::vector<double>& label,
                                   double scale, double norm, double alpha, bool use_ignore,
                                   double ignore, const HostTensor* head = nullptr) {
  HostTensor p = softmax_ref(x, 1);
  const int64_t N = x.shape[0], K = x.shape[1];
  HostTensor g = p;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t idx = n * K + k;
      if (use_ignore && label[n] == ignore) {
        g.data[idx] = 0;
        continue;
      }
      const double target = k == label[n] ? 1 - alpha : alpha / (K - 1);
      g.data[idx] = (p.data[idx] - target) * scale / norm * (head ? head->data[idx] : 1.0);
    }
  return g;
}

TEST(SoftmaxOutputGradient, NormalizationIgnoreSmoothingAndOutGrad) {
  HostTensor x = HostTensor::random(Shape{4, 5}, 10, -2, 2, kF64);
  std::vector<double> lab{0, 2, 1, 4};
  HostTensor label = HostTensor::of(Shape{4}, lab, kF64);
  HostTensor head = HostTensor::random(Shape{4, 5}, 11, -1, 1, kF64);
  auto grad = [&](const AttrMap& attrs) {
    auto g = op_gradient("SoftmaxOutput", attrs, {x, label}, {head});
    EXPECT_TRUE(g[1].empty());  // no gradient for the label
    return g[0];
  };
  EXPECT_TRUE(
      all_close(grad({}), softmax_output_grad_ref(x, lab, 1, 1, 0, false, -1), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(grad({{"normalization", "batch"}, {"grad_scale", "3"}}),
                        softmax_output_grad_ref(x, lab, 3, 4, 0, false, -1), 1e-12, 1e-12));
  // valid: label 2 ignored in one row, so the gradient is divided by 3.
  EXPECT_TRUE(
      all_close(grad({{"normalization", "valid"}, {"use_ignore", "True"}, {"ignore_label", "2"}}),
                softmax_output_grad_ref(x, lab, 1, 3, 0, true, 2), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(grad({{"smooth_alpha", "0.2"}}),
                        softmax_output_grad_ref(x, lab, 1, 1, 0.2, false, -1), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(grad({{"out_grad", "True"}}),
                        softmax_output_grad_ref(x, lab, 1, 1, 0, false, -1, &head), 1e-12, 1e-12));
}

TEST(SoftmaxOutputGradient, MultiOutputAndProbabilityLabels) {
  HostTensor x = HostTensor::random(Shape{2, 3, 2}, 12, -2, 2, kF64);
  HostTensor label = HostTensor::of(Shape{2, 2}, {0, 2, 1, 1}, kF64);
  auto g = op_gradient("SoftmaxOutput", {{"multi_output", "True"}, {"normalization", "batch"}},
                       {x, label}, {});
  HostTensor p = softmax_ref(x, 1);
  HostTensor ref = p;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t s = 0; s < 2; ++s)
        ref.at({n, c, s}) = (p.at({n, c, s}) - (c == label.at({n, s}) ? 1 : 0)) / 4;
  EXPECT_TRUE(all_close(g[0], ref, 1e-12, 1e-12));

  HostTensor x2 = HostTensor::random(Shape{3, 4}, 13, -2, 2, kF64);
  HostTensor prob = HostTensor::random(Shape{3, 4}, 14, 0, 1, kF64);
  auto g2 = op_gradient("SoftmaxOutput", {{"grad_scale", "0.5"}}, {x2, prob}, {});
  HostTensor ref2 = softmax_ref(x2, 1);
  for (int64_t k = 0; k < 12; ++k) ref2.data[k] = (ref2.data[k] - prob.data[k]) * 0.5;
  EXPECT_TRUE(all_close(g2[0], ref2, 1e-12, 1e-12));
}

TEST(SoftmaxOutputGradient, OutOfRangeLabelIsAnError) {
  HostTensor x = HostTensor::random(Shape{2, 3}, 15, -1, 1, kF64);
  EXPECT_THROW(op_gradient("SoftmaxOutput", {}, {x, HostTensor::of(Shape{2}, {0, 3}, kF64)}, {}),
               ValueError);
}

// ---- regression heads
// ----------------------------------------------------------------------------

TEST(SoftmaxRegressionOutputs, ForwardAndGradientFollowTheirFormulas) {
  HostTensor x = HostTensor::random(Shape{4, 3}, 16, -2, 2, kF64);
  HostTensor label = HostTensor::random(Shape{4, 3}, 17, -1, 1, kF64);
  EXPECT_TRUE(all_close(run_op("LinearRegressionOutput", {}, {x, label})[0], x, 0, 0));
  EXPECT_TRUE(all_close(run_op("MAERegressionOutput", {}, {x, label})[0], x, 0, 0));
  HostTensor sig = x;
  for (auto& v : sig.data) v = 1 / (1 + std::exp(-v));
  EXPECT_TRUE(all_close(run_op("LogisticRegressionOutput", {}, {x, label})[0], sig, 1e-12, 1e-12));

  auto lin = op_gradient("LinearRegressionOutput", {{"grad_scale", "2"}}, {x, label}, {});
  auto logi = op_gradient("LogisticRegressionOutput", {}, {x, label}, {});
  auto mae = op_gradient("MAERegressionOutput", {}, {x, label}, {});
  for (int64_t k = 0; k < 12; ++k) {
    EXPECT_NEAR(lin[0].data[k], 2 * (x.data[k] - label.data[k]) / 3, 1e-12);
    EXPECT_NEAR(logi[0].data[k], (sig.data[k] - label.data[k]) / 3, 1e-12);
    EXPECT_NEAR(mae[0].data[k], (x.data[k] > label.data[k] ? 1.0 : -1.0) / 3, 1e-12);
  }
  EXPECT_TRUE(lin[1].empty());
  auto [in, out] = infer_shapes("LinearRegressionOutput", {}, {Shape{5, 1}, Shape()});
  EXPECT_EQ(in[1], (Shape{5}));
  auto [in2, out2] = infer_shapes("LogisticRegressionOutput", {}, {Shape{5, 2}, Shape()});
  EXPECT_EQ(in2[1], (Shape{5, 2}));
  EXPECT_THROW(infer_shapes("MAERegressionOutput", {}, {Shape{5, 2}, Shape{5, 3}}), ShapeError);
  EXPECT_THROW(get_op("LinearRegressionOutput").make_attrs({{"scale", "2"}}), ValueError);
}

}  // namespace
}  // namespace weft
