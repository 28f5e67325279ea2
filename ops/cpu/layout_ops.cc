// Kernels on oneDNN layouts for ops whose plain kernels live elsewhere (see layout_ops.h); the
// definition of `_layout_reorder` is in ops/defs/layout_ops.cc.
#include "ops/cpu/layout_ops.h"

#include <cstring>
#include <string>
#include <utility>

#include "base/build_config.h"
#include "ops/infer_util.h"

#if WEFT_USE_ONEDNN
#include "ops/cpu/dnnl_util.h"
#endif

namespace weft::detail {

bool has_layouts(const OpContext& ctx, size_t num_in, size_t num_out) {
  for (size_t i = 0; i < num_in; ++i) {
    if (ctx.input_layout(i)) return true;
  }
  for (size_t o = 0; o < num_out; ++o) {
    if (ctx.output_layout(o)) return true;
  }
  return false;
}

namespace {

// ---- _layout_reorder ----------------------------------------------------------------------------

void reorder_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_ICHECK(req[0] == OpReq::kWrite) << attrs.where() << ": a reorder only writes";
#if WEFT_USE_ONEDNN
  if (has_layouts(ctx, 1, 1)) {
    dnnl_util::reorder_data(dnnl_util::input_desc(ctx, 0, in[0]), in[0].raw(),
                            dnnl_util::output_desc(ctx, 0, out[0]), out[0].raw(), ctx.num_threads);
    return;
  }
#endif
  if (out[0].raw() != in[0].raw()) std::memcpy(out[0].raw(), in[0].raw(), in[0].bytes());
}

}  // namespace

#if WEFT_USE_ONEDNN
namespace {

using dnnl::memory;

memory::desc desc_or_plain(const LayoutRef& l, const Shape& s, DType t) {
  const memory::desc* d = dnnl_util::desc_of(l.get());
  return d ? *d : dnnl_util::plain_desc(dnnl_util::to_dims(s), t);
}

// ---- binary ops ---------------------------------------------------------------------------------

// Whether `b` broadcasts along every dim of `a` but the channel axis 1 (and possibly the batch):
// (N or 1, C, 1, ...) against (N, C, ...).
bool channel_broadcast(const Shape& a, const Shape& b) {
  if (a.ndim() < 3 || b.ndim() != a.ndim() || b[1] != a[1]) return false;
  if (b[0] != a[0] && b[0] != 1) return false;
  for (int d = 2; d < b.ndim(); ++d) {
    if (b[d] != 1) return false;
  }
  return true;
}

dnnl::binary::primitive_desc binary_pd(dnnl::algorithm alg, const memory::desc& a,
                                       const memory::desc& b, const memory::desc& y) {
  return dnnl::binary::primitive_desc(dnnl::binary::desc(alg, a, b, y), dnnl_util::cpu_engine());
}

// Equal shapes: both operands and the output in the first operand's layout that is not plain.
// With `broadcast`, also a not-plain left operand with a plain per-channel right operand.
bool binary_infer_layout(dnnl::algorithm alg, bool broadcast, const LayoutQuery& q,
                         std::vector<LayoutRef>& in, std::vector<LayoutRef>& out) {
  if (q.in_types[0] != DType::kFloat32 || q.in_types[1] != DType::kFloat32) return false;
  const Shape &a = q.in_shapes[0], &b = q.in_shapes[1];
  if (a == b) {
    const LayoutRef l = in[0] ? in[0] : in[1];
    if (!l) return false;
    in[0] = in[1] = out[0] = l;
    return true;
  }
  if (!broadcast || !in[0] || q.out_shapes[0] != a || !channel_broadcast(a, b)) return false;
  const memory::desc& da = *dnnl_util::desc_of(in[0].get());
  try {
    binary_pd(alg, da, desc_or_plain(nullptr, b, DType::kFloat32), da);
  } catch (const dnnl::error&) {
    return false;  // no oneDNN implementation takes this pair: plain
  }
  in[1] = nullptr;
  out[0] = in[0];
  return true;
}

void binary_layout_forward(dnnl::algorithm alg, const OpAttrs& attrs, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_ICHECK(req[0] == OpReq::kWrite || req[0] == OpReq::kInplace)
      << attrs.where() << ": a kernel on layouts only writes";
  using namespace dnnl_util;
  memory::desc da = input_desc(ctx, 0, in[0]), db = input_desc(ctx, 1, in[1]);
  const memory::desc dy = output_desc(ctx, 0, out[0]);
  void* pa = in[0].raw();
  void* pb = in[1].raw();
  // oneDNN computes in place through the first source only; add and multiply commute.
  if (pb == out[0].raw() && pa != pb && da == db) {
    std::swap(pa, pb);
    std::swap(da, db);
  }
  const std::string key = "binary|" + std::to_string(static_cast<int>(alg)) + "|" + desc_key(da) +
                          "|" + desc_key(db) + "|" + desc_key(dy);
  auto& prim = cached<dnnl::binary>(key, [&] { return dnnl::binary(binary_pd(alg, da, db, dy)); });
  ScopedThreads threads(ctx.num_threads);
  execute(prim, {{DNNL_ARG_SRC_0, wrap(da, pa)},
                 {DNNL_ARG_SRC_1, wrap(db, pb)},
                 {DNNL_ARG_DST, wrap(dy, out[0].raw())}});
}

// Gives `name` layout support through oneDNN's binary `alg`, keeping its plain kernel for plain
// calls.
void add_binary_layout_support(OpRegistry& r, const std::string& name, dnnl::algorithm alg,
                               bool broadcast) {
  OpKernels op = r.kernels(name);
  const FCompute* plain = op.compute(DeviceType::kCPU);
  WEFT_ICHECK(plain != nullptr) << "op " << name << " has no CPU kernel to extend";
  op.set_attr<FInferLayout>([alg, broadcast](const OpAttrs&, const LayoutQuery& q,
                                             std::vector<LayoutRef>& in,
                                             std::vector<LayoutRef>& out) {
    return binary_infer_layout(alg, broadcast, q, in, out);
  });
  op.replace_compute(
      DeviceType::kCPU,
      FCompute([alg, plain = *plain](const OpAttrs& attrs, const OpContext& ctx,
                                     std::span<const TensorView> in, std::span<const OpReq> req,
                                     std::span<const TensorView> out) {
        if (has_layouts(ctx, in.size(), out.size())) {
          binary_layout_forward(alg, attrs, ctx, in, req, out);
        } else {
          plain(attrs, ctx, in, req, out);
        }
      }));
}

dnnl::concat::primitive_desc concat_pd(int axis, const std::vector<memory::desc>& srcs,
                                       const memory::desc& dst) {
  return dnnl::concat::primitive_desc(dst, axis, srcs, dnnl_util::cpu_engine());
}

}  // namespace

bool concat_infer_layout(int axis, const LayoutQuery& q, std::vector<LayoutRef>& in,
                         std::vector<LayoutRef>& out) {
  const int nd = q.out_shapes[0].ndim();
  if (axis != 1 || nd < 3 || nd > 5 || q.out_types[0] != DType::kFloat32) return false;
  bool any = false;
  std::vector<memory::desc> srcs;
  for (size_t i = 0; i < in.size(); ++i) {
    if (q.in_types[i] != DType::kFloat32) return false;
    any = any || in[i];
    srcs.push_back(desc_or_plain(in[i], q.in_shapes[i], DType::kFloat32));
  }
  if (!any) return false;
  try {
    const memory::desc dst(dnnl_util::to_dims(q.out_shapes[0]), memory::data_type::f32,
                           memory::format_tag::any);
    out[0] = dnnl_util::make_layout(concat_pd(axis, srcs, dst).dst_desc());
  } catch (const dnnl::error&) {
    return false;
  }
  return true;
}

void concat_layout_forward(int axis, const OpContext& ctx, std::span<const TensorView> in,
                           std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_ICHECK(req[0] == OpReq::kWrite) << "Concat on layouts only writes";
  using namespace dnnl_util;
  std::vector<memory::desc> srcs;
  std::string key = "concat|" + std::to_string(axis);
  for (size_t i = 0; i < in.size(); ++i) {
    srcs.push_back(input_desc(ctx, i, in[i]));
    key += "|" + desc_key(srcs.back());
  }
  const memory::desc dy = output_desc(ctx, 0, out[0]);
  key += "|" + desc_key(dy);
  auto& prim = cached<dnnl::concat>(key, [&] { return dnnl::concat(concat_pd(axis, srcs, dy)); });
  std::unordered_map<int, memory> args{{DNNL_ARG_DST, wrap(dy, out[0].raw())}};
  for (size_t i = 0; i < in.size(); ++i)
    args.emplace(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), wrap(srcs[i], in[i].raw()));
  ScopedThreads threads(ctx.num_threads);
  execute(prim, args);
}

#else

bool concat_infer_layout(int, const LayoutQuery&, std::vector<LayoutRef>&,
                         std::vector<LayoutRef>&) {
  return false;
}
void concat_layout_forward(int, const OpContext&, std::span<const TensorView>,
                           std::span<const OpReq>, std::span<const TensorView>) {
  WEFT_THROW(InternalError) << "Concat on layouts needs oneDNN";
}

#endif  // WEFT_USE_ONEDNN

void register_layout_kernels(OpRegistry& r) {
  r.kernels("_layout_reorder").set_attr<FCompute>(DeviceType::kCPU, reorder_forward);
#if WEFT_USE_ONEDNN
  add_binary_layout_support(r, "elemwise_add", dnnl::algorithm::binary_add, false);
  add_binary_layout_support(r, "broadcast_add", dnnl::algorithm::binary_add, true);
  add_binary_layout_support(r, "broadcast_mul", dnnl::algorithm::binary_mul, true);
#endif
}

}  // namespace weft::detail
