// The CPU kernels of the softmax family (softmax, log_softmax, SoftmaxActivation and their
// backward ops; definitions in ops/defs/softmax.cc). float32 softmax/log_softmax without length or
// temperature use oneDNN.
#include <limits>
#include <optional>
#include <type_traits>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/norm_kernels.h"
#include "ops/defs/softmax_params.h"

namespace weft::cpu {
namespace {

using namespace weft::detail;  // the param structs
using norm::AxisSplit;
using norm::CalcT;
using norm::softmax_rows;
using norm::split_at;
using norm::store;

/// Backward of softmax_rows given the output y and its gradient dy:
/// softmax dx = (dy - sum(dy*y)) * y / T; log_softmax dx = (dy - exp(y) * sum(dy)) / T.
template <typename DI, typename DO>
void softmax_rows_backward(const DO* dy, const DO* y, DI* dx, const AxisSplit& s, double temp,
                           bool log, const std::vector<int64_t>& lengths, OpReq req, int threads) {
  using CT = CalcT<DI, DO>;
  if (req == OpReq::kNull) return;
  const int64_t D = s.dim, inner = s.inner;
  const CT inv_t = static_cast<CT>(1.0 / temp);
  parallel_for(s.outer * inner, norm::row_grain(D), threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * D * inner + i;
      const int64_t len = lengths.empty() ? D : std::clamp<int64_t>(lengths[r], 0, D);
      CT acc = 0;
      if (log) {
        for (int64_t d = 0; d < len; ++d) acc += static_cast<CT>(dy[base + d * inner]);
        for (int64_t d = 0; d < len; ++d) {
          const int64_t k = base + d * inner;
          store(dx + k, req,
                (static_cast<CT>(dy[k]) - std::exp(static_cast<CT>(y[k])) * acc) * inv_t);
        }
      } else {
        for (int64_t d = 0; d < len; ++d)
          acc += static_cast<CT>(dy[base + d * inner]) * static_cast<CT>(y[base + d * inner]);
        for (int64_t d = 0; d < len; ++d) {
          const int64_t k = base + d * inner;
          store(dx + k, req, (static_cast<CT>(dy[k]) - acc) * static_cast<CT>(y[k]) * inv_t);
        }
      }
      for (int64_t d = len; d < D; ++d) store(dx + base + d * inner, req, 0);
    }
  });
}

/// Reads a small integer-valued tensor (lengths, labels) into int64s.
std::vector<int64_t> read_ints(const TensorView& v) {
  std::vector<int64_t> out(static_cast<size_t>(v.size()));
  WEFT_DTYPE_SWITCH(v.dtype(), DT, "softmax length/label", {
    const DT* p = v.ptr<DT>();
    for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<int64_t>(p[k]);
  });
  return out;
}

#if WEFT_USE_ONEDNN
// float32 softmax / log-softmax along `axis` through oneDNN (no temperature, no lengths).
bool softmax_dnnl(const OpContext& ctx, int axis, bool log, const TensorView& x, OpReq req,
                  const TensorView& y) {
  if (x.dtype() != DType::kFloat32 || y.dtype() != DType::kFloat32) return false;
  if (req != OpReq::kWrite && req != OpReq::kInplace) return false;
  if (x.size() == 0 || x.ndim == 0) return false;
  using namespace dnnl_util;
  const auto dims = to_dims(x);
  std::string key = std::string(log ? "log_softmax|" : "softmax|") + std::to_string(axis);
  for (auto d : dims) key += "," + std::to_string(d);
  const auto md = plain_desc(dims, DType::kFloat32);
  auto& prim = cached<dnnl::primitive>(key, [&]() -> dnnl::primitive {
    if (log) {
      dnnl::logsoftmax_forward::desc desc(dnnl::prop_kind::forward_inference, md, axis);
      return dnnl::logsoftmax_forward(dnnl::logsoftmax_forward::primitive_desc(desc, cpu_engine()));
    }
    dnnl::softmax_forward::desc desc(dnnl::prop_kind::forward_inference, md, axis);
    return dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(desc, cpu_engine()));
  });
  ScopedThreads threads(ctx.num_threads);
  execute(prim, {{DNNL_ARG_SRC, wrap(x)}, {DNNL_ARG_DST, wrap(y)}});
  return true;
}
#endif

/// Softmax of x into y along `axis` with any float in/out types, oneDNN when it applies.
void softmax_any(const OpAttrs& attrs, const OpContext& ctx, int axis, double temp, bool log,
                 const std::vector<int64_t>& lengths, const TensorView& x, OpReq req,
                 const TensorView& y) {
#if WEFT_USE_ONEDNN
  if (temp == 1.0 && lengths.empty() && softmax_dnnl(ctx, axis, log, x, req, y)) return;
#endif
  const AxisSplit s = split_at(x, axis);
  WEFT_FLOAT_SWITCH(x.dtype(), DI, attrs.where(), {
    WEFT_FLOAT_SWITCH(y.dtype(), DO, attrs.where(),
                      softmax_rows<DI, DO>(x.ptr<DI>(), y.ptr<DO>(), s, temp, log, lengths, req,
                                           ctx.num_threads));
  });
}

// ---- softmax / log_softmax
// -----------------------------------------------------------------------

template <bool kLog>
void softmax_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (in[0].ndim == 0) {  // a scalar: softmax 1, log_softmax 0
    WEFT_FLOAT_SWITCH(out[0].dtype(), DO, attrs.where(),
                      store(out[0].ptr<DO>(), req[0], kLog ? 0.0 : 1.0));
    return;
  }
  const int axis = normalize_axis(attrs, p.axis, in[0].ndim);
  const std::vector<int64_t> lengths = p.has_length() ? read_ints(in[1]) : std::vector<int64_t>{};
  softmax_any(attrs, ctx, axis, p.temp(), kLog, lengths, in[0], req[0], out[0]);
}

template <bool kLog>
void softmax_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (req[0] == OpReq::kNull) return;
  if (in[2].ndim == 0) {
    WEFT_FLOAT_SWITCH(out[0].dtype(), DI, attrs.where(), store(out[0].ptr<DI>(), req[0], 0.0));
    return;
  }
  const int axis = normalize_axis(attrs, p.axis, in[2].ndim);
  const std::vector<int64_t> lengths = p.has_length() ? read_ints(in[3]) : std::vector<int64_t>{};
  const AxisSplit s = split_at(in[2], axis);
  WEFT_FLOAT_SWITCH(out[0].dtype(), DI, attrs.where(), {
    WEFT_FLOAT_SWITCH(
        in[2].dtype(), DO, attrs.where(),
        softmax_rows_backward<DI, DO>(in[0].ptr<DO>(), in[2].ptr<DO>(), out[0].ptr<DI>(), s,
                                      p.temp(), kLog, lengths, req[0], ctx.num_threads));
  });
}

// ---- SoftmaxActivation
// ---------------------------------------------------------------------------

int softmax_act_axis(const OpAttrs& attrs, int ndim) {
  return attrs.params<SoftmaxActivationParam>().mode == SoftmaxActMode::kChannel ? 1 : ndim - 1;
}

void softmax_act_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out) {
  softmax_any(attrs, ctx, softmax_act_axis(attrs, in[0].ndim), 1.0, false, {}, in[0], req[0],
              out[0]);
}

// in: out_grad, output.
void softmax_act_backward(const OpAttrs& attrs, const OpContext& ctx,
                          std::span<const TensorView> in, std::span<const OpReq> req,
                          std::span<const TensorView> out) {
  const AxisSplit s = split_at(in[1], softmax_act_axis(attrs, in[1].ndim));
  WEFT_FLOAT_SWITCH(
      in[1].dtype(), DT, attrs.where(),
      softmax_rows_backward<DT, DT>(in[0].ptr<DT>(), in[1].ptr<DT>(), out[0].ptr<DT>(), s, 1.0,
                                    false, {}, req[0], ctx.num_threads));
}

}  // namespace

void register_softmax_kernels(OpRegistry& r) {
  r.kernels("softmax").set_attr<FCompute>(DeviceType::kCPU, softmax_forward<false>);
  r.kernels("_backward_softmax").set_attr<FCompute>(DeviceType::kCPU, softmax_backward<false>);
  r.kernels("log_softmax").set_attr<FCompute>(DeviceType::kCPU, softmax_forward<true>);
  r.kernels("_backward_log_softmax").set_attr<FCompute>(DeviceType::kCPU, softmax_backward<true>);
  r.kernels("SoftmaxActivation").set_attr<FCompute>(DeviceType::kCPU, softmax_act_forward);
  r.kernels("_backward_SoftmaxActivation")
      .set_attr<FCompute>(DeviceType::kCPU, softmax_act_backward);
}

}  // namespace weft::cpu
