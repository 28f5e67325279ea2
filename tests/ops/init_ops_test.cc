// Tests of the creation ops: _zeros/_ones/_full values and dtypes, _arange semantics (stop
// omitted, negative step, repeat, infer_range), and the random samplers' reproducibility and
// moments.
#include <cmath>
#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

TEST(InitFill, ZerosOnesAndFullFillEveryElement) {
  auto z = run_op("_zeros", {{"shape", "(2, 3)"}}, {});
  ASSERT_EQ(z.size(), 1u);
  EXPECT_EQ(z[0].shape, (Shape{2, 3}));
  EXPECT_EQ(z[0].dtype, DType::kFloat32);
  for (double v : z[0].data) EXPECT_EQ(v, 0.0);
  auto o = run_op("ones", {{"shape", "(4,)"}, {"dtype", "int32"}}, {});
  EXPECT_EQ(o[0].dtype, DType::kInt32);
  EXPECT_EQ(o[0].data, (std::vector<double>{1, 1, 1, 1}));
  auto f =
      run_op("full",
             {{"shape", "(2, 2)"}, {"value", "-2.5"}, {"dtype", "float64"}, {"ctx", "cpu(0)"}}, {});
  EXPECT_EQ(f[0].dtype, DType::kFloat64);
  EXPECT_EQ(f[0].data, (std::vector<double>(4, -2.5)));
  auto fi = run_op("_full", {{"shape", "(3,)"}, {"value", "7"}, {"dtype", "uint8"}}, {});
  EXPECT_EQ(fi[0].data, (std::vector<double>(3, 7)));
}

TEST(InitFill, EmptyShapeIsAScalarUnlessTheOutputIsKnown) {
  auto s = run_op("_ones", {{"shape", "()"}}, {});
  EXPECT_EQ(s[0].shape.ndim(), 0);
  EXPECT_EQ(s[0].data, (std::vector<double>{1}));
  auto [in, out] = infer_shapes("_zeros", {}, {}, {Shape{4, 5}});
  EXPECT_EQ(out[0], (Shape{4, 5}));
}

TEST(InitFill, ZeroDimensionIsInferredFromTheOutput) {
  // Legacy MXNet: zeros(shape=(0, 3)) leaves the first dimension to inference.
  auto [in, out] = infer_shapes("_zeros", {{"shape", "(0, 3)"}}, {}, {Shape{5, 3}});
  EXPECT_EQ(out[0], (Shape{5, 3}));
  auto [in2, out2] = infer_shapes("_zeros", {{"shape", "(0, 3)"}}, {});
  EXPECT_EQ(out2[0], (Shape{-1, 3}));
  EXPECT_THROW(infer_shapes("_zeros", {{"shape", "(0, 3)"}}, {}, {Shape{5, 4}}), ShapeError);
  EXPECT_THROW(infer_shapes("_ones", {{"shape", "(2, 3)"}}, {}, {Shape{2, 3, 1}}), ShapeError);
}

TEST(InitFill, FullAccumulatesWithKAdd) {
  RunOptions add;
  add.req = {OpReq::kAdd};
  add.initial_outputs = {HostTensor::of(Shape{3}, {1, 2, 3})};
  auto f = run_op("_full", {{"shape", "(3,)"}, {"value", "0.5"}}, {}, add);
  EXPECT_EQ(f[0].data, (std::vector<double>{1.5, 2.5, 3.5}));
  auto z = run_op("_zeros", {{"shape", "(3,)"}}, {}, add);
  EXPECT_EQ(z[0].data, (std::vector<double>{1, 2, 3}));
}

TEST(InitFill, TypeFollowsTheDtypeParameter) {
  auto [in, out] = infer_types("_zeros", {{"dtype", "int64"}}, {});
  EXPECT_EQ(out[0], DType::kInt64);
  EXPECT_THROW(infer_types("_ones", {{"dtype", "float64"}}, {}, {DType::kFloat32}), ShapeError);
}

TEST(InitFill, InvalidAttributesThrowValueError) {
  EXPECT_THROW(run_op("_zeros", {{"shape", "(2, 3)"}, {"dtype", "complex"}}, {}), ValueError);
  EXPECT_THROW(run_op("_zeros", {{"shape", "(2, -3)"}}, {}), ValueError);
  EXPECT_THROW(run_op("_ones", {{"shape", "(2,)"}, {"fill", "1"}}, {}), ValueError);
  EXPECT_THROW(run_op("_full", {{"shape", "(2,)"}}, {}), ValueError);  // value is required
}

TEST(InitFill, AliasesResolveToTheSameOps) {
  EXPECT_EQ(&get_op("zeros"), &get_op("_zeros"));
  EXPECT_EQ(&get_op("ones"), &get_op("_ones"));
  EXPECT_EQ(&get_op("full"), &get_op("_full"));
  EXPECT_EQ(&get_op("arange"), &get_op("_arange"));
  EXPECT_EQ(&get_op("uniform"), &get_op("_random_uniform"));
  EXPECT_EQ(&get_op("random_uniform"), &get_op("_random_uniform"));
  EXPECT_EQ(&get_op("normal"), &get_op("_random_normal"));
  EXPECT_EQ(&get_op("random_normal"), &get_op("_random_normal"));
}

// ---- arange
// ---------------------------------------------------------------------------------------

TEST(InitArange, StartStopStepGivesHalfOpenRange) {
  auto a = run_op("_arange", {{"start", "1"}, {"stop", "2"}, {"step", "0.25"}}, {});
  EXPECT_EQ(a[0].shape, (Shape{4}));
  EXPECT_EQ(a[0].data, (std::vector<double>{1, 1.25, 1.5, 1.75}));
  auto b =
      run_op("_arange", {{"start", "0"}, {"stop", "1"}, {"step", "0.3"}}, {});  // ceil(10/3) = 4
  EXPECT_TRUE(all_close(b[0], HostTensor::of(Shape{4}, {0, 0.3, 0.6, 0.9})));
}

TEST(InitArange, StopOmittedCountsFromZeroToStart) {
  auto a = run_op("arange", {{"start", "5"}, {"dtype", "int32"}}, {});
  EXPECT_EQ(a[0].dtype, DType::kInt32);
  EXPECT_EQ(a[0].data, (std::vector<double>{0, 1, 2, 3, 4}));
}

TEST(InitArange, NegativeStepCountsDown) {
  auto a = run_op("_arange",
                  {{"start", "3"}, {"stop", "-1"}, {"step", "-1.5"}, {"dtype", "float64"}}, {});
  EXPECT_EQ(a[0].data, (std::vector<double>{3, 1.5, 0}));
}

TEST(InitArange, RepeatRepeatsEachElement) {
  auto a = run_op("_arange", {{"start", "2"}, {"stop", "5"}, {"repeat", "2"}}, {});
  EXPECT_EQ(a[0].data, (std::vector<double>{2, 2, 3, 3, 4, 4}));
}

TEST(InitArange, InferRangeTakesTheLengthFromTheOutput) {
  AttrMap attrs{{"start", "1"}, {"step", "2"}, {"infer_range", "True"}};
  auto [in, out] = infer_shapes("_arange", attrs, {});
  EXPECT_FALSE(out[0].known());
  RunOptions o;
  o.initial_outputs = {HostTensor::filled(Shape{4}, 0.0)};
  auto a = run_op("_arange", attrs, {}, o);
  EXPECT_EQ(a[0].data, (std::vector<double>{1, 3, 5, 7}));
  attrs["repeat"] = "2";
  auto b = run_op("_arange", attrs, {}, o);
  EXPECT_EQ(b[0].data, (std::vector<double>{1, 1, 3, 3}));
  EXPECT_THROW(infer_shapes("_arange", attrs, {}, {Shape{2, 2}}), ShapeError);
}

TEST(InitArange, ShapeMismatchThrowsShapeError) {
  EXPECT_THROW(infer_shapes("_arange", {{"start", "0"}, {"stop", "4"}}, {}, {Shape{5}}),
               ShapeError);
}

TEST(InitArange, InvalidRangesThrowValueError) {
  EXPECT_THROW(run_op("_arange", {{"start", "0"}, {"stop", "3"}, {"step", "0"}}, {}), ValueError);
  EXPECT_THROW(run_op("_arange", {{"start", "3"}, {"stop", "0"}}, {}), ValueError);
  EXPECT_THROW(run_op("_arange", {{"start", "0"}, {"stop", "3"}, {"step", "-1"}}, {}), ValueError);
  EXPECT_THROW(run_op("_arange", {{"start", "0"}, {"stop", "3"}, {"repeat", "0"}}, {}), ValueError);
  EXPECT_THROW(run_op("_arange", {{"stop", "3"}}, {}), ValueError);  // start is required
}

// ---- random
// ---------------------------------------------------------------------------------------

struct Moments {
  double mean = 0, var = 0, min = 1e300, max = -1e300;
};
Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size() - 1);
  return m;
}

TEST(InitRandom, SameSeedGivesTheSameDrawsAndOtherSeedsDiffer) {
  for (const char* op : {"_random_uniform", "_random_normal"}) {
    RunOptions s1, s2;
    s1.seed = 42;
    s2.seed = 43;
    AttrMap attrs{{"shape", "(40000,)"}};
    auto a = run_op(op, attrs, {}, s1);
    auto b = run_op(op, attrs, {}, s1);
    auto c = run_op(op, attrs, {}, s2);
    EXPECT_EQ(a[0].data, b[0].data) << op;
    EXPECT_NE(a[0].data, c[0].data) << op;
    RunOptions threads = s1;  // the draws do not depend on the thread count
    threads.num_threads = 3;
    auto d = run_op(op, attrs, {}, threads);
    EXPECT_EQ(a[0].data, d[0].data) << op;
  }
}

TEST(InitRandom, UniformMomentsMatchTheDistribution) {
  RunOptions o;
  o.seed = 5;
  auto u = run_op("random_uniform", {{"low", "-1"}, {"high", "3"}, {"shape", "(100, 100)"}}, {}, o);
  EXPECT_EQ(u[0].dtype, DType::kFloat32);
  const Moments m = moments(u[0].data);
  EXPECT_NEAR(m.mean, 1.0, 0.05);
  EXPECT_NEAR(m.var, 16.0 / 12.0, 0.05);
  EXPECT_GE(m.min, -1.0);
  EXPECT_LT(m.max, 3.0);
}

TEST(InitRandom, NormalMomentsMatchTheDistribution) {
  RunOptions o;
  o.seed = 6;
  auto n =
      run_op("random_normal",
             {{"loc", "2"}, {"scale", "0.5"}, {"shape", "(10000,)"}, {"dtype", "float64"}}, {}, o);
  EXPECT_EQ(n[0].dtype, DType::kFloat64);
  const Moments m = moments(n[0].data);
  EXPECT_NEAR(m.mean, 2.0, 0.02);
  EXPECT_NEAR(m.var, 0.25, 0.015);
}

TEST(InitRandom, DtypeNoneFollowsTheOutputElseFloat32) {
  auto [in, out] = infer_types("_random_normal", {}, {});
  EXPECT_EQ(out[0], DType::kFloat32);
  auto [in2, out2] = infer_types("_random_uniform", {}, {}, {DType::kFloat64});
  EXPECT_EQ(out2[0], DType::kFloat64);
  EXPECT_THROW(infer_types("_random_uniform", {}, {}, {DType::kInt32}), ShapeError);
}

TEST(InitRandom, InvalidAttributesThrowValueError) {
  EXPECT_THROW(run_op("_random_uniform", {{"low", "2"}, {"high", "1"}, {"shape", "(2,)"}}, {}),
               ValueError);
  EXPECT_THROW(run_op("_random_normal", {{"scale", "0"}, {"shape", "(2,)"}}, {}), ValueError);
  EXPECT_THROW(run_op("_random_normal", {{"dtype", "int32"}, {"shape", "(2,)"}}, {}), ValueError);
  EXPECT_THROW(run_op("_random_uniform", {{"shape", "(2,)"}, {"seed", "1"}}, {}), ValueError);
}

}  // namespace
}  // namespace weft::testing
