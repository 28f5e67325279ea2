// The CPU kernels of Dropout (inverted dropout with an optional mask shared along `axes`) and its
// backward op (definitions in ops/defs/dropout.cc).
#include <cstring>
#include <optional>
#include <random>

#include "ops/cpu/norm_kernels.h"
#include "ops/defs/dropout_params.h"
#include "ops/defs/seed_word.h"

namespace weft::cpu {
namespace {

using namespace weft::detail;  // the param structs
using norm::store;

/// Row-major strides of `mask` as seen from `data`'s index space (0 where the mask is broadcast).
std::vector<int64_t> broadcast_strides(const TensorView& data, const TensorView& mask) {
  std::vector<int64_t> st(static_cast<size_t>(data.ndim), 0);
  int64_t stride = 1;
  for (int d = data.ndim - 1; d >= 0; --d) {
    st[d] = mask.shape[d] == 1 && data.shape[d] != 1 ? 0 : stride;
    stride *= mask.shape[d];
  }
  return st;
}

/// out[k] = x[k] * m[mask index of k] with the mask broadcast along its size-1 dims.
template <typename DT>
void multiply_broadcast(const DT* x, const DT* m, DT* y, const TensorView& data,
                        const std::vector<int64_t>& mst, OpReq req, int threads) {
  const int nd = data.ndim;
  const int64_t n = data.size();
  parallel_for(n, 16384, threads, [&](int64_t a, int64_t b) {
    for (int64_t k = a; k < b; ++k) {
      int64_t rem = k, mi = 0;
      for (int d = nd - 1; d >= 0; --d) {
        mi += (rem % data.shape[d]) * mst[d];
        rem /= data.shape[d];
      }
      store(y + k, req, x[k] * m[mi]);
    }
  });
}

template <typename DT>
void dropout_forward_typed(const DropoutParam& p, const OpContext& ctx,
                           std::span<const TensorView> in, std::span<const OpReq> req,
                           std::span<const TensorView> out) {
  const DT* x = in[0].ptr<DT>();
  DT* y = out[0].ptr<DT>();
  const int64_t n = in[0].size();
  const int64_t mn = out[1].size();
  const bool active = (ctx.is_train || p.mode == DropoutMode::kAlways) && p.p > 0;
  if (!active) {
    if (req[1] != OpReq::kNull) {
      DT* m = out[1].ptr<DT>();
      for (int64_t k = 0; k < mn; ++k) m[k] = DT(1);
    }
    if (req[0] == OpReq::kAdd) {
      for (int64_t k = 0; k < n; ++k) y[k] += x[k];
    } else if (req[0] != OpReq::kNull && y != x) {
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(DT));
    }
    return;
  }
  WEFT_ICHECK(ctx.random != nullptr) << "Dropout: no random resource";
  const DT scale = p.p >= 1 ? DT(0) : static_cast<DT>(1.0 / (1.0 - p.p));
  std::bernoulli_distribution keep(std::max(0.0, 1.0 - p.p));
  // The mask goes to output 1, or to the workspace when that output is not wanted.
  DT* m = req[1] != OpReq::kNull ? out[1].ptr<DT>() : static_cast<DT*>(ctx.workspace);
  if (m == nullptr) {
    // Mask same shape as data and not wanted: draw on the fly.
    WEFT_ICHECK(mn == n) << "Dropout: a broadcast mask needs its workspace";
    for (int64_t k = 0; k < n; ++k)
      store(y + k, req[0], keep(ctx.random->engine) ? x[k] * scale : DT(0));
    return;
  }
  for (int64_t k = 0; k < mn; ++k) m[k] = keep(ctx.random->engine) ? scale : DT(0);
  if (req[0] == OpReq::kNull) return;
  if (mn == n) {
    for (int64_t k = 0; k < n; ++k) store(y + k, req[0], x[k] * m[k]);
  } else {
    multiply_broadcast(x, m, y, in[0], broadcast_strides(in[0], out[1]), req[0], ctx.num_threads);
  }
}

void dropout_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DropoutParam>();
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(),
                    dropout_forward_typed<DT>(p, ctx, in, req, out));
}

// in: out_grad, mask. out: data gradient = out_grad * mask (broadcast).
void dropout_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                      std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  WEFT_FLOAT_SWITCH(in[0].dtype(), DT, attrs.where(), {
    const DT* dy = in[0].ptr<DT>();
    const DT* m = in[1].ptr<DT>();
    DT* dx = out[0].ptr<DT>();
    if (in[1].size() == in[0].size()) {
      const OpReq r = req[0];
      parallel_for(in[0].size(), 16384, ctx.num_threads, [&](int64_t a, int64_t b) {
        for (int64_t k = a; k < b; ++k) store(dx + k, r, dy[k] * m[k]);
      });
    } else {
      multiply_broadcast(dy, m, dx, in[0], broadcast_strides(in[0], in[1]), req[0],
                         ctx.num_threads);
    }
  });
}

}  // namespace

void register_dropout_kernels(OpRegistry& r) {
  r.kernels("Dropout").set_attr<FCompute>(DeviceType::kCPU, dropout_forward);
  r.kernels("_backward_Dropout").set_attr<FCompute>(DeviceType::kCPU, dropout_backward);
  r.kernels("_random_seed_next")
      .set_attr<FCompute>(
          DeviceType::kCPU, [](const OpAttrs&, const OpContext&, std::span<const TensorView> in,
                               std::span<const OpReq> req, std::span<const TensorView> out) {
            if (req[0] == OpReq::kNull) return;
            WEFT_CHECK(req[0] != OpReq::kAdd) << "_random_seed_next: seed words cannot be added to";
            const auto* x = static_cast<const uint64_t*>(in[0].raw());
            auto* y = static_cast<uint64_t*>(out[0].raw());
            for (int64_t k = 0; k < in[0].size(); ++k) y[k] = seed_word::next(x[k]);
          });
}

}  // namespace weft::cpu
