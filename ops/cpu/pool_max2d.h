// 2-D max pooling over NCHW planes, forward and backward, with MXNet's rules: a window is
// clipped to the input (padding never wins), and in the backward the first input of a window
// (row-major order) equal to the output takes the whole gradient.
//
// Note [Separable max pooling]: the max over a kh x kw window is the max over kw columns of the
// max over kh rows. For each output row the forward first takes the element-wise max of the kh
// input rows of its window into a scratch row of W values (contiguous loads the compiler
// vectorises), then reduces that row horizontally: kh + kw comparisons per output instead of
// kh * kw, and the horizontal pass runs on OH rows rather than H. Windows wholly inside the row
// take a loop specialised for the common kernel/stride pairs. It gives exactly the direct result
// (max is associative; NaN never replaces a value in either order).
// The general loops in pooling.cc handle 1-D/3-D, avg, sum and lp pooling.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/infer_util.h"

namespace weft::detail {

struct MaxPool2DGeom {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
};

namespace pool_max2d_internal {

template <typename T>
inline T max_keep(T v, T s) {
  return s > v ? s : v;  // NaN never replaces a value (MXNet's rule)
}

/// out[j] = max of t over window j of one row (horizontal pass). The windows that lie wholly
/// inside the row run with the compile-time width and stride KW/SW when they are nonzero (the
/// loop the compiler vectorises), the clipped ones at the row's ends with the runtime bounds.
template <typename T, int KW, int SW>
void row_max(const MaxPool2DGeom& g, const T* t, T* out, int64_t j0, int64_t j1) {
  const int64_t kw = KW > 0 ? KW : g.kw, sw = SW > 0 ? SW : g.sw;
  auto clipped = [&](int64_t j) {
    const int64_t start = j * sw - g.pw;
    const int64_t a = std::max<int64_t>(start, 0), b = std::min(start + kw, g.w);
    T v = std::numeric_limits<T>::lowest();
    for (int64_t i = a; i < b; ++i) v = max_keep(v, t[i]);
    out[j] = v;
  };
  for (int64_t j = 0; j < j0; ++j) clipped(j);
  for (int64_t j = j0; j < j1; ++j) {
    const T* p = t + j * sw - g.pw;
    T v = p[0];
    for (int64_t i = 1; i < kw; ++i) v = max_keep(v, p[i]);
    out[j] = v;
  }
  for (int64_t j = std::max(j0, j1); j < g.ow; ++j) clipped(j);
}

}  // namespace pool_max2d_internal

/// y (=, or += when `add`) = max pooling of x, every plane (Note [Separable max pooling]).
template <typename T>
void max_pool2d_forward(const MaxPool2DGeom& g, const T* x, T* y, bool add, int threads) {
  using namespace pool_max2d_internal;
  // Outputs [j0, j1) have their whole window inside the row.
  const int64_t j0 = std::min(g.ow, (g.pw + g.sw - 1) / g.sw);
  const int64_t j1 = std::max(j0, std::min(g.ow, (g.w + g.pw - g.kw) / g.sw + 1));
  auto row = row_max<T, 0, 0>;
  if (g.kw == 3 && g.sw == 2) row = row_max<T, 3, 2>;
  if (g.kw == 2 && g.sw == 2) row = row_max<T, 2, 2>;
  if (g.kw == 3 && g.sw == 1) row = row_max<T, 3, 1>;
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.h * g.w));
  parallel_for(g.planes, grain, threads, [&](int64_t c0, int64_t c1) {
    std::vector<T> col(static_cast<size_t>(g.w)), res(static_cast<size_t>(g.ow));
    for (int64_t c = c0; c < c1; ++c) {
      const T* xp = x + c * g.h * g.w;
      T* yp = y + c * g.oh * g.ow;
      for (int64_t o = 0; o < g.oh; ++o) {
        // Vertical pass first (whole contiguous rows), then the horizontal pass on one row.
        const int64_t start = o * g.sh - g.ph;
        const int64_t r0 = std::max<int64_t>(start, 0), r1 = std::min(start + g.kh, g.h);
        T* v = col.data();
        std::fill(v, v + g.w, std::numeric_limits<T>::lowest());
        for (int64_t r = r0; r < r1; ++r) {
          const T* s = xp + r * g.w;
          for (int64_t j = 0; j < g.w; ++j) v[j] = max_keep(v[j], s[j]);
        }
        T* out = yp + o * g.ow;
        if (!add) {
          row(g, v, out, j0, j1);
          continue;
        }
        row(g, v, res.data(), j0, j1);
        for (int64_t j = 0; j < g.ow; ++j) out[j] += res[j];
      }
    }
  });
}

/// dx (=, or += when `add`) the gradient of max pooling: dy, x and the forward's output y.
template <typename T>
void max_pool2d_backward(const MaxPool2DGeom& g, const T* dy, const T* x, const T* y, T* dx,
                         bool add, int threads) {
  parallel_for(g.planes, 1, threads, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const T* xp = x + c * g.h * g.w;
      T* gp = dx + c * g.h * g.w;
      const T* dyp = dy + c * g.oh * g.ow;
      const T* yp = y + c * g.oh * g.ow;
      if (!add) std::fill(gp, gp + g.h * g.w, T(0));
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t hs = oh * g.sh - g.ph;
        const int64_t r0 = std::max<int64_t>(hs, 0), r1 = std::min(hs + g.kh, g.h);
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const int64_t ws = ow * g.sw - g.pw;
          const int64_t q0 = std::max<int64_t>(ws, 0), q1 = std::min(ws + g.kw, g.w);
          const T out = yp[oh * g.ow + ow];
          const T go = dyp[oh * g.ow + ow];
          for (int64_t r = r0; r < r1; ++r) {
            const T* row = xp + r * g.w;
            int64_t q = q0;
            while (q < q1 && !(row[q] == out)) ++q;
            if (q < q1) {
              gp[r * g.w + q] += go;
              break;
            }
          }
        }
      }
    }
  });
}

}  // namespace weft::detail
