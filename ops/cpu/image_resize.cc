// CPU kernel of _image_resize (mx.nd.image.resize, which calls OpenCV's cv::resize). Nearest
// (interp=0) and bilinear (interp=1) follow OpenCV's arithmetic (Note [OpenCV bilinear
// resize]).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/defs/image_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

namespace {

// Note [OpenCV bilinear resize]
// cv::resize(INTER_LINEAR) maps output column dx to fx = (float)((dx + 0.5) * scale - 0.5) with
// scale = 1 / (out / in) in double, sx = floor(fx), and weights (1 - f, f) of columns sx and
// sx + 1 (f = fx - sx). Columns are clamped: left of column 0 or right of the last column the
// weight is (1, 0) on the edge column. Rows use the same coordinates but keep their weights and
// clamp the row indices instead (both rows are then the edge row). uint8 images are computed in
// fixed point like OpenCV's SIMD code, which MXNet's wheel runs: weights are rounded to 11 bits
// (x 2048), the horizontal pass sums into int, and the vertical pass takes each sum >> 4 times
// its weight keeping the high 16 bits, adds the two and rounds, (h0 + h1 + 2) >> 2 (within 1 of
// exact rounding; equal to MXNet's results in tests/mxnet). Floating images are computed in
// their own type with float weights. Equal sizes copy; an exact 2x reduction is OpenCV's area
// average, which equals the bilinear result.
constexpr int kCoefBits = 11;
constexpr int kCoefScale = 1 << kCoefBits;

// One axis of a bilinear resize: for each output position, the two source indices and weights.
struct LinearAxis {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
};

LinearAxis linear_axis(int64_t in, int64_t out, bool clamp_weights) {
  LinearAxis a;
  a.i0.resize(out), a.i1.resize(out), a.w0.resize(out), a.w1.resize(out);
  const double scale = 1.0 / (static_cast<double>(out) / static_cast<double>(in));
  for (int64_t d = 0; d < out; ++d) {
    float f = static_cast<float>((static_cast<double>(d) + 0.5) * scale - 0.5);
    int64_t s = static_cast<int64_t>(std::floor(f));
    f -= static_cast<float>(s);
    if (clamp_weights) {
      if (s < 0) f = 0.f, s = 0;
      if (s >= in - 1) f = 0.f, s = in - 1;
    }
    a.i0[d] = std::clamp<int64_t>(s, 0, in - 1);
    a.i1[d] = std::clamp<int64_t>(s + 1, 0, in - 1);
    a.w0[d] = 1.f - f;
    a.w1[d] = f;
  }
  return a;
}

// The accumulator type of the row buffers: fixed-point int for uint8, the data type otherwise.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, uint8_t>, int32_t, T>;

// Per output column: the element offsets (source column x channels) of the two source pixels
// and their weights.
template <typename T>
struct ColumnTable {
  std::vector<int64_t> o0, o1;
  std::vector<Acc<T>> a0, a1;
};

template <typename T>
Acc<T> weight(float w) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return static_cast<int32_t>(std::nearbyint(w * static_cast<float>(kCoefScale)));
  } else {
    return static_cast<T>(w);
  }
}

template <typename T>
ColumnTable<T> column_table(const LinearAxis& x, int64_t c) {
  ColumnTable<T> t;
  for (size_t d = 0; d < x.i0.size(); ++d) {
    t.o0.push_back(x.i0[d] * c);
    t.o1.push_back(x.i1[d] * c);
    t.a0.push_back(weight<T>(x.w0[d]));
    t.a1.push_back(weight<T>(x.w1[d]));
  }
  return t;
}

// Horizontal pass of one source row into `row` (ow * c accumulators); CN > 0 is c known at
// compile time.
template <typename T, int CN>
void horizontal(const T* src, const ColumnTable<T>& t, int64_t c, Acc<T>* row) {
  const int64_t cc = CN > 0 ? CN : c;
  const int64_t ow = static_cast<int64_t>(t.o0.size());
  for (int64_t d = 0; d < ow; ++d) {
    const T* s0 = src + t.o0[d];
    const T* s1 = src + t.o1[d];
    const Acc<T> a0 = t.a0[d], a1 = t.a1[d];
    Acc<T>* r = row + d * cc;
    for (int64_t ch = 0; ch < cc; ++ch) {
      r[ch] = static_cast<Acc<T>>(s0[ch]) * a0 + static_cast<Acc<T>>(s1[ch]) * a1;
    }
  }
}

// Vertical pass: one output row from two horizontal rows (uint8: OpenCV's 16-bit arithmetic,
// which vectorises as multiply-high on 16-bit lanes).
template <typename T, bool kAdd>
void vertical(const Acc<T>* r0, const Acc<T>* r1, Acc<T> b0, Acc<T> b1, int64_t n, T* dst) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    const int16_t c0 = static_cast<int16_t>(b0), c1 = static_cast<int16_t>(b1);
    for (int64_t k = 0; k < n; ++k) {
      const int16_t x0 = static_cast<int16_t>(r0[k] >> 4), x1 = static_cast<int16_t>(r1[k] >> 4);
      const int16_t h0 = static_cast<int16_t>((static_cast<int32_t>(x0) * c0) >> 16);
      const int16_t h1 = static_cast<int16_t>((static_cast<int32_t>(x1) * c1) >> 16);
      int16_t v = static_cast<int16_t>((h0 + h1 + 2) >> 2);
      if (kAdd) v = static_cast<int16_t>(v + dst[k]);
      dst[k] = static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  } else {
    for (int64_t k = 0; k < n; ++k) {
      const T v = r0[k] * b0 + r1[k] * b1;
      dst[k] = kAdd ? dst[k] + v : v;
    }
  }
}

template <typename T, int CN>
void resize_linear(const OpContext& ctx, const TensorView& in, const TensorView& out, bool add) {
  const bool batched = in.ndim == 4;
  const int64_t n = batched ? in.shape[0] : 1, ih = in.dim(-3), iw = in.dim(-2), c = in.dim(-1);
  const int64_t oh = out.dim(-3), ow = out.dim(-2);
  const ColumnTable<T> table = column_table<T>(linear_axis(iw, ow, true), c);
  const LinearAxis ys = linear_axis(ih, oh, false);
  const T* x = in.ptr<T>();
  T* y = out.ptr<T>();
  const int64_t row_in = iw * c, row_out = ow * c;
  parallel_for(n * oh, std::max<int64_t>(1, 8192 / std::max<int64_t>(row_out, 1)), ctx.num_threads,
               [&](int64_t b, int64_t e) {
                 // Two horizontal rows, tagged with the (image, source row) they hold.
                 std::vector<Acc<T>> buf0(row_out), buf1(row_out);
                 Acc<T>* rows[2] = {buf0.data(), buf1.data()};
                 int64_t held[2] = {-1, -1};
                 const auto slot_of = [&](int64_t key) {
                   return held[0] == key ? 0 : held[1] == key ? 1 : -1;
                 };
                 const auto fill = [&](int slot, int64_t key) {
                   horizontal<T, CN>(x + key * row_in, table, c, rows[slot]);
                   held[slot] = key;
                 };
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t img = r / oh, dy = r % oh;
                   const int64_t k0 = img * ih + ys.i0[dy], k1 = img * ih + ys.i1[dy];
                   int s0 = slot_of(k0);
                   if (s0 < 0) {
                     s0 = slot_of(k1) == 0 ? 1 : 0;  // keep the row the second weight needs
                     fill(s0, k0);
                   }
                   int s1 = slot_of(k1);
                   if (s1 < 0) {
                     s1 = 1 - s0;
                     fill(s1, k1);
                   }
                   const Acc<T> b0 = weight<T>(ys.w0[dy]), b1 = weight<T>(ys.w1[dy]);
                   T* dst = y + r * row_out;
                   if (add) {
                     vertical<T, true>(rows[s0], rows[s1], b0, b1, row_out, dst);
                   } else {
                     vertical<T, false>(rows[s0], rows[s1], b0, b1, row_out, dst);
                   }
                 }
               });
}

// OpenCV's INTER_NEAREST: source index floor(d * scale), clamped (no half-pixel offset).
std::vector<int64_t> nearest_axis(int64_t in, int64_t out) {
  std::vector<int64_t> idx(out);
  const double scale = 1.0 / (static_cast<double>(out) / static_cast<double>(in));
  for (int64_t d = 0; d < out; ++d) {
    idx[d] = std::min<int64_t>(static_cast<int64_t>(std::floor(d * scale)), in - 1);
  }
  return idx;
}

template <typename T, int CN>
void resize_nearest(const OpContext& ctx, const TensorView& in, const TensorView& out, bool add) {
  const int64_t n = in.ndim == 4 ? in.shape[0] : 1, ih = in.dim(-3), iw = in.dim(-2);
  const int64_t c = in.dim(-1), oh = out.dim(-3), ow = out.dim(-2);
  const int64_t cc = CN > 0 ? CN : c;
  auto xs = nearest_axis(iw, ow);
  for (auto& v : xs) v *= c;
  const auto ys = nearest_axis(ih, oh);
  const T* x = in.ptr<T>();
  T* y = out.ptr<T>();
  parallel_for(n * oh, std::max<int64_t>(1, 8192 / std::max<int64_t>(ow * c, 1)), ctx.num_threads,
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t img = r / oh, dy = r % oh;
                   const T* src = x + (img * ih + ys[dy]) * iw * c;
                   T* dst = y + r * ow * c;
                   for (int64_t d = 0; d < ow; ++d) {
                     const T* s = src + xs[d];
                     T* o = dst + d * cc;
                     for (int64_t ch = 0; ch < cc; ++ch) {
                       o[ch] = add ? static_cast<T>(o[ch] + s[ch]) : s[ch];
                     }
                   }
                 }
               });
}

void resize_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull || out[0].size() == 0) return;
  const bool add = req[0] == OpReq::kAdd;
  const int interp = static_cast<int>(attrs.params<ImageResizeParam>().interp);
  if (!add && out[0].shape_of() == in[0].shape_of()) {
    std::memcpy(out[0].raw(), in[0].raw(), in[0].bytes());  // OpenCV copies equal sizes
    return;
  }
  const int64_t c = in[0].dim(-1);
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    // Compile-time channel counts for grey and RGB images.
    const auto kernel = interp == 0 ? (c == 3   ? resize_nearest<T, 3>
                                       : c == 1 ? resize_nearest<T, 1>
                                                : resize_nearest<T, 0>)
                                    : (c == 3   ? resize_linear<T, 3>
                                       : c == 1 ? resize_linear<T, 1>
                                                : resize_linear<T, 0>);
    kernel(ctx, in[0], out[0], add);
  };
  switch (in[0].dtype()) {
    case DType::kUInt8:
      run(uint8_t{});
      break;
    case DType::kFloat32:
      run(float{});
      break;
    case DType::kFloat64:
      run(double{});
      break;
    default:
      WEFT_THROW(NotImplemented) << attrs.where() << ": dtype " << dtype_name(in[0].dtype())
                                 << " is not supported";
  }
}

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_image_resize_kernels(OpRegistry& r) {
  r.kernels("_image_resize").set_attr<FCompute>(DeviceType::kCPU, detail::resize_forward);
}

}  // namespace weft::cpu
