// Elementwise ops that are not arithmetic families: add_n, zeros_like/ones_like, _copy, clip,
// where, Cast, BlockGrad and MakeLoss; also the entry point of the elementwise group.
#include <algorithm>
#include <cstring>

#include "ops/builtin_ops.h"
#include "ops/cpu/layout_ops.h"
#include "ops/defs/elemwise_params.h"
#include "ops/elemwise_kernels.h"

namespace weft::detail {
namespace {

using InplaceList = std::vector<std::pair<int, int>>;

InplaceList inplace_first(const OpAttrs&) { return {{0, 0}}; }
std::vector<bool> inplace_identity(const OpAttrs&) { return {true}; }

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

bool where_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  Shape s;
  if (!merge_shape(&s, in[1]) || !merge_shape(&s, in[2]) || !merge_shape(&s, out[0])) {
    throw_shape_error(attrs, "x, y and the output must have one shape, got x " + in[1].to_string() +
                                 ", y " + in[2].to_string() + ", output " + out[0].to_string());
  }
  assign_input_shape(attrs, in, 1, s);
  assign_input_shape(attrs, in, 2, s);
  assign_output_shape(attrs, out, 0, s);
  if (!in[0].rank_known() || !s.rank_known()) return false;
  if (in[0].ndim() == 1 && s.ndim() != 1) {
    if (in[0][0] >= 0 && s[0] >= 0 && in[0][0] != s[0]) {
      throw_shape_error(attrs, "a 1-D condition must have x.shape[0] = " + std::to_string(s[0]) +
                                   " elements, got " + in[0].to_string());
    }
    if (in[0][0] < 0 && s[0] >= 0) assign_input_shape(attrs, in, 0, Shape{s[0]});
    return in[0].known() && s.known();
  }
  if (in[0].ndim() != s.ndim()) {
    throw_shape_error(attrs, "condition must have the shape of x " + s.to_string() +
                                 " or be 1-D of length x.shape[0], got " + in[0].to_string());
  }
  assign_input_shape(attrs, in, 0, s);
  Shape merged = in[0];
  assign_input_shape(attrs, in, 1, merged);
  assign_input_shape(attrs, in, 2, merged);
  assign_output_shape(attrs, out, 0, merged);
  return in[0].known();
}

bool where_infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = in[1];
  if (t == DType::kUnknown) t = in[2];
  if (t == DType::kUnknown) t = out[0];
  assign_input_type(attrs, in, 1, t);
  assign_input_type(attrs, in, 2, t);
  assign_output_type(attrs, out, 0, t);
  return in[0] != DType::kUnknown && t != DType::kUnknown;
}

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

bool infer_first_two_like(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  // Backward ops (ograd, data) -> grad: all three share one shape.
  return infer_same_shape(attrs, in, out);
}

}  // namespace

void register_elemwise_ops(OpRegistry& r) {
  register_elemwise_binary_ops(r);
  register_elemwise_unary_ops(r);
  register_elemwise_scalar_ops(r);
  register_layout_ops(r);  // after the binary ops: it extends elemwise_add and two broadcasts

  r.register_op("add_n")
      .describe("Sums num_args arrays of one shape elementwise.")
      .set_params<AddNParam>()
      .set_attr<FNumInputs>(
          [](const OpAttrs& a) { return static_cast<int>(a.params<AddNParam>().num_args); })
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, add_n_compute)
      .set_attr<FGradient>([](GradBuilder& b) {
        const int n = static_cast<int>(b.attrs().params<AddNParam>().num_args);
        std::vector<GradEntry> g;
        for (int i = 0; i < n; ++i) g.push_back(b.emit1("_copy", {b.out_grad(0)}));
        return g;
      });
  r.add_alias("ElementWiseSum", "add_n");

  r.register_op("_copy")
      .describe("Returns a copy of the input (identity).")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity)
      .set_attr<FCompute>(DeviceType::kCPU, copy_compute)
      .set_attr<FGradient>(
          [](GradBuilder& b) { return std::vector<GradEntry>{b.emit1("_copy", {b.out_grad(0)})}; });
  r.add_alias("identity", "_copy");

  auto no_grad = [](GradBuilder& b) {
    return std::vector<GradEntry>(static_cast<size_t>(b.attrs().op->num_inputs(b.attrs())),
                                  GradBuilder::none());
  };
  r.register_op("zeros_like")
      .describe("An array of zeros with the input's shape and type.")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FCompute>(DeviceType::kCPU, constant_like_compute<0>)
      .set_attr<FGradient>(no_grad);
  r.register_op("ones_like")
      .describe("An array of ones with the input's shape and type.")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FCompute>(DeviceType::kCPU, constant_like_compute<1>)
      .set_attr<FGradient>(no_grad);

  r.register_op("BlockGrad")
      .describe("Identity in the forward pass; stops the gradient (the input gets none).")
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity)
      .set_attr<FCompute>(DeviceType::kCPU, copy_compute)
      .set_attr<FGradient>(no_grad);
  r.add_alias("stop_gradient", "BlockGrad");

  r.register_op("MakeLoss")
      .describe(
          "Identity in the forward pass; marks its input as a loss: the gradient is grad_scale "
          "(divided by the batch size or valid count per normalization), whatever the head "
          "gradient.")
      .set_params<MakeLossParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FInplaceIdentity>(inplace_identity)
      .set_attr<FCompute>(DeviceType::kCPU, copy_compute)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_MakeLoss", {b.output(0)})};
      });
  r.register_op("_backward_MakeLoss")
      .describe("Gradient of MakeLoss: grad_scale / normalization, shaped like the forward output.")
      .set_params<MakeLossParam>()
      .set_input_names({"output"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FCompute>(DeviceType::kCPU, make_loss_backward_compute);

  r.register_op("clip")
      .describe("Clips values to [a_min, a_max].")
      .set_params<ClipParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInplaceOption>(inplace_first)
      .set_attr<FCompute>(DeviceType::kCPU, clip_compute)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_clip", {b.out_grad(0), b.input(0)})};
      });
  r.add_alias("Clip", "clip");
  r.register_op("_backward_clip")
      .describe("Gradient of clip: the head gradient where a_min <= data <= a_max, else 0.")
      .set_params<ClipParam>()
      .set_input_names({"ograd", "data"})
      .set_attr<FInferShape>(infer_first_two_like)
      .set_attr<FCompute>(DeviceType::kCPU, clip_backward_compute);

  r.register_op("where")
      .describe(
          "Picks x where condition is non-zero, else y. condition has x's shape, or is 1-D of "
          "length "
          "x.shape[0] and selects whole rows.")
      .set_input_names({"condition", "x", "y"})
      .set_attr<FInferShape>(where_infer_shape)
      .set_attr<FInferType>(where_infer_type)
      .set_attr<FCompute>(DeviceType::kCPU, where_compute)
      .set_attr<FGradient>([](GradBuilder& b) {
        auto g = b.emit("_backward_where", {b.out_grad(0), b.input(0)});
        return std::vector<GradEntry>{GradBuilder::none(), g.at(0), g.at(1)};
      });
  r.register_op("_backward_where")
      .describe("Gradient of where: (ograd where condition, ograd where not condition).")
      .set_input_names({"ograd", "condition"})
      .set_output_names({"x_grad", "y_grad"})
      .set_attr<FInferShape>(
          [](const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
            Shape s = in[0];
            if (!merge_shape(&s, out[0]) || !merge_shape(&s, out[1]))
              throw_shape_error(
                  attrs, "gradients must have the head gradient's shape " + in[0].to_string());
            assign_input_shape(attrs, in, 0, s);
            assign_output_shape(attrs, out, 0, s);
            assign_output_shape(attrs, out, 1, s);
            return s.known() && in[1].known();
          })
      .set_attr<FInferType>([](const OpAttrs& attrs, std::vector<DType>& in,
                               std::vector<DType>& out) {
        DType t = in[0] != DType::kUnknown ? in[0] : (out[0] != DType::kUnknown ? out[0] : out[1]);
        assign_input_type(attrs, in, 0, t);
        assign_output_type(attrs, out, 0, t);
        assign_output_type(attrs, out, 1, t);
        return t != DType::kUnknown && in[1] != DType::kUnknown;
      })
      .set_attr<FCompute>(DeviceType::kCPU, where_backward_compute);

  r.register_op("Cast")
      .describe("Converts the input to another element type.")
      .set_params<CastParam>()
      .set_input_names({"data"})
      .set_attr<FInferShape>(infer_same_shape)
      .set_attr<FInferType>(
          [](const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
            assign_output_type(attrs, out, 0, attrs.params<CastParam>().dtype);
            return in[0] != DType::kUnknown;
          })
      .set_attr<FCompute>(DeviceType::kCPU, cast_compute)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{b.emit1("_backward_Cast", {b.out_grad(0), b.input(0)})};
      });
  r.add_alias("cast", "Cast");
  r.register_op("_backward_Cast")
      .describe("Gradient of Cast: the head gradient converted back to the input's type.")
      .set_input_names({"ograd", "data"})
      .set_attr<FInferShape>(infer_first_two_like)
      .set_attr<FInferType>(
          [](const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) {
            assign_output_type(attrs, out, 0, in[1]);
            assign_input_type(attrs, in, 1, out[0]);
            return in[0] != DType::kUnknown && in[1] != DType::kUnknown;
          })
      .set_attr<FCompute>(DeviceType::kCPU, cast_backward_compute);
}

}  // namespace weft::detail
