// CUDA kernels of the loss heads: SoftmaxOutput (alias Softmax) and the Linear/Logistic/MAE
// regression outputs, with their backward ops. Semantics: ops/cpu/nn_norm.cc. float16/bfloat16
// data (CUDA only) is computed in float32 and rounded when stored.
//
// Note [CUDA SoftmaxOutput labels]
// The CPU backward rejects labels outside [0, dim) (unless ignored) with an error. Labels live on
// the device here and checking them would mean waiting for the stream, so an out-of-range label
// simply matches no class: its row gets the plain softmax as gradient (times the scale).
#include <algorithm>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/norm_util.cuh"
#include "ops/cuda/register.h"
#include "ops/defs/norm_params.h"

namespace weft::cuda {
namespace {

using detail::LossNorm;
using detail::RegressionParam;
using detail::SoftmaxOutputParam;

constexpr int kRowBlock = 256;

// The CPU computes float data's softmax in float and double data's in double; float16/bfloat16
// data is computed in float (acc_t) and rounded when stored.
template <typename DT>
__global__ void softmax_rows_kernel(const DT* __restrict__ x, DT* y, int req, int64_t D,
                                    int64_t inner) {
  using A = acc_t<DT>;
  __shared__ A shm[32];
  const int64_t r = blockIdx.x;
  const int64_t o = r / inner, i = r - o * inner;
  const int64_t base = o * D * inner + i;
  A mx = -INFINITY;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) mx = max(mx, to_acc(x[base + d * inner]));
  mx = block_max(mx, shm);
  A sum = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
    sum += exp(to_acc(x[base + d * inner]) - mx);
  const A inv = A(1) / block_sum(sum, shm);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const int64_t k = base + d * inner;
    store_req(y + k, req, exp(to_acc(x[k]) - mx) * inv);
  }
}

Split3 softmax_output_split(const SoftmaxOutputParam& p, const int64_t* shape, int ndim) {
  if (p.multi_output) return split3(shape, ndim, std::min(1, ndim - 1));
  if (p.preserve_shape) return split3(shape, ndim, ndim - 1);
  Split3 s;
  s.outer = ndim > 0 ? shape[0] : 1;
  for (int i = 1; i < ndim; ++i) s.dim *= shape[i];
  return s;
}

void softmax_output_forward(const OpAttrs& attrs, const OpContext& ctx,
                            std::span<const TensorView> in, std::span<const OpReq> req,
                            std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<SoftmaxOutputParam>();
  const Split3 s = softmax_output_split(p, in[0].shape, in[0].ndim);
  const int64_t rows = s.outer * s.inner;
  if (rows == 0 || s.dim == 0) return;
  WEFT_CUDA_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    softmax_rows_kernel<DT><<<static_cast<unsigned>(rows), kRowBlock, 0, stream_of(ctx)>>>(
        typed<const DT>(in[0]), typed<DT>(out[0]), req_code(req[0]), s.dim, s.inner);
    check_launch("softmax_rows_kernel", ctx);
  });
}

// Labels that are not ignore_label, for normalization = valid.
template <typename LT>
__global__ void count_valid_kernel(const LT* __restrict__ label, int64_t n, int ignore,
                                   unsigned long long* count) {
  __shared__ unsigned long long shm[32];
  unsigned long long c = 0;
  WEFT_CUDA_KERNEL_LOOP(k, n) c += static_cast<int>(to_acc(label[k])) != ignore;
  c = block_sum(c, shm);
  if (threadIdx.x == 0 && c != 0) atomicAdd(count, c);
}

struct SoftmaxGradArgs {
  int64_t n, D, inner;
  double scale;  // grad_scale / normaliser, without the valid count
  bool divide_by_count;
  const unsigned long long* count;
  bool use_ignore, out_grad;
  int ignore;
  double on, off;
};

template <typename DT, typename LT>
__global__ void softmax_output_grad_kernel(const DT* __restrict__ dy, const DT* __restrict__ y,
                                           const LT* __restrict__ label, DT* dx, int req,
                                           SoftmaxGradArgs a) {
  using W = wide_t<DT>;
  double scale = a.scale;
  if (a.divide_by_count) scale /= static_cast<double>(max(*a.count, 1ull));
  const W ws = static_cast<W>(scale), on = static_cast<W>(a.on), off = static_cast<W>(a.off);
  WEFT_CUDA_KERNEL_LOOP(k, a.n) {
    const int64_t o = k / (a.D * a.inner);
    const int64_t rem = k - o * a.D * a.inner;
    const int64_t d = rem / a.inner, i = rem - d * a.inner;
    const int li = static_cast<int>(to_acc(label[o * a.inner + i]));
    W g = 0;
    if (!(a.use_ignore && li == a.ignore)) {
      g = (widen(y[k]) - (d == li ? on : off)) * ws;
      if (a.out_grad) g *= widen(dy[k]);
    }
    store_req(dx + k, req, g);
  }
}

template <typename DT, typename LT>
__global__ void softmax_output_prob_grad_kernel(const DT* __restrict__ dy, const DT* __restrict__ y,
                                                const LT* __restrict__ label, DT* dx, int req,
                                                int64_t n, double grad_scale, bool out_grad) {
  using W = wide_t<DT>;
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    W g = (widen(y[k]) - static_cast<W>(to_acc(label[k]))) * static_cast<W>(grad_scale);
    if (out_grad) g *= widen(dy[k]);
    store_req(dx + k, req, g);
  }
}

// in: out_grad, output, label. out: data gradient.
void softmax_output_backward(const OpAttrs& attrs, const OpContext& ctx,
                             std::span<const TensorView> in, std::span<const OpReq> req,
                             std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<SoftmaxOutputParam>();
  const int64_t n = out[0].size();
  if (n == 0) return;
  cudaStream_t st = stream_of(ctx);
  const int rq = req_code(req[0]);
  WEFT_CUDA_FLOAT_SWITCH(in[1].dtype(), DT, attrs.where(), {
    WEFT_CUDA_ALL_SWITCH(in[2].dtype(), LT, attrs.where(), {
      const DT* dy = typed<const DT>(in[0]);
      const DT* y = typed<const DT>(in[1]);
      const LT* lab = typed<const LT>(in[2]);
      DT* dx = typed<DT>(out[0]);
      if (in[2].size() == n && in[2].ndim == in[1].ndim && in[2].ndim > 1) {
        softmax_output_prob_grad_kernel<DT, LT>
            <<<grid_for(n), kBlockSize, 0, st>>>(dy, y, lab, dx, rq, n, p.grad_scale, p.out_grad);
        check_launch("softmax_output_prob_grad_kernel", ctx);
      } else {
        const Split3 s = softmax_output_split(p, in[1].shape, in[1].ndim);
        WEFT_CHECK_AS(ShapeError, in[2].size() == s.outer * s.inner)
            << attrs.where() << ": label has " << in[2].size() << " elements, expected "
            << s.outer * s.inner;
        SoftmaxGradArgs a{};
        a.n = n;
        a.D = s.dim;
        a.inner = s.inner;
        a.use_ignore = p.use_ignore;
        a.out_grad = p.out_grad;
        a.ignore = static_cast<int>(p.ignore_label);
        a.off = (p.smooth_alpha > 0 && s.dim > 1) ? p.smooth_alpha / static_cast<double>(s.dim - 1)
                                                  : 0.0;
        a.on = 1.0 - p.smooth_alpha;
        double valid = 1;
        if (p.normalization == LossNorm::kBatch)
          valid = static_cast<double>(p.multi_output ? s.outer : s.outer * s.inner);
        a.scale = p.grad_scale / std::max(valid, 1.0);
        if (p.multi_output && p.normalization != LossNorm::kValid)
          a.scale /= static_cast<double>(s.inner);
        Scratch count(ctx, sizeof(unsigned long long));
        if (p.normalization == LossNorm::kValid) {
          a.divide_by_count = true;
          a.count = count.as<unsigned long long>();
          memset_on_stream(ctx, count.get(), 0, sizeof(unsigned long long));
          const int64_t nl = in[2].size();
          count_valid_kernel<LT><<<std::min(grid_for(nl), 1024u), kBlockSize, 0, st>>>(
              lab, nl, a.ignore, count.as<unsigned long long>());
          check_launch("count_valid_kernel", ctx);
        }
        softmax_output_grad_kernel<DT, LT>
            <<<grid_for(n), kBlockSize, 0, st>>>(dy, y, lab, dx, rq, a);
        check_launch("softmax_output_grad_kernel", ctx);
      }
    });
  });
}

// ---- regression heads ---------------------------------------------------------------------------

enum RegKind : int { kLinear = 0, kLogistic = 1, kMAE = 2 };

template <typename DT, int kKind>
__global__ void regression_forward_kernel(const DT* __restrict__ x, DT* y, int req, int64_t n) {
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    using A = acc_t<DT>;
    if constexpr (kKind == kLogistic) {
      store_req(y + k, req, A(1) / (A(1) + exp(-to_acc(x[k]))));
    } else {
      store_req(y + k, req, to_acc(x[k]));
    }
  }
}

template <typename DT, int kKind>
__global__ void regression_backward_kernel(const DT* __restrict__ y, const DT* __restrict__ l,
                                           DT* dx, int req, int64_t n, double scale) {
  using W = wide_t<DT>;
  const W ws = static_cast<W>(scale);
  WEFT_CUDA_KERNEL_LOOP(k, n) {
    const W diff = widen(y[k]) - widen(l[k]);
    W g = diff;
    if constexpr (kKind == kMAE) g = static_cast<W>((diff > 0) - (diff < 0));
    store_req(dx + k, req, g * ws);
  }
}

template <int kKind>
void regression_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t n = in[0].size();
  if (req[0] == OpReq::kNull || n == 0) return;
  WEFT_CUDA_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    regression_forward_kernel<DT, kKind><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(
        typed<const DT>(in[0]), typed<DT>(out[0]), req_code(req[0]), n);
    check_launch("regression_forward_kernel", ctx);
  });
}

// in: output, label. out: data gradient.
template <int kKind>
void regression_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  const int64_t n = in[0].size();
  if (req[0] == OpReq::kNull || n == 0) return;
  const double grad_scale = attrs.params<RegressionParam>().grad_scale;
  const int64_t lsize = in[1].size();
  const int64_t lead = in[1].ndim > 0 ? in[1].shape[0] : 1;
  const double num_output = lead > 0 ? static_cast<double>(lsize) / static_cast<double>(lead) : 1.0;
  WEFT_CHECK(in[1].dtype() == in[0].dtype())
      << attrs.where() << ": label dtype must match the data's";
  WEFT_CUDA_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    regression_backward_kernel<DT, kKind><<<grid_for(n), kBlockSize, 0, stream_of(ctx)>>>(
        typed<const DT>(in[0]), typed<const DT>(in[1]), typed<DT>(out[0]), req_code(req[0]), n,
        grad_scale / num_output);
    check_launch("regression_backward_kernel", ctx);
  });
}

template <int kKind>
void register_regression(OpRegistry& r, const std::string& name) {
  r.kernels(name).set_attr(DeviceType::kCUDA, FCompute(regression_forward<kKind>));
  r.kernels("_backward_" + name).set_attr(DeviceType::kCUDA, FCompute(regression_backward<kKind>));
}

}  // namespace

void register_norm_loss_kernels(OpRegistry& r) {
  r.kernels("SoftmaxOutput").set_attr(DeviceType::kCUDA, FCompute(softmax_output_forward));
  r.kernels("_backward_SoftmaxOutput")
      .set_attr(DeviceType::kCUDA, FCompute(softmax_output_backward));
  register_regression<kLinear>(r, "LinearRegressionOutput");
  register_regression<kLogistic>(r, "LogisticRegressionOutput");
  register_regression<kMAE>(r, "MAERegressionOutput");
}

}  // namespace weft::cuda
