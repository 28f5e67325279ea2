// The fused RNN's own CUDA kernels (see rnn_kernels.h). The formulas are those of
// ops/cpu/rnn_cell.h (forward_step, backward_step), one thread per (sequence n, unit j): a thread
// owns column j of every gate of row n, so a step needs no synchronisation.
#include "ops/cuda/device_util.cuh"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/rnn_kernels.h"

namespace weft::cuda {
namespace {

constexpr int kRelu = 0, kTanh = 1, kLstm = 2, kGru = 3;

template <typename DT>
__device__ __forceinline__ DT sigm(DT x) {
  return DT(1) / (DT(1) + exp(-x));
}

template <typename DT>
__global__ void forward_step_kernel(RnnStepFwd<DT> a) {
  const int64_t H = a.H;
  WEFT_CUDA_KERNEL_LOOP(idx, a.N * H) {
    const int64_t n = idx / H, j = idx % H;
    DT* y = a.y_layer + (a.t * a.N + n) * a.DH + a.dir * H + j;
    if (a.lens && a.t >= a.lens[n]) {
      *y = DT(0);
      continue;
    }
    const int64_t G = a.mode == kLstm ? 4 : a.mode == kGru ? 3 : 1;
    DT* g = a.g + n * G * H;
    const DT* hp = a.hproj + n * G * H;
    const DT* bh = a.b_h2h;
    DT& h = a.h[n * H + j];
    switch (a.mode) {
      case kRelu: {
        const DT v = g[j] + hp[j] + bh[j];
        h = g[j] = v > DT(0) ? v : DT(0);
        break;
      }
      case kTanh:
        h = g[j] = tanh(g[j] + hp[j] + bh[j]);
        break;
      case kLstm: {
        const DT i = sigm(g[j] + hp[j] + bh[j]);
        const DT f = sigm(g[H + j] + hp[H + j] + bh[H + j]);
        const DT gg = tanh(g[2 * H + j] + hp[2 * H + j] + bh[2 * H + j]);
        const DT o = sigm(g[3 * H + j] + hp[3 * H + j] + bh[3 * H + j]);
        g[j] = i, g[H + j] = f, g[2 * H + j] = gg, g[3 * H + j] = o;
        DT& c = a.c[n * H + j];
        DT cn = f * c + i * gg;
        if (a.clip) {
          if (a.craw) a.craw[n * H + j] = cn;
          const DT lo = static_cast<DT>(a.lo), hi = static_cast<DT>(a.hi);
          if (isnan(cn)) {
            if (a.clip_nan) cn = lo;
          } else {
            cn = cn < lo ? lo : (cn > hi ? hi : cn);
          }
        }
        c = cn;
        if (a.cell) a.cell[n * H + j] = cn;
        h = o * tanh(cn);
        break;
      }
      default: {  // GRU
        const DT r = sigm(g[j] + hp[j] + bh[j]);
        const DT z = sigm(g[H + j] + hp[H + j] + bh[H + j]);
        const DT hn = hp[2 * H + j] + bh[2 * H + j];
        const DT nn = tanh(g[2 * H + j] + r * hn);
        g[j] = r, g[H + j] = z, g[2 * H + j] = nn;
        if (a.hn) a.hn[n * H + j] = hn;
        h = (DT(1) - z) * nn + z * h;
        break;
      }
    }
    *y = h;
  }
}

template <typename DT>
__global__ void backward_step_kernel(RnnStepBwd<DT> a) {
  const int64_t H = a.H;
  const int64_t G = a.mode == kLstm ? 4 : a.mode == kGru ? 3 : 1;
  WEFT_CUDA_KERNEL_LOOP(idx, a.N * H) {
    const int64_t n = idx / H, j = idx % H;
    DT* dgx = a.dgx + n * G * H;
    DT* dgh = a.dgh + n * G * H;
    if (a.lens && a.t >= a.lens[n]) {  // a skipped step: h and c pass through unchanged
      for (int64_t q = 0; q < G; ++q) dgx[q * H + j] = dgh[q * H + j] = DT(0);
      continue;
    }
    const DT* g = a.g + n * G * H;
    const DT dy = a.dy_layer[(a.t * a.N + n) * a.DH + a.dir * H + j];
    DT& dh = a.dh[n * H + j];
    const int64_t e = n * H + j;
    switch (a.mode) {
      case kRelu:
        dgx[j] = g[j] > DT(0) ? dy + dh : DT(0);
        dh = DT(0);
        break;
      case kTanh:
        dgx[j] = (dy + dh) * (DT(1) - g[j] * g[j]);
        dh = DT(0);
        break;
      case kLstm: {
        const DT i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
        const DT tc = tanh(a.cell[e]);
        const DT dht = dy + dh;
        DT& dc = a.dc[e];
        DT dct = dc + dht * o * (DT(1) - tc * tc);
        if (a.craw) {
          const DT lo = static_cast<DT>(a.lo), hi = static_cast<DT>(a.hi);
          const DT cr = a.craw[e];
          if (!(cr >= lo && cr <= hi)) dct = DT(0);  // clipped (or NaN): no gradient
        }
        dgx[j] = dct * gg * i * (DT(1) - i);
        dgx[H + j] = dct * a.cprev[e] * f * (DT(1) - f);
        dgx[2 * H + j] = dct * i * (DT(1) - gg * gg);
        dgx[3 * H + j] = dht * tc * o * (DT(1) - o);
        dc = dct * f;
        dh = DT(0);
        break;
      }
      default: {  // GRU
        const DT r = g[j], z = g[H + j], nn = g[2 * H + j];
        const DT dht = dy + dh;
        const DT dnp = dht * (DT(1) - z) * (DT(1) - nn * nn);
        const DT drp = dnp * a.hn[e] * r * (DT(1) - r);
        const DT dzp = dht * (a.hprev[e] - nn) * z * (DT(1) - z);
        dgx[j] = dgh[j] = drp;
        dgx[H + j] = dgh[H + j] = dzp;
        dgx[2 * H + j] = dnp;
        dgh[2 * H + j] = dnp * r;
        dh = dht * z;
        break;
      }
    }
  }
}

template <typename DT>
__global__ void add_bias_rows_kernel(DT* x, const DT* bias, int64_t rows, int64_t cols) {
  WEFT_CUDA_KERNEL_LOOP(i, rows * cols) { x[i] += bias[i % cols]; }
}

template <typename DT>
__global__ void mul_kernel(const DT* x, const DT* m, DT* y, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { y[i] = x[i] * m[i]; }
}

template <typename DT>
__global__ void add_kernel(const DT* x, DT* y, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { y[i] += x[i]; }
}

template <typename DT>
__global__ void fill_kernel(DT* y, int64_t n, DT v) {
  WEFT_CUDA_KERNEL_LOOP(i, n) { y[i] = v; }
}

template <typename LT>
__global__ void lengths_kernel(const LT* src, int64_t* dst, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    dst[i] = static_cast<int64_t>(static_cast<double>(to_acc(src[i])));
  }
}

void check_last(const char* what) {
  int dev = -1;
  cudaGetDevice(&dev);
  check(cudaGetLastError(), what, dev);
}

}  // namespace

template <typename DT>
void rnn_forward_step(const RnnStepFwd<DT>& a, cudaStream_t stream) {
  const int64_t n = a.N * a.H;
  if (n == 0) return;
  forward_step_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(a);
  check_last("rnn_forward_step");
}

template <typename DT>
void rnn_backward_step(const RnnStepBwd<DT>& a, cudaStream_t stream) {
  const int64_t n = a.N * a.H;
  if (n == 0) return;
  backward_step_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(a);
  check_last("rnn_backward_step");
}

template <typename DT>
void rnn_add_bias_rows(DT* x, const DT* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_bias_rows_kernel<DT><<<grid_for(rows * cols), kBlockSize, 0, stream>>>(x, bias, rows, cols);
  check_last("rnn_add_bias_rows");
}

template <typename DT>
void rnn_mul(const DT* x, const DT* m, DT* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  mul_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(x, m, y, n);
  check_last("rnn_mul");
}

template <typename DT>
void rnn_add(const DT* x, DT* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(x, y, n);
  check_last("rnn_add");
}

template <typename DT>
void rnn_fill(DT* y, int64_t n, double v, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<DT><<<grid_for(n), kBlockSize, 0, stream>>>(y, n, static_cast<DT>(v));
  check_last("rnn_fill");
}

void rnn_lengths_to_i64(DType dtype, const void* src, int64_t* dst, int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return;
  WEFT_CUDA_ALL_SWITCH(dtype, LT, "RNN sequence_length", {
    lengths_kernel<LT><<<grid_for(n), kBlockSize, 0, stream>>>(static_cast<const LT*>(src), dst, n);
  });
  check_last("rnn_lengths_to_i64");
}

#define WEFT_RNN_INSTANTIATE(DT)                                                       \
  template void rnn_forward_step<DT>(const RnnStepFwd<DT>&, cudaStream_t);             \
  template void rnn_backward_step<DT>(const RnnStepBwd<DT>&, cudaStream_t);            \
  template void rnn_add_bias_rows<DT>(DT*, const DT*, int64_t, int64_t, cudaStream_t); \
  template void rnn_mul<DT>(const DT*, const DT*, DT*, int64_t, cudaStream_t);         \
  template void rnn_add<DT>(const DT*, DT*, int64_t, cudaStream_t);                    \
  template void rnn_fill<DT>(DT*, int64_t, double, cudaStream_t);
WEFT_RNN_INSTANTIATE(float)
WEFT_RNN_INSTANTIATE(double)
#undef WEFT_RNN_INSTANTIATE

}  // namespace weft::cuda
