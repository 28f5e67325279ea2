// CPU kernels of the elementwise ops that are not arithmetic families (add_n, zeros_like/ones_like,
// _copy, clip, where, Cast, BlockGrad, MakeLoss; definitions in ops/defs/elemwise.cc); also the
// entry point of the elementwise kernel group.
#include <algorithm>
#include <cstring>

#include "ops/cpu/elemwise_kernels.h"
#include "ops/cpu/layout_ops.h"
#include "ops/cpu/register.h"
#include "ops/defs/elemwise_params.h"

namespace weft::detail {
namespace {

// ---- add_n ------------------------------------------------------------------------------------

template <typename DT>
void add_n_typed(const OpContext& ctx, std::span<const TensorView> in, OpReq req,
                 const TensorView& out) {
  const int64_t n = out.size();
  const int k = static_cast<int>(in.size());
  DT* o = out.ptr<DT>();
  // The first input summed is one the output aliases (if any), so an in-place write never
  // overwrites an input that is still to be read.
  int first = 0;
  for (int j = 0; j < k; ++j) {
    if (in[j].raw() == out.raw()) first = j;
  }
  if (req == OpReq::kAdd) {
    map1<DT, DT>(n, in[0].ptr<DT>(), o, OpReq::kAdd, ctx.num_threads, [](DT x) { return x; });
    for (int j = 1; j < k; ++j)
      map1<DT, DT>(n, in[j].ptr<DT>(), o, OpReq::kAdd, ctx.num_threads, [](DT x) { return x; });
    return;
  }
  const DT* a = in[first].ptr<DT>();
  if (k == 1) {
    if (a != o) std::memcpy(o, a, static_cast<size_t>(n) * sizeof(DT));
    return;
  }
  const int second = first == 0 ? 1 : 0;
  map2<DT, DT>(n, a, in[second].ptr<DT>(), o, OpReq::kWrite, ctx.num_threads,
               [](DT x, DT y) { return static_cast<DT>(x + y); });
  for (int j = 0; j < k; ++j) {
    if (j == first || j == second) continue;
    map1<DT, DT>(n, in[j].ptr<DT>(), o, OpReq::kAdd, ctx.num_threads, [](DT x) { return x; });
  }
}

void add_n_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), add_n_typed<DT>(ctx, in, req[0], out[0]));
}

// ---- copies and constants ---------------------------------------------------------------------

void copy_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  if (req[0] == OpReq::kAdd) {
    WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(),
                      map1<DT, DT>(out[0].size(), in[0].ptr<DT>(), out[0].ptr<DT>(), OpReq::kAdd,
                                   ctx.num_threads, [](DT x) { return x; }));
    return;
  }
  if (in[0].raw() != out[0].raw()) std::memcpy(out[0].raw(), in[0].raw(), out[0].bytes());
}

template <int kValue>
void constant_like_compute(const OpAttrs& attrs, const OpContext&, std::span<const TensorView>,
                           std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  if (kValue == 0 && req[0] != OpReq::kAdd) {
    std::memset(out[0].raw(), 0, out[0].bytes());
    return;
  }
  WEFT_DTYPE_SWITCH(out[0].dtype(), DT, attrs.where(),
                    fill<DT>(out[0].size(), out[0].ptr<DT>(), static_cast<DT>(kValue), req[0]));
}

// ---- clip -------------------------------------------------------------------------------------

void clip_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<ClipParam>();
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    const DT lo = static_cast<DT>(p.a_min), hi = static_cast<DT>(p.a_max);
    map1<DT, DT>(out[0].size(), in[0].ptr<DT>(), out[0].ptr<DT>(), req[0], ctx.num_threads,
                 [lo, hi](DT x) { return x < lo ? lo : (x > hi ? hi : x); });
  });
}

// inputs (ograd, data): ograd where a_min <= data <= a_max (MXNet's _backward_clip).
void clip_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  const auto& p = attrs.params<ClipParam>();
  WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    const DT lo = static_cast<DT>(p.a_min), hi = static_cast<DT>(p.a_max);
    map2<DT, DT>(out[0].size(), in[0].ptr<DT>(), in[1].ptr<DT>(), out[0].ptr<DT>(), req[0],
                 ctx.num_threads,
                 [lo, hi](DT g, DT x) { return (x >= lo && x <= hi) ? g : DT(0); });
  });
}

// ---- where ------------------------------------------------------------------------------------

// Calls f(cond_nonzero, i) per element i of x's shape; inner stretch per condition element.
template <typename CT, typename F>
void for_each_where(const TensorView& cond, int64_t n, F f) {
  const CT* c = cond.ptr<CT>();
  if (cond.size() == n) {
    for (int64_t i = 0; i < n; ++i) f(c[i] != CT(0), i);
    return;
  }
  const int64_t rows = cond.size();
  const int64_t inner = rows > 0 ? n / rows : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const bool nz = c[r] != CT(0);
    for (int64_t j = 0; j < inner; ++j) f(nz, r * inner + j);
  }
}

void where_compute(const OpAttrs& attrs, const OpContext&, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const int64_t n = out[0].size();
  const bool add = req[0] == OpReq::kAdd;
  WEFT_DTYPE_SWITCH(in[0].dtype(), CT, attrs.where(), {
    WEFT_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
      const DT* x = in[1].ptr<DT>();
      const DT* y = in[2].ptr<DT>();
      DT* o = out[0].ptr<DT>();
      for_each_where<CT>(in[0], n, [&](bool nz, int64_t i) {
        const DT v = nz ? x[i] : y[i];
        o[i] = add ? static_cast<DT>(o[i] + v) : v;
      });
    });
  });
}

// inputs (ograd, condition) -> (x grad, y grad).
void where_backward_compute(const OpAttrs& attrs, const OpContext&, std::span<const TensorView> in,
                            std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t n = in[0].size();
  WEFT_DTYPE_SWITCH(in[1].dtype(), CT, attrs.where(), {
    WEFT_ARITH_SWITCH(in[0].dtype(), DT, attrs.where(), {
      const DT* g = in[0].ptr<DT>();
      DT* gx = out[0].ptr<DT>();
      DT* gy = out[1].ptr<DT>();
      const OpReq rx = req[0], ry = req[1];
      for_each_where<CT>(in[1], n, [&](bool nz, int64_t i) {
        const DT vx = nz ? g[i] : DT(0), vy = nz ? DT(0) : g[i];
        if (rx == OpReq::kAdd)
          gx[i] += vx;
        else if (rx != OpReq::kNull)
          gx[i] = vx;
        if (ry == OpReq::kAdd)
          gy[i] += vy;
        else if (ry != OpReq::kNull)
          gy[i] = vy;
      });
    });
  });
}

// ---- Cast -------------------------------------------------------------------------------------

template <typename ST, typename DT>
void convert(int64_t n, const ST* src, DT* dst, OpReq req, int threads) {
  map1<ST, DT>(n, src, dst, req, threads, [](ST x) { return static_cast<DT>(x); });
}

void cast_views(const OpAttrs& attrs, const OpContext& ctx, const TensorView& src, OpReq req,
                const TensorView& dst) {
  if (req == OpReq::kNull) return;
  if (src.dtype() == dst.dtype() && req != OpReq::kAdd) {
    if (src.raw() != dst.raw()) std::memcpy(dst.raw(), src.raw(), dst.bytes());
    return;
  }
  WEFT_DTYPE_SWITCH(src.dtype(), ST, attrs.where(), {
    WEFT_DTYPE_SWITCH(
        dst.dtype(), DT, attrs.where(),
        convert<ST, DT>(dst.size(), src.ptr<ST>(), dst.ptr<DT>(), req, ctx.num_threads));
  });
}

void cast_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  cast_views(attrs, ctx, in[0], req[0], out[0]);
}

// inputs (ograd, data): ograd converted to data's type.
void cast_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  cast_views(attrs, ctx, in[0], req[0], out[0]);
}

// ---- MakeLoss ---------------------------------------------------------------------------------

// input (output of the forward) -> grad_scale / norm everywhere.
void make_loss_backward_compute(const OpAttrs& attrs, const OpContext&,
                                std::span<const TensorView> in, std::span<const OpReq> req,
                                std::span<const TensorView> out) {
  const auto& p = attrs.params<MakeLossParam>();
  WEFT_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    double scale = p.grad_scale;
    if (p.normalization == LossNorm::kBatch) {
      const int64_t batch = in[0].ndim > 0 ? in[0].shape[0] : 1;
      scale /= static_cast<double>(std::max<int64_t>(batch, 1));
    } else if (p.normalization == LossNorm::kValid) {
      const DT* x = in[0].ptr<DT>();
      int64_t valid = 0;
      for (int64_t i = 0; i < in[0].size(); ++i)
        valid += x[i] > static_cast<DT>(p.valid_thresh) ? 1 : 0;
      scale /= static_cast<double>(std::max<int64_t>(valid, 1));
    }
    fill<DT>(out[0].size(), out[0].ptr<DT>(), static_cast<DT>(scale), req[0]);
  });
}

}  // namespace

}  // namespace weft::detail

namespace weft::cpu {

void register_elemwise_kernels(OpRegistry& r) {
  using namespace detail;
  register_elemwise_binary_kernels(r);
  register_elemwise_unary_kernels(r);
  register_elemwise_scalar_kernels(r);
  register_layout_kernels(r);  // after the binary ops: it extends elemwise_add and two broadcasts

  r.kernels("add_n").set_attr<FCompute>(DeviceType::kCPU, add_n_compute);
  r.kernels("_copy").set_attr<FCompute>(DeviceType::kCPU, copy_compute);
  r.kernels("zeros_like").set_attr<FCompute>(DeviceType::kCPU, constant_like_compute<0>);
  r.kernels("ones_like").set_attr<FCompute>(DeviceType::kCPU, constant_like_compute<1>);
  r.kernels("BlockGrad").set_attr<FCompute>(DeviceType::kCPU, copy_compute);
  r.kernels("MakeLoss").set_attr<FCompute>(DeviceType::kCPU, copy_compute);
  r.kernels("_backward_MakeLoss").set_attr<FCompute>(DeviceType::kCPU, make_loss_backward_compute);
  r.kernels("clip").set_attr<FCompute>(DeviceType::kCPU, clip_compute);
  r.kernels("_backward_clip").set_attr<FCompute>(DeviceType::kCPU, clip_backward_compute);
  r.kernels("where").set_attr<FCompute>(DeviceType::kCPU, where_compute);
  r.kernels("_backward_where").set_attr<FCompute>(DeviceType::kCPU, where_backward_compute);
  r.kernels("Cast").set_attr<FCompute>(DeviceType::kCPU, cast_compute);
  r.kernels("_backward_Cast").set_attr<FCompute>(DeviceType::kCPU, cast_backward_compute);
}

}  // namespace weft::cpu
