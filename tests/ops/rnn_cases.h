// One configuration of the fused RNN operator for the CUDA tests (tests/ops/cuda_rnn_test.cc, the
// fallback kernels, and tests/ops/cuda_rnn_cudnn_test.cc, the cuDNN path): its attributes, the
// size of its packed parameter vector, and random inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {

struct RnnCase {
  std::string mode = "lstm";
  int64_t T = 5, N = 3, I = 7, H = 6, L = 1, D = 1;
  std::vector<int64_t> lens;  ///< empty: no sequence_length input
  bool state_outputs = true;
  DType dtype = DType::kFloat32;
};

/// Elements of the packed parameter vector (MXNet's layout: every layer's and direction's
/// input and recurrent weights, then their biases).
inline int64_t rnn_param_size(const RnnCase& c) {
  const int64_t gh = (c.mode == "lstm" ? 4 : c.mode == "gru" ? 3 : 1) * c.H;
  int64_t total = 0;
  for (int64_t l = 0; l < c.L; ++l) total += c.D * (gh * ((l == 0 ? c.I : c.D * c.H) + c.H + 2));
  return total;
}

inline AttrMap rnn_attrs(const RnnCase& c) {
  AttrMap a{{"mode", c.mode},
            {"state_size", std::to_string(c.H)},
            {"num_layers", std::to_string(c.L)},
            {"bidirectional", c.D == 2 ? "True" : "False"},
            {"state_outputs", c.state_outputs ? "True" : "False"}};
  if (!c.lens.empty()) a["use_sequence_length"] = "True";
  return a;
}

/// data, parameters, the initial state (and cell for lstm), and the lengths when given.
inline std::vector<HostTensor> rnn_inputs(const RnnCase& c, uint64_t seed) {
  std::vector<HostTensor> in;
  in.push_back(HostTensor::random(Shape{c.T, c.N, c.I}, seed, -1, 1, c.dtype));
  in.push_back(HostTensor::random(Shape{rnn_param_size(c)}, seed + 1, -0.5, 0.5, c.dtype));
  in.push_back(HostTensor::random(Shape{c.L * c.D, c.N, c.H}, seed + 2, -0.5, 0.5, c.dtype));
  if (c.mode == "lstm")
    in.push_back(HostTensor::random(Shape{c.L * c.D, c.N, c.H}, seed + 3, -0.5, 0.5, c.dtype));
  if (!c.lens.empty()) {
    std::vector<double> v(c.lens.begin(), c.lens.end());
    in.push_back(HostTensor::of(Shape{c.N}, v, DType::kInt32));
  }
  return in;
}

}  // namespace weft::testing
