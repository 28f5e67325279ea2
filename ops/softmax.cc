// The softmax family: softmax / log_softmax (axis, temperature, dtype, length masking) and
// SoftmaxActivation, with their backward ops. float32 softmax/log_softmax without length or
// temperature use oneDNN.
#include <limits>
#include <optional>
#include <type_traits>

#include "ops/cpu/dnnl_util.h"
#include "ops/cpu/norm_kernels.h"
#include "ops/defs/norm_common.h"
#include "ops/defs/softmax_params.h"

namespace weft::detail {
namespace {

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

bool softmax_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (!in[0].rank_known() && out[0].rank_known()) assign_input_shape(attrs, in, 0, out[0]);
  if (!in[0].rank_known()) return false;
  assign_output_shape(attrs, out, 0, in[0]);
  assign_input_shape(attrs, in, 0, out[0]);
  if (p.has_length()) {
    WEFT_CHECK_AS(ShapeError, in[0].ndim() >= 1)
        << attrs.where() << ": use_length needs data of rank >= 1";
    const int axis = normalize_axis(attrs, p.axis, in[0].ndim());
    Shape ls;
    for (int d = 0; d < in[0].ndim(); ++d)
      if (d != axis) ls.push_back(in[0][d]);
    if (!ls.rank_known()) ls = Shape(std::vector<int64_t>{});
    assign_input_shape(attrs, in, 1, ls);
    Shape dd = Shape::filled(in[0].ndim(), -1);
    for (int d = 0, k = 0; d < in[0].ndim(); ++d)
      if (d != axis) dd[d] = in[1][k++];
    assign_input_shape(attrs, in, 0, dd);
    assign_output_shape(attrs, out, 0, in[0]);
  } else if (in[0].ndim() > 0) {
    normalize_axis(attrs, p.axis, in[0].ndim());
  }
  return all_known(in) && all_known(out);
}

bool softmax_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  const auto& p = attrs.params<SoftmaxParam>();
  if (p.dtype) {
    assign_output_type(attrs, out, 0, *p.dtype);
  } else {
    if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, out[0]);
    assign_output_type(attrs, out, 0, in[0]);
  }
  norm::check_any_float_type(attrs, in[0], "softmax data");
  if (p.has_length() && in[1] == DType::kUnknown) in[1] = DType::kInt32;
  return in[0] != DType::kUnknown && out[0] != DType::kUnknown;
}

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

// Backward inputs: out_grad, data (for its type), output, [length].
bool softmax_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                                  std::vector<Shape>& out) {
  Shape s;
  for (int i = 0; i < 3; ++i) merge_shape(&s, in[i]);
  merge_shape(&s, out[0]);
  if (!s.rank_known()) return false;
  for (int i = 0; i < 3; ++i) assign_input_shape(attrs, in, i, s);
  assign_output_shape(attrs, out, 0, s);
  if (attrs.params<SoftmaxParam>().has_length() && s.ndim() > 0) {
    const int axis = normalize_axis(attrs, attrs.params<SoftmaxParam>().axis, s.ndim());
    Shape ls;
    for (int d = 0; d < s.ndim(); ++d)
      if (d != axis) ls.push_back(s[d]);
    if (!ls.rank_known()) ls = Shape(std::vector<int64_t>{});
    assign_input_shape(attrs, in, 3, ls);
  }
  return all_known(in) && all_known(out);
}

bool softmax_backward_infer_type(const OpAttrs& attrs, std::vector<DType>& in,
                                 std::vector<DType>& out) {
  if (in[1] == DType::kUnknown) assign_input_type(attrs, in, 1, out[0]);
  assign_output_type(attrs, out, 0, in[1]);
  if (in[0] == DType::kUnknown) assign_input_type(attrs, in, 0, in[2]);
  if (in[2] == DType::kUnknown) assign_input_type(attrs, in, 2, in[0]);
  return out[0] != DType::kUnknown;
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

void register_softmax_pair(OpRegistry& r, const std::string& name, bool log) {
  r.register_op(name)
      .describe(
          log ? "Log-softmax along `axis`: (x - max)/T - log(sum(exp((x - max)/T))). With "
                "use_length, "
                "positions at or past length (the second input, data's shape without the axis) are "
                "0."
              : "Softmax along `axis`: exp((x - max)/T) / sum(exp((x - max)/T)). With use_length, "
                "positions at or past length (the second input, data's shape without the axis) are "
                "0.")
      .set_params<SoftmaxParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return a.params<SoftmaxParam>().has_length() ? 2 : 1; })
      .set_attr<FListInputNames>([](const OpAttrs& a) {
        return a.params<SoftmaxParam>().has_length() ? std::vector<std::string>{"data", "length"}
                                                     : std::vector<std::string>{"data"};
      })
      .set_output_names({"output"})
      .set_attr<FInferShape>(softmax_infer_shape)
      .set_attr<FInferType>(softmax_infer_type)
      .set_attr<FCompute>(DeviceType::kCPU, log ? softmax_forward<true> : softmax_forward<false>)
      .set_attr<FGradient>([name](GradBuilder& b) {
        const bool has_len = b.attrs().params<SoftmaxParam>().has_length();
        std::vector<GradEntry> ins{b.out_grad(0), b.input(0), b.output(0)};
        if (has_len) ins.push_back(b.input(1));
        std::vector<GradEntry> g{b.emit_with_forward_attrs("_backward_" + name, ins).at(0)};
        if (has_len) g.push_back(GradBuilder::none());
        return g;
      });
  r.register_op("_backward_" + name)
      .describe("Gradient of " + name + " with respect to data.")
      .set_params<SoftmaxParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return a.params<SoftmaxParam>().has_length() ? 4 : 3; })
      .set_attr<FListInputNames>([](const OpAttrs& a) {
        std::vector<std::string> names{"out_grad", "data", "output"};
        if (a.params<SoftmaxParam>().has_length()) names.push_back("length");
        return names;
      })
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(softmax_backward_infer_shape)
      .set_attr<FInferType>(softmax_backward_infer_type)
      .set_attr<FCompute>(DeviceType::kCPU, log ? softmax_backward<true> : softmax_backward<false>);
}

// ---- SoftmaxActivation
// ---------------------------------------------------------------------------

bool softmax_act_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                             std::vector<Shape>& out) {
  const bool ok = infer_same_shape(attrs, in, out);
  const Shape& s = in[0];
  if (s.rank_known()) {
    if (attrs.params<SoftmaxActivationParam>().mode == SoftmaxActMode::kChannel) {
      WEFT_CHECK_AS(ShapeError, s.ndim() >= 3)
          << attrs.where() << ": mode=channel needs data of rank >= 3, got " << s.to_string();
    } else {
      WEFT_CHECK_AS(ShapeError, s.ndim() >= 1) << attrs.where() << ": data must have rank >= 1";
    }
  }
  return ok;
}

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

void register_softmax_ops(OpRegistry& r) {
  register_softmax_pair(r, "softmax", false);
  register_softmax_pair(r, "log_softmax", true);

  r.register_op("SoftmaxActivation")
      .describe(
          "Softmax activation. mode=instance: softmax over the last axis; mode=channel: over axis "
          "1 "
          "of an (N, C, ...) tensor at each position (rank >= 3).")
      .set_params<SoftmaxActivationParam>()
      .set_input_names({"data"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(softmax_act_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, softmax_act_forward)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_SoftmaxActivation", {b.out_grad(0), b.output(0)})
                .at(0)};
      });
  r.register_op("_backward_SoftmaxActivation")
      .describe("Gradient of SoftmaxActivation with respect to data.")
      .set_params<SoftmaxActivationParam>()
      .set_input_names({"out_grad", "output"})
      .set_output_names({"data_grad"})
      .set_attr<FInferShape>(softmax_act_infer_shape)
      .set_attr<FCompute>(DeviceType::kCPU, softmax_act_backward);
}

}  // namespace weft::detail
