// CUDA kernels of the binary elementwise ops: identical-shape (elemwise_add, _power, _equal, ...)
// and broadcast (broadcast_add, ...) arithmetic and comparisons, and their backward ops (the
// broadcast ones reduce over the broadcast axes, Note [Broadcast gradient reduction]).
#include <string>

#include "ops/cuda/elemwise_kernels.cuh"
#include "ops/cuda/register.h"

namespace weft::cuda {
namespace {

// ---- forward functors (C: the computation type)
// --------------------------------------------------

#define WEFT_BINARY_FUNCTOR(Name, expr)       \
  struct Name {                               \
    template <typename C>                     \
    __device__ C operator()(C a, C b) const { \
      return static_cast<C>(expr);            \
    }                                         \
  }

WEFT_BINARY_FUNCTOR(AddF, a + b);
WEFT_BINARY_FUNCTOR(SubF, a - b);
WEFT_BINARY_FUNCTOR(MulF, a* b);
WEFT_BINARY_FUNCTOR(DivF, safe_div(a, b));
WEFT_BINARY_FUNCTOR(PowF, any_pow(a, b));
WEFT_BINARY_FUNCTOR(MaxF, a > b ? a : b);
WEFT_BINARY_FUNCTOR(MinF, a < b ? a : b);
WEFT_BINARY_FUNCTOR(EqF, a == b);
WEFT_BINARY_FUNCTOR(NeF, a != b);
WEFT_BINARY_FUNCTOR(GtF, a > b);
WEFT_BINARY_FUNCTOR(GeF, a >= b);
WEFT_BINARY_FUNCTOR(LtF, a < b);
WEFT_BINARY_FUNCTOR(LeF, a <= b);
#undef WEFT_BINARY_FUNCTOR

// ---- backward functors: lhs/rhs gradient terms from (head gradient, lhs, rhs) -------------------

struct AddG {
  template <typename C>
  __device__ static C lhs(C g, C, C) {
    return g;
  }
  template <typename C>
  __device__ static C rhs(C g, C, C) {
    return g;
  }
};
struct SubG {
  template <typename C>
  __device__ static C lhs(C g, C, C) {
    return g;
  }
  template <typename C>
  __device__ static C rhs(C g, C, C) {
    return static_cast<C>(C(0) - g);
  }
};
struct MulG {
  template <typename C>
  __device__ static C lhs(C g, C, C b) {
    return static_cast<C>(g * b);
  }
  template <typename C>
  __device__ static C rhs(C g, C a, C) {
    return static_cast<C>(g * a);
  }
};
struct DivG {
  template <typename C>
  __device__ static C lhs(C g, C, C b) {
    return safe_div(g, b);
  }
  template <typename C>
  __device__ static C rhs(C g, C a, C b) {
    return safe_div(static_cast<C>(C(0) - g * a), static_cast<C>(b * b));
  }
};
struct PowG {  // d(a^b)/da = b a^(b-1); d(a^b)/db = a^b log(a); integers through double
  template <typename C>
  __device__ static C lhs(C g, C a, C b) {
    using D = std::conditional_t<std::is_floating_point_v<C>, C, double>;
    return static_cast<C>(D(g) * D(b) * pow(D(a), D(b) - D(1)));
  }
  template <typename C>
  __device__ static C rhs(C g, C a, C b) {
    using D = std::conditional_t<std::is_floating_point_v<C>, C, double>;
    return static_cast<C>(D(g) * pow(D(a), D(b)) * log(D(a)));
  }
};
struct MaxG {  // ties go to lhs
  template <typename C>
  __device__ static C lhs(C g, C a, C b) {
    return a >= b ? g : C(0);
  }
  template <typename C>
  __device__ static C rhs(C g, C a, C b) {
    return a < b ? g : C(0);
  }
};
struct MinG {
  template <typename C>
  __device__ static C lhs(C g, C a, C b) {
    return a <= b ? g : C(0);
  }
  template <typename C>
  __device__ static C rhs(C g, C a, C b) {
    return a > b ? g : C(0);
  }
};

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
  r.register_op(elem_name).set_attr(DeviceType::kCUDA, FCompute(binary_compute<F>), "cuda");
  r.register_op("broadcast_" + base)
      .set_attr(DeviceType::kCUDA, FCompute(broadcast_compute<F>), "cuda");
  r.register_op("_backward_broadcast_" + base)
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<G>), "cuda");
}

template <typename F>
void reg_compare(OpRegistry& r, const std::string& base) {
  r.register_op("_" + base).set_attr(DeviceType::kCUDA, FCompute(binary_compute<F>), "cuda");
  r.register_op("broadcast_" + base)
      .set_attr(DeviceType::kCUDA, FCompute(broadcast_compute<F>), "cuda");
}

}  // namespace

void register_elemwise_binary_kernels(OpRegistry& r) {
  reg_arith<AddF, AddG>(r, "add", "elemwise_add");
  reg_arith<SubF, SubG>(r, "sub", "elemwise_sub");
  reg_arith<MulF, MulG>(r, "mul", "elemwise_mul");
  reg_arith<DivF, DivG>(r, "div", "elemwise_div");
  reg_arith<PowF, PowG>(r, "power", "_power");
  reg_arith<MaxF, MaxG>(r, "maximum", "_maximum");
  reg_arith<MinF, MinG>(r, "minimum", "_minimum");

  r.register_op("_backward_add")
      .set_attr(DeviceType::kCUDA, FCompute(add_sub_backward_compute<false>), "cuda");
  r.register_op("_backward_sub")
      .set_attr(DeviceType::kCUDA, FCompute(add_sub_backward_compute<true>), "cuda");
  r.register_op("_backward_mul")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<MulG>), "cuda");
  r.register_op("_backward_div")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<DivG>), "cuda");
  r.register_op("_backward_power")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<PowG>), "cuda");
  r.register_op("_backward_maximum")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<MaxG>), "cuda");
  r.register_op("_backward_minimum")
      .set_attr(DeviceType::kCUDA, FCompute(binary_backward_compute<MinG>), "cuda");

  reg_compare<EqF>(r, "equal");
  reg_compare<NeF>(r, "not_equal");
  reg_compare<GtF>(r, "greater");
  reg_compare<GeF>(r, "greater_equal");
  reg_compare<LtF>(r, "lesser");
  reg_compare<LeF>(r, "lesser_equal");
}

}  // namespace weft::cuda
