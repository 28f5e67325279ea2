// Private helpers of the CPU convolution / pooling / dense kernels: a row-major GEMM (oneDNN sgemm
// for float32, plain loops otherwise), im2col/col2im and the reference convolution, workspace
// slicing, the fused ops' post-ops and the oneDNN convolution primitives.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/build_config.h"
#include "ops/defs/conv_common.h"
#include "ops/op.h"

#if WEFT_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

#include "ops/cpu/dnnl_util.h"
#endif

namespace weft::detail {

// ---- kernel registration (one per file; called by cpu::register_conv_dense_kernels)
// ----------------
void register_convolution_kernels(OpRegistry& r);      // ops/cpu/conv.cc
void register_fused_conv_kernels(OpRegistry& r);       // ops/cpu/conv_fused.cc
void register_deconvolution_kernels(OpRegistry& r);    // ops/cpu/deconv.cc
void register_pooling_kernels(OpRegistry& r);          // ops/cpu/pooling.cc
void register_fully_connected_kernels(OpRegistry& r);  // ops/cpu/fully_connected.cc
void register_dot_kernels(OpRegistry& r);              // ops/cpu/dot.cc

/// Workspace bytes of the im2col reference path (0 for a pointwise convolution).
size_t conv_ref_workspace_bytes(const ConvGeom& g);

// ---- post-ops of the fused ops (ops/cpu/conv_fused.cc) ------------------------------------------

/// y[i] = act(y[i]) for n floats (the reference paths).
void fused_act_apply(const FusedAct& act, float* y, int64_t n, int threads);

/// The post-ops of a fused primitive: an optional sum with the destination's old contents, then
/// the activation. A prelu activation reads its slopes from `prelu_slopes` (float32, one per
/// output channel, or one for all when `prelu_shared`), set at execution.
struct FusedPostOps {
  bool sum = false;
  FusedAct act;
  bool prelu_shared = false;
  const float* prelu_slopes = nullptr;
  std::string key() const {
    return (sum ? "|sum" : "") + act.key() + (prelu_shared ? "|shared" : "");
  }
};

#if WEFT_USE_ONEDNN
/// `post` as oneDNN post-ops (the sum first).
dnnl::post_ops fused_post_ops(const FusedPostOps& post);
/// A primitive_attr (user scratchpad) carrying `post` as oneDNN post-ops.
dnnl::primitive_attr fused_post_op_attr(const FusedPostOps& post);
#endif

/// Hands out aligned slices of an op's workspace; throws InternalError past its end.
class WorkspaceCursor {
 public:
  WorkspaceCursor(void* base, size_t bytes) : base_(static_cast<char*>(base)), bytes_(bytes) {}
  void* take(size_t n);
  template <typename T>
  T* take_array(int64_t count) {
    return static_cast<T*>(take(static_cast<size_t>(count) * sizeof(T)));
  }

 private:
  char* base_;
  size_t bytes_;
  size_t used_ = 0;
};

// ---- GEMM ---------------------------------------------------------------------------------------

/// Plain row-major C = alpha·op(A)·op(B) + beta·C (beta == 0 overwrites, NaNs included).
template <typename T>
void gemm_loops(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc, int threads) {
  if (m <= 0 || n <= 0) return;
  const int64_t work = std::max<int64_t>(1, n * std::max<int64_t>(k, 1));
  const int64_t grain = std::max<int64_t>(1, 32768 / work);
  parallel_for(m, grain, threads, [&](int64_t i0, int64_t i1) {
    std::vector<T> acc;
    if (tb) acc.resize(static_cast<size_t>(n));
    for (int64_t i = i0; i < i1; ++i) {
      T* crow = c + i * ldc;
      if (beta == T(0)) {
        std::fill(crow, crow + n, T(0));
      } else if (beta != T(1)) {
        for (int64_t j = 0; j < n; ++j) crow[j] *= beta;
      }
      if (!tb) {
        for (int64_t p = 0; p < k; ++p) {
          const T av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
          const T* brow = b + p * ldb;
          for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
        }
      } else {
        for (int64_t j = 0; j < n; ++j) {
          const T* bcol = b + j * ldb;
          T sum = T(0);
          if (!ta) {
            const T* arow = a + i * lda;
            for (int64_t p = 0; p < k; ++p) sum += arow[p] * bcol[p];
          } else {
            for (int64_t p = 0; p < k; ++p) sum += a[p * lda + i] * bcol[p];
          }
          crow[j] += alpha * sum;
        }
      }
    }
  });
}

/// Row-major GEMM: float32 runs oneDNN's sgemm (when built with oneDNN) on `threads` threads,
/// other types the plain loops.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc, int threads) {
  if (m <= 0 || n <= 0) return;
#if WEFT_USE_ONEDNN
  if constexpr (std::is_same_v<T, float>) {
    if (k > 0) {
      dnnl_util::ScopedThreads scoped(threads);
      const dnnl_status_t st =
          dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      WEFT_ICHECK(st == dnnl_success) << "dnnl_sgemm failed with status " << static_cast<int>(st);
      return;
    }
  }
#endif
  gemm_loops<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, threads);
}

// ---- im2col / col2im ----------------------------------------------------------------------------

/// Unfolds `channels` channels of one image `x` (channels × in) into `col`
/// ((channels·k_size) × out_size), zeros where the window reads padding.
template <typename T>
void im2col(const ConvGeom& g, const T* x, int64_t channels, T* col, int threads) {
  const int64_t ks = g.k_size(), os = g.out_size(), is = g.in_size();
  const int64_t rows = channels * ks;
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(os, 1)), threads,
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t c = r / ks, kidx = r % ks;
                   const int64_t kw = kidx % g.k[2], kh = (kidx / g.k[2]) % g.k[1],
                                 kd = kidx / (g.k[2] * g.k[1]);
                   const T* xc = x + c * is;
                   T* dst = col + r * os;
                   for (int64_t od = 0; od < g.out[0]; ++od) {
                     const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
                     for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                       T* drow = dst + (od * g.out[1] + oh) * g.out[2];
                       const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
                       if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
                         std::fill(drow, drow + g.out[2], T(0));
                         continue;
                       }
                       const T* xrow = xc + (id * g.in[1] + ih) * g.in[2];
                       const int64_t off = kw * g.d[2] - g.p[2];
                       if (g.s[2] == 1) {
                         for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                           const int64_t iw = ow + off;
                           drow[ow] = (iw >= 0 && iw < g.in[2]) ? xrow[iw] : T(0);
                         }
                       } else {
                         for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                           const int64_t iw = ow * g.s[2] + off;
                           drow[ow] = (iw >= 0 && iw < g.in[2]) ? xrow[iw] : T(0);
                         }
                       }
                     }
                   }
                 }
               });
}

/// Folds `col` back, adding each entry into the input position it was read from (padding
/// entries are dropped). Channels are independent, so the loop parallelises over them.
template <typename T>
void col2im_add(const ConvGeom& g, const T* col, int64_t channels, T* x, int threads) {
  const int64_t ks = g.k_size(), os = g.out_size(), is = g.in_size();
  parallel_for(channels, 1, threads, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      T* xc = x + c * is;
      for (int64_t kidx = 0; kidx < ks; ++kidx) {
        const int64_t kw = kidx % g.k[2], kh = (kidx / g.k[2]) % g.k[1],
                      kd = kidx / (g.k[2] * g.k[1]);
        const T* src = col + (c * ks + kidx) * os;
        for (int64_t od = 0; od < g.out[0]; ++od) {
          const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t oh = 0; oh < g.out[1]; ++oh) {
            const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const T* srow = src + (od * g.out[1] + oh) * g.out[2];
            T* xrow = xc + (id * g.in[1] + ih) * g.in[2];
            for (int64_t ow = 0; ow < g.out[2]; ++ow) {
              const int64_t iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
              if (iw >= 0 && iw < g.in[2]) xrow[iw] += srow[ow];
            }
          }
        }
      }
    }
  });
}

// ---- reference convolution (im2col + GEMM), in conv terms ---------------------------------------
// x: (batch, in_c, in), w: (out_c, in_cg, k), y: (batch, out_c, out). `col` is a workspace of
// col_rows()·out_size() elements (unused for pointwise convolutions).

/// y (=, or += when `add`) conv(x, w) [+ bias].
template <typename T>
void conv_forward_ref(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y, bool add,
                      T* col, int threads) {
  const int64_t is = g.in_size(), os = g.out_size(), rows = g.col_rows();
  const bool pw = g.pointwise();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* xg = x + (n * g.in_c + grp * g.in_cg()) * is;
      const T* src = xg;
      if (!pw) {
        im2col(g, xg, g.in_cg(), col, threads);
        src = col;
      }
      T* yg = y + (n * g.out_c + grp * g.out_cg()) * os;
      gemm<T>(false, false, g.out_cg(), os, rows, T(1), w + grp * g.out_cg() * rows, rows, src, os,
              add ? T(1) : T(0), yg, os, threads);
    }
    if (bias) {
      T* yn = y + n * g.out_c * os;
      parallel_for(g.out_c, 1, threads, [&](int64_t f0, int64_t f1) {
        for (int64_t f = f0; f < f1; ++f) {
          const T b = bias[f];
          T* row = yn + f * os;
          for (int64_t o = 0; o < os; ++o) row[o] += b;
        }
      });
    }
  }
}

/// dx (=, or += when `add`) the gradient of conv with respect to x, given dy and w.
template <typename T>
void conv_backward_data_ref(const ConvGeom& g, const T* dy, const T* w, T* dx, bool add, T* col,
                            int threads) {
  const int64_t is = g.in_size(), os = g.out_size(), rows = g.col_rows();
  const bool pw = g.pointwise();
  if (!add && !pw) std::fill(dx, dx + g.batch * g.in_c * is, T(0));
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* dyg = dy + (n * g.out_c + grp * g.out_cg()) * os;
      const T* wg = w + grp * g.out_cg() * rows;
      T* dxg = dx + (n * g.in_c + grp * g.in_cg()) * is;
      if (pw) {
        gemm<T>(true, false, rows, os, g.out_cg(), T(1), wg, rows, dyg, os, add ? T(1) : T(0), dxg,
                os, threads);
      } else {
        gemm<T>(true, false, rows, os, g.out_cg(), T(1), wg, rows, dyg, os, T(0), col, os, threads);
        col2im_add(g, col, g.in_cg(), dxg, threads);
      }
    }
  }
}

/// dw (=, or += when `add`) the gradient of conv with respect to w, given x and dy.
template <typename T>
void conv_backward_weight_ref(const ConvGeom& g, const T* x, const T* dy, T* dw, bool add, T* col,
                              int threads) {
  const int64_t is = g.in_size(), os = g.out_size(), rows = g.col_rows();
  const bool pw = g.pointwise();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* xg = x + (n * g.in_c + grp * g.in_cg()) * is;
      const T* src = xg;
      if (!pw) {
        im2col(g, xg, g.in_cg(), col, threads);
        src = col;
      }
      const T* dyg = dy + (n * g.out_c + grp * g.out_cg()) * os;
      const bool accumulate = add || n > 0;
      gemm<T>(false, true, g.out_cg(), rows, os, T(1), dyg, os, src, os, accumulate ? T(1) : T(0),
              dw + grp * g.out_cg() * rows, rows, threads);
    }
  }
  if (g.batch == 0 && !add) std::fill(dw, dw + g.out_c * rows, T(0));
}

/// db[c] (=, or +=) Σ over batch and positions of dy[n, c, :] for dy of shape (batch, channels,
/// size).
template <typename T>
void bias_backward_ref(const T* dy, int64_t batch, int64_t channels, int64_t size, T* db, bool add,
                       int threads) {
  parallel_for(channels, 1, threads, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      T sum = T(0);
      for (int64_t n = 0; n < batch; ++n) {
        const T* row = dy + (n * channels + c) * size;
        for (int64_t o = 0; o < size; ++o) sum += row[o];
      }
      db[c] = add ? db[c] + sum : sum;
    }
  });
}

/// True when `req` asks for a write of any kind (not kNull).
inline bool writes(OpReq req) { return req != OpReq::kNull; }

#if WEFT_USE_ONEDNN
/// A cached conversion between the plain layout of a tensor and the layout a primitive prefers;
/// `needed` is false (and no reorder exists) when they are the same.
struct DnnlReformat {
  bool needed = false;
  dnnl::memory::desc plain, want;
  dnnl::reorder to_want, to_plain;
  /// Bytes of workspace a converted copy takes (0 when not needed).
  size_t bytes() const { return needed ? align64(want.get_size()) : 0; }
};
/// Builds the reorders between `plain` and `want` (both directions) when they differ.
DnnlReformat make_reformat(const dnnl::memory::desc& plain, const dnnl::memory::desc& want);
/// Memory for an input in the wanted layout: the plain buffer itself, or a reordered copy in the
/// workspace (the reorder is queued on the thread's stream).
dnnl::memory dnnl_input(const DnnlReformat& f, void* data, WorkspaceCursor& ws);
/// Memory for an output in the wanted layout: the plain buffer itself or a workspace buffer;
/// call dnnl_finish_output after executing to copy a workspace buffer back.
dnnl::memory dnnl_output(const DnnlReformat& f, void* data, WorkspaceCursor& ws);
void dnnl_finish_output(const DnnlReformat& f, const dnnl::memory& produced, void* data);
/// Appends a user scratchpad of `desc`'s size from the workspace to `args` (when non-empty).
void dnnl_add_scratchpad(const dnnl::memory::desc& desc, WorkspaceCursor& ws,
                         std::unordered_map<int, dnnl::memory>& args);
/// A key fragment "a,b,c" for a list of numbers.
std::string dims_key(const dnnl::memory::dims& d);
/// A primitive_attr with a user-managed scratchpad.
dnnl::primitive_attr user_scratchpad_attr();

// oneDNN float32 convolution in conv terms (ops/cpu/conv.cc): x (batch, in_c, in), w (out_c, in_cg,
// k) in MXNet's layout, y (batch, out_c, out). Primitives are cached by geometry; the weight's
// blocked copy is cached by (storage id, version) of input `w_index` of the context. Each call
// writes its outputs (no accumulation), takes its scratch from ctx.workspace (at least
// dnnl_conv_workspace bytes) and returns when done.
/// Whether the oneDNN path handles this geometry (non-empty tensors).
bool dnnl_conv_supported(const ConvGeom& g);
/// Whether the forward primitive writes the plain layout itself (no reorder of its output).
bool dnnl_conv_dst_plain(const ConvGeom& g, bool bias, const FusedPostOps& post);
/// Workspace bytes of the forward (backward = false) or backward primitives; 0 when unsupported.
size_t dnnl_conv_workspace(const ConvGeom& g, bool bias, bool backward,
                           const FusedPostOps& post = {});
/// With `post`, the primitive applies its post-ops: y = act(conv + y) with `post.sum` (y holds the
/// addend on entry), y = act(conv) otherwise.
void dnnl_conv_forward(const ConvGeom& g, const OpContext& ctx, const TensorView& x,
                       const TensorView& w, int w_index, const TensorView* bias,
                       const TensorView& y, const FusedPostOps& post = {});
/// The formats the forward primitive for `g` prefers for its source and destination, as layouts
/// (null when plain or placed like plain): what FInferLayout of the convolution ops announces.
void dnnl_conv_layouts(const ConvGeom& g, bool bias, const FusedPostOps& post, LayoutRef* src,
                       LayoutRef* dst);
/// Workspace bytes of dnnl_conv_forward when the data and output have layouts `src` / `dst`
/// (null: plain); 0 when unsupported.
size_t dnnl_conv_layout_workspace(const ConvGeom& g, bool bias, const FusedPostOps& post,
                                  const MemoryLayout* src, const MemoryLayout* dst);
void dnnl_conv_backward_data(const ConvGeom& g, const OpContext& ctx, const TensorView& dy,
                             const TensorView& w, int w_index, const TensorView& dx);
/// Weight (and bias, when db is given) gradients.
void dnnl_conv_backward_weights(const ConvGeom& g, const OpContext& ctx, const TensorView& x,
                                const TensorView& dy, const TensorView& dw, const TensorView* db);
#endif

}  // namespace weft::detail
