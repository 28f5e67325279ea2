// CUDA kernels of the binary elementwise ops: identical-shape (elemwise_add, _power, _equal, ...)
// and broadcast (broadcast_add, ...) arithmetic and comparisons, and their backward ops (the
// broadcast ones reduce over the broadcast axes, Note [Broadcast gradient reduction]).
#include <string>

#include "ops/cuda/elemwise_kernels.cuh"
#include "ops/cuda/register.h"

namespace weft::cuda {
namespace {

// The functors (detail::AddF, AddG, ...) are in ops/defs/elemwise_math.h, shared with the CPU
// kernels.

template <typename G, bool kLhs>
struct Term {
  template <typename C>
  __device__ C operator()(C g, C a, C b) const {
    return kLhs ? G::lhs(g, a, b) : G::rhs(g, a, b);
  }
};

struct NegateF {
  template <typename C>
  __device__ C operator()(C x) const {
    return static_cast<C>(C(0) - x);
  }
};

// ---- kernels ------------------------------------------------------------------------------------

template <typename F>
void binary_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_CUDA_ARITH_SWITCH(
      out[0].dtype(), DT, attrs.where(),
      map2<DT, DT>(ctx, attrs.op->name().c_str(), out[0].size(), dptr<const DT>(in[0]),
                   dptr<const DT>(in[1]), dptr<DT>(out[0]), req[0], F{}));
}

template <typename F>
void broadcast_compute(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  WEFT_CUDA_ARITH_SWITCH(
      out[0].dtype(), DT, attrs.where(),
      launch_broadcast<DT>(ctx, attrs.op->name().c_str(), in[0], in[1], out[0], req[0], F{}));
}

// Backward of a (possibly broadcast) binary op: inputs (ograd, lhs, rhs), outputs gradients shaped
// like lhs and rhs.
template <typename DT, typename G>
void binary_backward_typed(const OpContext& ctx, const char* name, const TensorView& og,
                           const TensorView& a, const TensorView& b, const TensorView& ga,
                           const TensorView& gb, OpReq ra, OpReq rb) {
  const int64_t n = og.size();
  const DT* g = dptr<const DT>(og);
  const DT* x = dptr<const DT>(a);
  const DT* y = dptr<const DT>(b);
  if (a.size() == n && b.size() == n) {
    map3<DT, DT>(ctx, name, n, g, x, y, dptr<DT>(ga), ra, Term<G, true>{});
    map3<DT, DT>(ctx, name, n, g, x, y, dptr<DT>(gb), rb, Term<G, false>{});
    return;
  }
  if (n == 0) {  // an operand broadcast over an empty axis gets a zero gradient
    for (auto [grad, req] : {std::pair{&ga, ra}, std::pair{&gb, rb}}) {
      if (req == OpReq::kWrite || req == OpReq::kInplace) launch_fill<DT>(ctx, name, *grad, 0, req);
    }
    return;
  }
  const BcastGeom geom = make_bcast_geom(og, a, b, name);
  launch_reduce_grad<true>(ctx, name, make_reduce_geom(geom, true), g, x, y, dptr<DT>(ga), ra,
                           Term<G, true>{});
  launch_reduce_grad<false>(ctx, name, make_reduce_geom(geom, false), g, y, x, dptr<DT>(gb), rb,
                            Term<G, false>{});
}

template <typename G>
void binary_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                             std::span<const TensorView> in, std::span<const OpReq> req,
                             std::span<const TensorView> out) {
  WEFT_CUDA_ARITH_SWITCH(in[0].dtype(), DT, attrs.where(),
                         binary_backward_typed<DT, G>(ctx, attrs.op->name().c_str(), in[0], in[1],
                                                      in[2], out[0], out[1], req[0], req[1]));
}

// _backward_add / _backward_sub of identical-shape ops: ograd -> (ograd, ±ograd).
template <bool kNegateRhs>
void add_sub_backward_compute(const OpAttrs& attrs, const OpContext& ctx,
                              std::span<const TensorView> in, std::span<const OpReq> req,
                              std::span<const TensorView> out) {
  const char* name = attrs.op->name().c_str();
  WEFT_CUDA_ARITH_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const int64_t n = in[0].size();
    const DT* g = dptr<const DT>(in[0]);
    if (req[0] == OpReq::kAdd) {
      map1<DT, DT>(ctx, name, n, g, dptr<DT>(out[0]), req[0], IdentityF{});
    } else if (req[0] != OpReq::kNull) {
      copy_async(ctx, name, in[0], out[0]);
    }
    if constexpr (kNegateRhs) {
      map1<DT, DT>(ctx, name, n, g, dptr<DT>(out[1]), req[1], NegateF{});
    } else if (req[1] == OpReq::kAdd) {
      map1<DT, DT>(ctx, name, n, g, dptr<DT>(out[1]), req[1], IdentityF{});
    } else if (req[1] != OpReq::kNull) {
      copy_async(ctx, name, in[0], out[1]);
    }
  });
}

template <typename F, typename G>
void reg_arith(OpRegistry& r, const std::string& base, const std::string& elem_name) {
  r.kernels(elem_name).set_attr(DeviceType::kCUDA, FCompute(binary_compute<F>));
  r.kernels("broadcast_" + base).set_attr(DeviceType::kCUDA, FCompute(broadcast_compute<F>));
  r.kernels("_backward_broadcast_" + base)
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<G>));
}

template <typename F>
void reg_compare(OpRegistry& r, const std::string& base) {
  r.kernels("_" + base).set_attr(DeviceType::kCUDA, FCompute(binary_compute<F>));
  r.kernels("broadcast_" + base).set_attr(DeviceType::kCUDA, FCompute(broadcast_compute<F>));
}

}  // namespace

void register_elemwise_binary_kernels(OpRegistry& r) {
  reg_arith<detail::AddF, detail::AddG>(r, "add", "elemwise_add");
  reg_arith<detail::SubF, detail::SubG>(r, "sub", "elemwise_sub");
  reg_arith<detail::MulF, detail::MulG>(r, "mul", "elemwise_mul");
  reg_arith<detail::DivF, detail::DivG>(r, "div", "elemwise_div");
  reg_arith<detail::PowF, detail::PowG>(r, "power", "_power");
  reg_arith<detail::MaxF, detail::MaxG>(r, "maximum", "_maximum");
  reg_arith<detail::MinF, detail::MinG>(r, "minimum", "_minimum");

  r.kernels("_backward_add").set_attr(DeviceType::kCUDA, FCompute(add_sub_backward_compute<false>));
  r.kernels("_backward_sub").set_attr(DeviceType::kCUDA, FCompute(add_sub_backward_compute<true>));
  r.kernels("_backward_mul")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<detail::MulG>));
  r.kernels("_backward_div")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<detail::DivG>));
  r.kernels("_backward_power")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<detail::PowG>));
  r.kernels("_backward_maximum")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<detail::MaxG>));
  r.kernels("_backward_minimum")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<detail::MinG>));

  reg_compare<detail::EqF>(r, "equal");
  reg_compare<detail::NeF>(r, "not_equal");
  reg_compare<detail::GtF>(r, "greater");
  reg_compare<detail::GeF>(r, "greater_equal");
  reg_compare<detail::LtF>(r, "lesser");
  reg_compare<detail::LeF>(r, "lesser_equal");
}

}  // namespace weft::cuda
