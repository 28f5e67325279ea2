// CUDA kernels of the blas and cudnn families (FullyConnected, _fused_fc_act, dot, batch_dot,
// Convolution, Deconvolution, Pooling, Activation, LeakyReLU, LRN, Dropout) against the CPU
// kernels: outputs and gradients, odd sizes, every OpReq on a few ops, float16/bfloat16 with loose
// tolerances. Random ops are checked by their statistics. Every test skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

HostTensor rnd(Shape s, uint64_t seed, DType dt = kF32) {
  return HostTensor::random(std::move(s), seed, -1.0, 1.0, dt);
}

/// Tolerances of a GEMM/convolution in float32 against the CPU's summation order.
CudaCompare f32_cmp() {
  CudaCompare c;
  c.rtol = 1e-4;
  c.atol = 1e-5;
  return c;
}
CudaCompare f64_cmp() {
  CudaCompare c;
  c.rtol = 1e-10;
  c.atol = 1e-12;
  return c;
}
CudaCompare half_cmp(DType dt) {
  CudaCompare c;
  c.cuda_dtype = dt;
  c.rtol = dt == DType::kBFloat16 ? 5e-2 : 1e-2;
  c.atol = dt == DType::kBFloat16 ? 5e-2 : 1e-2;
  return c;
}
/// Forward only, with output 0 accumulated into `initial`.
CudaCompare add_cmp(const HostTensor& initial) {
  CudaCompare c = f32_cmp();
  c.gradients = false;
  c.options.req = {OpReq::kAdd};
  c.options.initial_outputs = {initial};
  return c;
}

// ---- FullyConnected / dot / batch_dot ----------------------------------------------------------

TEST(CudaFullyConnected, FlattenWithBiasOddSizes) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("FullyConnected", {{"num_hidden", "9"}},
                          {rnd(Shape{7, 13, 5}, 1), rnd(Shape{9, 65}, 2), rnd(Shape{9}, 3)},
                          f32_cmp());
}

TEST(CudaFullyConnected, NoBiasAndLastAxis) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("FullyConnected",
                          {{"num_hidden", "6"}, {"no_bias", "True"}, {"flatten", "False"}},
                          {rnd(Shape{3, 5, 7}, 4), rnd(Shape{6, 7}, 5)}, f32_cmp());
  expect_cuda_matches_cpu("FullyConnected", {{"num_hidden", "11"}, {"no_bias", "True"}},
                          {rnd(Shape{1, 17}, 6), rnd(Shape{11, 17}, 7)}, f32_cmp());
}

TEST(CudaFullyConnected, Float64AndHalfTypes) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "FullyConnected", {{"num_hidden", "5"}},
      {rnd(Shape{4, 3, 3}, 8, kF64), rnd(Shape{5, 9}, 9, kF64), rnd(Shape{5}, 10, kF64)},
      f64_cmp());
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    expect_cuda_matches_cpu("FullyConnected", {{"num_hidden", "7"}},
                            {rnd(Shape{6, 10}, 11), rnd(Shape{7, 10}, 12), rnd(Shape{7}, 13)},
                            half_cmp(dt));
  }
}

TEST(CudaFullyConnected, AccumulatesWithAddReq) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("FullyConnected", {{"num_hidden", "4"}},
                          {rnd(Shape{5, 6}, 14), rnd(Shape{4, 6}, 15), rnd(Shape{4}, 16)},
                          add_cmp(rnd(Shape{5, 4}, 17)));
}

TEST(CudaFullyConnected, FusedActivation) {
  WEFT_REQUIRE_CUDA();
  for (const char* act : {"relu", "sigmoid", "tanh", "softrelu"}) {
    CudaCompare c = f32_cmp();
    c.gradients = false;
    expect_cuda_matches_cpu("_fused_fc_act", {{"num_hidden", "8"}, {"__act_type__", act}},
                            {rnd(Shape{5, 7}, 18), rnd(Shape{8, 7}, 19), rnd(Shape{8}, 20)}, c);
  }
  CudaCompare c = f32_cmp();
  c.gradients = false;
  expect_cuda_matches_cpu(
      "_fused_fc_act", {{"num_hidden", "3"}, {"__act_type__", "leaky"}, {"__act_alpha__", "0.1"}},
      {rnd(Shape{4, 5}, 21), rnd(Shape{3, 5}, 22), rnd(Shape{3}, 23)}, c);
}

TEST(CudaDot, TransposesAndRanks) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("dot", {}, {rnd(Shape{7, 13}, 30), rnd(Shape{13, 5}, 31)}, f32_cmp());
  expect_cuda_matches_cpu("dot", {{"transpose_a", "True"}},
                          {rnd(Shape{13, 7}, 32), rnd(Shape{13, 5}, 33)}, f32_cmp());
  expect_cuda_matches_cpu("dot", {{"transpose_b", "True"}},
                          {rnd(Shape{7, 13}, 34), rnd(Shape{5, 13}, 35)}, f32_cmp());
  expect_cuda_matches_cpu("dot", {{"transpose_a", "True"}, {"transpose_b", "True"}},
                          {rnd(Shape{13, 7}, 36), rnd(Shape{5, 13}, 37)}, f32_cmp());
  // N-d: lhs (2, 3, 4) · rhs (4, 5, 2) → (2, 3, 5, 2).
  expect_cuda_matches_cpu("dot", {}, {rnd(Shape{2, 3, 4}, 38), rnd(Shape{4, 5, 2}, 39)}, f32_cmp());
  expect_cuda_matches_cpu("dot", {{"transpose_a", "True"}, {"transpose_b", "True"}},
                          {rnd(Shape{4, 3, 2}, 40), rnd(Shape{5, 2, 4}, 41)}, f32_cmp());
  // Vectors: the inner product, and a matrix-vector product.
  expect_cuda_matches_cpu("dot", {}, {rnd(Shape{9}, 42), rnd(Shape{9}, 43)}, f32_cmp());
  expect_cuda_matches_cpu("dot", {}, {rnd(Shape{6, 9}, 44), rnd(Shape{9}, 45)}, f32_cmp());
  expect_cuda_matches_cpu("dot", {}, {rnd(Shape{5, 3}, 46, kF64), rnd(Shape{3, 4}, 47, kF64)},
                          f64_cmp());
  expect_cuda_matches_cpu("dot", {}, {rnd(Shape{8, 16}, 48), rnd(Shape{16, 8}, 49)},
                          half_cmp(DType::kFloat16));
  expect_cuda_matches_cpu("dot", {}, {rnd(Shape{3, 4}, 50), rnd(Shape{4, 2}, 51)},
                          add_cmp(rnd(Shape{3, 2}, 52)));
}

TEST(CudaBatchDot, TransposesAndBatchDims) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("batch_dot", {}, {rnd(Shape{3, 7, 5}, 60), rnd(Shape{3, 5, 4}, 61)},
                          f32_cmp());
  expect_cuda_matches_cpu("batch_dot", {{"transpose_a", "True"}},
                          {rnd(Shape{3, 5, 7}, 62), rnd(Shape{3, 5, 4}, 63)}, f32_cmp());
  expect_cuda_matches_cpu("batch_dot", {{"transpose_b", "True"}},
                          {rnd(Shape{3, 7, 5}, 64), rnd(Shape{3, 4, 5}, 65)}, f32_cmp());
  expect_cuda_matches_cpu("batch_dot", {{"transpose_a", "True"}, {"transpose_b", "True"}},
                          {rnd(Shape{2, 3, 5, 7}, 66), rnd(Shape{2, 3, 4, 5}, 67)}, f32_cmp());
  expect_cuda_matches_cpu(
      "batch_dot", {}, {rnd(Shape{4, 3, 2}, 68, kF64), rnd(Shape{4, 2, 5}, 69, kF64)}, f64_cmp());
  expect_cuda_matches_cpu("batch_dot", {}, {rnd(Shape{2, 8, 8}, 70), rnd(Shape{2, 8, 8}, 71)},
                          half_cmp(DType::kBFloat16));
}

// ---- Convolution / Deconvolution ---------------------------------------------------------------

TEST(CudaConvolution, OddSizesPadStrideDilation) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd(Shape{2, 3, 7, 9}, 80);
  expect_cuda_matches_cpu("Convolution",
                          {{"kernel", "(3,3)"}, {"num_filter", "5"}, {"pad", "(1,1)"}},
                          {x, rnd(Shape{5, 3, 3, 3}, 81), rnd(Shape{5}, 82)}, f32_cmp());
  expect_cuda_matches_cpu("Convolution",
                          {{"kernel", "(3,2)"}, {"num_filter", "4"}, {"stride", "(2,2)"}},
                          {x, rnd(Shape{4, 3, 3, 2}, 83), rnd(Shape{4}, 84)}, f32_cmp());
  expect_cuda_matches_cpu("Convolution",
                          {{"kernel", "(3,3)"},
                           {"num_filter", "2"},
                           {"dilate", "(2,2)"},
                           {"pad", "(2,1)"},
                           {"no_bias", "True"}},
                          {x, rnd(Shape{2, 3, 3, 3}, 85)}, f32_cmp());
}

TEST(CudaConvolution, GroupsAndDepthwise) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "Convolution",
      {{"kernel", "(3,3)"}, {"num_filter", "6"}, {"num_group", "2"}, {"pad", "(1,1)"}},
      {rnd(Shape{2, 4, 5, 6}, 90), rnd(Shape{6, 2, 3, 3}, 91), rnd(Shape{6}, 92)}, f32_cmp());
  expect_cuda_matches_cpu(
      "Convolution",
      {{"kernel", "(3,3)"},
       {"num_filter", "4"},
       {"num_group", "4"},
       {"stride", "(2,2)"},
       {"pad", "(1,1)"}},
      {rnd(Shape{1, 4, 9, 7}, 93), rnd(Shape{4, 1, 3, 3}, 94), rnd(Shape{4}, 95)}, f32_cmp());
}

TEST(CudaConvolution, OneAndThreeDims) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "Convolution", {{"kernel", "(3,)"}, {"num_filter", "4"}, {"pad", "(1,)"}, {"stride", "(2,)"}},
      {rnd(Shape{2, 3, 11}, 100), rnd(Shape{4, 3, 3}, 101), rnd(Shape{4}, 102)}, f32_cmp());
  expect_cuda_matches_cpu(
      "Convolution", {{"kernel", "(2,3,3)"}, {"num_filter", "3"}, {"pad", "(0,1,1)"}},
      {rnd(Shape{1, 2, 4, 5, 6}, 103), rnd(Shape{3, 2, 2, 3, 3}, 104), rnd(Shape{3}, 105)},
      f32_cmp());
}

TEST(CudaConvolution, TypesAndAddReq) {
  WEFT_REQUIRE_CUDA();
  const AttrMap a{{"kernel", "(3,3)"}, {"num_filter", "4"}, {"pad", "(1,1)"}};
  expect_cuda_matches_cpu("Convolution", a,
                          {rnd(Shape{2, 3, 5, 5}, 110, kF64), rnd(Shape{4, 3, 3, 3}, 111, kF64),
                           rnd(Shape{4}, 112, kF64)},
                          f64_cmp());
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    CudaCompare c = half_cmp(dt);
    c.rtol = c.atol = 0.1;  // sums of 27 products in 16 bits
    expect_cuda_matches_cpu(
        "Convolution", a,
        {rnd(Shape{2, 3, 5, 5}, 113), rnd(Shape{4, 3, 3, 3}, 114), rnd(Shape{4}, 115)}, c);
  }
  expect_cuda_matches_cpu(
      "Convolution", a,
      {rnd(Shape{2, 3, 5, 5}, 116), rnd(Shape{4, 3, 3, 3}, 117), rnd(Shape{4}, 118)},
      add_cmp(rnd(Shape{2, 4, 5, 5}, 119)));
}

TEST(CudaDeconvolution, StrideAdjGroupsBias) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "Deconvolution",
      {{"kernel", "(3,3)"},
       {"num_filter", "4"},
       {"stride", "(2,2)"},
       {"pad", "(1,1)"},
       {"adj", "(1,1)"},
       {"no_bias", "False"}},
      {rnd(Shape{2, 3, 5, 4}, 120), rnd(Shape{3, 4, 3, 3}, 121), rnd(Shape{4}, 122)}, f32_cmp());
  expect_cuda_matches_cpu("Deconvolution",
                          {{"kernel", "(2,2)"}, {"num_filter", "6"}, {"num_group", "2"}},
                          {rnd(Shape{1, 4, 3, 5}, 123), rnd(Shape{4, 3, 2, 2}, 124)}, f32_cmp());
  expect_cuda_matches_cpu("Deconvolution",
                          {{"kernel", "(4,)"}, {"num_filter", "2"}, {"stride", "(3,)"}},
                          {rnd(Shape{2, 3, 6}, 125), rnd(Shape{3, 2, 4}, 126)}, f32_cmp());
}

TEST(CudaFusedConv, BatchNormSumAndActivations) {
  WEFT_REQUIRE_CUDA();
  CudaCompare c = f32_cmp();
  c.gradients = false;
  const HostTensor x = rnd(Shape{2, 3, 7, 6}, 127);
  const HostTensor w = rnd(Shape{4, 3, 3, 3}, 128);
  const HostTensor bias = rnd(Shape{4}, 129);
  const HostTensor gamma = HostTensor::random(Shape{4}, 130, 0.5, 1.5);
  const HostTensor beta = rnd(Shape{4}, 131);
  const HostTensor mean = rnd(Shape{4}, 132);
  const HostTensor var = HostTensor::random(Shape{4}, 133, 0.5, 2.0);
  const AttrMap conv{{"kernel", "(3,3)"}, {"num_filter", "4"}, {"pad", "(1,1)"}};
  // BatchNorm (gamma used) then relu.
  AttrMap a = conv;
  a["__bn_fix_gamma__"] = "False";
  a["__act_type__"] = "relu";
  expect_cuda_matches_cpu("_fused_conv_bn_act", a, {x, w, bias, gamma, beta, mean, var}, c);
  // No BatchNorm, a same-shape sum, then clip.
  a = conv;
  a["__with_bn__"] = "False";
  a["__with_sum__"] = "True";
  a["__act_type__"] = "clip";
  a["__act_alpha__"] = "-0.5";
  a["__act_beta__"] = "0.5";
  expect_cuda_matches_cpu("_fused_conv_bn_act", a, {x, w, bias, rnd(Shape{2, 4, 7, 6}, 134)}, c);
  // BatchNorm without bias, a broadcast sum, then prelu per channel.
  a = conv;
  a["no_bias"] = "True";
  a["__with_sum__"] = "True";
  a["__sum_broadcast__"] = "True";
  a["__act_type__"] = "prelu";
  expect_cuda_matches_cpu("_fused_conv_bn_act", a,
                          {x, w, gamma, beta, mean, var, rnd(Shape{1, 4, 1, 6}, 135),
                           HostTensor::random(Shape{4}, 136, 0, 0.5)},
                          c);
}

// ---- Pooling -----------------------------------------------------------------------------------

TEST(CudaPooling, TypesAndConventions) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd(Shape{2, 3, 7, 8}, 130);
  for (const char* type : {"max", "avg", "sum"}) {
    for (const char* conv : {"valid", "full"}) {
      expect_cuda_matches_cpu("Pooling",
                              {{"kernel", "(3,3)"},
                               {"stride", "(2,2)"},
                               {"pad", "(1,1)"},
                               {"pool_type", type},
                               {"pooling_convention", conv}},
                              {x});
    }
  }
  expect_cuda_matches_cpu("Pooling",
                          {{"kernel", "(3,2)"},
                           {"stride", "(2,1)"},
                           {"pad", "(1,1)"},
                           {"pool_type", "avg"},
                           {"count_include_pad", "False"}},
                          {x});
  expect_cuda_matches_cpu("Pooling", {{"kernel", "(2,2)"}, {"pool_type", "lp"}, {"p_value", "2"}},
                          {HostTensor::random(Shape{1, 2, 5, 5}, 131, 0.5, 1.5)}, f32_cmp());
}

TEST(CudaPooling, GlobalOneAndThreeDims) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("Pooling", {{"kernel", "(1,1)"}, {"global_pool", "True"}},
                          {rnd(Shape{2, 5, 6, 7}, 140)});
  expect_cuda_matches_cpu("Pooling",
                          {{"kernel", "(1,1)"}, {"global_pool", "True"}, {"pool_type", "avg"}},
                          {rnd(Shape{2, 5, 6, 7}, 141)});
  expect_cuda_matches_cpu("Pooling",
                          {{"kernel", "(3,)"}, {"stride", "(2,)"}, {"pooling_convention", "full"}},
                          {rnd(Shape{2, 3, 10}, 142)});
  expect_cuda_matches_cpu("Pooling",
                          {{"kernel", "(2,2,2)"}, {"stride", "(2,2,2)"}, {"pool_type", "avg"}},
                          {rnd(Shape{1, 2, 5, 4, 6}, 143)});
}

TEST(CudaPooling, HalfTypesAndAddReq) {
  WEFT_REQUIRE_CUDA();
  const AttrMap a{{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}};
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    expect_cuda_matches_cpu("Pooling", a, {rnd(Shape{2, 3, 6, 6}, 150)}, half_cmp(dt));
  expect_cuda_matches_cpu("Pooling", {{"kernel", "(3,3)"}, {"stride", "(2,2)"}},
                          {rnd(Shape{2, 3, 7, 7}, 151, kF64)});
  expect_cuda_matches_cpu("Pooling", a, {rnd(Shape{2, 3, 6, 6}, 152)},
                          add_cmp(rnd(Shape{2, 3, 3, 3}, 153)));
}

// ---- Activation / LeakyReLU --------------------------------------------------------------------

TEST(CudaActivation, AllTypes) {
  WEFT_REQUIRE_CUDA();
  for (const char* t : {"relu", "sigmoid", "tanh", "softrelu", "softsign"}) {
    expect_cuda_matches_cpu("Activation", {{"act_type", t}},
                            {HostTensor::random(Shape{7, 13, 5}, 160, -3, 3)});
    expect_cuda_matches_cpu("Activation", {{"act_type", t}},
                            {HostTensor::random(Shape{4, 9}, 161, -3, 3, kF64)});
    expect_cuda_matches_cpu("Activation", {{"act_type", t}},
                            {HostTensor::random(Shape{4, 9}, 162, -3, 3)},
                            half_cmp(DType::kFloat16));
  }
  expect_cuda_matches_cpu("Activation", {{"act_type", "tanh"}}, {rnd(Shape{3, 5}, 163)},
                          add_cmp(rnd(Shape{3, 5}, 164)));
}

TEST(CudaLeakyReLU, ElementwiseTypes) {
  WEFT_REQUIRE_CUDA();
  for (const char* t : {"leaky", "elu", "selu", "gelu"}) {
    expect_cuda_matches_cpu("LeakyReLU", {{"act_type", t}, {"slope", "0.2"}},
                            {HostTensor::random(Shape{7, 13, 5}, 170, -3, 3)});
  }
  expect_cuda_matches_cpu("LeakyReLU", {{"act_type", "elu"}},
                          {HostTensor::random(Shape{5, 6}, 171, -3, 3, kF64)});
  // rrelu at inference: the midpoint slope, deterministic.
  expect_cuda_matches_cpu("LeakyReLU", {{"act_type", "rrelu"}},
                          {HostTensor::random(Shape{4, 6}, 172, -3, 3)});
}

TEST(CudaLeakyReLU, PReLUPerChannelAndShared) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("LeakyReLU", {{"act_type", "prelu"}},
                          {rnd(Shape{3, 4, 5, 6}, 180), HostTensor::random(Shape{4}, 181, 0, 0.5)},
                          f32_cmp());
  expect_cuda_matches_cpu("LeakyReLU", {{"act_type", "prelu"}},
                          {rnd(Shape{3, 7}, 182), HostTensor::random(Shape{1}, 183, 0, 0.5)},
                          f32_cmp());
}

TEST(CudaLeakyReLU, RReLUTrainingSlopesInBounds) {
  WEFT_REQUIRE_CUDA();
  RunOptions o;
  o.is_train = true;
  o.device = Device::cuda(0);
  const HostTensor x = HostTensor::random(Shape{40, 50}, 190, -2, 2);
  auto out = run_op(
      "LeakyReLU", {{"act_type", "rrelu"}, {"lower_bound", "0.1"}, {"upper_bound", "0.3"}}, {x}, o);
  ASSERT_EQ(out.size(), 2u);
  double mean = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    const double s = out[1].data[i];
    ASSERT_GE(s, 0.1 - 1e-6);
    ASSERT_LE(s, 0.3 + 1e-6);
    mean += s;
    const double want = x.data[i] > 0 ? x.data[i] : s * x.data[i];
    ASSERT_NEAR(out[0].data[i], want, 1e-6);
  }
  EXPECT_NEAR(mean / x.size(), 0.2, 0.01);
}

// ---- LRN ---------------------------------------------------------------------------------------

TEST(CudaLRN, WindowsAtTheChannelEdges) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("LRN", {{"nsize", "3"}}, {rnd(Shape{2, 5, 4, 3}, 210)});
  expect_cuda_matches_cpu("LRN",
                          {{"nsize", "5"}, {"alpha", "0.01"}, {"beta", "0.5"}, {"knorm", "1"}},
                          {rnd(Shape{3, 7, 6}, 211, kF64)}, f64_cmp());
}

// ---- Dropout -----------------------------------------------------------------------------------

TEST(CudaDropout, InferenceIsIdentity) {
  WEFT_REQUIRE_CUDA();
  CudaCompare c;
  c.gradients = false;
  expect_cuda_matches_cpu("Dropout", {{"p", "0.3"}}, {rnd(Shape{7, 13}, 200)}, c);
}

TEST(CudaDropout, TrainingMaskStatisticsAndGradient) {
  WEFT_REQUIRE_CUDA();
  RunOptions o;
  o.is_train = true;
  o.seed = 5;
  o.device = Device::cuda(0);
  const HostTensor x = HostTensor::random(Shape{100, 200}, 201, 0.5, 1.5);
  auto out = run_op("Dropout", {{"p", "0.25"}}, {x}, o);
  int64_t dropped = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    const double m = out[1].data[i];
    ASSERT_TRUE(m == 0.0 || std::abs(m - 1 / 0.75) < 1e-5) << m;
    dropped += m == 0.0;
    ASSERT_NEAR(out[0].data[i], x.data[i] * m, 1e-5);
  }
  EXPECT_NEAR(static_cast<double>(dropped) / x.size(), 0.25, 0.02);
  // Another seed gives another mask.
  o.seed = 6;
  auto out2 = run_op("Dropout", {{"p", "0.25"}}, {x}, o);
  EXPECT_NE(out[1].data, out2[1].data);
  // The gradient is the output gradient times the mask.
  const HostTensor dy = rnd(Shape{100, 200}, 202);
  RunOptions b;
  b.device = Device::cuda(0);
  auto dx = run_op("_backward_Dropout", {{"p", "0.25"}}, {dy, out[1]}, b);
  for (int64_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(dx[0].data[i], dy.data[i] * out[1].data[i], 1e-5);
}

TEST(CudaDropout, SharedAxesMask) {
  WEFT_REQUIRE_CUDA();
  RunOptions o;
  o.is_train = true;
  o.device = Device::cuda(0);
  const HostTensor x = HostTensor::filled(Shape{6, 50, 4}, 1.0);
  auto out = run_op("Dropout", {{"p", "0.5"}, {"axes", "(1,)"}}, {x}, o);
  ASSERT_EQ(out[1].shape, (Shape{6, 1, 4}));
  for (int64_t a = 0; a < 6; ++a)
    for (int64_t b = 0; b < 50; ++b)
      for (int64_t c = 0; c < 4; ++c) ASSERT_EQ(out[0].at({a, b, c}), out[1].at({a, 0, c}));
}

}  // namespace
}  // namespace weft::testing
