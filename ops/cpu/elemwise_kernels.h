// Private helpers of the CPU elementwise and reduction kernels: req-aware loops, the walk of a
// broadcast plan (ops/defs/elemwise.h), and the registration entry points of the kernel files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/defs/elemwise.h"
#include "ops/defs/elemwise_math.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

void register_elemwise_binary_kernels(OpRegistry& r);  // ops/cpu/elemwise_binary.cc
void register_elemwise_unary_kernels(OpRegistry& r);   // ops/cpu/elemwise_unary.cc
void register_elemwise_scalar_kernels(OpRegistry& r);  // ops/cpu/elemwise_scalar.cc

/// Below this many elements a kernel runs on the calling thread.
inline constexpr int64_t kElemwiseParallelMin = 1 << 16;
/// Elements per parallel chunk.
inline constexpr int64_t kElemwiseGrain = 1 << 15;

/// Runs body(begin, end) over [0, n): inline for small n, else with parallel_for.
template <typename Body>
inline void run_range(int64_t n, int threads, Body&& body) {
  if (n < kElemwiseParallelMin || threads <= 1) {
    if (n > 0) body(int64_t{0}, n);
  } else {
    parallel_for(n, kElemwiseGrain, threads, body);
  }
}

/// out[i] (=|+=) f(a[i]) for i in [0, n). `out` may alias `a` (same index read before write).
template <typename DT, typename OT, typename F>
inline void map1(int64_t n, const DT* a, OT* out, OpReq req, int threads, F f) {
  if (req == OpReq::kNull) return;
  if (req == OpReq::kAdd) {
    run_range(n, threads, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] += static_cast<OT>(f(a[i]));
    });
  } else {
    run_range(n, threads, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = static_cast<OT>(f(a[i]));
    });
  }
}

/// out[i] (=|+=) f(a[i], b[i]).
template <typename DT, typename OT, typename F>
inline void map2(int64_t n, const DT* a, const DT* b, OT* out, OpReq req, int threads, F f) {
  if (req == OpReq::kNull) return;
  if (req == OpReq::kAdd) {
    run_range(n, threads, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] += static_cast<OT>(f(a[i], b[i]));
    });
  } else {
    run_range(n, threads, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = static_cast<OT>(f(a[i], b[i]));
    });
  }
}

/// out[i] (=|+=) f(a[i], b[i], c[i]).
template <typename DT, typename F>
inline void map3(int64_t n, const DT* a, const DT* b, const DT* c, DT* out, OpReq req, int threads,
                 F f) {
  if (req == OpReq::kNull) return;
  if (req == OpReq::kAdd) {
    run_range(n, threads, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] += f(a[i], b[i], c[i]);
    });
  } else {
    run_range(n, threads, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = f(a[i], b[i], c[i]);
    });
  }
}

/// out (=|+=) value, n elements.
template <typename DT>
inline void fill(int64_t n, DT* out, DT value, OpReq req) {
  if (req == OpReq::kNull) return;
  if (req == OpReq::kAdd) {
    for (int64_t i = 0; i < n; ++i) out[i] += value;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = value;
  }
}

/// Calls body(loff, roff, big_off) for each row (all dims but the last) in [row_begin, row_end);
/// the row covers plan.inner() elements of the big shape starting at big_off.
template <typename Body>
inline void for_each_row(const BroadcastPlan& p, int64_t row_begin, int64_t row_end, Body&& body) {
  const int outer = p.ndim - 1;
  const int64_t inner = p.inner();
  int64_t idx[BroadcastPlan::kMaxDims];
  int64_t loff = 0, roff = 0, rem = row_begin;
  for (int d = outer - 1; d >= 0; --d) {
    idx[d] = rem % p.shape[d];
    rem /= p.shape[d];
    loff += idx[d] * p.lstride[d];
    roff += idx[d] * p.rstride[d];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    body(loff, roff, row * inner);
    for (int d = outer - 1; d >= 0; --d) {
      ++idx[d];
      loff += p.lstride[d];
      roff += p.rstride[d];
      if (idx[d] < p.shape[d]) break;
      loff -= p.lstride[d] * p.shape[d];
      roff -= p.rstride[d] * p.shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace weft::detail
