// Own CUDA kernels of the fused RNN (ops/cuda/rnn.cc), written in rnn_kernels.cu: the per-step
// gate activations and their BPTT counterparts, the formulas of ops/cpu/rnn_cell.h's forward_step /
// backward_step. Host launchers for float and double; everything runs on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"

namespace weft::cuda {

/// One time step t of one (layer, direction), one thread per (n, j). Pointers are device
/// pointers; the per-step trace pointers (`cell`, `craw`, `hn`, already offset to step t) may be
/// null when not traced.
template <typename DT>
struct RnnStepFwd {
  int mode = 0;  // rnn::RnnMode as int: 0 relu, 1 tanh, 2 lstm, 3 gru
  int64_t N = 0, H = 0, DH = 0, t = 0, dir = 0;
  const int64_t* lens = nullptr;  // N, or null
  DT* g = nullptr;                // N·G·H at step t: input projections in, activated gates out
  const DT* hproj = nullptr;      // N·G·H: W_h2h·h (no bias)
  const DT* b_h2h = nullptr;      // G·H
  DT* h = nullptr;                // N·H
  DT* c = nullptr;                // N·H (LSTM)
  DT* y_layer = nullptr;          // T·N·D·H
  DT* cell = nullptr;             // N·H (LSTM trace)
  DT* craw = nullptr;             // N·H (LSTM trace with clipping)
  DT* hn = nullptr;               // N·H (GRU trace)
  bool clip = false, clip_nan = false;
  double lo = 0, hi = 0;
};
template <typename DT>
void rnn_forward_step(const RnnStepFwd<DT>& a, cudaStream_t stream);

/// One backward time step; writes dgx / dgh at step t, resets dh to its direct part and updates
/// dc (the recurrent GEMM adds the rest of dh afterwards).
template <typename DT>
struct RnnStepBwd {
  int mode = 0;
  int64_t N = 0, H = 0, DH = 0, t = 0, dir = 0;
  const int64_t* lens = nullptr;
  const DT* g = nullptr;         // N·G·H activated gates at step t
  const DT* dy_layer = nullptr;  // T·N·D·H
  DT* dgx = nullptr;             // N·G·H at step t
  DT* dgh = nullptr;             // N·G·H at step t (== dgx except for GRU)
  DT* dh = nullptr;              // N·H
  DT* dc = nullptr;              // N·H (LSTM)
  const DT* cell = nullptr;      // N·H at step t (LSTM)
  const DT* cprev = nullptr;     // N·H at step t (LSTM)
  const DT* craw = nullptr;      // N·H at step t (LSTM with clipping) or null
  const DT* hprev = nullptr;     // N·H at step t (GRU)
  const DT* hn = nullptr;        // N·H at step t (GRU)
  double lo = 0, hi = 0;
};
template <typename DT>
void rnn_backward_step(const RnnStepBwd<DT>& a, cudaStream_t stream);

/// x[r·cols + j] += bias[j] for `rows` rows.
template <typename DT>
void rnn_add_bias_rows(DT* x, const DT* bias, int64_t rows, int64_t cols, cudaStream_t stream);
/// y = x · m elementwise.
template <typename DT>
void rnn_mul(const DT* x, const DT* m, DT* y, int64_t n, cudaStream_t stream);
/// y += x.
template <typename DT>
void rnn_add(const DT* x, DT* y, int64_t n, cudaStream_t stream);
/// y = v.
template <typename DT>
void rnn_fill(DT* y, int64_t n, double v, cudaStream_t stream);
/// Sequence lengths of any dtype to int64.
void rnn_lengths_to_i64(DType dtype, const void* src, int64_t* dst, int64_t n, cudaStream_t stream);

}  // namespace weft::cuda
