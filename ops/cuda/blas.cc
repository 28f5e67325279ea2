// CUDA kernels: the blas family (see ops/cuda/register.h). FullyConnected, _fused_fc_act, dot and
// batch_dot and their backward ops as cuBLAS GEMMs with the CPU kernels' operand choices
// (ops/cpu/fully_connected.cc, ops/cpu/dot.cc), so that each output is the same product.
//
// Note [cuBLAS precision]: float32 runs with CUBLAS_COMPUTE_32F on a handle in the default math
// mode, which keeps TF32 off, so results match the CPU kernels to float rounding; float16 and
// bfloat16 accumulate in float (CUBLAS_COMPUTE_32F); float64 in double.
#include <cuda_runtime.h>

#include "ops/cuda/blas_kernels.h"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/register.h"
#include "ops/defs/conv_common.h"
#include "ops/defs/dot_params.h"
#include "ops/defs/fc_params.h"

namespace weft::cuda {
namespace {

using detail::dot_gemm;
using detail::DotGemm;

using detail::DotParam;
using detail::FullyConnectedParam;
using detail::FusedAct;

cudaDataType_t cuda_type(DType t, const char* what) {
  switch (t) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kFloat64:
      return CUDA_R_64F;
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    default:
      WEFT_THROW(NotImplemented) << what << ": no CUDA kernel for dtype " << dtype_name(t);
  }
}

/// Row-major C = op(A)·op(B) (+ C when `add`), `batch` times with element strides sa/sb/sc
/// between the matrices. A k of 0 gives zeros (or leaves C when adding).
void gemm(const OpContext& ctx, DType dtype, const char* what, bool ta, bool tb, int64_t m,
          int64_t n, int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb, bool add,
          void* c, int64_t ldc, int64_t batch = 1, int64_t sa = 0, int64_t sb = 0, int64_t sc = 0) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  const cudaDataType_t t = cuda_type(dtype, what);
  if (k <= 0) {
    if (!add) {
      // C is compact here (ldc == n) for every caller that can have k == 0.
      const size_t bytes = static_cast<size_t>(batch * m * ldc) * dtype_size(dtype);
      WEFT_CUDA_CALL(cudaMemsetAsync(c, 0, bytes, stream_of(ctx)), device_of(ctx));
    }
    return;
  }
  const double one_d = 1.0, beta_d = add ? 1.0 : 0.0;
  const float one_f = 1.0f, beta_f = add ? 1.0f : 0.0f;
  const bool dbl = dtype == DType::kFloat64;
  const void* alpha = dbl ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
  const cublasComputeType_t compute = dbl ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  cublasHandle_t h = handles(ctx).cublas;
  // Row-major C (m × n) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands.
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  WEFT_CHECK(n <= INT32_MAX && m <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX &&
             ldb <= INT32_MAX && ldc <= INT32_MAX && batch <= INT32_MAX)
      << what << ": GEMM dimensions exceed cuBLAS's 32-bit sizes";
  if (batch == 1) {
    WEFT_CUDA_CALL(
        cublasGemmEx(h, opb, opa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                     alpha, b, t, static_cast<int>(ldb), a, t, static_cast<int>(lda), beta, c, t,
                     static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT),
        device_of(ctx));
  } else {
    WEFT_CUDA_CALL(
        cublasGemmStridedBatchedEx(h, opb, opa, static_cast<int>(n), static_cast<int>(m),
                                   static_cast<int>(k), alpha, b, t, static_cast<int>(ldb), sb, a,
                                   t, static_cast<int>(lda), sa, beta, c, t, static_cast<int>(ldc),
                                   sc, static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
        device_of(ctx));
  }
}

bool writes(OpReq r) { return r != OpReq::kNull; }
bool adds(OpReq r) { return r == OpReq::kAdd; }

// ---- FullyConnected
// ------------------------------------------------------------------------------

struct FcDims {
  int64_t m, k, h;
};
FcDims fc_dims(const FullyConnectedParam& p, const TensorView& data) {
  const Shape s = data.shape_of();
  if (p.flatten) return {s[0], s.prod(1, s.ndim()), p.num_hidden};
  return {s.prod(0, s.ndim() - 1), s[s.ndim() - 1], p.num_hidden};
}

void fc_forward_act(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out,
                    const FusedAct& act) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<FullyConnectedParam>();
  const FcDims d = fc_dims(p, in[0]);
  if (d.m == 0) return;
  const DType dt = in[0].dtype();
  const std::string where = attrs.where();
  gemm(ctx, dt, where.c_str(), false, true, d.m, d.h, d.k, in[0].raw(), d.k, in[1].raw(), d.k,
       adds(req[0]), out[0].raw(), d.h);
  if (!p.no_bias) {
    add_bias_rows(dt, out[0].raw(), in[2].raw(), d.m, d.h, stream_of(ctx));
    check_launch("FullyConnected bias", ctx);
  }
  if (!act.none()) {
    WEFT_CHECK_AS(NotImplemented, act.kind != FusedAct::Kind::kPRelu && !adds(req[0]))
        << where << ": the fused activation on CUDA is not prelu and never accumulates";
    fused_act_inplace(dt, static_cast<int>(act.kind), act.alpha, act.beta, out[0].raw(), d.m * d.h,
                      stream_of(ctx));
    check_launch("_fused_fc_act activation", ctx);
  }
}

void fc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                std::span<const OpReq> req, std::span<const TensorView> out) {
  fc_forward_act(attrs, ctx, in, req, out, FusedAct{});
}

void fused_fc_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  fc_forward_act(attrs, ctx, in, req, out, detail::fused_act_from_attrs(attrs));
}

// in: out_grad, data, weight; out: d_data, d_weight[, d_bias].
void fc_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                 std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<FullyConnectedParam>();
  const FcDims d = fc_dims(p, in[1]);
  const DType dt = in[0].dtype();
  const std::string where = attrs.where();
  if (writes(req[0]))
    gemm(ctx, dt, where.c_str(), false, false, d.m, d.k, d.h, in[0].raw(), d.h, in[2].raw(), d.k,
         adds(req[0]), out[0].raw(), d.k);
  if (writes(req[1]))
    gemm(ctx, dt, where.c_str(), true, false, d.h, d.k, d.m, in[0].raw(), d.h, in[1].raw(), d.k,
         adds(req[1]), out[1].raw(), d.k);
  if (!p.no_bias && writes(req[2])) {
    bias_grad_rows(dt, in[0].raw(), d.m, d.h, out[2].raw(), adds(req[2]), stream_of(ctx));
    check_launch("FullyConnected bias gradient", ctx);
  }
}

// ---- dot / batch_dot: the GEMM sizes of detail::dot_gemm (ops/defs/dot_params.h)
// ---------------------

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

void register_blas_kernels(OpRegistry& r) {
  r.register_op("FullyConnected").set_attr<FCompute>(DeviceType::kCUDA, fc_forward, "cuda");
  r.register_op("_fused_fc_act").set_attr<FCompute>(DeviceType::kCUDA, fused_fc_forward, "cuda");
  r.register_op("_backward_FullyConnected")
      .set_attr<FCompute>(DeviceType::kCUDA, fc_backward, "cuda");
  r.register_op("dot").set_attr<FCompute>(DeviceType::kCUDA, dot_forward, "cuda");
  r.register_op("_backward_dot").set_attr<FCompute>(DeviceType::kCUDA, dot_backward, "cuda");
  r.register_op("batch_dot").set_attr<FCompute>(DeviceType::kCUDA, batch_dot_forward, "cuda");
  r.register_op("_backward_batch_dot")
      .set_attr<FCompute>(DeviceType::kCUDA, batch_dot_backward, "cuda");
}

}  // namespace weft::cuda
