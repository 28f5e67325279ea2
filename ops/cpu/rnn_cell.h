// Private to ops/cpu/rnn.cc: the fused RNN's CPU kernels, a row-major GEMM (oneDNN sgemm or a
// plain loop) and the forward / BPTT passes. The sizes, parameter packing and workspace layout
// they work on are in ops/defs/rnn_packing.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/build_config.h"
#include "ops/defs/rnn_packing.h"
#include "ops/infer_util.h"

#if WEFT_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

namespace weft::detail::rnn {

// ---- GEMM ---------------------------------------------------------------------------------------

/// Row-major C (M×N) = alpha·op(A)·op(B) + beta·C, op(X) = X or Xᵀ. float goes to oneDNN's
/// sgemm when built with it; otherwise (and for double) a loop parallel over rows of C.
template <typename DT>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, DT alpha, const DT* A,
          int64_t lda, const DT* B, int64_t ldb, DT beta, DT* C, int64_t ldc, int threads) {
  if (M == 0 || N == 0) return;
#if WEFT_USE_ONEDNN
  if constexpr (std::is_same_v<DT, float>) {
    if (K > 0) {
      const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha,
                                          A, lda, B, ldb, beta, C, ldc);
      WEFT_CHECK_AS(InternalError, st == dnnl_success)
          << "RNN: dnnl_sgemm failed with status " << st;
      return;
    }
  }
#endif
  const int64_t grain =
      std::max<int64_t>(1, 16384 / std::max<int64_t>(1, N * std::max<int64_t>(K, 1)));
  parallel_for(M, grain, threads, [&](int64_t mb, int64_t me) {
    for (int64_t m = mb; m < me; ++m) {
      DT* c = C + m * ldc;
      if (beta == DT(0)) {
        std::fill(c, c + N, DT(0));
      } else if (beta != DT(1)) {
        for (int64_t n = 0; n < N; ++n) c[n] *= beta;
      }
      if (!trans_b) {
        for (int64_t k = 0; k < K; ++k) {
          const DT a = alpha * (trans_a ? A[k * lda + m] : A[m * lda + k]);
          const DT* b = B + k * ldb;
          for (int64_t n = 0; n < N; ++n) c[n] += a * b[n];
        }
      } else {
        for (int64_t n = 0; n < N; ++n) {
          const DT* b = B + n * ldb;
          DT s = 0;
          if (!trans_a) {
            const DT* a = A + m * lda;
            for (int64_t k = 0; k < K; ++k) s += a[k] * b[k];
          } else {
            for (int64_t k = 0; k < K; ++k) s += A[k * lda + m] * b[k];
          }
          c[n] += alpha * s;
        }
      }
    }
  });
}

template <typename DT>
inline DT sigmoid(DT x) {
  return DT(1) / (DT(1) + std::exp(-x));
}

/// One time step of one (layer, direction) for rows [nb, ne): reads the input projection in `g`
/// (bias b_i2h included) and `b.hproj` (W_h2h·h, without bias), overwrites `g` with the activated
/// gates and updates b.h / b.c; writes the step's output (zero past a sequence's end).
template <typename DT>
void forward_step(const RnnDims& d, const RnnOptions& opt, RnnBuffers<DT>& b, int64_t k, int64_t t,
                  int64_t dir, const DT* b_h2h, const int64_t* lens, DT* g_t, DT* y_layer,
                  int64_t nb, int64_t ne) {
  const int64_t H = d.H, GH = d.GH(), DH = d.D * H;
  const DT lo = static_cast<DT>(opt.clip_min), hi = static_cast<DT>(opt.clip_max);
  for (int64_t n = nb; n < ne; ++n) {
    DT* y = y_layer + (t * d.N + n) * DH + dir * H;
    if (lens && t >= lens[n]) {
      std::fill(y, y + H, DT(0));
      continue;
    }
    DT* g = g_t + n * GH;
    const DT* hp = b.hproj + n * GH;
    DT* h = b.h + n * H;
    const int64_t row = (t * d.N + n) * H;
    switch (d.mode) {
      case RnnMode::kRnnRelu:
        for (int64_t j = 0; j < H; ++j) {
          const DT a = g[j] + hp[j] + b_h2h[j];
          h[j] = g[j] = a > DT(0) ? a : DT(0);
        }
        break;
      case RnnMode::kRnnTanh:
        for (int64_t j = 0; j < H; ++j) h[j] = g[j] = std::tanh(g[j] + hp[j] + b_h2h[j]);
        break;
      case RnnMode::kLstm: {
        DT* c = b.c + n * H;
        for (int64_t j = 0; j < H; ++j) {
          const DT i = sigmoid(g[j] + hp[j] + b_h2h[j]);
          const DT f = sigmoid(g[H + j] + hp[H + j] + b_h2h[H + j]);
          const DT gg = std::tanh(g[2 * H + j] + hp[2 * H + j] + b_h2h[2 * H + j]);
          const DT o = sigmoid(g[3 * H + j] + hp[3 * H + j] + b_h2h[3 * H + j]);
          g[j] = i, g[H + j] = f, g[2 * H + j] = gg, g[3 * H + j] = o;
          DT cn = f * c[j] + i * gg;
          if (opt.clip) {
            if (b.trace && b.craw[k]) b.craw[k][row + j] = cn;
            if (std::isnan(cn)) {
              if (opt.clip_nan) cn = lo;
            } else {
              cn = std::min(std::max(cn, lo), hi);
            }
          }
          c[j] = cn;
          if (b.trace) b.cell[k][row + j] = cn;
          h[j] = o * std::tanh(cn);
        }
        break;
      }
      case RnnMode::kGru:
        for (int64_t j = 0; j < H; ++j) {
          const DT r = sigmoid(g[j] + hp[j] + b_h2h[j]);
          const DT z = sigmoid(g[H + j] + hp[H + j] + b_h2h[H + j]);
          const DT hn = hp[2 * H + j] + b_h2h[2 * H + j];
          const DT nn = std::tanh(g[2 * H + j] + r * hn);
          g[j] = r, g[H + j] = z, g[2 * H + j] = nn;
          if (b.trace) b.hn[k][row + j] = hn;
          h[j] = (DT(1) - z) * nn + z * h[j];
        }
        break;
    }
    std::copy(h, h + H, y);
  }
}

/// The whole forward pass (all layers and directions). With b.trace, keeps what backward needs.
template <typename DT>
void forward(const RnnDims& d, const RnnOptions& opt, const ForwardArgs<DT>& a, RnnBuffers<DT>& b) {
  const int64_t T = d.T, N = d.N, H = d.H, GH = d.GH(), DH = d.D * H, TN = T * N;
  const bool lstm = d.mode == RnnMode::kLstm;
  const int64_t step_grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, GH));
  for (int64_t l = 0; l < d.L; ++l) {
    const int64_t in = d.layer_input(l);
    DT* y_layer = b.trace ? b.y[l] : b.y[l % 2];
    const DT* x_layer = a.data;
    if (l > 0) {
      const DT* y_prev = b.trace ? b.y[l - 1] : b.y[(l - 1) % 2];
      x_layer = y_prev;
      if (a.mask) {
        DT* x = b.trace ? b.x[l] : b.x[0];
        const DT* m = a.mask + (l - 1) * TN * DH;
        parallel_for(TN * DH, 1 << 15, opt.threads, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) x[i] = y_prev[i] * m[i];
        });
        x_layer = x;
      }
    }
    for (int64_t dir = 0; dir < d.D; ++dir) {
      const int64_t k = b.trace ? l * d.D + dir : 0;
      const ParamOffsets off = param_offsets(d, l, dir);
      const DT* w_i2h = a.params + off.w_i2h;
      const DT* w_h2h = a.params + off.w_h2h;
      const DT* b_i2h = a.params + off.b_i2h;
      const DT* b_h2h = a.params + off.b_h2h;
      DT* gates = b.gates[k];
      // Input projection of every time step at once: (T·N × in) · W_i2hᵀ + b_i2h.
      gemm<DT>(false, true, TN, GH, in, DT(1), x_layer, in, w_i2h, in, DT(0), gates, GH,
               opt.threads);
      parallel_for(TN, std::max<int64_t>(1, 8192 / GH), opt.threads, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          DT* g = gates + r * GH;
          for (int64_t j = 0; j < GH; ++j) g[j] += b_i2h[j];
        }
      });
      const int64_t state = (l * d.D + dir) * N * H;
      std::copy(a.hx + state, a.hx + state + N * H, b.h);
      if (lstm) std::copy(a.cx + state, a.cx + state + N * H, b.c);
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = dir == 0 ? s : T - 1 - s;
        if (b.trace) {
          std::copy(b.h, b.h + N * H, b.hprev[k] + t * N * H);
          if (lstm) std::copy(b.c, b.c + N * H, b.cprev[k] + t * N * H);
        }
        gemm<DT>(false, true, N, GH, H, DT(1), b.h, H, w_h2h, H, DT(0), b.hproj, GH, opt.threads);
        DT* g_t = gates + t * N * GH;
        parallel_for(N, step_grain, opt.threads, [&](int64_t n0, int64_t n1) {
          forward_step(d, opt, b, k, t, dir, b_h2h, a.lens, g_t, y_layer, n0, n1);
        });
      }
      if (a.hy) std::copy(b.h, b.h + N * H, a.hy + state);
      if (lstm && a.cy) std::copy(b.c, b.c + N * H, a.cy + state);
    }
  }
  const DT* y_last = b.trace ? b.y[d.L - 1] : b.y[(d.L - 1) % 2];
  if (a.y) std::copy(y_last, y_last + TN * DH, a.y);
}

/// One backward time step of one (layer, direction) for rows [nb, ne): from the output gradient
/// and the carried b.dh / b.dc, writes the gate gradients of step t and sets b.dh to its direct
/// part (the recurrent GEMM adds the rest) and b.dc to the gradient of the previous cell state.
template <typename DT>
void backward_step(const RnnDims& d, const RnnOptions& opt, RnnBuffers<DT>& b, int64_t k, int64_t t,
                   int64_t dir, const int64_t* lens, const DT* dy_layer, int64_t nb, int64_t ne) {
  const int64_t H = d.H, GH = d.GH(), DH = d.D * H;
  const DT lo = static_cast<DT>(opt.clip_min), hi = static_cast<DT>(opt.clip_max);
  for (int64_t n = nb; n < ne; ++n) {
    const int64_t grow = (t * d.N + n) * GH;
    DT* dgx = b.dgx + grow;
    DT* dgh = b.dgh + grow;
    if (lens && t >= lens[n]) {  // a skipped step: h and c pass through unchanged
      std::fill(dgx, dgx + GH, DT(0));
      if (dgh != dgx) std::fill(dgh, dgh + GH, DT(0));
      continue;
    }
    const DT* g = b.gates[k] + grow;
    const DT* dy = dy_layer + (t * d.N + n) * DH + dir * H;
    DT* dh = b.dh + n * H;
    const int64_t row = (t * d.N + n) * H;
    switch (d.mode) {
      case RnnMode::kRnnRelu:
        for (int64_t j = 0; j < H; ++j) {
          dgx[j] = g[j] > DT(0) ? dy[j] + dh[j] : DT(0);
          dh[j] = 0;
        }
        break;
      case RnnMode::kRnnTanh:
        for (int64_t j = 0; j < H; ++j) {
          dgx[j] = (dy[j] + dh[j]) * (DT(1) - g[j] * g[j]);
          dh[j] = 0;
        }
        break;
      case RnnMode::kLstm: {
        DT* dc = b.dc + n * H;
        const DT* cell = b.cell[k] + row;
        const DT* cprev = b.cprev[k] + row;
        const DT* craw = opt.clip ? b.craw[k] + row : nullptr;
        for (int64_t j = 0; j < H; ++j) {
          const DT i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
          const DT tc = std::tanh(cell[j]);
          const DT dht = dy[j] + dh[j];
          DT dct = dc[j] + dht * o * (DT(1) - tc * tc);
          if (craw && !(craw[j] >= lo && craw[j] <= hi)) dct = 0;  // clipped (or NaN): no gradient
          dgx[j] = dct * gg * i * (DT(1) - i);
          dgx[H + j] = dct * cprev[j] * f * (DT(1) - f);
          dgx[2 * H + j] = dct * i * (DT(1) - gg * gg);
          dgx[3 * H + j] = dht * tc * o * (DT(1) - o);
          dc[j] = dct * f;
          dh[j] = 0;
        }
        break;
      }
      case RnnMode::kGru: {
        const DT* hprev = b.hprev[k] + row;
        const DT* hn = b.hn[k] + row;
        for (int64_t j = 0; j < H; ++j) {
          const DT r = g[j], z = g[H + j], nn = g[2 * H + j];
          const DT dht = dy[j] + dh[j];
          const DT dnp = dht * (DT(1) - z) * (DT(1) - nn * nn);
          const DT drp = dnp * hn[j] * r * (DT(1) - r);
          const DT dzp = dht * (hprev[j] - nn) * z * (DT(1) - z);
          dgx[j] = dgh[j] = drp;
          dgx[H + j] = dgh[H + j] = dzp;
          dgx[2 * H + j] = dnp;
          dgh[2 * H + j] = dnp * r;
          dh[j] = dht * z;
        }
        break;
      }
    }
  }
}

/// Backpropagation through time over a forward pass recorded in `b` (run forward() with
/// b.trace first, on the same inputs).
template <typename DT>
void backward(const RnnDims& d, const RnnOptions& opt, const ForwardArgs<DT>& a,
              const BackwardArgs<DT>& ga, RnnBuffers<DT>& b) {
  const int64_t T = d.T, N = d.N, H = d.H, GH = d.GH(), DH = d.D * H, TN = T * N;
  const bool lstm = d.mode == RnnMode::kLstm;
  const int64_t step_grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, GH));
  const int64_t nparams = param_size(d.mode, d.L, d.D, d.I, d.H);
  std::fill(b.dparams, b.dparams + nparams, DT(0));
  std::copy(ga.dy, ga.dy + TN * DH, b.dy);
  for (int64_t l = d.L - 1; l >= 0; --l) {
    const int64_t in = d.layer_input(l);
    const DT* x_layer = l == 0 ? a.data : a.mask ? b.x[l] : b.y[l - 1];
    DT* dx = l == 0 ? b.ddata : b.dx;
    for (int64_t dir = 0; dir < d.D; ++dir) {
      const int64_t k = l * d.D + dir;
      const ParamOffsets off = param_offsets(d, l, dir);
      const DT* w_i2h = a.params + off.w_i2h;
      const DT* w_h2h = a.params + off.w_h2h;
      const int64_t state = k * N * H;
      if (ga.dhy) {
        std::copy(ga.dhy + state, ga.dhy + state + N * H, b.dh);
      } else {
        std::fill(b.dh, b.dh + N * H, DT(0));
      }
      if (lstm) {
        if (ga.dcy) {
          std::copy(ga.dcy + state, ga.dcy + state + N * H, b.dc);
        } else {
          std::fill(b.dc, b.dc + N * H, DT(0));
        }
      }
      for (int64_t s = T - 1; s >= 0; --s) {
        const int64_t t = dir == 0 ? s : T - 1 - s;
        parallel_for(N, step_grain, opt.threads, [&](int64_t n0, int64_t n1) {
          backward_step(d, opt, b, k, t, dir, a.lens, b.dy, n0, n1);
        });
        // dh_prev += dG_h(t) · W_h2h  (rows of skipped steps have dG = 0 and keep their dh)
        gemm<DT>(false, false, N, H, GH, DT(1), b.dgh + t * N * GH, GH, w_h2h, H, DT(1), b.dh, H,
                 opt.threads);
      }
      std::copy(b.dh, b.dh + N * H, b.dhx + state);
      if (lstm) std::copy(b.dc, b.dc + N * H, b.dcx + state);
      // Weight gradients over all steps at once.
      gemm<DT>(true, false, GH, in, TN, DT(1), b.dgx, GH, x_layer, in, DT(1), b.dparams + off.w_i2h,
               in, opt.threads);
      gemm<DT>(true, false, GH, H, TN, DT(1), b.dgh, GH, b.hprev[k], H, DT(1),
               b.dparams + off.w_h2h, H, opt.threads);
      DT* db_i2h = b.dparams + off.b_i2h;
      DT* db_h2h = b.dparams + off.b_h2h;
      for (int64_t r = 0; r < TN; ++r) {
        const DT* gx = b.dgx + r * GH;
        const DT* gh = b.dgh + r * GH;
        for (int64_t j = 0; j < GH; ++j) db_i2h[j] += gx[j];
        for (int64_t j = 0; j < GH; ++j) db_h2h[j] += gh[j];
      }
      // Gradient of the layer input, summed over directions.
      gemm<DT>(false, false, TN, in, GH, DT(1), b.dgx, GH, w_i2h, in, dir == 0 ? DT(0) : DT(1), dx,
               in, opt.threads);
    }
    if (l > 0) {
      const DT* m = a.mask ? a.mask + (l - 1) * TN * DH : nullptr;
      parallel_for(TN * DH, 1 << 15, opt.threads, [&](int64_t i0, int64_t i1) {
        if (m) {
          for (int64_t i = i0; i < i1; ++i) b.dy[i] = b.dx[i] * m[i];
        } else {
          std::copy(b.dx + i0, b.dx + i1, b.dy + i0);
        }
      });
    }
  }
}

}  // namespace weft::detail::rnn