// 2-D max pooling over NCHW planes, forward and backward, with MXNet's rules: a window is
// clipped to the input (padding never wins), and in the backward the first input of a window
// (row-major order) equal to the output takes the whole gradient.
//
// Note [Separable max pooling]: the max over a kh x kw window is the max over kh rows of the
// max over kw columns. The forward first reduces each input row horizontally into a scratch
// row of OW values, then each output row is the element-wise max of kh scratch rows: contiguous
// loads the compiler vectorises, and kh + kw comparisons per output instead of kh * kw. It gives
// exactly the direct result (max is associative; NaN never replaces a value in either order).
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

/// y (=, or += when `add`) = max pooling of x, every plane.
template <typename T>
void max_pool2d_forward(const MaxPool2DGeom& g, const T* x, T* y, bool add, int threads) {
  parallel_for(g.planes, 1, threads, [&](int64_t c0, int64_t c1) {
    std::vector<T> rows(static_cast<size_t>(g.h * g.ow));
    std::vector<int64_t> lo(static_cast<size_t>(g.ow)), hi(static_cast<size_t>(g.ow));
    for (int64_t o = 0; o < g.ow; ++o) {
      const int64_t start = o * g.sw - g.pw;
      lo[o] = std::max<int64_t>(start, 0);
      hi[o] = std::max(std::min(start + g.kw, g.w), lo[o]);
    }
    for (int64_t c = c0; c < c1; ++c) {
      const T* xp = x + c * g.h * g.w;
      T* yp = y + c * g.oh * g.ow;
      for (int64_t r = 0; r < g.h; ++r) {  // horizontal pass
        const T* in = xp + r * g.w;
        T* out = rows.data() + r * g.ow;
        for (int64_t o = 0; o < g.ow; ++o) {
          T v = std::numeric_limits<T>::lowest();
          for (int64_t i = lo[o]; i < hi[o]; ++i) v = in[i] > v ? in[i] : v;
          out[o] = v;
        }
      }
      for (int64_t o = 0; o < g.oh; ++o) {  // vertical pass, whole rows at a time
        const int64_t start = o * g.sh - g.ph;
        const int64_t r0 = std::max<int64_t>(start, 0), r1 = std::min(start + g.kh, g.h);
        T* out = yp + o * g.ow;
        if (add) {
          for (int64_t j = 0; j < g.ow; ++j) {
            T v = std::numeric_limits<T>::lowest();
            for (int64_t r = r0; r < r1; ++r) {
              const T s = rows[r * g.ow + j];
              v = s > v ? s : v;
            }
            out[j] += v;
          }
          continue;
        }
        std::fill(out, out + g.ow, std::numeric_limits<T>::lowest());
        for (int64_t r = r0; r < r1; ++r) {
          const T* s = rows.data() + r * g.ow;
          for (int64_t j = 0; j < g.ow; ++j) out[j] = s[j] > out[j] ? s[j] : out[j];
        }
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
