// The fused RNN through cuDNN's RNN API (cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8): the preferred implementation of `RNN` and `_backward_RNN` on CUDA,
// in front of weft's own kernels (ops/cuda/rnn.cc), which run whatever it declines. Declares no
// CUDA types, so that tests can include it.
#pragma once

#include <cstdint>
#include <span>

#include "ops/op.h"

namespace weft::cuda {

/// Runs `RNN` through cuDNN when cuDNN computes exactly what weft's kernels compute for this
/// application (Note [cuDNN RNN coverage] in cudnn_rnn.cc) and returns true; returns false,
/// having written nothing, otherwise. Throws Error when a CUDA or cuDNN call fails, and
/// NotImplemented for a float16/bfloat16 application cuDNN cannot run. The caller has checked
/// the requests (no kAdd). Call from the op's worker thread.
bool cudnn_rnn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out);

/// Likewise for `_backward_RNN` (recomputes the forward pass in cuDNN's training mode, then runs
/// the backward passes); honours kWrite, kInplace, kAdd and kNull on every gradient.
bool cudnn_rnn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out);

/// How many `RNN` / `_backward_RNN` applications ran on each CUDA path since the process started
/// (forward and backward together). For tests that check which path a configuration takes.
/// Thread-safe.
struct RnnPathCounts {
  uint64_t cudnn = 0;     ///< ran through cuDNN
  uint64_t fallback = 0;  ///< ran on weft's own kernels
};
RnnPathCounts rnn_path_counts();
/// Counts one application of the fallback path (called by ops/cuda/rnn.cc). Thread-safe.
void count_rnn_fallback();

}  // namespace weft::cuda
