// CUDA kernels of the elementwise family (see ops/cuda/register.h): unary math and its backward
// ops, _copy, BlockGrad, zeros_like, ones_like, clip, where, Cast, add_n and MakeLoss. The binary,
// broadcast and scalar ops are in elemwise_binary.cu and elemwise_scalar.cu.
#include <algorithm>
#include <string>

#include "ops/cuda/elemwise_kernels.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/elemwise_params.h"

namespace weft::cuda {
namespace {

// ---- unary math ---------------------------------------------------------------------------------
// The functors (ReluF, ...: fwd and grad) are in ops/defs/elemwise_math.h, shared with the CPU
// kernels.

template <typename F>
struct Fwd {
  template <typename C>
  __device__ C operator()(C x) const {
    return F::fwd(x);
  }
};
template <typename F>
struct Bwd {
  template <typename C>
  __device__ C operator()(C g, C v) const {
    return static_cast<C>(g * F::grad(v));
  }
};

template <typename F, bool kFloatOnly>
void unary_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  const char* name = attrs.op->name().c_str();
  auto run = [&]<typename DT>() {
    map1<DT, DT>(ctx, name, out[0].size(), dptr<const DT>(in[0]), dptr<DT>(out[0]), req[0],
                 Fwd<F>{});
  };
  if constexpr (kFloatOnly) {
    WEFT_CUDA_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  } else {
    WEFT_CUDA_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  }
}

// inputs (ograd, value) -> ograd * F::grad(value).
template <typename F, bool kFloatOnly>
void unary_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                            std::span<const TensorView> in, std::span<const OpReq> req,
                            std::span<const TensorView> out) {
  const char* name = attrs.op->name().c_str();
  auto run = [&]<typename DT>() {
    map2<DT, DT>(ctx, name, out[0].size(), dptr<const DT>(in[0]), dptr<const DT>(in[1]),
                 dptr<DT>(out[0]), req[0], Bwd<F>{});
  };
  if constexpr (kFloatOnly) {
    WEFT_CUDA_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  } else {
    WEFT_CUDA_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), run.template operator()<DT>());
  }
}

template <typename F, bool kFloatOnly>
void reg_unary(OpRegistry& r, const std::string& name) {
  r.kernels(name).set_attr(DeviceType::kCUDA, FCompute(unary_compute<F, kFloatOnly>));
  r.kernels("_backward_" + name)
      .set_attr(DeviceType::kCUDA, FCompute(unary_backward_compute<F, kFloatOnly>));
}

// ---- copies and constants -----------------------------------------------------------------------

void copy_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const char* name = attrs.op->name().c_str();
  if (req[0] == OpReq::kNull) return;
  if (req[0] == OpReq::kAdd) {
    WEFT_CUDA_ALL_SWITCH(out[0].dtype(), DT, attrs.where(),
                         map1<DT, DT>(ctx, name, out[0].size(), dptr<const DT>(in[0]),
                                      dptr<DT>(out[0]), OpReq::kAdd, IdentityF{}));
    return;
  }
  copy_async(ctx, name, in[0], out[0]);
}

template <int kValue>
void constant_like_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView>,
                           std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_CUDA_ALL_SWITCH(
      out[0].dtype(), DT, attrs.where(),
      launch_fill<DT>(ctx, attrs.op->name().c_str(), out[0], static_cast<double>(kValue), req[0]));
}

// ---- clip ---------------------------------------------------------------------------------------

template <typename C>
struct ClipF {
  C lo, hi;
  __device__ C operator()(C x) const { return x < lo ? lo : (x > hi ? hi : x); }
};
template <typename C>
struct ClipG {
  C lo, hi;
  __device__ C operator()(C g, C x) const { return (x >= lo && x <= hi) ? g : C(0); }
};

/// A bound of clip in DT's computation type: cast to DT first, as the CPU kernel does.
template <typename DT>
acc_t<DT> bound_of(double v) {
  if constexpr (kIsFloat16<DT>) {
    return static_cast<float>(v);
  } else {
    return static_cast<DT>(v);
  }
}

void clip_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::ClipParam>();
  WEFT_CUDA_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    using C = acc_t<DT>;
    map1<DT, DT>(ctx, "clip", out[0].size(), dptr<const DT>(in[0]), dptr<DT>(out[0]), req[0],
                 ClipF<C>{bound_of<DT>(p.a_min), bound_of<DT>(p.a_max)});
  });
}

void clip_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::ClipParam>();
  WEFT_CUDA_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
    using C = acc_t<DT>;
    map2<DT, DT>(ctx, "_backward_clip", out[0].size(), dptr<const DT>(in[0]), dptr<const DT>(in[1]),
                 dptr<DT>(out[0]), req[0], ClipG<C>{bound_of<DT>(p.a_min), bound_of<DT>(p.a_max)});
  });
}

// ---- where --------------------------------------------------------------------------------------
// The condition has x's shape (inner = 1) or is 1-D over x's first axis: element i reads
// condition[i / inner], inner being the size of one row of x.

template <typename CT>
__device__ __forceinline__ bool nonzero(CT c) {
  return to_acc<CT>(c) != acc_t<CT>(0);
}

template <bool kAdd, typename CT, typename DT>
__global__ void where_kernel(int64_t n, int64_t inner, const CT* cond, const DT* x, const DT* y,
                             DT* out) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    const DT v = nonzero(cond[i / inner]) ? x[i] : y[i];
    put<kAdd>(out, i, to_acc<DT>(v));
  }
}

enum ReqCode : int { kSkip = 0, kSet = 1, kAccumulate = 2 };
inline int req_code(OpReq r) {
  return r == OpReq::kNull ? kSkip : (r == OpReq::kAdd ? kAccumulate : kSet);
}

template <typename DT>
__device__ __forceinline__ void put_code(DT* out, int64_t i, acc_t<DT> v, int code) {
  if (code == kSet) {
    put<false>(out, i, v);
  } else if (code == kAccumulate) {
    put<true>(out, i, v);
  }
}

template <typename CT, typename DT>
__global__ void where_backward_kernel(int64_t n, int64_t inner, const DT* g, const CT* cond, DT* gx,
                                      DT* gy, int rx, int ry) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    const bool nz = nonzero(cond[i / inner]);
    const acc_t<DT> gv = to_acc<DT>(g[i]), zero = acc_t<DT>(0);
    put_code(gx, i, nz ? gv : zero, rx);
    put_code(gy, i, nz ? zero : gv, ry);
  }
}

int64_t where_inner(const TensorView& cond, int64_t n) {
  const int64_t rows = cond.size();
  return rows == n ? 1 : std::max<int64_t>(1, n / std::max<int64_t>(rows, 1));
}

void where_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t n = out[0].size();
  if (req[0] == OpReq::kNull || n == 0) return;
  const int64_t inner = where_inner(in[0], n);
  cudaStream_t s = stream_of(ctx);
  WEFT_CUDA_ALL_SWITCH(in[0].dtype(), CT, attrs.where(), {
    WEFT_CUDA_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(), {
      if (req[0] == OpReq::kAdd) {
        where_kernel<true><<<grid_for(n), kBlockSize, 0, s>>>(
            n, inner, dptr<const CT>(in[0]), dptr<const DT>(in[1]), dptr<const DT>(in[2]),
            dptr<DT>(out[0]));
      } else {
        where_kernel<false><<<grid_for(n), kBlockSize, 0, s>>>(
            n, inner, dptr<const CT>(in[0]), dptr<const DT>(in[1]), dptr<const DT>(in[2]),
            dptr<DT>(out[0]));
      }
    });
  });
  check_launch("where", ctx);
}

void where_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                            std::span<const TensorView> in, std::span<const OpReq> req,
                            std::span<const TensorView> out) {
  const int64_t n = in[0].size();
  const int rx = req_code(req[0]), ry = req_code(req[1]);
  if (n == 0 || (rx == kSkip && ry == kSkip)) return;
  const int64_t inner = where_inner(in[1], n);
  WEFT_CUDA_ALL_SWITCH(in[1].dtype(), CT, attrs.where(), {
    WEFT_CUDA_ARITH_SWITCH(in[0].dtype(), DT, attrs.where(), {
      where_backward_kernel<CT, DT><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(
          n, inner, dptr<const DT>(in[0]), dptr<const CT>(in[1]), dptr<DT>(out[0]),
          dptr<DT>(out[1]), rx, ry);
    });
  });
  check_launch("_backward_where", ctx);
}

// ---- Cast ---------------------------------------------------------------------------------------

void cast_views(const OpAttrs& attrs, const OpContext& ctx, const TensorView& src, OpReq req,
                const TensorView& dst) {
  const char* name = attrs.op->name().c_str();
  if (req == OpReq::kNull) return;
  if (src.dtype() == dst.dtype() && req != OpReq::kAdd) {
    copy_async(ctx, name, src, dst);
    return;
  }
  WEFT_CUDA_ALL_SWITCH(src.dtype(), ST, attrs.where(), {
    WEFT_CUDA_ALL_SWITCH(dst.dtype(), DT, attrs.where(), {
      map1<ST, DT>(ctx, name, dst.size(), dptr<const ST>(src), dptr<DT>(dst), req, IdentityF{});
    });
  });
}

void cast_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  cast_views(attrs, ctx, in[0], req[0], out[0]);
}

// ---- add_n --------------------------------------------------------------------------------------

constexpr int kAddNChunk = 8;

template <typename T>
struct AddNPtrs {
  const T* p[kAddNChunk];
  int k;
};

template <bool kAdd, typename T>
__global__ void add_n_kernel(int64_t n, AddNPtrs<T> in, T* out) {
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    acc_t<T> sum = to_acc<T>(in.p[0][i]);
    for (int k = 1; k < in.k; ++k) sum = static_cast<acc_t<T>>(sum + to_acc<T>(in.p[k][i]));
    put<kAdd>(out, i, sum);
  }
}

// Sums in chunks of kAddNChunk inputs per kernel; the first chunk holds the input the output
// aliases (in-place), so no input is overwritten before it is read.
template <typename T>
void add_n_typed(const OpContext& ctx, std::span<const TensorView> in, OpReq req,
                 const TensorView& out) {
  const int64_t n = out.size();
  if (n == 0) return;
  std::vector<const T*> ptrs;
  for (const TensorView& v : in) ptrs.push_back(dptr<const T>(v));
  for (size_t j = 0; j < ptrs.size(); ++j) {
    if (ptrs[j] == dptr<const T>(out)) std::swap(ptrs[0], ptrs[j]);
  }
  bool add = req == OpReq::kAdd;
  for (size_t base = 0; base < ptrs.size(); base += kAddNChunk) {
    AddNPtrs<T> chunk{};
    chunk.k = static_cast<int>(std::min<size_t>(kAddNChunk, ptrs.size() - base));
    for (int k = 0; k < chunk.k; ++k) chunk.p[k] = ptrs[base + k];
    if (add) {
      add_n_kernel<true><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(n, chunk, dptr<T>(out));
    } else {
      add_n_kernel<false><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(n, chunk, dptr<T>(out));
    }
    check_launch("add_n", ctx);
    add = true;
  }
}

void add_n_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_CUDA_ARITH_SWITCH(out[0].dtype(), DT, attrs.where(),
                         add_n_typed<DT>(ctx, in, req[0], out[0]));
}

// ---- MakeLoss -----------------------------------------------------------------------------------

template <typename T>
__global__ void count_above_kernel(int64_t n, const T* x, float thresh_f, double thresh_d,
                                   unsigned long long* count) {
  unsigned long long mine = 0;
  WEFT_CUDA_KERNEL_LOOP(i, n) {
    if constexpr (std::is_same_v<T, double>) {
      mine += x[i] > thresh_d ? 1 : 0;
    } else {
      mine += to_acc<T>(x[i]) > thresh_f ? 1 : 0;
    }
  }
  if (mine != 0) atomicAdd(count, mine);
}

// out (=|+=) scale, divided by max(*count, 1) when count is given.
template <bool kAdd, typename T>
__global__ void loss_grad_kernel(int64_t n, T* out, double scale, const unsigned long long* count) {
  double s = scale;
  if (count != nullptr) s /= static_cast<double>(*count > 0 ? *count : 1ull);
  const acc_t<T> v = static_cast<acc_t<T>>(s);
  WEFT_CUDA_KERNEL_LOOP(i, n) { put<kAdd>(out, i, v); }
}

// input (output of the forward) -> grad_scale / norm everywhere.
void make_loss_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                                std::span<const TensorView> in, std::span<const OpReq> req,
                                std::span<const TensorView> out) {
  const auto& p = attrs.params<detail::MakeLossParam>();
  const int64_t n = out[0].size();
  if (req[0] == OpReq::kNull || n == 0) return;
  cudaStream_t s = stream_of(ctx);
  WEFT_CUDA_FLOAT_SWITCH(out[0].dtype(), DT, attrs.where(), {
    double scale = p.grad_scale;
    Scratch scratch(ctx, p.normalization == detail::LossNorm::kValid ? sizeof(uint64_t) : 0);
    unsigned long long* count = nullptr;
    if (p.normalization == detail::LossNorm::kBatch) {
      const int64_t batch = in[0].ndim > 0 ? in[0].shape[0] : 1;
      scale /= static_cast<double>(std::max<int64_t>(batch, 1));
    } else if (p.normalization == detail::LossNorm::kValid) {
      count = scratch.as<unsigned long long>();
      memset_on_stream(ctx, count, 0, sizeof(*count));
      count_above_kernel<DT><<<grid_for(in[0].size()), kBlockSize, 0, s>>>(
          in[0].size(), dptr<const DT>(in[0]), static_cast<float>(p.valid_thresh), p.valid_thresh,
          count);
      check_launch("_backward_MakeLoss", ctx);
    }
    if (req[0] == OpReq::kAdd) {
      loss_grad_kernel<true, DT>
          <<<grid_for(n), kBlockSize, 0, s>>>(n, dptr<DT>(out[0]), scale, count);
    } else {
      loss_grad_kernel<false, DT>
          <<<grid_for(n), kBlockSize, 0, s>>>(n, dptr<DT>(out[0]), scale, count);
    }
    check_launch("_backward_MakeLoss", ctx);
  });
}

}  // namespace

void register_elemwise_kernels(OpRegistry& r) {
  reg_unary<detail::ReluF, false>(r, "relu");
  reg_unary<detail::SigmoidF, true>(r, "sigmoid");
  reg_unary<detail::TanhF, true>(r, "tanh");
  reg_unary<detail::ExpF, true>(r, "exp");
  reg_unary<detail::LogF, true>(r, "log");
  reg_unary<detail::SqrtF, true>(r, "sqrt");
  reg_unary<detail::SquareF, false>(r, "square");
  reg_unary<detail::AbsF, false>(r, "abs");
  reg_unary<detail::ReciprocalF, true>(r, "reciprocal");
  reg_unary<detail::SinF, true>(r, "sin");
  reg_unary<detail::CosF, true>(r, "cos");
  r.kernels("negative")
      .set_attr(DeviceType::kCUDA, FCompute(unary_compute<detail::NegativeF, false>));

  for (const char* name : {"_copy", "BlockGrad", "MakeLoss"})
    r.kernels(name).set_attr(DeviceType::kCUDA, FCompute(copy_compute));
  r.kernels("_backward_MakeLoss").set_attr(DeviceType::kCUDA, FCompute(make_loss_backward_compute));
  r.kernels("zeros_like").set_attr(DeviceType::kCUDA, FCompute(constant_like_compute<0>));
  r.kernels("ones_like").set_attr(DeviceType::kCUDA, FCompute(constant_like_compute<1>));
  r.kernels("add_n").set_attr(DeviceType::kCUDA, FCompute(add_n_compute));
  r.kernels("clip").set_attr(DeviceType::kCUDA, FCompute(clip_compute));
  r.kernels("_backward_clip").set_attr(DeviceType::kCUDA, FCompute(clip_backward_compute));
  r.kernels("where").set_attr(DeviceType::kCUDA, FCompute(where_compute));
  r.kernels("_backward_where").set_attr(DeviceType::kCUDA, FCompute(where_backward_compute));
  // _backward_Cast takes (ograd, data) and converts ograd to data's type: the same kernel.
  r.kernels("Cast").set_attr(DeviceType::kCUDA, FCompute(cast_compute));
  r.kernels("_backward_Cast").set_attr(DeviceType::kCUDA, FCompute(cast_compute));

  register_elemwise_binary_kernels(r);
  register_elemwise_scalar_kernels(r);
}

}  // namespace weft::cuda
