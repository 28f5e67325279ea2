// CUDA kernels of dot, batch_dot and their backward ops: cuBLAS GEMMs (blas.cc, Note [cuBLAS
// precision]) with the sizes of detail::dot_gemm (ops/defs/dot_params.h) and the CPU kernels'
// operand choices (ops/cpu/dot.cc).
#include <string>
#include <utility>

#include "ops/cuda/blas_kernels.h"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/register.h"
#include "ops/defs/dot_params.h"

namespace weft::cuda {
namespace {

using detail::dot_gemm;
using detail::DotGemm;
using detail::DotParam;

bool writes(OpReq r) { return r != OpReq::kNull; }
bool adds(OpReq r) { return r == OpReq::kAdd; }

void dot_forward_impl(const OpContext& ctx, const std::string& where, const DotParam& p,
                      const DotGemm& g, int64_t batch, const TensorView& a, const TensorView& b,
                      OpReq req, const TensorView& c) {
  if (req == OpReq::kNull) return;
  gemm(ctx, a.dtype(), where.c_str(), p.transpose_a, p.transpose_b, g.m, g.n, g.k, a.raw(), g.ca,
       b.raw(), g.cb, adds(req), c.raw(), g.n, batch, g.ra * g.ca, g.rb * g.cb, g.m * g.n);
}

// Note [dot gradients] in ops/cpu/dot.cc: the same operand choices, batched.
void dot_backward_impl(const OpContext& ctx, const std::string& where, const DotParam& p,
                       const DotGemm& g, int64_t batch, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const bool ta = p.transpose_a, tb = p.transpose_b;
  const DType dt = in[0].dtype();
  const void* dc = in[0].raw();
  const void* a = in[1].raw();
  const void* b = in[2].raw();
  const int64_t sa = g.ra * g.ca, sb = g.rb * g.cb, sc = g.m * g.n;
  const char* w = where.c_str();
  if (writes(req[0])) {
    if (!ta) {
      gemm(ctx, dt, w, false, !tb, g.m, g.k, g.n, dc, g.n, b, g.cb, adds(req[0]), out[0].raw(),
           g.ca, batch, sc, sb, sa);
    } else {
      gemm(ctx, dt, w, tb, true, g.k, g.m, g.n, b, g.cb, dc, g.n, adds(req[0]), out[0].raw(), g.ca,
           batch, sb, sc, sa);
    }
  }
  if (writes(req[1])) {
    if (!tb) {
      gemm(ctx, dt, w, !ta, false, g.k, g.n, g.m, a, g.ca, dc, g.n, adds(req[1]), out[1].raw(),
           g.cb, batch, sa, sc, sb);
    } else {
      gemm(ctx, dt, w, true, ta, g.n, g.k, g.m, dc, g.n, a, g.ca, adds(req[1]), out[1].raw(), g.cb,
           batch, sc, sa, sb);
    }
  }
}

void dot_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DotParam>();
  const DotGemm g = dot_gemm(p, in[0].shape_of(), in[1].shape_of());
  dot_forward_impl(ctx, attrs.where(), p, g, 1, in[0], in[1], req[0], out[0]);
}

void dot_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DotParam>();
  const DotGemm g = dot_gemm(p, in[1].shape_of(), in[2].shape_of());
  dot_backward_impl(ctx, attrs.where(), p, g, 1, in, req, out);
}

/// The per-batch GEMM of a batch_dot and the batch count.
std::pair<DotGemm, int64_t> batch_gemm(const DotParam& p, const Shape& l, const Shape& r) {
  const int nd = l.ndim();
  const Shape lm{l[nd - 2], l[nd - 1]}, rm{r[nd - 2], r[nd - 1]};
  return {dot_gemm(p, lm, rm), l.prod(0, nd - 2)};
}

void batch_dot_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DotParam>();
  const auto [g, batch] = batch_gemm(p, in[0].shape_of(), in[1].shape_of());
  dot_forward_impl(ctx, attrs.where(), p, g, batch, in[0], in[1], req[0], out[0]);
}

void batch_dot_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DotParam>();
  const auto [g, batch] = batch_gemm(p, in[1].shape_of(), in[2].shape_of());
  dot_backward_impl(ctx, attrs.where(), p, g, batch, in, req, out);
}

}  // namespace

void register_dot_kernels(OpRegistry& r) {
  r.kernels("dot").set_attr<FCompute>(DeviceType::kCUDA, dot_forward);
  r.kernels("_backward_dot").set_attr<FCompute>(DeviceType::kCUDA, dot_backward);
  r.kernels("batch_dot").set_attr<FCompute>(DeviceType::kCUDA, batch_dot_forward);
  r.kernels("_backward_batch_dot").set_attr<FCompute>(DeviceType::kCUDA, batch_dot_backward);
}

}  // namespace weft::cuda
