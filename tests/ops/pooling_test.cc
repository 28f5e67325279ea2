// Tests of Pooling: every convention × type × count_include_pad against a naive loop that follows
// MXNet's window arithmetic, global and 1-D/3-D pooling, gradients, shapes and attribute errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF64 = DType::kFloat64;

std::string tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

struct PoolCase {
  std::vector<int64_t> kernel{}, stride{}, pad{};
  std::string type = "max";
  std::string convention = "valid";
  bool include_pad = true;
  int p = 2;
};

AttrMap pool_attrs(const PoolCase& c) {
  AttrMap a{{"kernel", tuple(c.kernel)},
            {"pool_type", c.type},
            {"pooling_convention", c.convention},
            {"count_include_pad", c.include_pad ? "True" : "False"}};
  if (!c.stride.empty()) a["stride"] = tuple(c.stride);
  if (!c.pad.empty()) a["pad"] = tuple(c.pad);
  if (c.type == "lp") a["p_value"] = std::to_string(c.p);
  return a;
}

/// Output size per OPS.md: valid floor, full ceil, same ceil(x/s).
int64_t out_size(int64_t x, int64_t k, int64_t s, int64_t p, const std::string& conv) {
  if (conv == "valid") return (x + 2 * p - k) / s + 1;
  if (conv == "full")
    return static_cast<int64_t>(std::ceil(static_cast<double>(x + 2 * p - k) / s)) + 1;
  return static_cast<int64_t>(std::ceil(static_cast<double>(x) / s));
}

/// Naive pooling over up to three spatial dims (OPS.md's window math).
HostTensor naive_pool(const HostTensor& x, const PoolCase& c) {
  const int nsp = static_cast<int>(c.kernel.size());
  std::array<int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0}, o{1, 1, 1};
  std::vector<int64_t> oshape{x.shape[0], x.shape[1]};
  for (int i = 0; i < nsp; ++i) {
    const int slot = 3 - nsp + i;
    in[slot] = x.shape[2 + i];
    k[slot] = c.kernel[i];
    s[slot] = c.stride.empty() ? 1 : c.stride[i];
    p[slot] = c.pad.empty() ? 0 : c.pad[i];
    o[slot] = out_size(in[slot], k[slot], s[slot], p[slot], c.convention);
    oshape.push_back(o[slot]);
  }
  HostTensor y = HostTensor::filled(Shape(oshape), 0.0, x.dtype);
  const int64_t planes = x.shape[0] * x.shape[1], is = in[0] * in[1] * in[2];
  int64_t yi = 0;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t a = 0; a < o[0]; ++a)
      for (int64_t b = 0; b < o[1]; ++b)
        for (int64_t cc = 0; cc < o[2]; ++cc, ++yi) {
          const std::array<int64_t, 3> idx{a, b, cc};
          std::array<int64_t, 3> lo{}, hi{}, padded{};
          for (int d = 0; d < 3; ++d) {
            int64_t start = idx[d] * s[d] - p[d];
            int64_t end = c.type == "max" ? std::min(start + k[d], in[d])
                                          : std::min(start + k[d], in[d] + p[d]);
            padded[d] = end - start;
            lo[d] = std::max<int64_t>(start, 0);
            hi[d] = std::min(end, in[d]);
          }
          double acc = c.type == "max" ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int64_t i0 = lo[0]; i0 < hi[0]; ++i0)
            for (int64_t i1 = lo[1]; i1 < hi[1]; ++i1)
              for (int64_t i2 = lo[2]; i2 < hi[2]; ++i2) {
                const double v = x.data[pl * is + (i0 * in[1] + i1) * in[2] + i2];
                if (c.type == "max")
                  acc = std::max(acc, v);
                else if (c.type == "lp")
                  acc += std::pow(v, c.p);
                else
                  acc += v;
              }
          if (c.type == "avg") {
            const double count =
                c.include_pad
                    ? static_cast<double>(padded[0] * padded[1] * padded[2])
                    : static_cast<double>((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
            // A `full` window entirely in the padding has nothing to average: 0 (MXNet computes
            // 0/0).
            acc = count > 0 ? acc / count : 0.0;
          } else if (c.type == "lp") {
            acc = std::pow(acc, 1.0 / c.p);
          }
          y.data[yi] = acc;
        }
  return y;
}

void expect_pool_matches(const Shape& xshape, const PoolCase& c, DType dt, double tol,
                         double lo = -1.0) {
  HostTensor x = HostTensor::random(xshape, 3, lo, 1.0, dt);
  auto out = run_op("Pooling", pool_attrs(c), {x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], naive_pool(x, c), tol, tol))
      << c.type << " " << c.convention << " include_pad=" << c.include_pad;
}

TEST(PoolForward, EveryConventionTypeAndPadCountMatchesNaiveLoops) {
  // Sizes chosen so that `full` windows run past x+p and clipping differs between conventions.
  for (const char* conv : {"valid", "full"}) {
    for (const char* type : {"max", "avg", "sum"}) {
      for (bool include : {true, false}) {
        PoolCase c{{3, 2}, {2, 2}, {1, 1}, type, conv, include};
        expect_pool_matches(Shape{2, 3, 8, 7}, c, DType::kFloat32, 1e-5);
        expect_pool_matches(Shape{2, 3, 8, 7}, c, kF64, 1e-12);
        PoolCase nopad{{3, 3}, {2, 2}, {}, type, conv, include};
        expect_pool_matches(Shape{1, 2, 8, 8}, nopad, DType::kFloat32, 1e-5);
        // The separable max path's specialised rows (3/2, 3/1) with clipped windows at both ends.
        for (int64_t s : {1, 2}) {
          PoolCase stem{{3, 3}, {s, s}, {1, 1}, type, conv, include};
          expect_pool_matches(Shape{1, 3, 11, 12}, stem, DType::kFloat32, 1e-5);
        }
      }
    }
  }
}

TEST(PoolForward, FullConventionAvgDividesByWindowClippedToPaddedInput) {
  // x = 1..5 in 1-D, k = 3, s = 2, p = 1, full: windows [-1,2), [1,4), [3,6) → clipped to x+p = 6.
  HostTensor x = HostTensor::of(Shape{1, 1, 5}, {1, 2, 3, 4, 5});
  auto out = run_op("Pooling",
                    {{"kernel", "(3,)"},
                     {"stride", "(2,)"},
                     {"pad", "(1,)"},
                     {"pool_type", "avg"},
                     {"pooling_convention", "full"}},
                    {x});
  ASSERT_EQ(out[0].shape, (Shape{1, 1, 3}));
  EXPECT_TRUE(all_close(out[0], HostTensor::of(Shape{1, 1, 3}, {3.0 / 3, 9.0 / 3, 9.0 / 3})));
  // Last full window with k = 2, s = 2, p = 1 on x = 4: O = ceil(4/2)+1 = 3, last window [3, 5) →
  // [3, 5) ∩ (x+p=5).
  HostTensor x4 = HostTensor::of(Shape{1, 1, 4}, {1, 2, 3, 4});
  auto o4 = run_op("Pooling",
                   {{"kernel", "(2,)"},
                    {"stride", "(2,)"},
                    {"pad", "(1,)"},
                    {"pool_type", "avg"},
                    {"pooling_convention", "full"},
                    {"count_include_pad", "False"}},
                   {x4});
  EXPECT_TRUE(all_close(o4[0], HostTensor::of(Shape{1, 1, 3}, {1, 2.5, 4})));
}

TEST(PoolForward, MaxIgnoresPaddingEvenForNegativeInputs) {
  HostTensor x = HostTensor::of(Shape{1, 1, 2, 2}, {-4, -3, -2, -1});
  auto out =
      run_op("Pooling", {{"kernel", "(2, 2)"}, {"pad", "(1, 1)"}, {"stride", "(2, 2)"}}, {x});
  EXPECT_TRUE(all_close(out[0], HostTensor::of(Shape{1, 1, 2, 2}, {-4, -3, -2, -1})));
}

TEST(PoolForward, LpPoolingMatchesNaiveLoops) {
  for (int p : {1, 2, 3}) {
    PoolCase c{{2, 2}, {1, 2}, {0, 1}, "lp", "valid", true, p};
    expect_pool_matches(Shape{1, 2, 5, 6}, c, kF64, 1e-10, 0.1);
  }
}

TEST(PoolForward, GlobalPoolIgnoresKernelStrideAndPad) {
  HostTensor x = HostTensor::random(Shape{2, 3, 4, 5}, 9, -1, 1, kF64);
  for (const char* type : {"max", "avg", "sum"}) {
    auto out = run_op("Pooling",
                      {{"kernel", "(7, 7)"},
                       {"stride", "(3, 3)"},
                       {"pad", "(2, 2)"},
                       {"global_pool", "True"},
                       {"pool_type", type}},
                      {x});
    ASSERT_EQ(out[0].shape, (Shape{2, 3, 1, 1}));
    PoolCase whole{{4, 5}, {}, {}, type};
    EXPECT_TRUE(all_close(out[0], naive_pool(x, whole), 1e-12, 1e-12)) << type;
  }
  // Without any kernel, and on 1-D and 3-D data.
  auto o1 = run_op("Pooling", {{"global_pool", "True"}, {"pool_type", "avg"}},
                   {HostTensor::of(Shape{1, 1, 4}, {1, 2, 3, 6})});
  EXPECT_TRUE(all_close(o1[0], HostTensor::of(Shape{1, 1, 1}, {3})));
  auto o3 =
      run_op("Pooling", {{"global_pool", "True"}}, {HostTensor::random(Shape{1, 2, 2, 3, 2}, 4)});
  EXPECT_EQ(o3[0].shape, (Shape{1, 2, 1, 1, 1}));
}

TEST(PoolForward, OneDAndThreeDMatchNaiveLoops) {
  expect_pool_matches(Shape{2, 2, 9}, {{3}, {2}, {1}, "avg", "full", false}, kF64, 1e-12);
  expect_pool_matches(Shape{2, 2, 9}, {{3}, {2}, {1}, "max", "valid"}, DType::kFloat32, 1e-6);
  expect_pool_matches(Shape{1, 2, 5, 4, 6}, {{2, 3, 2}, {2, 1, 2}, {1, 1, 0}, "max", "full"},
                      DType::kFloat32, 1e-6);
  expect_pool_matches(Shape{1, 2, 5, 4, 6}, {{2, 3, 2}, {2, 1, 2}, {1, 1, 0}, "avg", "valid"},
                      DType::kFloat32, 1e-5);
}

TEST(PoolForward, SameConventionGivesCeilOfSizeOverStride) {
  expect_pool_matches(Shape{1, 2, 7}, {{3}, {2}, {}, "max", "same"}, kF64, 1e-12);
  expect_pool_matches(Shape{1, 2, 8}, {{2}, {3}, {}, "max", "same"}, kF64, 1e-12);
  auto [in, out] = infer_shapes(
      "Pooling", {{"kernel", "(3,)"}, {"stride", "(2,)"}, {"pooling_convention", "same"}},
      {Shape{2, 3, 7}});
  EXPECT_EQ(out[0], (Shape{2, 3, 4}));
}

TEST(PoolGradient, AvgSumAndLpMatchFiniteDifferences) {
  GradCheckOptions opt;
  opt.eps = 1e-6;
  opt.rtol = 1e-6;
  opt.atol = 1e-8;
  HostTensor x = HostTensor::random(Shape{1, 2, 5, 6}, 21, -1, 1, kF64);
  for (const char* conv : {"valid", "full"}) {
    for (bool include : {true, false}) {
      EXPECT_TRUE(check_gradient(
          "Pooling", pool_attrs({{3, 2}, {2, 2}, {1, 1}, "avg", conv, include}), {x}, opt));
    }
    EXPECT_TRUE(
        check_gradient("Pooling", pool_attrs({{3, 2}, {2, 2}, {1, 1}, "sum", conv}), {x}, opt));
  }
  HostTensor xp = HostTensor::random(Shape{1, 2, 4, 5}, 22, 0.2, 1, kF64);
  for (int p : {1, 2, 3}) {
    EXPECT_TRUE(check_gradient(
        "Pooling", pool_attrs({{2, 2}, {1, 2}, {0, 1}, "lp", "valid", true, p}), {xp}, opt));
  }
}

TEST(PoolGradient, MaxSendsGradientToTheArgmax) {
  GradCheckOptions opt;
  opt.eps = 1e-6;
  opt.rtol = 1e-6;
  opt.atol = 1e-8;
  // Distinct values so that the finite difference does not straddle a tie.
  std::vector<double> v(60);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(1.7 * static_cast<double>(i)) + 0.01 * static_cast<double>(i);
  HostTensor x = HostTensor::of(Shape{1, 2, 5, 6}, v, kF64);
  for (const char* conv : {"valid", "full"}) {
    EXPECT_TRUE(
        check_gradient("Pooling", pool_attrs({{3, 2}, {2, 2}, {1, 1}, "max", conv}), {x}, opt));
  }
  EXPECT_TRUE(check_gradient("Pooling", {{"global_pool", "True"}, {"kernel", "(1, 1)"}}, {x}, opt));
  // Float32 with oneDNN forward.
  HostTensor x32 = HostTensor::of(Shape{1, 2, 5, 6}, v);
  GradCheckOptions o32;
  o32.eps = 1e-3;
  EXPECT_TRUE(
      check_gradient("Pooling", pool_attrs({{2, 2}, {2, 2}, {}, "max", "valid"}), {x32}, o32));
  EXPECT_TRUE(
      check_gradient("Pooling", pool_attrs({{3, 3}, {2, 2}, {1, 1}, "avg", "full"}), {x32}, o32));
}

TEST(PoolShape, InfersOutputAndBatchChannelsBackward) {
  auto [in, out] = infer_shapes("Pooling", pool_attrs({{3, 3}, {2, 2}, {1, 1}, "max", "full"}),
                                {Shape{2, 4, 8, 9}});
  EXPECT_EQ(out[0], (Shape{2, 4, 5, 5}));
  auto [in2, out2] = infer_shapes("Pooling", pool_attrs({{3, 3}, {2, 2}, {1, 1}}),
                                  {Shape{-1, -1, 8, 9}}, {Shape{2, 4, 4, 5}});
  EXPECT_EQ(in2[0], (Shape{2, 4, 8, 9}));
  auto a = get_op("Pooling").make_attrs(pool_attrs({{3, 3}}));
  std::vector<Shape> uin(1), uout(1);
  EXPECT_FALSE(a.op->infer_shape(a, uin, uout));
}

TEST(PoolShape, MismatchesAreShapeErrors) {
  EXPECT_THROW(infer_shapes("Pooling", pool_attrs({{3, 3}}), {Shape{2, 4, 8}}), ShapeError);
  EXPECT_THROW(infer_shapes("Pooling", pool_attrs({{5, 5}}), {Shape{2, 4, 3, 3}}), ShapeError);
  EXPECT_THROW(
      infer_shapes("Pooling", pool_attrs({{3, 3}}), {Shape{2, 4, 8, 8}}, {Shape{2, 4, 5, 5}}),
      ShapeError);
  EXPECT_THROW(infer_shapes("Pooling", {{"kernel", "(2, 2)"}, {"pooling_convention", "same"}},
                            {Shape{1, 1, 4, 4}}),
               ShapeError);
}

TEST(PoolAttrs, InvalidValuesAreValueErrorsAndUnsupportedOnesNotImplemented) {
  const auto& op = get_op("Pooling");
  EXPECT_THROW(op.make_attrs({{"pool_type", "max"}}), ValueError);  // no kernel, not global
  EXPECT_THROW(op.make_attrs({{"kernel", "(2, 2)"}, {"pool_type", "median"}}), ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(2, 2)"}, {"pool_type", "lp"}}),
               ValueError);  // lp needs p_value
  EXPECT_THROW(op.make_attrs({{"kernel", "(2, 2)"}, {"stride", "(1, 0)"}}), ValueError);
  EXPECT_THROW(
      op.make_attrs({{"kernel", "(2, 2)"}, {"pooling_convention", "same"}, {"pad", "(1, 1)"}}),
      ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(2, 2)"}, {"pooling_convention", "ceil"}}), ValueError);
  EXPECT_NO_THROW(op.make_attrs({{"kernel", "(2, 2)"},
                                 {"pool_type", "avg"},
                                 {"global_pool", "False"},
                                 {"cudnn_off", "True"},
                                 {"pooling_convention", "full"},
                                 {"stride", "(2, 2)"},
                                 {"pad", "(0, 0)"},
                                 {"p_value", "None"},
                                 {"count_include_pad", "None"},
                                 {"layout", "NCHW"},
                                 {"output_size", "None"}}));
  AttrMap nhwc = pool_attrs({{2, 2}});
  nhwc["layout"] = "NHWC";
  EXPECT_THROW(infer_shapes("Pooling", nhwc, {Shape{1, 4, 4, 3}}), NotImplemented);
  AttrMap adaptive = pool_attrs({{2, 2}});
  adaptive["output_size"] = "(2, 2)";
  EXPECT_THROW(infer_shapes("Pooling", adaptive, {Shape{1, 3, 4, 4}}), NotImplemented);
  // One output, no MKL-DNN workspace output.
  EXPECT_EQ(op.num_outputs(op.make_attrs(pool_attrs({{2, 2}}))), 1);
}

}  // namespace
}  // namespace weft::testing
