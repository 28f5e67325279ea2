// Half types in the norm family. CUDA kernels of BatchNorm, LayerNorm, LRN, the loss heads
// (SoftmaxOutput, Linear/Logistic/MAE regression) and the optimizer updates in float16/bfloat16
// against the CPU kernels run in float32 on the same rounded values: outputs, updated state and
// gradients, odd sizes. BatchNorm is mixed precision (float32 gamma, beta and moving statistics, as
// MXNet). The CUDA tests skip without a device; the type-inference and CPU-refusal tests at the top
// run everywhere.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kHalfTypes[] = {DType::kFloat16, DType::kBFloat16};

HostTensor rnd(Shape s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return HostTensor::random(std::move(s), seed, lo, hi, kF32);
}

/// The element-wise tolerance of a result rounded to `dt` (about 4 ulp of values near 1).
double tol_of(DType dt) { return dt == DType::kBFloat16 ? 5e-2 : 1e-2; }
CudaCompare half_cmp(DType dt) { return cuda_half(dt, tol_of(dt), tol_of(dt)); }

/// `t` relabelled as `dt` (its values are already representable there).
HostTensor as_type(HostTensor t, DType dt) {
  t.dtype = dt;
  return t;
}

// ---- type inference and the CPU's refusal (no device needed) -----------------------------------

TEST(HalfNormTypes, BatchNormTakesFloat32ParametersWithHalfDataAsMXNet) {
  const DType u = DType::kUnknown;
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const auto [in, out] = infer_types("BatchNorm", {}, {dt, u, u, u, u});
    EXPECT_EQ(in, (std::vector<DType>{dt, kF32, kF32, kF32, kF32}));
    EXPECT_EQ(out, (std::vector<DType>{dt, kF32, kF32}));
    // Known float32 parameters are accepted, 16-bit ones refused (MXNet's UNIFORM_TYPE_CHECK).
    EXPECT_NO_THROW(infer_types("BatchNorm", {}, {dt, kF32, kF32, kF32, kF32}));
    EXPECT_THROW(infer_types("BatchNorm", {}, {dt, dt, u, u, u}), ValueError);
    // The backward op: out_grad and data in the 16-bit type, the rest float32.
    const auto [bin, bout] = infer_types("_backward_BatchNorm", {}, {u, dt, u, u, u, u, u});
    EXPECT_EQ(bin, (std::vector<DType>{dt, dt, kF32, kF32, kF32, kF32, kF32}));
    EXPECT_EQ(bout, (std::vector<DType>{dt, kF32, kF32}));
  }
  // float32/float64 data keeps one type for everything.
  for (DType dt : {kF32, DType::kFloat64}) {
    const auto [in, out] = infer_types("BatchNorm", {}, {dt, u, u, u, u});
    EXPECT_EQ(in, (std::vector<DType>(5, dt)));
    EXPECT_EQ(out, (std::vector<DType>(3, dt)));
  }
  // A float64 parameter fixes the data's type; a float32 one leaves it open.
  EXPECT_EQ(infer_types("BatchNorm", {}, {u, DType::kFloat64, u, u, u}).first[0], DType::kFloat64);
  EXPECT_EQ(infer_types("BatchNorm", {}, {u, kF32, u, u, u}).first[0], u);
  EXPECT_THROW(infer_types("BatchNorm", {}, {DType::kInt32, u, u, u, u}), ValueError);
}

TEST(HalfNormTypes, LayerNormAndLossHeadsAcceptHalfTypes) {
  const DType u = DType::kUnknown;
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    // LayerNorm: one type for data, gamma, beta and the outputs (MXNet's ElemwiseType).
    const auto [in, out] = infer_types("LayerNorm", {}, {dt, u, u});
    EXPECT_EQ(in, (std::vector<DType>(3, dt)));
    EXPECT_EQ(out, (std::vector<DType>(3, dt)));
    EXPECT_THROW(infer_types("LayerNorm", {}, {dt, kF32, u}), Error);
    for (const char* op : {"SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
                           "MAERegressionOutput"}) {
      EXPECT_EQ(infer_types(op, {}, {dt, u}).second[0], dt) << op;
    }
  }
  EXPECT_THROW(infer_types("LayerNorm", {}, {DType::kInt32, u, u}), ValueError);
}

TEST(HalfNormTypes, CpuKernelsRefuseHalfTypesNamingTheOp) {
  for (DType dt : kHalfTypes) {
    const HostTensor v = rnd(Shape{3}, 1, 0.5, 1.5);
    struct Case {
      std::string op;
      std::vector<HostTensor> in;
    };
    const std::vector<Case> cases{
        {"BatchNorm", {HostTensor::random(Shape{2, 3}, 2, -1, 1, dt), v, v, v, v}},
        {"LayerNorm",
         {HostTensor::random(Shape{2, 3}, 2, -1, 1, dt), as_type(v, dt), as_type(v, dt)}},
        {"SoftmaxOutput",
         {HostTensor::random(Shape{2, 3}, 2, -1, 1, dt), HostTensor::filled(Shape{2}, 1, dt)}}};
    for (const Case& c : cases) {
      try {
        run_op(c.op, {}, c.in);
        ADD_FAILURE() << c.op << " ran on the CPU with " << dtype_name(dt) << " data";
      } catch (const NotImplemented& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(c.op), std::string::npos) << msg;
        EXPECT_NE(msg.find(dtype_name(dt)), std::string::npos) << msg;
      }
    }
  }
}

// ---- BatchNorm (mixed precision) ----------------------------------------------------------------

struct BnCase {
  Shape data;
  int64_t channels;
  AttrMap attrs;
  bool is_train;
};

// Runs BatchNorm on CUDA with `dt` data and float32 gamma, beta and moving statistics, and on the
// CPU in float32 on the same (rounded) data; compares the outputs, the updated moving statistics
// and the gradients of data, gamma and beta.
void expect_bn_half_matches_cpu(const BnCase& c, DType dt, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + " data " + c.data.to_string());
  // Random values drawn in `dt` are rounded to it; the CPU copy holds the same values as float32.
  const HostTensor x = HostTensor::random(c.data, seed, -2.0, 3.0, dt);
  const Shape v{c.channels};
  std::vector<HostTensor> cpu_in{as_type(x, kF32), rnd(v, seed + 1, 0.5, 1.5),
                                 rnd(v, seed + 2, -0.5, 0.5), rnd(v, seed + 3, -0.3, 0.3),
                                 rnd(v, seed + 4, 0.5, 2.0)};
  std::vector<HostTensor> gpu_in = cpu_in;
  gpu_in[0] = x;
  RunOptions cpu_opt;
  cpu_opt.is_train = c.is_train;
  RunOptions gpu_opt = cpu_opt;
  gpu_opt.device = Device::cuda(0);
  std::vector<HostTensor> cpu_out, gpu_out;
  ASSERT_NO_THROW(cpu_out = run_op_mutating("BatchNorm", c.attrs, cpu_in, cpu_opt));
  ASSERT_NO_THROW(gpu_out = run_op_mutating("BatchNorm", c.attrs, gpu_in, gpu_opt));
  ASSERT_EQ(gpu_out.size(), 3u);
  EXPECT_EQ(gpu_out[0].dtype, dt);
  EXPECT_EQ(gpu_out[1].dtype, kF32);
  EXPECT_EQ(gpu_out[2].dtype, kF32);
  const double t = tol_of(dt);
  EXPECT_TRUE(all_close(gpu_out[0], cpu_out[0], t, t)) << "output";
  // Statistics of the same rounded data, reduced in float32 on the GPU and double on the CPU.
  EXPECT_TRUE(all_close(gpu_out[1], cpu_out[1], 1e-4, 1e-5)) << "mean";
  EXPECT_TRUE(all_close(gpu_out[2], cpu_out[2], 1e-4, 1e-5)) << "var";
  EXPECT_EQ(gpu_in[3].dtype, kF32);
  EXPECT_TRUE(all_close(gpu_in[3], cpu_in[3], 1e-4, 1e-5)) << "moving_mean";
  EXPECT_TRUE(all_close(gpu_in[4], cpu_in[4], 1e-4, 1e-5)) << "moving_var";

  // Gradients from the original inputs (op_gradient runs the forward pass again).
  cpu_in[3] = gpu_in[3] = rnd(v, seed + 3, -0.3, 0.3);
  cpu_in[4] = gpu_in[4] = rnd(v, seed + 4, 0.5, 2.0);
  const HostTensor head = HostTensor::random(c.data, seed + 9, -1.0, 1.0, dt);
  std::vector<HostTensor> cpu_g, gpu_g;
  ASSERT_NO_THROW(cpu_g =
                      op_gradient("BatchNorm", c.attrs, cpu_in, {as_type(head, kF32)}, cpu_opt));
  ASSERT_NO_THROW(gpu_g = op_gradient("BatchNorm", c.attrs, gpu_in, {head}, gpu_opt));
  ASSERT_EQ(gpu_g.size(), 5u);
  EXPECT_EQ(gpu_g[0].dtype, dt);
  EXPECT_TRUE(all_close(gpu_g[0], cpu_g[0], t, t)) << "data gradient";
  // Sums over the batch of float32 products: a looser bound than the statistics'.
  EXPECT_EQ(gpu_g[1].dtype, kF32);
  EXPECT_TRUE(all_close(gpu_g[1], cpu_g[1], 1e-3, 1e-3)) << "gamma gradient";
  EXPECT_TRUE(all_close(gpu_g[2], cpu_g[2], 1e-3, 1e-3)) << "beta gradient";
}

TEST(CudaHalfBatchNorm, TrainingUpdatesMovingStatisticsInFloat32) {
  WEFT_REQUIRE_CUDA();
  const AttrMap a{{"fix_gamma", "False"}, {"momentum", "0.8"}, {"eps", "1e-5"}};
  const std::vector<BnCase> cases{
      {Shape{4, 3, 7, 5}, 3, a, true},
      {Shape{2, 17, 6}, 17, a, true},
      {Shape{5, 65}, 65, a, true},
      {Shape{3, 5, 17}, 17, {{"axis", "-1"}, {"fix_gamma", "False"}}, true},
      {Shape{2, 3, 7, 5}, 3, {}, true}};  // fix_gamma defaults to True
  uint64_t seed = 10;
  for (DType dt : kHalfTypes)
    for (const BnCase& c : cases) expect_bn_half_matches_cpu(c, dt, seed += 10);
}

TEST(CudaHalfBatchNorm, InferenceAndGlobalStatsUseMovingStatistics) {
  WEFT_REQUIRE_CUDA();
  const AttrMap a{{"fix_gamma", "False"}, {"eps", "1e-3"}};
  const AttrMap global{{"fix_gamma", "False"}, {"use_global_stats", "True"}};
  const std::vector<BnCase> cases{{Shape{4, 3, 7, 5}, 3, a, false},
                                  {Shape{3, 65}, 65, a, false},
                                  {Shape{2, 17, 7, 5}, 17, global, true},
                                  {Shape{6, 3}, 3, global, true}};
  uint64_t seed = 200;
  for (DType dt : kHalfTypes)
    for (const BnCase& c : cases) expect_bn_half_matches_cpu(c, dt, seed += 10);
}

TEST(CudaHalfBatchNorm, UseGlobalStatsLeavesMovingStatisticsUnchanged) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : kHalfTypes) {
    std::vector<HostTensor> in{HostTensor::random(Shape{2, 17, 5}, 300, -1, 1, dt),
                               rnd(Shape{17}, 301), rnd(Shape{17}, 302), rnd(Shape{17}, 303),
                               rnd(Shape{17}, 304, 0.5, 2.0)};
    const std::vector<HostTensor> before = in;
    RunOptions o;
    o.is_train = true;
    o.device = Device::cuda(0);
    run_op_mutating("BatchNorm", {{"use_global_stats", "True"}}, in, o);
    EXPECT_TRUE(all_close(in[3], before[3], 0, 0)) << dtype_name(dt);
    EXPECT_TRUE(all_close(in[4], before[4], 0, 0)) << dtype_name(dt);
  }
}

// ---- LayerNorm, LRN (one dtype for every tensor, as MXNet) --------------------------------------

TEST(CudaHalfLayerNorm, OddSizesForwardAndGradient) {
  WEFT_REQUIRE_CUDA();
  struct Case {
    Shape data;
    int64_t d;
    std::string axis;
  };
  for (DType dt : kHalfTypes) {
    for (const Case& c : {Case{Shape{3, 65}, 65, "-1"}, Case{Shape{2, 17, 7}, 17, "1"},
                          Case{Shape{4, 7, 5}, 5, "-1"}, Case{Shape{3, 7, 5}, 3, "0"}}) {
      SCOPED_TRACE(c.data.to_string() + " axis " + c.axis);
      expect_cuda_matches_cpu(
          "LayerNorm", {{"axis", c.axis}, {"eps", "1e-5"}, {"output_mean_var", "True"}},
          {rnd(c.data, 400, -2, 2), rnd(Shape{c.d}, 401, 0.5, 1.5), rnd(Shape{c.d}, 402)},
          half_cmp(dt));
    }
  }
}

TEST(CudaHalfLRN, ChannelWindowsForwardAndGradient) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : kHalfTypes) {
    expect_cuda_matches_cpu("LRN", {{"nsize", "3"}}, {rnd(Shape{2, 17, 7, 5}, 410)}, half_cmp(dt));
    expect_cuda_matches_cpu("LRN", {{"nsize", "5"}, {"alpha", "0.01"}, {"knorm", "1.5"}},
                            {rnd(Shape{1, 3, 5, 7}, 411)}, half_cmp(dt));
  }
}

// ---- loss heads ---------------------------------------------------------------------------------

/// Class labels in [0, classes) (exact in both 16-bit types).
HostTensor labels(Shape s, int64_t classes, uint64_t seed) {
  HostTensor t = rnd(std::move(s), seed, 0.0, static_cast<double>(classes));
  for (double& v : t.data) v = static_cast<double>(static_cast<int64_t>(v));
  return t;
}

TEST(CudaHalfSoftmaxOutput, ModesForwardAndGradient) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : kHalfTypes) {
    SCOPED_TRACE(dtype_name(dt));
    expect_cuda_matches_cpu("SoftmaxOutput", {},
                            {rnd(Shape{7, 17}, 420, -3, 3), labels(Shape{7}, 17, 421)},
                            half_cmp(dt));
    expect_cuda_matches_cpu("SoftmaxOutput", {{"multi_output", "True"}, {"grad_scale", "0.5"}},
                            {rnd(Shape{3, 5, 7}, 422, -3, 3), labels(Shape{3, 7}, 5, 423)},
                            half_cmp(dt));
    expect_cuda_matches_cpu("SoftmaxOutput", {{"preserve_shape", "True"}, {"smooth_alpha", "0.1"}},
                            {rnd(Shape{2, 3, 65}, 424, -3, 3), labels(Shape{2, 3}, 65, 425)},
                            half_cmp(dt));
    HostTensor lab = labels(Shape{9}, 3, 427);
    lab.data[2] = 1;
    expect_cuda_matches_cpu(
        "SoftmaxOutput",
        {{"use_ignore", "True"}, {"ignore_label", "1"}, {"normalization", "valid"}},
        {rnd(Shape{9, 3}, 426, -3, 3), lab}, half_cmp(dt));
  }
}

TEST(CudaHalfRegressionOutput, HeadsForwardAndGradient) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : kHalfTypes) {
    for (const char* op :
         {"LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"}) {
      SCOPED_TRACE(std::string(op) + " " + dtype_name(dt));
      expect_cuda_matches_cpu(op, {{"grad_scale", "0.5"}},
                              {rnd(Shape{9, 5}, 430, -2, 2), rnd(Shape{9, 5}, 431, 0, 1)},
                              half_cmp(dt));
      expect_cuda_matches_cpu(op, {}, {rnd(Shape{17, 1}, 432, -2, 2), rnd(Shape{17}, 433, 0, 1)},
                              half_cmp(dt));
    }
  }
}

// ---- optimizer updates --------------------------------------------------------------------------

TEST(CudaHalfOptimizer, UpdatesMatchFloat32Reference) {
  WEFT_REQUIRE_CUDA();
  const AttrMap common{
      {"lr", "0.05"}, {"wd", "0.01"}, {"rescale_grad", "0.5"}, {"clip_gradient", "0.4"}};
  struct Case {
    std::string op;
    AttrMap extra;
    int states;
  };
  const std::vector<Case> cases{{"sgd_update", {}, 0},
                                {"sgd_mom_update", {{"momentum", "0.9"}}, 1},
                                {"adam_update", {{"beta1", "0.8"}}, 2},
                                {"adamw_update", {{"eta", "0.7"}}, 2}};
  for (DType dt : kHalfTypes) {
    for (const Case& c : cases) {
      for (const Shape& s : {Shape{3, 65}, Shape{1031}}) {
        SCOPED_TRACE(c.op + " " + dtype_name(dt) + " " + s.to_string());
        AttrMap a = common;
        for (const auto& [k, v] : c.extra) a[k] = v;
        std::vector<HostTensor> in{rnd(s, 440), rnd(s, 441, -2, 2)};
        if (c.states >= 1) in.push_back(rnd(s, 442, -0.1, 0.1));
        if (c.states >= 2) in.push_back(rnd(s, 443, 0.01, 1.0));
        expect_cuda_matches_cpu(c.op, a, in, half_cmp(dt));
      }
    }
  }
}

}  // namespace
}  // namespace weft::testing
