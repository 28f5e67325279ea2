// Tests of FullyConnected, dot and batch_dot: forward against naive loops, gradients against
// finite differences, shape inference both ways, and attribute errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

/// Naive y[m, h] = Σ_k x[m, k] · w[h, k] (+ b[h]) with x viewed as (rows, k).
std::vector<double> naive_fc(const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>* b, int64_t rows, int64_t k, int64_t h) {
  std::vector<double> y(static_cast<size_t>(rows * h));
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < h; ++j) {
      double acc = b ? (*b)[j] : 0.0;
      for (int64_t i = 0; i < k; ++i) acc += x[m * k + i] * w[j * k + i];
      y[m * h + j] = acc;
    }
  return y;
}

GradCheckOptions tight() {
  GradCheckOptions o;
  o.eps = 1e-5;
  o.rtol = 1e-6;
  o.atol = 1e-8;
  return o;
}

// ---- FullyConnected ----------------------------------------------------------------------------

TEST(FullyConnectedForward, FlattenViewsDataAsBatchByFeatures) {
  for (DType dt : {kF32, kF64}) {
    HostTensor x = HostTensor::random(Shape{3, 2, 2, 3}, 1, -1, 1, dt);
    HostTensor w = HostTensor::random(Shape{5, 12}, 2, -1, 1, dt);
    HostTensor b = HostTensor::random(Shape{5}, 3, -1, 1, dt);
    auto out = run_op("FullyConnected", {{"num_hidden", "5"}}, {x, w, b});
    HostTensor expected =
        HostTensor::of(Shape{3, 5}, naive_fc(x.data, w.data, &b.data, 3, 12, 5), dt);
    EXPECT_TRUE(all_close(out[0], expected, 1e-5, 1e-5));
  }
}

TEST(FullyConnectedForward, FlattenFalseAppliesToLastAxis) {
  HostTensor x = HostTensor::random(Shape{2, 3, 4}, 4);
  HostTensor w = HostTensor::random(Shape{6, 4}, 5);
  auto out = run_op("FullyConnected",
                    {{"num_hidden", "6"}, {"flatten", "False"}, {"no_bias", "True"}}, {x, w});
  ASSERT_EQ(out[0].shape, (Shape{2, 3, 6}));
  EXPECT_TRUE(all_close(out[0],
                        HostTensor::of(Shape{2, 3, 6}, naive_fc(x.data, w.data, nullptr, 6, 4, 6)),
                        1e-5, 1e-5));
}

TEST(FullyConnectedForward, AddRequestAccumulates) {
  HostTensor x = HostTensor::random(Shape{4, 3}, 6), w = HostTensor::random(Shape{2, 3}, 7),
             b = HostTensor::random(Shape{2}, 8);
  auto y = naive_fc(x.data, w.data, &b.data, 4, 3, 2);
  for (auto& v : y) v += 0.5;
  RunOptions opt;
  opt.req = {OpReq::kAdd};
  opt.initial_outputs = {HostTensor::filled(Shape{4, 2}, 0.5)};
  auto out = run_op("FullyConnected", {{"num_hidden", "2"}}, {x, w, b}, opt);
  EXPECT_TRUE(all_close(out[0], HostTensor::of(Shape{4, 2}, y), 1e-5, 1e-5));
}

TEST(FullyConnectedGradient, MatchesFiniteDifferences) {
  HostTensor x = HostTensor::random(Shape{3, 2, 3}, 9, -1, 1, kF64);
  HostTensor w = HostTensor::random(Shape{4, 6}, 10, -1, 1, kF64);
  HostTensor b = HostTensor::random(Shape{4}, 11, -1, 1, kF64);
  EXPECT_TRUE(check_gradient("FullyConnected", {{"num_hidden", "4"}}, {x, w, b}, tight()));
  HostTensor w3 = HostTensor::random(Shape{2, 3}, 12, -1, 1, kF64);
  EXPECT_TRUE(check_gradient("FullyConnected",
                             {{"num_hidden", "2"}, {"flatten", "False"}, {"no_bias", "True"}},
                             {x, w3}, tight()));
  // float32 runs the oneDNN inner-product backward primitives.
  GradCheckOptions loose;
  loose.eps = 1e-2;
  EXPECT_TRUE(
      check_gradient("FullyConnected", {{"num_hidden", "4"}},
                     {HostTensor::random(Shape{3, 6}, 13), HostTensor::random(Shape{4, 6}, 14),
                      HostTensor::random(Shape{4}, 15)},
                     loose));
}

TEST(FullyConnectedShape, InfersWeightBiasOutputAndDataBackward) {
  auto [in, out] =
      infer_shapes("FullyConnected", {{"num_hidden", "7"}}, {Shape{5, 2, 3}, Shape(), Shape()});
  EXPECT_EQ(in[1], (Shape{7, 6}));
  EXPECT_EQ(in[2], (Shape{7}));
  EXPECT_EQ(out[0], (Shape{5, 7}));
  auto [in2, out2] = infer_shapes("FullyConnected", {{"num_hidden", "7"}, {"flatten", "False"}},
                                  {Shape(), Shape{7, 4}, Shape()}, {Shape{2, 3, 7}});
  EXPECT_EQ(in2[0], (Shape{2, 3, 4}));
  auto [in3, out3] = infer_shapes("FullyConnected", {{"num_hidden", "7"}},
                                  {Shape{-1, 4}, Shape(), Shape()}, {Shape{9, 7}});
  EXPECT_EQ(in3[0], (Shape{9, 4}));
}

TEST(FullyConnectedShape, MismatchIsShapeErrorAndBadAttrsValueError) {
  EXPECT_THROW(
      infer_shapes("FullyConnected", {{"num_hidden", "3"}}, {Shape{2, 4}, Shape{3, 5}, Shape()}),
      ShapeError);
  EXPECT_THROW(infer_shapes("FullyConnected", {{"num_hidden", "3"}},
                            {Shape{2, 4}, Shape(), Shape()}, {Shape{2, 4}}),
               ShapeError);
  const auto& op = get_op("FullyConnected");
  EXPECT_THROW(op.make_attrs({}), ValueError);
  EXPECT_THROW(op.make_attrs({{"num_hidden", "0"}}), ValueError);
  EXPECT_THROW(op.make_attrs({{"num_hidden", "2"}, {"flatten", "maybe"}}), ValueError);
  EXPECT_EQ(op.num_inputs(op.make_attrs({{"num_hidden", "2"}, {"no_bias", "True"}})), 2);
}

// ---- dot ---------------------------------------------------------------------------------------

/// Naive 2-D product of op(a) (m×k) and op(b) (k×n), with a stored (ra×ca) and b (rb×cb).
std::vector<double> naive_mm(const std::vector<double>& a, int64_t ra, int64_t ca, bool ta,
                             const std::vector<double>& b, int64_t rb, int64_t cb, bool tb) {
  const int64_t m = ta ? ca : ra, k = ta ? ra : ca, n = tb ? rb : cb;
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * ca + i] : a[i * ca + p];
        const double bv = tb ? b[j * cb + p] : b[p * cb + j];
        acc += av * bv;
      }
      c[i * n + j] = acc;
    }
  return c;
}

AttrMap dot_attrs(bool ta, bool tb) {
  return {{"transpose_a", ta ? "True" : "False"}, {"transpose_b", tb ? "True" : "False"}};
}

TEST(DotForward, AllTransposeCombinationsMatchNaiveProduct) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Shape as = ta ? Shape{4, 3} : Shape{3, 4};
      const Shape bs = tb ? Shape{5, 4} : Shape{4, 5};
      HostTensor a = HostTensor::random(as, 1), b = HostTensor::random(bs, 2);
      auto out = run_op("dot", dot_attrs(ta, tb), {a, b});
      auto expected = naive_mm(a.data, as[0], as[1], ta, b.data, bs[0], bs[1], tb);
      EXPECT_TRUE(all_close(out[0], HostTensor::of(Shape{3, 5}, expected), 1e-5, 1e-5)) << ta << tb;
    }
}

TEST(DotForward, VectorsAndNdFollowMxnetRule) {
  HostTensor u = HostTensor::of(Shape{3}, {1, 2, 3}), v = HostTensor::of(Shape{3}, {4, 5, 6});
  auto inner = run_op("dot", {}, {u, v});
  EXPECT_TRUE(all_close(inner[0], HostTensor::of(Shape{1}, {32})));
  // (2,3,4) · (4,2,5) → (2,3,2,5): contract lhs's last axis with rhs's first.
  HostTensor a = HostTensor::random(Shape{2, 3, 4}, 3, -1, 1, kF64),
             b = HostTensor::random(Shape{4, 2, 5}, 4, -1, 1, kF64);
  auto nd = run_op("dot", {}, {a, b});
  ASSERT_EQ(nd[0].shape, (Shape{2, 3, 2, 5}));
  EXPECT_TRUE(all_close(
      nd[0],
      HostTensor::of(Shape{2, 3, 2, 5}, naive_mm(a.data, 6, 4, false, b.data, 4, 10, false), kF64),
      1e-12, 1e-12));
  // transpose_a on N-D: lhs (4,2,3) contracts its first axis; transpose_b: rhs (2,5,4) contracts
  // its last.
  HostTensor at = HostTensor::random(Shape{4, 2, 3}, 5, -1, 1, kF64),
             bt = HostTensor::random(Shape{2, 5, 4}, 6, -1, 1, kF64);
  auto ndt = run_op("dot", dot_attrs(true, true), {at, bt});
  ASSERT_EQ(ndt[0].shape, (Shape{2, 3, 2, 5}));
  EXPECT_TRUE(all_close(
      ndt[0],
      HostTensor::of(Shape{2, 3, 2, 5}, naive_mm(at.data, 4, 6, true, bt.data, 10, 4, true), kF64),
      1e-12, 1e-12));
  // Vector times matrix and matrix times vector.
  HostTensor m = HostTensor::random(Shape{3, 2}, 7);
  EXPECT_EQ(run_op("dot", {}, {u, m})[0].shape, (Shape{2}));
  EXPECT_EQ(run_op("dot", dot_attrs(true, false), {m, HostTensor::random(Shape{3}, 8)})[0].shape,
            (Shape{2}));
}

TEST(DotForward, LargeFloat32ProductMatchesFloat64) {
  HostTensor a = HostTensor::random(Shape{64, 96}, 9), b = HostTensor::random(Shape{96, 80}, 10);
  RunOptions opt;
  opt.num_threads = 2;
  auto out = run_op("dot", {}, {a, b}, opt);
  EXPECT_TRUE(all_close(
      out[0], HostTensor::of(Shape{64, 80}, naive_mm(a.data, 64, 96, false, b.data, 96, 80, false)),
      1e-4, 1e-4));
}

TEST(DotGradient, MatchesFiniteDifferencesForTransposesAndNd) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      HostTensor a = HostTensor::random(ta ? Shape{4, 3} : Shape{3, 4}, 11, -1, 1, kF64);
      HostTensor b = HostTensor::random(tb ? Shape{2, 4} : Shape{4, 2}, 12, -1, 1, kF64);
      EXPECT_TRUE(check_gradient("dot", dot_attrs(ta, tb), {a, b}, tight())) << ta << tb;
    }
  EXPECT_TRUE(check_gradient("dot", {},
                             {HostTensor::random(Shape{2, 2, 3}, 13, -1, 1, kF64),
                              HostTensor::random(Shape{3, 2, 2}, 14, -1, 1, kF64)},
                             tight()));
  EXPECT_TRUE(check_gradient("dot", dot_attrs(true, true),
                             {HostTensor::random(Shape{3, 2, 2}, 15, -1, 1, kF64),
                              HostTensor::random(Shape{2, 2, 3}, 16, -1, 1, kF64)},
                             tight()));
  EXPECT_TRUE(check_gradient("dot", {},
                             {HostTensor::random(Shape{3}, 17, -1, 1, kF64),
                              HostTensor::random(Shape{3}, 18, -1, 1, kF64)},
                             tight()));
  GradCheckOptions loose;
  loose.eps = 1e-2;
  EXPECT_TRUE(check_gradient(
      "dot", dot_attrs(false, true),
      {HostTensor::random(Shape{3, 4}, 19), HostTensor::random(Shape{5, 4}, 20)}, loose));
}

TEST(DotShape, InfersOutputAndFillsInputsFromEachOther) {
  auto [in, out] = infer_shapes("dot", dot_attrs(false, true), {Shape{2, 3, 4}, Shape{6, 4}});
  EXPECT_EQ(out[0], (Shape{2, 3, 6}));
  auto [in2, out2] = infer_shapes("dot", {}, {Shape{-1, 4}, Shape{-1, 5}}, {Shape{3, 5}});
  EXPECT_EQ(in2[0], (Shape{3, 4}));
  EXPECT_EQ(in2[1], (Shape{4, 5}));
}

TEST(DotShape, MismatchIsShapeErrorAndTransposedVectorsValueError) {
  EXPECT_THROW(infer_shapes("dot", {}, {Shape{2, 3}, Shape{4, 5}}), ShapeError);
  EXPECT_THROW(infer_shapes("dot", dot_attrs(true, false), {Shape{2, 3}, Shape{3, 5}}), ShapeError);
  EXPECT_THROW(infer_shapes("dot", dot_attrs(true, false), {Shape{3}, Shape{3}}), ValueError);
  EXPECT_THROW(get_op("dot").make_attrs({{"transpose_a", "yes"}}), ValueError);
  EXPECT_THROW(get_op("dot").make_attrs({{"forward_stype", "dense"}}), ValueError);
  EXPECT_NO_THROW(get_op("dot").make_attrs({{"forward_stype", "csr"}}));
}

// ---- batch_dot ---------------------------------------------------------------------------------

TEST(DotBatchForward, EveryTransposeMatchesPerBatchProduct) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Shape as = ta ? Shape{3, 4, 2} : Shape{3, 2, 4};
      const Shape bs = tb ? Shape{3, 5, 4} : Shape{3, 4, 5};
      HostTensor a = HostTensor::random(as, 21), b = HostTensor::random(bs, 22);
      RunOptions opt;
      opt.num_threads = 2;
      auto out = run_op("batch_dot", dot_attrs(ta, tb), {a, b}, opt);
      ASSERT_EQ(out[0].shape, (Shape{3, 2, 5}));
      std::vector<double> expected;
      for (int64_t i = 0; i < 3; ++i) {
        std::vector<double> ai(a.data.begin() + i * 8, a.data.begin() + (i + 1) * 8);
        std::vector<double> bi(b.data.begin() + i * 20, b.data.begin() + (i + 1) * 20);
        auto ci = naive_mm(ai, as[1], as[2], ta, bi, bs[1], bs[2], tb);
        expected.insert(expected.end(), ci.begin(), ci.end());
      }
      EXPECT_TRUE(all_close(out[0], HostTensor::of(Shape{3, 2, 5}, expected), 1e-5, 1e-5))
          << ta << tb;
    }
}

TEST(DotBatchForward, ManyBatchDimsAreSupported) {
  HostTensor a = HostTensor::random(Shape{2, 3, 2, 4}, 23, -1, 1, kF64),
             b = HostTensor::random(Shape{2, 3, 4, 3}, 24, -1, 1, kF64);
  auto out = run_op("batch_dot", {}, {a, b});
  ASSERT_EQ(out[0].shape, (Shape{2, 3, 2, 3}));
  std::vector<double> expected;
  for (int64_t i = 0; i < 6; ++i) {
    std::vector<double> ai(a.data.begin() + i * 8, a.data.begin() + (i + 1) * 8);
    std::vector<double> bi(b.data.begin() + i * 12, b.data.begin() + (i + 1) * 12);
    auto ci = naive_mm(ai, 2, 4, false, bi, 4, 3, false);
    expected.insert(expected.end(), ci.begin(), ci.end());
  }
  EXPECT_TRUE(all_close(out[0], HostTensor::of(Shape{2, 3, 2, 3}, expected, kF64), 1e-12, 1e-12));
}

TEST(DotBatchGradient, MatchesFiniteDifferences) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      HostTensor a = HostTensor::random(ta ? Shape{2, 3, 2} : Shape{2, 2, 3}, 25, -1, 1, kF64);
      HostTensor b = HostTensor::random(tb ? Shape{2, 4, 3} : Shape{2, 3, 4}, 26, -1, 1, kF64);
      EXPECT_TRUE(check_gradient("batch_dot", dot_attrs(ta, tb), {a, b}, tight())) << ta << tb;
    }
}

TEST(DotBatchShape, InfersBothWaysAndRejectsMismatches) {
  auto [in, out] =
      infer_shapes("batch_dot", dot_attrs(true, false), {Shape{4, 3, 2}, Shape{4, 3, 7}});
  EXPECT_EQ(out[0], (Shape{4, 2, 7}));
  auto [in2, out2] = infer_shapes("batch_dot", {}, {Shape(), Shape{4, 3, 7}}, {Shape{4, 2, 7}});
  EXPECT_EQ(in2[0], (Shape{4, 2, 3}));
  EXPECT_THROW(infer_shapes("batch_dot", {}, {Shape{4, 2, 3}, Shape{5, 3, 7}}), ShapeError);
  EXPECT_THROW(infer_shapes("batch_dot", {}, {Shape{4, 2, 3}, Shape{4, 4, 7}}), ShapeError);
  EXPECT_THROW(infer_shapes("batch_dot", {}, {Shape{2, 3}, Shape{3, 7}}), ShapeError);
}

}  // namespace
}  // namespace weft::testing
