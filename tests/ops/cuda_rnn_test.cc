// The fused RNN's CUDA kernels (ops/cuda/rnn.cc) against the CPU kernels: every mode, stacked
// and bidirectional layers, sequence lengths, LSTM cell clipping, the dropout mask path, both
// float types, and kAdd on the backward op's gradients. Most of these run through cuDNN now, the
// zero lengths, clipping and mask cases on weft's own kernels; cuda_rnn_cudnn_test.cc checks
// which path runs.
#include <string>
#include <vector>

#include "tests/ops/op_harness.h"
#include "tests/ops/rnn_cases.h"

namespace weft::testing {
namespace {

using Config = RnnCase;
AttrMap attrs_of(const Config& c) { return rnn_attrs(c); }
std::vector<HostTensor> inputs_of(const Config& c, uint64_t seed = 3) {
  return rnn_inputs(c, seed);
}

CudaCompare tolerances(DType dtype) {
  CudaCompare cmp;
  if (dtype == DType::kFloat32) {
    cmp.rtol = 1e-4, cmp.atol = 1e-5;
  } else {
    cmp.rtol = 1e-9, cmp.atol = 1e-11;
  }
  return cmp;
}

void check(const Config& c) {
  expect_cuda_matches_cpu("RNN", attrs_of(c), inputs_of(c), tolerances(c.dtype));
}

TEST(CudaRnn, LstmTwoLayersBidirectional) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.mode = "lstm", c.L = 2, c.D = 2;
  check(c);
  c.dtype = DType::kFloat64;
  check(c);
}

TEST(CudaRnn, GruTwoLayersBidirectional) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.mode = "gru", c.L = 2, c.D = 2;
  check(c);
  c.dtype = DType::kFloat64;
  check(c);
}

TEST(CudaRnn, TanhAndReluOneLayer) {
  WEFT_REQUIRE_CUDA();
  for (const char* mode : {"rnn_tanh", "rnn_relu"}) {
    Config c;
    c.mode = mode;
    check(c);
    c.D = 2, c.dtype = DType::kFloat64;
    check(c);
  }
}

TEST(CudaRnn, SequenceLengths) {
  WEFT_REQUIRE_CUDA();
  for (const char* mode : {"lstm", "gru", "rnn_tanh"}) {
    Config c;
    c.mode = mode, c.L = 2, c.D = 2, c.lens = {5, 2, 0};
    check(c);
  }
}

TEST(CudaRnn, LstmCellClipping) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.L = 2;
  AttrMap a = attrs_of(c);
  a["lstm_state_clip_min"] = "-0.3";
  a["lstm_state_clip_max"] = "0.25";
  expect_cuda_matches_cpu("RNN", a, inputs_of(c), tolerances(c.dtype));
}

TEST(CudaRnn, DropoutMaskOutsideTraining) {
  WEFT_REQUIRE_CUDA();
  // Outside training the hidden mask is all ones on both devices; the backward op then runs the
  // masked path with that mask.
  Config c;
  c.mode = "gru", c.L = 3, c.D = 2;
  AttrMap a = attrs_of(c);
  a["p"] = "0.4";
  expect_cuda_matches_cpu("RNN", a, inputs_of(c), tolerances(c.dtype));
}

TEST(CudaRnn, BackwardAccumulates) {
  WEFT_REQUIRE_CUDA();
  Config c;
  c.L = 2, c.D = 2, c.dtype = DType::kFloat64;
  std::vector<HostTensor> in = inputs_of(c);
  const Shape state{c.L * c.D, c.N, c.H};
  in.push_back(HostTensor::random(Shape{c.T, c.N, c.D * c.H}, 11, -1, 1, c.dtype));  // d output
  in.push_back(HostTensor::random(state, 12, -1, 1, c.dtype));                       // d hy
  in.push_back(HostTensor::random(state, 13, -1, 1, c.dtype));                       // d cy
  CudaCompare cmp = tolerances(c.dtype);
  cmp.gradients = false;
  cmp.options.req = {OpReq::kAdd, OpReq::kAdd, OpReq::kWrite, OpReq::kAdd};
  for (int i = 0; i < 4; ++i)
    cmp.options.initial_outputs.push_back(HostTensor::random(in[i].shape, 20 + i, -1, 1, c.dtype));
  expect_cuda_matches_cpu("_backward_RNN", attrs_of(c), in, cmp);
}

}  // namespace
}  // namespace weft::testing
