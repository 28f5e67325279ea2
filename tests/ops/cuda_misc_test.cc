// CUDA kernels of the norm and misc families (BatchNorm, LayerNorm, SoftmaxOutput, the regression
// heads, the optimizer updates, _contrib_CTCLoss) against the CPU kernels: outputs, mutated
// inputs (moving statistics, optimizer states) and gradients, with odd sizes and a few kAdd
// requests. Every test skips without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

HostTensor rnd(Shape s, uint64_t seed, DType dt = kF32, double lo = -1.0, double hi = 1.0) {
  return HostTensor::random(std::move(s), seed, lo, hi, dt);
}

CudaCompare f32_cmp(bool train = false) {
  CudaCompare c;
  c.rtol = 1e-4;
  c.atol = 1e-5;
  c.options.is_train = train;
  return c;
}
CudaCompare f64_cmp(bool train = false) {
  CudaCompare c;
  c.rtol = 1e-10;
  c.atol = 1e-12;
  c.options.is_train = train;
  return c;
}
CudaCompare add_cmp(const HostTensor& initial) {
  CudaCompare c = f32_cmp();
  c.gradients = false;
  c.options.req = {OpReq::kAdd};
  c.options.initial_outputs = {initial};
  return c;
}

/// data, gamma, beta, moving_mean, moving_var for channel axis `axis` of `shape`.
std::vector<HostTensor> bn_inputs(const Shape& shape, int axis, DType dt = kF32) {
  const int64_t c = shape[axis];
  return {rnd(shape, 1, dt, -2.0, 3.0), rnd(Shape{c}, 2, dt, 0.5, 1.5), rnd(Shape{c}, 3, dt),
          rnd(Shape{c}, 4, dt), rnd(Shape{c}, 5, dt, 0.5, 2.0)};
}

// ---- BatchNorm ----------------------------------------------------------------------------------

TEST(CudaBatchNorm, TrainingUpdatesMovingStats) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("BatchNorm", {{"fix_gamma", "false"}, {"momentum", "0.8"}},
                          bn_inputs(Shape{5, 7, 3, 4}, 1), f32_cmp(true));
}

TEST(CudaBatchNorm, TrainingFixGammaOutputMeanVarFloat64) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("BatchNorm", {{"output_mean_var", "true"}, {"eps", "1e-4"}},
                          bn_inputs(Shape{7, 13, 5}, 1, kF64), f64_cmp(true));
}

TEST(CudaBatchNorm, LastAxisTraining) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("BatchNorm", {{"fix_gamma", "false"}, {"axis", "-1"}},
                          bn_inputs(Shape{7, 13, 5}, 2), f32_cmp(true));
}

TEST(CudaBatchNorm, Inference) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("BatchNorm", {{"fix_gamma", "false"}}, bn_inputs(Shape{3, 6, 5, 7}, 1),
                          f32_cmp(false));
}

TEST(CudaBatchNorm, UseGlobalStatsInTraining) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("BatchNorm", {{"fix_gamma", "false"}, {"use_global_stats", "true"}},
                          bn_inputs(Shape{4, 3, 9}, 1), f32_cmp(true));
}

TEST(CudaBatchNorm, TwoDimensionalInput) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("BatchNorm", {{"fix_gamma", "false"}}, bn_inputs(Shape{33, 17}, 1),
                          f32_cmp(true));
}

// ---- LayerNorm ----------------------------------------------------------------------------------

TEST(CudaLayerNorm, LastAxis) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "LayerNorm", {{"output_mean_var", "true"}},
      {rnd(Shape{7, 13, 37}, 1, kF32, -2, 3), rnd(Shape{37}, 2), rnd(Shape{37}, 3)}, f32_cmp());
}

TEST(CudaLayerNorm, MiddleAxisFloat64) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "LayerNorm", {{"axis", "1"}, {"eps", "1e-3"}},
      {rnd(Shape{7, 13, 5}, 4, kF64), rnd(Shape{13}, 5, kF64), rnd(Shape{13}, 6, kF64)}, f64_cmp());
}

TEST(CudaLayerNorm, WideRows) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("LayerNorm", {},
                          {rnd(Shape{3, 1031}, 7), rnd(Shape{1031}, 8), rnd(Shape{1031}, 9)},
                          f32_cmp());
}

// ---- SoftmaxOutput and the regression heads ----------------------------------------------------

HostTensor int_labels(Shape s, int64_t classes, uint64_t seed) {
  HostTensor t = HostTensor::random(std::move(s), seed, 0.0, static_cast<double>(classes));
  for (double& v : t.data) v = static_cast<double>(static_cast<int64_t>(v));
  return t;
}

TEST(CudaSoftmaxOutput, Default) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("SoftmaxOutput", {{"grad_scale", "0.5"}},
                          {rnd(Shape{7, 13}, 1, kF32, -3, 3), int_labels(Shape{7}, 13, 2)},
                          f32_cmp());
}

TEST(CudaSoftmaxOutput, MultiOutputValidIgnore) {
  WEFT_REQUIRE_CUDA();
  HostTensor label = int_labels(Shape{4, 3, 2}, 5, 3);
  label.data[1] = -1;
  label.data[5] = -1;
  expect_cuda_matches_cpu(
      "SoftmaxOutput",
      {{"multi_output", "true"}, {"use_ignore", "true"}, {"normalization", "valid"}},
      {rnd(Shape{4, 5, 3, 2}, 4, kF32, -3, 3), label}, f32_cmp());
}

TEST(CudaSoftmaxOutput, MultiOutputBatchNorm) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("SoftmaxOutput", {{"multi_output", "true"}, {"normalization", "batch"}},
                          {rnd(Shape{3, 7, 5}, 5), int_labels(Shape{3, 5}, 7, 6)}, f32_cmp());
}

TEST(CudaSoftmaxOutput, PreserveShapeSmoothOutGradFloat64) {
  WEFT_REQUIRE_CUDA();
  HostTensor label = int_labels(Shape{3, 4}, 9, 8);
  label.dtype = kF64;
  expect_cuda_matches_cpu(
      "SoftmaxOutput", {{"preserve_shape", "true"}, {"smooth_alpha", "0.1"}, {"out_grad", "true"}},
      {rnd(Shape{3, 4, 9}, 7, kF64), label}, f64_cmp());
}

TEST(CudaSoftmaxOutput, ProbabilityLabels) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("SoftmaxOutput", {},
                          {rnd(Shape{6, 11}, 9), rnd(Shape{6, 11}, 10, kF32, 0, 1)}, f32_cmp());
}

TEST(CudaRegressionOutput, AllKinds) {
  WEFT_REQUIRE_CUDA();
  for (const char* op :
       {"LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {{"grad_scale", "1.5"}},
                            {rnd(Shape{7, 13}, 1), rnd(Shape{7, 13}, 2)}, f32_cmp());
    expect_cuda_matches_cpu(op, {}, {rnd(Shape{9, 1}, 3), rnd(Shape{9}, 4)}, f32_cmp());
  }
}

TEST(CudaRegressionOutput, AddTo) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("LogisticRegressionOutput", {},
                          {rnd(Shape{5, 7}, 1), rnd(Shape{5, 7}, 2)}, add_cmp(rnd(Shape{5, 7}, 3)));
}

// ---- optimizer updates --------------------------------------------------------------------------

const AttrMap kScaling = {
    {"lr", "0.1"}, {"wd", "0.01"}, {"rescale_grad", "0.7"}, {"clip_gradient", "0.5"}};

AttrMap with(AttrMap a, const AttrMap& more) {
  for (const auto& [k, v] : more) a[k] = v;
  return a;
}

CudaCompare update_cmp(DType dt) {
  CudaCompare c = dt == kF64 ? f64_cmp() : f32_cmp();
  c.gradients = false;
  return c;
}

TEST(CudaOptimizer, SgdUpdate) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : {kF32, kF64}) {
    expect_cuda_matches_cpu("sgd_update", kScaling,
                            {rnd(Shape{7, 13, 5}, 1, dt), rnd(Shape{7, 13, 5}, 2, dt, -2, 2)},
                            update_cmp(dt));
  }
}

TEST(CudaOptimizer, SgdMomUpdate) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : {kF32, kF64}) {
    expect_cuda_matches_cpu(
        "sgd_mom_update", with(kScaling, {{"momentum", "0.9"}}),
        {rnd(Shape{1001}, 1, dt), rnd(Shape{1001}, 2, dt, -2, 2), rnd(Shape{1001}, 3, dt)},
        update_cmp(dt));
  }
}

TEST(CudaOptimizer, AdamUpdate) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : {kF32, kF64}) {
    expect_cuda_matches_cpu("adam_update", with(kScaling, {{"beta1", "0.8"}}),
                            {rnd(Shape{7, 13}, 1, dt), rnd(Shape{7, 13}, 2, dt, -2, 2),
                             rnd(Shape{7, 13}, 3, dt), rnd(Shape{7, 13}, 4, dt, 0, 1)},
                            update_cmp(dt));
  }
}

TEST(CudaOptimizer, AdamWUpdate) {
  WEFT_REQUIRE_CUDA();
  const std::vector<HostTensor> in{rnd(Shape{5, 9}, 1), rnd(Shape{5, 9}, 2, kF32, -2, 2),
                                   rnd(Shape{5, 9}, 3), rnd(Shape{5, 9}, 4, kF32, 0, 1)};
  expect_cuda_matches_cpu("adamw_update", with(kScaling, {{"eta", "0.5"}}), in, update_cmp(kF32));
  // A zero rescale_grad skips the step.
  expect_cuda_matches_cpu("adamw_update", with(kScaling, {{"rescale_grad", "0"}}), in,
                          update_cmp(kF32));
}

TEST(CudaOptimizer, SgdUpdateAddTo) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("sgd_update", kScaling, {rnd(Shape{7, 3}, 1), rnd(Shape{7, 3}, 2)},
                          add_cmp(rnd(Shape{7, 3}, 3)));
}

// ---- CTC loss -----------------------------------------------------------------------------------

TEST(CudaCTCLoss, PaddedLabelsBlankFirst) {
  WEFT_REQUIRE_CUDA();
  // Sequence 1 repeats a class (needs a blank between), sequence 3 has no label.
  HostTensor label = HostTensor::of(Shape{4, 3}, {1, 2, 3, 2, 2, 0, 5, 0, 0, 0, 0, 0});
  expect_cuda_matches_cpu("_contrib_CTCLoss", {}, {rnd(Shape{9, 4, 6}, 1, kF32, -2, 2), label},
                          f32_cmp());
}

TEST(CudaCTCLoss, LengthsBlankLastFloat64) {
  WEFT_REQUIRE_CUDA();
  HostTensor label = HostTensor::of(Shape{3, 4}, {0, 1, 1, 3, 2, -1, -1, -1, 4, 0, 2, 1}, kF64);
  HostTensor dlen = HostTensor::of(Shape{3}, {11, 5, 2}, kF64);
  HostTensor llen = HostTensor::of(Shape{3}, {4, 1, 1}, kF64);
  expect_cuda_matches_cpu(
      "_contrib_CTCLoss",
      {{"blank_label", "last"}, {"use_data_lengths", "true"}, {"use_label_lengths", "true"}},
      {rnd(Shape{11, 3, 6}, 2, kF64, -2, 2), label, dlen, llen}, f64_cmp());
}

// ---- UpSampling ---------------------------------------------------------------------------------

TEST(CudaUpSampling, NearestConcatTwoInputs) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("UpSampling",
                          {{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "2"}},
                          {rnd(Shape{2, 3, 5, 7}, 1), rnd(Shape{2, 4, 10, 14}, 2)}, f32_cmp());
}

TEST(CudaUpSampling, NearestSumScale3) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu(
      "UpSampling",
      {{"scale", "3"}, {"sample_type", "nearest"}, {"num_args", "2"}, {"multi_input_mode", "sum"}},
      {rnd(Shape{2, 3, 4, 5}, 3), rnd(Shape{2, 3, 12, 15}, 4)}, f32_cmp());
}

TEST(CudaUpSampling, NearestAddTo) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("UpSampling",
                          {{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "1"}},
                          {rnd(Shape{1, 3, 5, 7}, 5)}, add_cmp(rnd(Shape{1, 3, 10, 14}, 6)));
}

TEST(CudaUpSampling, Bilinear) {
  WEFT_REQUIRE_CUDA();
  for (int scale : {2, 3}) {
    const int64_t k = 2 * scale - scale % 2;
    expect_cuda_matches_cpu("UpSampling",
                            {{"scale", std::to_string(scale)},
                             {"sample_type", "bilinear"},
                             {"num_args", "2"},
                             {"num_filter", "3"}},
                            {rnd(Shape{2, 3, 5, 7}, 7), rnd(Shape{3, 1, k, k}, 8)}, f32_cmp());
  }
}

// ---- image ops ----------------------------------------------------------------------------------

TEST(CudaImage, ToTensor) {
  WEFT_REQUIRE_CUDA();
  HostTensor img = HostTensor::random(Shape{2, 5, 7, 3}, 1, 0, 255, DType::kUInt8);
  for (double& v : img.data) v = static_cast<double>(static_cast<int>(v));
  CudaCompare c = f32_cmp();
  c.gradients = false;  // no FGradient
  expect_cuda_matches_cpu("_image_to_tensor", {}, {img}, c);
  expect_cuda_matches_cpu("_image_to_tensor", {}, {rnd(Shape{5, 7, 2}, 2, kF32, 0, 255)}, c);
}

TEST(CudaImage, Normalize) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("_image_normalize",
                          {{"mean", "(0.1, 0.2, 0.3)"}, {"std", "(0.5, 2.0, 1.5)"}},
                          {rnd(Shape{2, 3, 5, 7}, 3)}, f32_cmp());
  expect_cuda_matches_cpu("_image_normalize", {{"mean", "0.4"}, {"std", "3"}},
                          {rnd(Shape{4, 5, 3}, 4, kF64)}, f64_cmp());
}

TEST(CudaImage, Flips) {
  WEFT_REQUIRE_CUDA();
  for (const char* op : {"_image_flip_left_right", "_image_flip_top_bottom"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {}, {rnd(Shape{5, 7, 3}, 5)}, f32_cmp());
    expect_cuda_matches_cpu(op, {}, {rnd(Shape{2, 4, 5, 2}, 6)},
                            add_cmp(rnd(Shape{2, 4, 5, 2}, 7)));
  }
}

TEST(CudaImage, RandomFlipsWithCertainOutcomes) {
  WEFT_REQUIRE_CUDA();
  for (const char* op : {"_image_random_flip_left_right", "_image_random_flip_top_bottom"}) {
    SCOPED_TRACE(op);
    CudaCompare c = f32_cmp();
    c.gradients = false;
    expect_cuda_matches_cpu(op, {{"p", "1"}}, {rnd(Shape{5, 7, 3}, 8)}, c);
    expect_cuda_matches_cpu(op, {{"p", "0"}}, {rnd(Shape{5, 7, 3}, 9)}, c);
  }
}

}  // namespace
}  // namespace weft::testing
