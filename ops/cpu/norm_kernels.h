// Private helpers of the CPU kernels of the normalisation / softmax / activation / dropout / CTC op
// group: the registration functions of its parts and the loops they share.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::cpu {

// The CPU kernels of the group's parts (each in its own file); register_nn_norm_kernels calls
// them all.
void register_batch_norm_kernels(OpRegistry& r);  ///< ops/cpu/batch_norm.cc: BatchNorm
void register_layer_norm_kernels(OpRegistry& r);  ///< ops/cpu/layer_norm.cc: LayerNorm, LRN
void register_softmax_kernels(
    OpRegistry& r);  ///< ops/cpu/softmax.cc: softmax, log_softmax, SoftmaxActivation
void register_activation_kernels(OpRegistry& r);  ///< ops/cpu/activation.cc: Activation, LeakyReLU
void register_dropout_kernels(OpRegistry& r);     ///< ops/cpu/dropout.cc: Dropout
void register_ctc_loss_kernels(OpRegistry& r);    ///< ops/cpu/ctc_loss.cc: _contrib_CTCLoss

}  // namespace weft::cpu

namespace weft::detail {
namespace norm {

/// A compact tensor viewed as (outer, dim, inner) around one axis.
struct AxisSplit {
  int64_t outer = 1;
  int64_t dim = 1;
  int64_t inner = 1;
};

/// Splits `shape` (rank `ndim`) at `axis` (already normalised).
inline AxisSplit split_at(const int64_t* shape, int ndim, int axis) {
  AxisSplit s;
  for (int i = 0; i < axis; ++i) s.outer *= shape[i];
  s.dim = ndim > 0 ? shape[axis] : 1;
  for (int i = axis + 1; i < ndim; ++i) s.inner *= shape[i];
  return s;
}
inline AxisSplit split_at(const TensorView& v, int axis) { return split_at(v.shape, v.ndim, axis); }

/// Writes `v` to `*dst` as `req` says: kWrite/kInplace overwrite, kAdd accumulates, kNull skips.
template <typename T, typename V>
inline void store(T* dst, OpReq req, V v) {
  if (req == OpReq::kAdd) {
    *dst = static_cast<T>(*dst + static_cast<T>(v));
  } else if (req != OpReq::kNull) {
    *dst = static_cast<T>(v);
  }
}

/// A parallel_for grain for loops whose items are rows of `row_len` elements (~16K elements each).
inline int64_t row_grain(int64_t row_len) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(row_len, 1));
}

/// An exact text form of a double (hex float) for primitive-cache keys.
inline std::string exact_key(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return buf;
}

/// Reads element i of a view of any supported dtype as a double (labels, lengths).
inline double read_as_double(const TensorView& v, int64_t i) {
  double x = 0;
  WEFT_DTYPE_SWITCH(v.dtype(), DT, "read_as_double", x = static_cast<double>(v.ptr<DT>()[i]));
  return x;
}

/// Computation type: double when either side is double.
template <typename A, typename B>
using CalcT =
    std::conditional_t<std::is_same_v<A, double> || std::is_same_v<B, double>, double, float>;

/// Softmax (or log-softmax) of x / temp along the middle axis of `s`. Row (o, i) uses its first
/// `len` entries (lengths[o*inner+i] clamped to [0, dim]) when lengths is non-empty; the rest of
/// the row becomes 0.
template <typename DI, typename DO>
void softmax_rows(const DI* x, DO* y, const AxisSplit& s, double temp, bool log,
                  const std::vector<int64_t>& lengths, OpReq req, int threads) {
  using CT = CalcT<DI, DO>;
  if (req == OpReq::kNull) return;
  const int64_t D = s.dim, inner = s.inner;
  const CT inv_t = static_cast<CT>(1.0 / temp);
  parallel_for(s.outer * inner, norm::row_grain(D), threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * D * inner + i;
      const int64_t len = lengths.empty() ? D : std::clamp<int64_t>(lengths[r], 0, D);
      CT mx = -std::numeric_limits<CT>::infinity();
      for (int64_t d = 0; d < len; ++d) mx = std::max(mx, static_cast<CT>(x[base + d * inner]));
      CT sum = 0;
      for (int64_t d = 0; d < len; ++d)
        sum += std::exp((static_cast<CT>(x[base + d * inner]) - mx) * inv_t);
      if (log) {
        const CT lse = std::log(sum);
        for (int64_t d = 0; d < len; ++d)
          store(y + base + d * inner, req,
                (static_cast<CT>(x[base + d * inner]) - mx) * inv_t - lse);
      } else {
        const CT inv = CT(1) / sum;
        for (int64_t d = 0; d < len; ++d)
          store(y + base + d * inner, req,
                std::exp((static_cast<CT>(x[base + d * inner]) - mx) * inv_t) * inv);
      }
      for (int64_t d = len; d < D; ++d) store(y + base + d * inner, req, 0);
    }
  });
}

}  // namespace norm
}  // namespace weft::detail
