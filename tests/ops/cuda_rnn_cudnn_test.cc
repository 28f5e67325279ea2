// The fused RNN's cuDNN path (ops/cuda/cudnn_rnn.cc) against the CPU kernels, forward and
// gradient: every mode, stacked bidirectional layers, odd sizes, sequence lengths, kAdd on the
// backward op's gradients, float32/float64 and float16/bfloat16; and the configurations cuDNN
// declines (Note [cuDNN RNN coverage]) still match on the fallback. rnn_path_counts() tells
// which path ran.
#include <iostream>
#include <string>
#include <vector>

#include "base/build_config.h"
#include "base/error.h"
#include "tests/ops/op_harness.h"
#include "tests/ops/rnn_cases.h"

#if WEFT_USE_CUDA
#include "ops/cuda/cudnn_rnn.h"
#endif

namespace weft::testing {
namespace {

// Two bidirectional layers of odd sizes by default.
struct Config : RnnCase {
  Config() { T = 7, N = 5, I = 3, H = 9, L = 2, D = 2; }
};
AttrMap attrs_of(const Config& c) { return rnn_attrs(c); }
std::vector<HostTensor> inputs_of(const Config& c, uint64_t seed = 5) {
  return rnn_inputs(c, seed);
}

CudaCompare tolerances(DType dtype) {
  // cuDNN sums in another order than the CPU kernel: a little more room than rounding alone.
  return dtype == DType::kFloat64 ? cuda_tolerance(1e-9, 1e-11) : cuda_tolerance(2e-4, 2e-5);
}

/// Which CUDA path the RNN applications since construction took.
struct PathCounter {
#if WEFT_USE_CUDA
  cuda::RnnPathCounts start = cuda::rnn_path_counts();
  uint64_t cudnn() const { return cuda::rnn_path_counts().cudnn - start.cudnn; }
  uint64_t fallback() const { return cuda::rnn_path_counts().fallback - start.fallback; }
#else
  uint64_t cudnn() const { return 0; }
  uint64_t fallback() const { return 0; }
#endif
};

/// Compares forward and gradient with the CPU and expects every application on cuDNN.
void expect_cudnn_matches_cpu(const Config& c) {
  SCOPED_TRACE("mode " + c.mode + ", L " + std::to_string(c.L) + ", D " + std::to_string(c.D) +
               ", " + dtype_name(c.dtype));
  PathCounter paths;
  expect_cuda_matches_cpu("RNN", attrs_of(c), inputs_of(c), tolerances(c.dtype));
  EXPECT_GE(paths.cudnn(), 2u) << "the forward and _backward_RNN should run through cuDNN";
  EXPECT_EQ(paths.fallback(), 0u);
}

TEST(CudaRnnCudnn, AllModesTwoLayersBidirectional) {
  WEFT_REQUIRE_CUDA();
  for (const char* mode : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      Config c;
      c.mode = mode, c.dtype = dt;
      expect_cudnn_matches_cpu(c);
    }
  }
}

TEST(CudaRnnCudnn, OneLayerOneDirectionWithoutStateOutputs) {
  WEFT_REQUIRE_CUDA();
  for (const char* mode : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    Config c;
    c.mode = mode, c.L = 1, c.D = 1, c.state_outputs = false, c.dtype = DType::kFloat64;
    expect_cudnn_matches_cpu(c);
  }
}

TEST(CudaRnnCudnn, ThreeLayersOddSizes) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.mode = "gru", c.T = 4, c.N = 1, c.I = 11, c.H = 5, c.L = 3;
  expect_cudnn_matches_cpu(c);
  c.mode = "lstm", c.D = 1, c.I = 1, c.H = 13;
  expect_cudnn_matches_cpu(c);
}

TEST(CudaRnnCudnn, SequenceLengths) {
  WEFT_REQUIRE_CUDA();
  // Padded steps: the output rows are zero and the states stop at each sequence's end.
  for (const char* mode : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      Config c;
      c.mode = mode, c.dtype = dt, c.lens = {7, 3, 1, 6, 7};
      expect_cudnn_matches_cpu(c);
    }
  }
}

TEST(CudaRnnCudnn, LengthsAboveTActAsT) {
  WEFT_REQUIRE_CUDA();
  // The CPU kernel rejects a length above T; on CUDA it acts as T (Note [RNN on CUDA]), on both
  // paths: compare with the clamped lengths on the CPU.
  Config c;
  c.mode = "lstm", c.dtype = DType::kFloat64, c.lens = {9, 2, 7, 7, 1};
  std::vector<HostTensor> in = inputs_of(c);
  RunOptions gpu;
  gpu.device = Device::cuda(0);
  PathCounter paths;
  const std::vector<HostTensor> got = run_op("RNN", attrs_of(c), in, gpu);
  EXPECT_EQ(paths.cudnn(), 1u);
  in.back().data[0] = 7;
  const std::vector<HostTensor> want = run_op("RNN", attrs_of(c), in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(all_close(got[k], want[k], 1e-9, 1e-11));
}

TEST(CudaRnnCudnn, BackwardAccumulatesAndWrites) {
  WEFT_REQUIRE_CUDA();
  for (const char* mode : {"lstm", "gru"}) {
    Config c;
    c.mode = mode, c.dtype = DType::kFloat64, c.lens = {7, 4, 2, 7, 5};
    std::vector<HostTensor> in = inputs_of(c);
    const Shape state{c.L * c.D, c.N, c.H};
    in.push_back(HostTensor::random(Shape{c.T, c.N, c.D * c.H}, 11, -1, 1, c.dtype));   // d out
    in.push_back(HostTensor::random(state, 12, -1, 1, c.dtype));                        // d hy
    if (c.mode == "lstm") in.push_back(HostTensor::random(state, 13, -1, 1, c.dtype));  // d cy
    const int ngrad = c.mode == "lstm" ? 4 : 3;
    for (const auto& req :
         {std::vector<OpReq>{OpReq::kAdd, OpReq::kAdd, OpReq::kWrite, OpReq::kAdd},
          std::vector<OpReq>{OpReq::kWrite, OpReq::kAdd, OpReq::kAdd, OpReq::kWrite}}) {
      CudaCompare cmp = tolerances(c.dtype);
      cmp.gradients = false;
      cmp.options.req.assign(req.begin(), req.begin() + ngrad);
      for (int i = 0; i < ngrad; ++i) {
        cmp.options.initial_outputs.push_back(
            HostTensor::random(in[i].shape, 20 + i, -1, 1, c.dtype));
      }
      PathCounter paths;
      expect_cuda_matches_cpu("_backward_RNN", attrs_of(c), in, cmp);
      EXPECT_EQ(paths.cudnn(), 1u);
      EXPECT_EQ(paths.fallback(), 0u);
    }
  }
}

TEST(CudaRnnCudnn, DropoutMaskOutsideTrainingIsOnes) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.mode = "rnn_tanh", c.L = 3;
  AttrMap a = attrs_of(c);
  a["p"] = "0.4";
  RunOptions gpu;
  gpu.device = Device::cuda(0);
  PathCounter paths;
  const std::vector<HostTensor> got = run_op("RNN", a, inputs_of(c), gpu);
  EXPECT_EQ(paths.cudnn(), 1u);
  // rnn_tanh with state outputs: out and hy, then the hidden mask.
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(all_close(got[2], HostTensor::filled(got[2].shape, 1.0), 0, 0));
  const std::vector<HostTensor> want = run_op("RNN", a, inputs_of(c));
  ASSERT_EQ(want.size(), got.size());
  for (size_t k = 0; k < 2; ++k) EXPECT_TRUE(all_close(got[k], want[k], 2e-4, 2e-5));
}

// ---- the fallback ---------------------------------------------------------------------------

TEST(CudaRnnCudnn, ZeroLengthSequenceFallsBack) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.mode = "gru", c.lens = {7, 0, 3, 7, 1};
  PathCounter paths;
  expect_cuda_matches_cpu("RNN", attrs_of(c), inputs_of(c), tolerances(c.dtype));
  EXPECT_EQ(paths.cudnn(), 0u);
  EXPECT_GE(paths.fallback(), 2u);
}

TEST(CudaRnnCudnn, CellClippingFallsBack) {
  WEFT_REQUIRE_CUDA();
  Config c;
  AttrMap a = attrs_of(c);
  a["lstm_state_clip_min"] = "-0.3";
  a["lstm_state_clip_max"] = "0.25";
  PathCounter paths;
  expect_cuda_matches_cpu("RNN", a, inputs_of(c), tolerances(c.dtype));
  EXPECT_EQ(paths.cudnn(), 0u);
  EXPECT_GE(paths.fallback(), 2u);
}

TEST(CudaRnnCudnn, DropoutInTrainingFallsBack) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.mode = "lstm", c.L = 2;
  AttrMap a = attrs_of(c);
  a["p"] = "0.5";
  RunOptions gpu;
  gpu.device = Device::cuda(0);
  gpu.is_train = true;
  gpu.seed = 3;
  PathCounter paths;
  const std::vector<HostTensor> got = run_op("RNN", a, inputs_of(c), gpu);
  EXPECT_EQ(paths.cudnn(), 0u);
  EXPECT_EQ(paths.fallback(), 1u);
  ASSERT_EQ(got.size(), 4u);
  for (double m : got[3].data) EXPECT_TRUE(m == 0.0 || m == 2.0) << m;

  // `_backward_RNN` with a mask input (here a fixed one) runs on the fallback and matches.
  std::vector<HostTensor> in = inputs_of(c);
  HostTensor mask = HostTensor::random(got[3].shape, 31, 0, 1);
  for (double& m : mask.data) m = m < 0.5 ? 0.0 : 2.0;
  in.push_back(mask);
  const Shape state{c.L * c.D, c.N, c.H};
  in.push_back(HostTensor::random(Shape{c.T, c.N, c.D * c.H}, 32, -1, 1));
  in.push_back(HostTensor::random(state, 33, -1, 1));
  in.push_back(HostTensor::random(state, 34, -1, 1));
  CudaCompare cmp = tolerances(c.dtype);
  cmp.gradients = false;
  PathCounter bwd;
  expect_cuda_matches_cpu("_backward_RNN", a, in, cmp);
  EXPECT_EQ(bwd.cudnn(), 0u);
  EXPECT_EQ(bwd.fallback(), 1u);
}

// ---- float16 / bfloat16 ---------------------------------------------------------------------

TEST(CudaRnnCudnn, CpuKernelRejectsHalfTypes) {
  // No GPU needed: the CPU kernel names the op and the dtype.
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    Config c;
    c.L = 1, c.D = 1, c.dtype = dt;
    try {
      run_op("RNN", attrs_of(c), inputs_of(c));
      ADD_FAILURE() << "the CPU kernel ran RNN in " << dtype_name(dt);
    } catch (const NotImplemented& e) {
      EXPECT_NE(std::string(e.what()).find(dtype_name(dt)), std::string::npos) << e.what();
    }
  }
}

TEST(CudaRnnCudnn, HalfTypesThroughCudnn) {
  WEFT_REQUIRE_CUDA();
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (const char* mode : {"lstm", "gru", "rnn_tanh"}) {
      Config c;
      c.mode = mode, c.lens = {7, 3, 1, 6, 7};
      // cuDNN may have no RNN kernels for a type: then the op says so (NotImplemented).
      try {
        Config probe = c;
        probe.dtype = dt;
        RunOptions gpu;
        gpu.device = Device::cuda(0);
        run_op("RNN", attrs_of(probe), inputs_of(probe), gpu);
      } catch (const NotImplemented& e) {
        std::cout << "[ note     ] " << dtype_name(dt) << ": " << e.what() << "\n";
        EXPECT_NE(dt, DType::kFloat16) << "cuDNN runs RNNs in float16";
        continue;
      }
      SCOPED_TRACE(std::string(mode) + " in " + dtype_name(dt));
      PathCounter paths;
      expect_cuda_matches_cpu("RNN", attrs_of(c), inputs_of(c), cuda_half(dt, 2e-2, 8e-2));
      EXPECT_GE(paths.cudnn(), 2u);
      EXPECT_EQ(paths.fallback(), 0u);
    }
  }
}

TEST(CudaRnnCudnn, HalfTypesWithoutCudnnSupportSayNotImplemented) {
  WEFT_REQUIRE_CUDA();
  // Cell clipping declines cuDNN, and float16 has no fallback.
  Config c;
  c.dtype = DType::kFloat16;
  AttrMap a = attrs_of(c);
  a["lstm_state_clip_min"] = "-0.3";
  a["lstm_state_clip_max"] = "0.25";
  RunOptions gpu;
  gpu.device = Device::cuda(0);
  EXPECT_THROW(run_op("RNN", a, inputs_of(c), gpu), NotImplemented);
}

}  // namespace
}  // namespace weft::testing
