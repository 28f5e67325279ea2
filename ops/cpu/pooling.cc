// CPU kernels of Pooling and _backward_Pooling (definitions in ops/defs/pooling.cc), with MXNet's
// window arithmetic (src/operator/nn/pool.h). Forward max/avg use oneDNN where its results are
// identical, 2-D max pooling a separable pass; everything else the plain loops.
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "ops/cpu/conv_kernels.h"
#include "ops/cpu/layout_ops.h"
#include "ops/cpu/pool_max2d.h"
#include "ops/defs/pooling_params.h"

namespace weft::detail {
namespace {

/// Window geometry with three spatial slots (leading slots trivial).
struct PoolGeom {
  int nsp = 2;
  int64_t planes = 0;  // N * C
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

/// The effective kernel/stride/pad of a data shape (global pooling: the whole input, stride 1, no
/// pad).
void window_of(const PoolingParam& p, const Shape& data, int nsp, Shape* k, Shape* s, Shape* pad) {
  if (p.global_pool) {
    *k = Shape::filled(nsp, 1);
    for (int i = 0; i < nsp; ++i) (*k)[i] = data[2 + i];
    *s = Shape::filled(nsp, 1);
    *pad = Shape::filled(nsp, 0);
  } else {
    *k = p.kernel;
    *s = p.stride;
    *pad = p.pad;
  }
}

PoolGeom pool_geom(const PoolingParam& p, const Shape& data, const Shape& out) {
  PoolGeom g;
  g.nsp = data.ndim() - 2;
  g.planes = data[0] * data[1];
  Shape k, s, pad;
  window_of(p, data, g.nsp, &k, &s, &pad);
  for (int i = 0; i < g.nsp; ++i) {
    const int slot = 3 - g.nsp + i;
    g.in[slot] = data[2 + i];
    g.out[slot] = out[2 + i];
    g.k[slot] = k[i];
    g.s[slot] = s[i];
    g.p[slot] = pad[i];
  }
  return g;
}

/// One output's window along a dim: [lo, hi) clipped to the input, and the unclipped size that
/// avg pooling divides by (the window clipped to input + pad, MXNet's pool_size).
struct Span1 {
  int64_t lo, hi, padded;
};
inline Span1 window_span(const PoolGeom& g, int d, int64_t o, bool max_rule) {
  int64_t start = o * g.s[d] - g.p[d];
  int64_t end =
      max_rule ? std::min(start + g.k[d], g.in[d]) : std::min(start + g.k[d], g.in[d] + g.p[d]);
  const int64_t padded = end - start;
  start = std::max<int64_t>(start, 0);
  end = std::min(end, g.in[d]);
  return {start, std::max(end, start), padded};
}

template <typename T>
T root_p(T v, int64_t pv) {
  if (pv == 1) return v;
  if (pv == 2) return std::sqrt(v);
  if (pv == 3) return std::cbrt(v);
  return std::pow(v, T(1) / static_cast<T>(pv));
}
template <typename T>
T pow_p(T v, int64_t pv) {
  if (pv == 1) return v;
  if (pv == 2) return v * v;
  if (pv == 3) return v * v * v;
  return std::pow(v, static_cast<T>(pv));
}

template <typename T>
void pool_forward_ref(const PoolingParam& p, const PoolGeom& g, const T* x, T* y, bool add,
                      int threads) {
  const bool include_pad = p.count_include_pad.value_or(true);
  const int64_t pv = p.p_value.value_or(1);
  const int64_t is = g.in_size(), os = g.out_size();
  parallel_for(g.planes, 1, threads, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const T* xp = x + c * is;
      T* yp = y + c * os;
      int64_t oi = 0;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++oi) {
            const bool mx = p.pool_type == PoolType::kMax;
            const Span1 sd = window_span(g, 0, od, mx), sh = window_span(g, 1, oh, mx),
                        sw = window_span(g, 2, ow, mx);
            T v;
            if (mx) {
              v = std::numeric_limits<T>::lowest();
              for (int64_t id = sd.lo; id < sd.hi; ++id)
                for (int64_t ih = sh.lo; ih < sh.hi; ++ih) {
                  const T* row = xp + (id * g.in[1] + ih) * g.in[2];
                  for (int64_t iw = sw.lo; iw < sw.hi; ++iw) v = row[iw] > v ? row[iw] : v;
                }
            } else {
              T sum = T(0);
              for (int64_t id = sd.lo; id < sd.hi; ++id)
                for (int64_t ih = sh.lo; ih < sh.hi; ++ih) {
                  const T* row = xp + (id * g.in[1] + ih) * g.in[2];
                  if (p.pool_type == PoolType::kLp) {
                    for (int64_t iw = sw.lo; iw < sw.hi; ++iw) sum += pow_p(row[iw], pv);
                  } else {
                    for (int64_t iw = sw.lo; iw < sw.hi; ++iw) sum += row[iw];
                  }
                }
              if (p.pool_type == PoolType::kAvg) {
                const int64_t count = include_pad
                                          ? sd.padded * sh.padded * sw.padded
                                          : (sd.hi - sd.lo) * (sh.hi - sh.lo) * (sw.hi - sw.lo);
                v = count > 0 ? sum / static_cast<T>(count) : T(0);
              } else if (p.pool_type == PoolType::kLp) {
                v = root_p(sum, pv);
              } else {
                v = sum;
              }
            }
            yp[oi] = add ? yp[oi] + v : v;
          }
        }
      }
    }
  });
}

// dx (=, or +=) the gradient; dy, x, y as in the forward.
template <typename T>
void pool_backward_ref(const PoolingParam& p, const PoolGeom& g, const T* dy, const T* x,
                       const T* y, T* dx, bool add, int threads) {
  const bool include_pad = p.count_include_pad.value_or(true);
  const int64_t pv = p.p_value.value_or(1);
  const int64_t is = g.in_size(), os = g.out_size();
  parallel_for(g.planes, 1, threads, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const T* xp = x + c * is;
      T* gp = dx + c * is;
      if (!add) std::fill(gp, gp + is, T(0));
      const T* dyp = dy + c * os;
      const T* yp = y + c * os;
      int64_t oi = 0;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++oi) {
            const bool mx = p.pool_type == PoolType::kMax;
            const Span1 sd = window_span(g, 0, od, mx), sh = window_span(g, 1, oh, mx),
                        sw = window_span(g, 2, ow, mx);
            const T go = dyp[oi];
            if (mx) {
              // The first input equal to the output takes the whole gradient (MXNet's unpool).
              bool done = false;
              for (int64_t id = sd.lo; id < sd.hi && !done; ++id)
                for (int64_t ih = sh.lo; ih < sh.hi && !done; ++ih)
                  for (int64_t iw = sw.lo; iw < sw.hi; ++iw) {
                    const int64_t idx = (id * g.in[1] + ih) * g.in[2] + iw;
                    if (xp[idx] == yp[oi]) {
                      gp[idx] += go;
                      done = true;
                      break;
                    }
                  }
              continue;
            }
            T scale = T(1);
            if (p.pool_type == PoolType::kAvg) {
              const int64_t count = include_pad
                                        ? sd.padded * sh.padded * sw.padded
                                        : (sd.hi - sd.lo) * (sh.hi - sh.lo) * (sw.hi - sw.lo);
              scale = count > 0 ? T(1) / static_cast<T>(count) : T(0);
            }
            for (int64_t id = sd.lo; id < sd.hi; ++id)
              for (int64_t ih = sh.lo; ih < sh.hi; ++ih) {
                const int64_t base = (id * g.in[1] + ih) * g.in[2];
                if (p.pool_type == PoolType::kLp) {
                  const T out = yp[oi];
                  for (int64_t iw = sw.lo; iw < sw.hi; ++iw) {
                    const T xv = xp[base + iw];
                    T gv = go;
                    if (pv == 2)
                      gv = go * xv / out;
                    else if (pv == 3)
                      gv = go * xv * xv / (out * out);
                    else if (pv != 1)
                      gv = go * std::pow(xv / out, static_cast<T>(pv - 1));
                    gp[base + iw] += gv;
                  }
                } else {
                  const T gv = go * scale;
                  for (int64_t iw = sw.lo; iw < sw.hi; ++iw) gp[base + iw] += gv;
                }
              }
          }
        }
      }
    }
  });
}

#if WEFT_USE_ONEDNN
struct PoolPlan {
  dnnl::pooling_forward prim;
  dnnl::memory::desc src, dst;
};

/// The oneDNN algorithm that reproduces MXNet's result for this geometry, if any: every window
/// must overlap the input, and include-padding averages need windows that stay inside the pads.
std::optional<dnnl::algorithm> dnnl_pool_algorithm(const PoolingParam& p, const PoolGeom& g,
                                                   std::array<int64_t, 3>* pad_r) {
  if (p.pool_type == PoolType::kSum || p.pool_type == PoolType::kLp) return std::nullopt;
  bool stays_in_pads = true;
  for (int d = 0; d < 3; ++d) {
    const int64_t needed = (g.out[d] - 1) * g.s[d] + g.k[d] - g.in[d] - g.p[d];
    (*pad_r)[d] = std::max(needed, g.p[d]);
    stays_in_pads = stays_in_pads && needed <= g.p[d];
    if (g.p[d] >= g.k[d] || (*pad_r)[d] >= g.k[d])
      return std::nullopt;  // a window could miss the input
    if ((g.out[d] - 1) * g.s[d] - g.p[d] >= g.in[d]) return std::nullopt;
    if ((g.in[d] - g.k[d] + g.p[d] + (*pad_r)[d]) / g.s[d] + 1 != g.out[d]) return std::nullopt;
  }
  if (p.pool_type == PoolType::kMax) return dnnl::algorithm::pooling_max;
  if (!p.count_include_pad.value_or(true)) return dnnl::algorithm::pooling_avg_exclude_padding;
  if (stays_in_pads) return dnnl::algorithm::pooling_avg_include_padding;
  return std::nullopt;
}

bool pool_forward_dnnl(const PoolingParam& p, const PoolGeom& g, const OpContext& ctx,
                       const TensorView& x, const TensorView& y) {
  std::array<int64_t, 3> pad_r{};
  const auto algo = dnnl_pool_algorithm(p, g, &pad_r);
  if (!algo) return false;
  using dnnl::memory;
  memory::dims src = dnnl_util::to_dims(x), dst = dnnl_util::to_dims(y), strides, kernel, pl, pr;
  for (int d = 3 - g.nsp; d < 3; ++d) {
    strides.push_back(g.s[d]);
    kernel.push_back(g.k[d]);
    pl.push_back(g.p[d]);
    pr.push_back(pad_r[d]);
  }
  // Data in another layout (Note [Layout propagation]) is pooled in it; the output is written in
  // its own layout, or, when that is plain, in the format the primitive picks if that places the
  // elements as plain does (a globally pooled acdb image) and plain otherwise.
  const memory::desc* src_layout = dnnl_util::desc_of(ctx.input_layout(0));
  const memory::desc* dst_layout = dnnl_util::desc_of(ctx.output_layout(0));
  std::string key = "Pooling.fwd|" + std::to_string(static_cast<int>(*algo)) + "|" + dims_key(src) +
                    "|" + dims_key(dst) + "|" + dims_key(strides) + "|" + dims_key(kernel) + "|" +
                    dims_key(pl) + "|" + dims_key(pr);
  if (src_layout) key += "|x:" + dnnl_util::desc_key(*src_layout);
  if (dst_layout) key += "|y:" + dnnl_util::desc_key(*dst_layout);
  const PoolPlan& plan = dnnl_util::cached<PoolPlan>(key, [&] {
    PoolPlan pp;
    pp.src = src_layout ? *src_layout : dnnl_util::plain_desc(src, DType::kFloat32);
    const memory::desc plain_dst = dnnl_util::plain_desc(dst, DType::kFloat32);
    pp.dst = dst_layout ? *dst_layout : plain_dst;
    auto make = [&](const memory::desc& d) {
      return dnnl::pooling_forward::primitive_desc(
          dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, *algo, pp.src, d, strides,
                                      kernel, pl, pr),
          dnnl_util::cpu_engine());
    };
    if (src_layout && !dst_layout) {
      auto pd = make(memory::desc(dst, memory::data_type::f32, memory::format_tag::any));
      if (dnnl_util::same_placement(pd.dst_desc(), plain_dst)) {
        pp.dst = pd.dst_desc();
        pp.prim = dnnl::pooling_forward(pd);
        return pp;
      }
    }
    pp.prim = dnnl::pooling_forward(make(pp.dst));
    return pp;
  });
  dnnl_util::ScopedThreads threads(ctx.num_threads);
  auto& eng = dnnl_util::cpu_engine();
  dnnl_util::execute(plan.prim, {{DNNL_ARG_SRC, memory(plan.src, eng, x.raw())},
                                 {DNNL_ARG_DST, memory(plan.dst, eng, y.raw())}});
  return true;
}
#endif

#if WEFT_USE_ONEDNN
// Float32 pooling of data in a oneDNN layout stays in it when oneDNN reproduces the geometry.
bool pool_infer_layout(const OpAttrs& attrs, const LayoutQuery& q, std::vector<LayoutRef>& in,
                       std::vector<LayoutRef>& out) {
  using dnnl::memory;
  const memory::desc* src = dnnl_util::desc_of(in[0].get());
  if (!src || q.in_types[0] != DType::kFloat32) return false;
  const auto& p = attrs.params<PoolingParam>();
  const PoolGeom g = pool_geom(p, q.in_shapes[0], q.out_shapes[0]);
  if (g.planes <= 0 || g.in_size() <= 0) return false;
  std::array<int64_t, 3> pad_r{};
  const auto algo = dnnl_pool_algorithm(p, g, &pad_r);
  if (!algo) return false;
  memory::dims strides, kernel, pl, pr;
  for (int d = 3 - g.nsp; d < 3; ++d) {
    strides.push_back(g.s[d]);
    kernel.push_back(g.k[d]);
    pl.push_back(g.p[d]);
    pr.push_back(pad_r[d]);
  }
  try {
    dnnl::pooling_forward::primitive_desc pd(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference, *algo, *src,
                                    memory::desc(dnnl_util::to_dims(q.out_shapes[0]),
                                                 memory::data_type::f32, memory::format_tag::any),
                                    strides, kernel, pl, pr),
        dnnl_util::cpu_engine());
    out[0] = dnnl_util::make_layout(pd.dst_desc());
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}
#endif

// 2-D max pooling takes the separable path (Note [Separable max pooling]): several times
// faster than oneDNN's plain-layout pooling and the general loops.
std::optional<MaxPool2DGeom> max_pool2d_geom(const PoolingParam& p, const PoolGeom& g) {
  if (p.pool_type != PoolType::kMax || g.nsp != 2) return std::nullopt;
  return MaxPool2DGeom{g.planes, g.in[1], g.in[2], g.out[1], g.out[2], g.k[1],
                       g.k[2],   g.s[1],  g.s[2],  g.p[1],   g.p[2]};
}

void pool_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<PoolingParam>();
  const PoolGeom g = pool_geom(p, in[0].shape_of(), out[0].shape_of());
  const bool add = req[0] == OpReq::kAdd;
#if WEFT_USE_ONEDNN
  if (has_layouts(ctx, in.size(), out.size())) {
    WEFT_ICHECK(!add && pool_forward_dnnl(p, g, ctx, in[0], out[0]))
        << attrs.where() << ": no kernel for this call's layouts";
    return;
  }
#endif
  if (const auto mg = max_pool2d_geom(p, g)) {
    WEFT_FLOAT_SWITCH(
        in[0].dtype(), DT, attrs.where(),
        max_pool2d_forward<DT>(*mg, in[0].ptr<DT>(), out[0].ptr<DT>(), add, ctx.num_threads));
    return;
  }
#if WEFT_USE_ONEDNN
  if (in[0].dtype() == DType::kFloat32 && !add && g.planes > 0 && g.in_size() > 0 &&
      pool_forward_dnnl(p, g, ctx, in[0], out[0])) {
    return;
  }
#endif
  WEFT_FLOAT_SWITCH(
      in[0].dtype(), DT, attrs.where(),
      pool_forward_ref<DT>(p, g, in[0].ptr<DT>(), out[0].ptr<DT>(), add, ctx.num_threads));
}

void pool_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<PoolingParam>();
  const PoolGeom g = pool_geom(p, in[1].shape_of(), in[0].shape_of());
  if (const auto mg = max_pool2d_geom(p, g)) {
    WEFT_FLOAT_SWITCH(
        in[0].dtype(), DT, attrs.where(),
        max_pool2d_backward<DT>(*mg, in[0].ptr<DT>(), in[1].ptr<DT>(), in[2].ptr<DT>(),
                                out[0].ptr<DT>(), req[0] == OpReq::kAdd, ctx.num_threads));
    return;
  }
  WEFT_FLOAT_SWITCH(
      in[0].dtype(), DT, attrs.where(),
      pool_backward_ref<DT>(p, g, in[0].ptr<DT>(), in[1].ptr<DT>(), in[2].ptr<DT>(),
                            out[0].ptr<DT>(), req[0] == OpReq::kAdd, ctx.num_threads));
}

}  // namespace

void register_pooling_kernels(OpRegistry& r) {
  r.kernels("Pooling")
      .set_attr<FCompute>(DeviceType::kCPU, pool_forward)
#if WEFT_USE_ONEDNN
      .set_attr<FInferLayout>(pool_infer_layout)
#endif
      ;
  r.kernels("_backward_Pooling").set_attr<FCompute>(DeviceType::kCPU, pool_backward);
}

}  // namespace weft::detail
