// The fused RNN's sizes and the packing of its flat `parameters` vector, the layout of its
// workspace (Carver, RnnBuffers) and the arguments of its forward and BPTT passes: shared by the
// definitions (ops/defs/rnn.cc sizes the workspace), the CPU kernels (ops/cpu/rnn_cell.h) and
// the CUDA kernels (ops/cuda/rnn.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::detail::rnn {

/// The recurrence (MXNet rnn_enum).
enum class RnnMode { kRnnRelu, kRnnTanh, kLstm, kGru };

/// Gates per cell: 1 for the plain RNNs, 4 for LSTM [i, f, g, o], 3 for GRU [r, z, n].
inline int64_t num_gates(RnnMode mode) {
  return mode == RnnMode::kLstm ? 4 : mode == RnnMode::kGru ? 3 : 1;
}

/// The sizes of one RNN application. A plain value; thread-safe to share.
struct RnnDims {
  RnnMode mode = RnnMode::kLstm;
  int64_t T = 0, N = 0, I = 0, H = 0, L = 0, D = 1;
  int64_t G() const { return num_gates(mode); }
  int64_t GH() const { return G() * H; }
  /// Input width of layer l: I for the first layer, D·H afterwards.
  int64_t layer_input(int64_t l) const { return l == 0 ? I : D * H; }
};

/// Number of values in the flat `parameters` input (MXNet's GetRnnParamSize).
inline int64_t param_size(RnnMode mode, int64_t L, int64_t D, int64_t I, int64_t H) {
  const int64_t gh = num_gates(mode) * H;
  return (I + H + 2) * gh * D + (L - 1) * (D * H + H + 2) * gh * D;
}

/// Where one (layer, direction)'s weights and biases start in the flat parameter vector: all
/// weights first (per layer, per direction: W_i2h (G·H × in_l), then W_h2h (G·H × H)), then all
/// biases (per layer, per direction: b_i2h (G·H), then b_h2h (G·H)).
struct ParamOffsets {
  int64_t w_i2h = 0, w_h2h = 0, b_i2h = 0, b_h2h = 0;
};

inline ParamOffsets param_offsets(const RnnDims& d, int64_t l, int64_t dir) {
  const int64_t gh = d.GH();
  int64_t weights_before = 0, weights_total = 0;
  for (int64_t ll = 0; ll < d.L; ++ll) {
    const int64_t per_dir = gh * (d.layer_input(ll) + d.H);
    if (ll < l) weights_before += d.D * per_dir;
    if (ll == l) weights_before += dir * per_dir;
    weights_total += d.D * per_dir;
  }
  ParamOffsets o;
  o.w_i2h = weights_before;
  o.w_h2h = weights_before + gh * d.layer_input(l);
  o.b_i2h = weights_total + (l * d.D + dir) * 2 * gh;
  o.b_h2h = o.b_i2h + gh;
  return o;
}

// ---- workspace
// ------------------------------------------------------------------------------------

/// Hands out 64-byte aligned arrays from a workspace; with a null base it only counts bytes (the
/// same sequence of take() calls then gives the size to request). Call from one thread.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(int64_t n) {
    const size_t offset = (used_ + 63) / 64 * 64;
    used_ = offset + static_cast<size_t>(std::max<int64_t>(n, 0)) * sizeof(T);
    return base_ ? reinterpret_cast<T*>(base_ + offset) : nullptr;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

/// The kernels' scratch arrays, carved from the workspace. With `trace` (training backward), every
/// (layer, direction) keeps its per-step activations for BPTT; without it, the buffers are shared
/// and only a forward pass fits.
template <typename DT>
struct RnnBuffers {
  bool trace = false;
  // forward, indexed [l * D + dir] (trace) or shared in [0]
  std::vector<DT*> gates;  ///< T·N·G·H: input projections, then activated gates (in place)
  std::vector<DT*> hprev;  ///< T·N·H: h before each step (trace only)
  std::vector<DT*> cprev;  ///< T·N·H: c before each step (LSTM, trace only)
  std::vector<DT*> cell;   ///< T·N·H: c after each step, clipped (LSTM, trace only)
  std::vector<DT*> craw;   ///< T·N·H: c before clipping (LSTM with clipping, trace only)
  std::vector<DT*> hn;     ///< T·N·H: W_hn·h + b_hn (GRU, trace only)
  // forward, indexed by layer (trace) or ping-pong [l % 2]
  std::vector<DT*> y;   ///< T·N·D·H: layer outputs
  std::vector<DT*> x;   ///< T·N·D·H: dropped-out layer inputs (l ≥ 1, with a dropout mask)
  DT* hproj = nullptr;  ///< N·G·H
  DT* h = nullptr;      ///< N·H: running hidden state
  DT* c = nullptr;      ///< N·H: running cell state
  // backward
  DT* dgx = nullptr;      ///< T·N·G·H: gradient of the gate pre-activations (input side)
  DT* dgh = nullptr;      ///< T·N·G·H: the same on the recurrent side (GRU only; else = dgx)
  DT* dy = nullptr;       ///< T·N·D·H: gradient of the current layer's output
  DT* dx = nullptr;       ///< T·N·D·H: gradient of the current layer's input (layers ≥ 1)
  DT* dh = nullptr;       ///< N·H
  DT* dc = nullptr;       ///< N·H
  DT* ddata = nullptr;    ///< T·N·I
  DT* dparams = nullptr;  ///< the parameter count
  DT* dhx = nullptr;      ///< L·D·N·H
  DT* dcx = nullptr;      ///< L·D·N·H
};

/// Lays the buffers out on `carver`. `with_mask`: a dropout mask is applied between layers;
/// `backward`: trace everything and add the gradient buffers.
template <typename DT>
RnnBuffers<DT> layout_buffers(Carver& carver, const RnnDims& d, bool with_mask, bool clip,
                              bool backward) {
  RnnBuffers<DT> b;
  b.trace = backward;
  const int64_t TN = d.T * d.N, GH = d.GH(), DH = d.D * d.H;
  const bool lstm = d.mode == RnnMode::kLstm, gru = d.mode == RnnMode::kGru;
  const int64_t cells = backward ? d.L * d.D : 1;
  for (int64_t k = 0; k < cells; ++k) {
    b.gates.push_back(carver.take<DT>(TN * GH));
    if (backward) {
      b.hprev.push_back(carver.take<DT>(TN * d.H));
      b.cprev.push_back(lstm ? carver.take<DT>(TN * d.H) : nullptr);
      b.cell.push_back(lstm ? carver.take<DT>(TN * d.H) : nullptr);
      b.craw.push_back(lstm && clip ? carver.take<DT>(TN * d.H) : nullptr);
      b.hn.push_back(gru ? carver.take<DT>(TN * d.H) : nullptr);
    }
  }
  const int64_t ys = backward ? d.L : std::min<int64_t>(d.L, 2);
  for (int64_t l = 0; l < ys; ++l) b.y.push_back(carver.take<DT>(TN * DH));
  const int64_t xs = !with_mask ? 0 : backward ? d.L : 1;
  b.x.assign(backward ? d.L : 1, nullptr);
  for (int64_t l = backward ? 1 : 0; l < xs; ++l) b.x[l] = carver.take<DT>(TN * DH);
  b.hproj = carver.take<DT>(d.N * GH);
  b.h = carver.take<DT>(d.N * d.H);
  b.c = carver.take<DT>(d.N * d.H);
  if (backward) {
    b.dgx = carver.take<DT>(TN * GH);
    b.dgh = gru ? carver.take<DT>(TN * GH) : b.dgx;
    b.dy = carver.take<DT>(TN * DH);
    b.dx = carver.take<DT>(TN * DH);
    b.dh = carver.take<DT>(d.N * d.H);
    b.dc = carver.take<DT>(d.N * d.H);
    b.ddata = carver.take<DT>(TN * d.I);
    b.dparams = carver.take<DT>(param_size(d.mode, d.L, d.D, d.I, d.H));
    b.dhx = carver.take<DT>(d.L * d.D * d.N * d.H);
    b.dcx = carver.take<DT>(d.L * d.D * d.N * d.H);
  }
  return b;
}

/// Options of the recurrence that are not sizes.
struct RnnOptions {
  bool clip = false;  ///< clip the LSTM cell state to [clip_min, clip_max]
  double clip_min = 0, clip_max = 0;
  bool clip_nan = false;  ///< NaN cell states become clip_min instead of propagating
  int threads = 1;
};

/// The tensors of one forward pass. `lens` (N) may be null (every sequence has length T);
/// `mask` ((L−1)·T·N·D·H) may be null (no dropout); `cx` / `cy` only for LSTM; `hy`/`cy` may be
/// null.
template <typename DT>
struct ForwardArgs {
  const DT* data = nullptr;
  const DT* params = nullptr;
  const DT* hx = nullptr;
  const DT* cx = nullptr;
  const int64_t* lens = nullptr;
  const DT* mask = nullptr;
  DT* y = nullptr;
  DT* hy = nullptr;
  DT* cy = nullptr;
};

/// The gradients of one backward pass. `dy` (T·N·D·H) is the output gradient; `dhy` / `dcy`
/// (L·D·N·H) may be null (zero). Results land in b.ddata, b.dparams, b.dhx, b.dcx.
template <typename DT>
struct BackwardArgs {
  const DT* dy = nullptr;
  const DT* dhy = nullptr;
  const DT* dcy = nullptr;
};

}  // namespace weft::detail::rnn
