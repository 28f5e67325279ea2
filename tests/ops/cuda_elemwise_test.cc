// CUDA kernels of the elemwise and init families against the CPU kernels: unary math, clip,
// copies, Cast, where, add_n, MakeLoss, identical-shape and broadcast binary ops with their
// backward ops (every reduction path of the broadcast gradient), scalar ops, comparisons and the
// creation ops; odd sizes, every OpReq on a few ops, float16/bfloat16 with loose tolerances.
// The samplers are checked by their statistics and determinism. Every test skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kF16 = DType::kFloat16;
constexpr DType kBF16 = DType::kBFloat16;

HostTensor rnd(Shape s, uint64_t seed, DType dt = kF32, double lo = -1.0, double hi = 1.0) {
  return HostTensor::random(std::move(s), seed, lo, hi, dt);
}
bool is_fp(DType t) { return t == kF32 || t == kF64 || t == kF16 || t == kBF16; }
HostTensor pos(Shape s, uint64_t seed, DType dt = kF32) {
  return rnd(std::move(s), seed, dt, 0.5, 2.0);
}

/// Tolerances of transcendental functions in float32 (CUDA's are within a few ulp).
CudaCompare f32_cmp() { return cuda_tolerance(2e-5, 1e-6); }
CudaCompare f64_cmp() { return cuda_tolerance(1e-12, 1e-13); }
CudaCompare half_cmp(DType dt) { return cuda_half(dt, 4e-3, 2e-2); }
CudaCompare exact_cmp() { return cuda_exact(); }
/// Forward only, outputs accumulated into `initial`.
CudaCompare add_cmp(std::vector<HostTensor> initial) {
  return cuda_add_into(std::move(initial), f32_cmp());
}

const Shape kOdd{7, 13, 5};

// ---- unary math ---------------------------------------------------------------------------------

TEST(CudaElemwiseUnary, AllOpsFloat32AndFloat64) {
  WEFT_REQUIRE_CUDA();
  for (const char* op :
       {"relu", "sigmoid", "tanh", "exp", "square", "abs", "sin", "cos", "negative"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {}, {rnd(kOdd, 1)}, f32_cmp());
    expect_cuda_matches_cpu(op, {}, {rnd(Shape{1031}, 2, kF64)}, f64_cmp());
  }
  // Positive inputs for the ops defined there.
  for (const char* op : {"log", "sqrt", "reciprocal"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {}, {pos(kOdd, 3)}, f32_cmp());
    expect_cuda_matches_cpu(op, {}, {pos(Shape{1031}, 4, kF64)}, f64_cmp());
  }
}

TEST(CudaElemwiseUnary, Float16AndBFloat16) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : {kF16, kBF16}) {
    for (const char* op : {"relu", "sigmoid", "tanh", "exp", "square", "abs", "sin", "negative"}) {
      SCOPED_TRACE(op);
      expect_cuda_matches_cpu(op, {}, {rnd(kOdd, 5)}, half_cmp(dt));
    }
    for (const char* op : {"log", "sqrt", "reciprocal"}) {
      SCOPED_TRACE(op);
      expect_cuda_matches_cpu(op, {}, {pos(kOdd, 6)}, half_cmp(dt));
    }
  }
}

TEST(CudaElemwiseUnary, IntegerTypes) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : {DType::kInt32, DType::kInt64, DType::kInt8}) {
    for (const char* op : {"relu", "abs", "square", "negative"}) {
      SCOPED_TRACE(op);
      expect_cuda_matches_cpu(op, {}, {rnd(Shape{9, 11}, 7, dt, -9, 9)}, exact_cmp());
    }
  }
  expect_cuda_matches_cpu("abs", {}, {rnd(Shape{33}, 8, DType::kUInt8, 0, 200)}, exact_cmp());
}

TEST(CudaElemwiseUnary, AddToAndVectorTails) {
  WEFT_REQUIRE_CUDA();
  // Sizes around the 4-wide float path: 1, 3, 4, 5, 4099.
  for (int64_t n : {1, 3, 4, 5, 4099}) {
    expect_cuda_matches_cpu("relu", {}, {rnd(Shape{n}, 9)}, add_cmp({rnd(Shape{n}, 10)}));
    expect_cuda_matches_cpu("exp", {}, {rnd(Shape{n}, 11)}, f32_cmp());
  }
  expect_cuda_matches_cpu("_backward_sigmoid", {}, {rnd(kOdd, 12), rnd(kOdd, 13, kF32, 0, 1)},
                          add_cmp({rnd(kOdd, 14)}));
}

// ---- clip, copies, Cast, where, add_n, MakeLoss -------------------------------------------------

TEST(CudaElemwiseMisc, Clip) {
  WEFT_REQUIRE_CUDA();
  const AttrMap a{{"a_min", "-0.3"}, {"a_max", "0.55"}};
  expect_cuda_matches_cpu("clip", a, {rnd(kOdd, 20)}, f32_cmp());
  expect_cuda_matches_cpu("clip", a, {rnd(kOdd, 21, kF64)}, f64_cmp());
  expect_cuda_matches_cpu("clip", a, {rnd(kOdd, 22)}, half_cmp(kF16));
  expect_cuda_matches_cpu("clip", {{"a_min", "-2"}, {"a_max", "3"}},
                          {rnd(Shape{40}, 23, DType::kInt32, -6, 6)}, exact_cmp());
  expect_cuda_matches_cpu("_backward_clip", a, {rnd(kOdd, 24), rnd(kOdd, 25)},
                          add_cmp({rnd(kOdd, 26)}));
}

TEST(CudaElemwiseMisc, CopiesAndConstantsLike) {
  WEFT_REQUIRE_CUDA();
  for (const char* op : {"_copy", "BlockGrad", "zeros_like", "ones_like"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {}, {rnd(kOdd, 30)}, f32_cmp());
    expect_cuda_matches_cpu(op, {}, {rnd(Shape{17}, 31, DType::kInt64, -50, 50)}, exact_cmp());
    expect_cuda_matches_cpu(op, {}, {rnd(Shape{5, 3}, 32)}, add_cmp({rnd(Shape{5, 3}, 33)}));
  }
  expect_cuda_matches_cpu(
      "ones_like", {}, {HostTensor::of(Shape{6}, {0, 1, 1, 0, 1, 0}, DType::kBool)}, exact_cmp());
}

TEST(CudaElemwiseMisc, CastBetweenTypes) {
  WEFT_REQUIRE_CUDA();
  const std::vector<std::pair<DType, const char*>> types = {
      {kF32, "float32"},        {kF64, "float64"},        {DType::kInt32, "int32"},
      {DType::kInt64, "int64"}, {DType::kUInt8, "uint8"}, {DType::kInt8, "int8"}};
  for (const auto& [from, from_name] : types) {
    for (const auto& [to, to_name] : types) {
      SCOPED_TRACE(std::string(from_name) + " -> " + to_name);
      // Values every type holds (0..100), with fractions for the floating sources.
      CudaCompare c = exact_cmp();
      c.gradients = is_fp(from) && is_fp(to);
      expect_cuda_matches_cpu("Cast", {{"dtype", to_name}}, {rnd(Shape{7, 9}, 40, from, 0, 100)},
                              c);
    }
  }
  expect_cuda_matches_cpu("Cast", {{"dtype", "float64"}}, {rnd(Shape{11}, 41)},
                          add_cmp({rnd(Shape{11}, 42, kF64)}));
}

TEST(CudaElemwiseMisc, CastThroughHalfTypes) {
  WEFT_REQUIRE_CUDA();
  // The CPU Cast has no 16-bit types: round-trip on the GPU and compare with the input.
  const HostTensor x = rnd(kOdd, 43, kF32, -100, 100);
  RunOptions gpu;
  gpu.device = Device::cuda(0);
  for (const char* half : {"float16", "bfloat16"}) {
    SCOPED_TRACE(half);
    const HostTensor h = run_op("Cast", {{"dtype", half}}, {x}, gpu).at(0);
    const HostTensor back = run_op("Cast", {{"dtype", "float32"}}, {h}, gpu).at(0);
    const double rel = std::string(half) == "float16" ? 1e-3 : 8e-3;
    EXPECT_TRUE(all_close(back, x, rel, 0));
    const HostTensor i = run_op("Cast", {{"dtype", "int32"}}, {h}, gpu).at(0);
    for (int64_t j = 0; j < i.size(); ++j) EXPECT_EQ(i.data[j], std::trunc(h.data[j])) << j;
  }
}

TEST(CudaElemwiseMisc, Where) {
  WEFT_REQUIRE_CUDA();
  const HostTensor cond = rnd(kOdd, 50, kF32, -1, 1);
  expect_cuda_matches_cpu("where", {}, {cond, rnd(kOdd, 51), rnd(kOdd, 52)}, f32_cmp());
  // A 1-D condition selects rows; an integer condition.
  const HostTensor rows = rnd(Shape{7}, 53, DType::kInt32, -1, 2);
  expect_cuda_matches_cpu("where", {}, {rows, rnd(kOdd, 54), rnd(kOdd, 55)}, f32_cmp());
  expect_cuda_matches_cpu("where", {}, {rows, rnd(kOdd, 54, kF64), rnd(kOdd, 55, kF64)}, f64_cmp());
  expect_cuda_matches_cpu("where", {}, {cond, rnd(kOdd, 56), rnd(kOdd, 57)},
                          add_cmp({rnd(kOdd, 58)}));
  expect_cuda_matches_cpu("_backward_where", {}, {rnd(kOdd, 59), cond},
                          add_cmp({rnd(kOdd, 60), rnd(kOdd, 61)}));
}

TEST(CudaElemwiseMisc, AddN) {
  WEFT_REQUIRE_CUDA();
  for (int k : {1, 2, 3, 8, 11}) {
    SCOPED_TRACE(k);
    std::vector<HostTensor> in;
    for (int j = 0; j < k; ++j) in.push_back(rnd(kOdd, 70 + j));
    expect_cuda_matches_cpu("add_n", {{"num_args", std::to_string(k)}}, in, f32_cmp());
    expect_cuda_matches_cpu("add_n", {{"num_args", std::to_string(k)}}, in,
                            add_cmp({rnd(kOdd, 90)}));
  }
  expect_cuda_matches_cpu(
      "add_n", {{"num_args", "3"}},
      {rnd(Shape{9}, 91, DType::kInt32, -9, 9), rnd(Shape{9}, 92, DType::kInt32, -9, 9),
       rnd(Shape{9}, 93, DType::kInt32, -9, 9)},
      exact_cmp());
}

TEST(CudaElemwiseMisc, MakeLoss) {
  WEFT_REQUIRE_CUDA();
  for (const char* norm : {"null", "batch", "valid"}) {
    SCOPED_TRACE(norm);
    const AttrMap a{{"grad_scale", "0.7"}, {"normalization", norm}, {"valid_thresh", "0.1"}};
    expect_cuda_matches_cpu("MakeLoss", a, {rnd(kOdd, 100)}, f32_cmp());
    expect_cuda_matches_cpu("MakeLoss", a, {rnd(kOdd, 101, kF64)}, f64_cmp());
    expect_cuda_matches_cpu("_backward_MakeLoss", a, {rnd(kOdd, 102)}, add_cmp({rnd(kOdd, 103)}));
  }
}

// ---- binary ops ---------------------------------------------------------------------------------

TEST(CudaElemwiseBinary, IdenticalShapes) {
  WEFT_REQUIRE_CUDA();
  for (const char* op :
       {"elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_maximum", "_minimum",
        "_equal", "_not_equal", "_greater", "_greater_equal", "_lesser", "_lesser_equal"}) {
    SCOPED_TRACE(op);
    // Some equal elements for the comparisons and the max/min ties.
    HostTensor b = rnd(kOdd, 111);
    const HostTensor a = rnd(kOdd, 110);
    for (int64_t j = 0; j < b.size(); j += 7) b.data[j] = a.data[j];
    expect_cuda_matches_cpu(op, {}, {a, b}, f32_cmp());
    expect_cuda_matches_cpu(op, {}, {rnd(kOdd, 112, kF64), rnd(kOdd, 113, kF64, 0.5, 2)},
                            f64_cmp());
    // A positive divisor keeps float16 quotients and their gradients finite.
    expect_cuda_matches_cpu(op, {}, {a, pos(kOdd, 111)}, half_cmp(kF16));
    expect_cuda_matches_cpu(
        op, {},
        {rnd(Shape{30}, 114, DType::kInt32, -20, 20), rnd(Shape{30}, 115, DType::kInt32, -4, 4)},
        exact_cmp());
  }
  expect_cuda_matches_cpu("_power", {}, {pos(kOdd, 116), rnd(kOdd, 117)}, f32_cmp());
  expect_cuda_matches_cpu("_power", {}, {pos(kOdd, 116, kF64), rnd(kOdd, 117, kF64)}, f64_cmp());
  expect_cuda_matches_cpu("elemwise_mul", {}, {rnd(kOdd, 118), rnd(kOdd, 119)}, half_cmp(kBF16));
}

TEST(CudaElemwiseBinary, BackwardOpsAddTo) {
  WEFT_REQUIRE_CUDA();
  const HostTensor g = rnd(kOdd, 120), a = rnd(kOdd, 121), b = pos(kOdd, 122);
  for (const char* op : {"_backward_add", "_backward_sub"}) {
    expect_cuda_matches_cpu(op, {}, {g}, add_cmp({rnd(kOdd, 123), rnd(kOdd, 124)}));
  }
  for (const char* op : {"_backward_mul", "_backward_div", "_backward_power", "_backward_maximum",
                         "_backward_minimum"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {}, {g, b, a}, add_cmp({rnd(kOdd, 125), rnd(kOdd, 126)}));
  }
}

struct BroadcastCase {
  Shape lhs, rhs;
};

// Shapes exercising each reduction path of the gradient: one thread (few terms), a warp and a
// block per element (many terms, few elements), both operands broadcast, a scalar operand and
// different ranks.
const std::vector<BroadcastCase> kBroadcastCases = {
    {Shape{7, 1, 5}, Shape{1, 13, 5}},      {Shape{3, 4}, Shape{4}},
    {Shape{2, 3, 4, 5}, Shape{1, 3, 1, 5}}, {Shape{1}, Shape{6, 7}},
    {Shape{100, 7}, Shape{1, 7}},           {Shape{8192, 3}, Shape{1, 3}},
    {Shape{5, 1}, Shape{1, 6000}},          {Shape{7, 13, 5}, Shape{7, 13, 5}},
};

TEST(CudaElemwiseBroadcast, ArithmeticForwardAndGradient) {
  WEFT_REQUIRE_CUDA();
  for (const char* op : {"broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div",
                         "broadcast_maximum", "broadcast_minimum", "broadcast_power"}) {
    for (const auto& c : kBroadcastCases) {
      SCOPED_TRACE(std::string(op) + " " + c.lhs.to_string() + " " + c.rhs.to_string());
      const bool power = std::string(op) == "broadcast_power";
      const HostTensor a = power ? pos(c.lhs, 130) : rnd(c.lhs, 130);
      const HostTensor b = power ? rnd(c.rhs, 131) : pos(c.rhs, 131);
      // Sums of thousands of terms: the summation order differs from the CPU's.
      CudaCompare f = f32_cmp();
      f.rtol = 1e-4;
      f.atol = 1e-4;
      expect_cuda_matches_cpu(op, {}, {a, b}, f);
      CudaCompare d = f64_cmp();
      d.rtol = d.atol = 1e-10;
      expect_cuda_matches_cpu(op, {},
                              {power ? pos(c.lhs, 132, kF64) : rnd(c.lhs, 132, kF64),
                               power ? rnd(c.rhs, 133, kF64) : pos(c.rhs, 133, kF64)},
                              d);
    }
  }
}

TEST(CudaElemwiseBroadcast, HalfTypesAndIntegers) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : {kF16, kBF16}) {
    for (const char* op : {"broadcast_add", "broadcast_mul", "broadcast_maximum"}) {
      SCOPED_TRACE(op);
      CudaCompare c = half_cmp(dt);
      c.atol = c.rtol = dt == kBF16 ? 5e-2 : 1e-2;
      expect_cuda_matches_cpu(op, {}, {rnd(Shape{7, 1, 5}, 140), rnd(Shape{1, 13, 5}, 141)}, c);
      expect_cuda_matches_cpu(op, {}, {rnd(Shape{64, 3}, 142), rnd(Shape{3}, 143)}, c);
    }
  }
  for (const char* op : {"broadcast_add", "broadcast_mul", "broadcast_div", "broadcast_sub"}) {
    SCOPED_TRACE(op);
    CudaCompare c = exact_cmp();
    c.gradients = true;
    expect_cuda_matches_cpu(op, {},
                            {rnd(Shape{7, 1, 5}, 144, DType::kInt32, -9, 9),
                             rnd(Shape{1, 13, 5}, 145, DType::kInt32, -4, 4)},
                            c);
  }
}

TEST(CudaElemwiseBroadcast, Comparisons) {
  WEFT_REQUIRE_CUDA();
  for (const char* op : {"broadcast_equal", "broadcast_not_equal", "broadcast_greater",
                         "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal"}) {
    SCOPED_TRACE(op);
    const HostTensor a = rnd(Shape{6, 1, 4}, 150, DType::kInt32, -3, 3);
    const HostTensor b = rnd(Shape{5, 1}, 151, DType::kInt32, -3, 3);
    expect_cuda_matches_cpu(op, {}, {a, b}, exact_cmp());
    expect_cuda_matches_cpu(op, {}, {rnd(Shape{6, 1, 4}, 152), rnd(Shape{5, 1}, 153)}, exact_cmp());
  }
}

TEST(CudaElemwiseBroadcast, AddToForwardAndBackward) {
  WEFT_REQUIRE_CUDA();
  const Shape l{7, 1, 5}, r{1, 13, 5}, o{7, 13, 5};
  expect_cuda_matches_cpu("broadcast_mul", {}, {rnd(l, 160), rnd(r, 161)}, add_cmp({rnd(o, 162)}));
  for (const char* op : {"_backward_broadcast_mul", "_backward_broadcast_add",
                         "_backward_broadcast_div", "_backward_broadcast_maximum"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {}, {rnd(o, 163), rnd(l, 164), pos(r, 165)},
                            add_cmp({rnd(l, 166), rnd(r, 167)}));
    expect_cuda_matches_cpu(
        op, {}, {rnd(Shape{8192, 3}, 168), rnd(Shape{8192, 3}, 169), pos(Shape{3}, 170)}, [] {
          CudaCompare c = add_cmp({rnd(Shape{8192, 3}, 171), rnd(Shape{3}, 172)});
          c.rtol = c.atol = 1e-4;
          return c;
        }());
  }
}

// ---- scalar ops ---------------------------------------------------------------------------------

TEST(CudaElemwiseScalar, AllOps) {
  WEFT_REQUIRE_CUDA();
  const AttrMap a{{"scalar", "1.7"}};
  for (const char* op :
       {"_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar",
        "_rdiv_scalar", "_power_scalar", "_rpower_scalar", "_maximum_scalar", "_minimum_scalar",
        "_equal_scalar", "_not_equal_scalar", "_greater_scalar", "_greater_equal_scalar",
        "_lesser_scalar", "_lesser_equal_scalar"}) {
    SCOPED_TRACE(op);
    HostTensor x = pos(kOdd, 180);
    x.data[3] = 1.7;  // a tie for the comparisons and max/min
    expect_cuda_matches_cpu(op, a, {x}, f32_cmp());
    expect_cuda_matches_cpu(op, a, {pos(kOdd, 181, kF64)}, f64_cmp());
    expect_cuda_matches_cpu(op, a, {x}, half_cmp(kF16));
    // Integers: the scalar truncated (is_int) or the op computed in double (3.3: no power of
    // an integer lands on an integer, where a last-ulp difference would truncate differently).
    expect_cuda_matches_cpu(op, {{"scalar", "3.5"}, {"is_int", "true"}},
                            {rnd(Shape{40}, 182, DType::kInt32, 1, 9)}, exact_cmp());
    expect_cuda_matches_cpu(op, {{"scalar", "3.3"}, {"is_int", "false"}},
                            {rnd(Shape{40}, 182, DType::kInt32, 1, 9)}, exact_cmp());
  }
  expect_cuda_matches_cpu("_mul_scalar", a, {rnd(kOdd, 183)}, add_cmp({rnd(kOdd, 184)}));
  expect_cuda_matches_cpu("_backward_power_scalar", a, {rnd(kOdd, 185), pos(kOdd, 186)},
                          add_cmp({rnd(kOdd, 187)}));
}

// ---- creation ops -------------------------------------------------------------------------------

TEST(CudaInit, ConstantsAndArange) {
  WEFT_REQUIRE_CUDA();
  for (const char* dt : {"float32", "float64", "int32", "int64", "uint8", "int8", "bool"}) {
    SCOPED_TRACE(dt);
    const AttrMap shape{{"shape", "(7, 13, 5)"}, {"dtype", dt}};
    expect_cuda_matches_cpu("_zeros", shape, {}, exact_cmp());
    expect_cuda_matches_cpu("_ones", shape, {}, exact_cmp());
    AttrMap full = shape;
    full["value"] = "3";
    expect_cuda_matches_cpu("_full", full, {}, exact_cmp());
  }
  expect_cuda_matches_cpu("_full", {{"shape", "(4, 3)"}, {"value", "2.5"}}, {},
                          add_cmp({rnd(Shape{4, 3}, 190)}));
  expect_cuda_matches_cpu("_ones", {{"shape", "(4, 3)"}}, {}, add_cmp({rnd(Shape{4, 3}, 191)}));
  expect_cuda_matches_cpu("_zeros", {{"shape", "(4, 3)"}}, {}, add_cmp({rnd(Shape{4, 3}, 192)}));
  for (const char* dt : {"float32", "float64", "int32", "int64"}) {
    SCOPED_TRACE(dt);
    expect_cuda_matches_cpu(
        "_arange", {{"start", "2"}, {"stop", "40"}, {"step", "1.5"}, {"dtype", dt}}, {}, f32_cmp());
    expect_cuda_matches_cpu(
        "_arange", {{"start", "9"}, {"stop", "-3"}, {"step", "-2"}, {"repeat", "3"}, {"dtype", dt}},
        {}, f32_cmp());
  }
  expect_cuda_matches_cpu("_arange", {{"start", "5"}}, {}, add_cmp({rnd(Shape{5}, 193)}));
}

/// Runs a sampler on the GPU.
HostTensor sample_gpu(const std::string& op, AttrMap attrs, uint64_t seed) {
  RunOptions o;
  o.device = Device::cuda(0);
  o.seed = seed;
  return run_op(op, attrs, {}, o).at(0);
}

void expect_moments(const HostTensor& t, double mean, double var, double tol) {
  double s = 0, s2 = 0;
  for (double v : t.data) s += v;
  const double m = s / static_cast<double>(t.size());
  for (double v : t.data) s2 += (v - m) * (v - m);
  EXPECT_NEAR(m, mean, tol);
  EXPECT_NEAR(s2 / static_cast<double>(t.size()), var, tol * 4);
}

TEST(CudaInit, RandomUniformStatistics) {
  WEFT_REQUIRE_CUDA();
  for (const char* dt : {"float32", "float64", "float16"}) {
    SCOPED_TRACE(dt);
    const AttrMap a{{"low", "-1"}, {"high", "3"}, {"shape", "(1001, 201)"}, {"dtype", dt}};
    const HostTensor t = sample_gpu("_random_uniform", a, 5);
    for (double v : t.data) {
      ASSERT_GE(v, -1.0);
      ASSERT_LT(v, 3.0);
    }
    expect_moments(t, 1.0, 16.0 / 12.0, 0.01);
    // Same seed, same values; another seed, other values.
    EXPECT_TRUE(all_close(sample_gpu("_random_uniform", a, 5), t, 0, 0));
    EXPECT_NE(sample_gpu("_random_uniform", a, 6).data, t.data);
  }
}

TEST(CudaInit, RandomNormalStatistics) {
  WEFT_REQUIRE_CUDA();
  for (const char* dt : {"float32", "float64", "float16"}) {
    SCOPED_TRACE(dt);
    const AttrMap a{{"loc", "0.5"}, {"scale", "2"}, {"shape", "(1001, 203)"}, {"dtype", dt}};
    const HostTensor t = sample_gpu("_random_normal", a, 9);
    for (double v : t.data) ASSERT_TRUE(std::isfinite(v));
    expect_moments(t, 0.5, 4.0, 0.02);
    // About 68.3% within one standard deviation.
    int64_t within = 0;
    for (double v : t.data) within += std::abs(v - 0.5) < 2.0 ? 1 : 0;
    EXPECT_NEAR(static_cast<double>(within) / static_cast<double>(t.size()), 0.6827, 0.005);
    EXPECT_TRUE(all_close(sample_gpu("_random_normal", a, 9), t, 0, 0));
  }
  // Odd sizes fill every element (no group left short).
  const HostTensor odd = sample_gpu("_random_normal", {{"shape", "(7,)"}, {"dtype", "float64"}}, 3);
  for (double v : odd.data) EXPECT_NE(v, 0.0);
}

}  // namespace
}  // namespace weft::testing
