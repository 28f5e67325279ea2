// Param struct of dot and batch_dot, shared by the definitions (ops/defs/dot.cc), the CPU kernels
// (ops/cpu/dot.cc) and the CUDA ones (ops/cuda/dot.cc).
#pragma once

#include <cstdint>
#include <optional>

#include "ops/params.h"

namespace weft::detail {

enum class StorageType { kDefault, kCsr, kRowSparse };

struct DotParam {
  bool transpose_a = false;
  bool transpose_b = false;
  std::optional<StorageType> forward_stype;
  static void declare(ParamSchema<DotParam>& s) {
    using P = DotParam;
    s.field("transpose_a", &P::transpose_a)
        .set_default(false)
        .describe("transpose the first input");
    s.field("transpose_b", &P::transpose_b)
        .set_default(false)
        .describe("transpose the second input");
    s.optional_enum_field("forward_stype", &P::forward_stype,
                          {{"default", StorageType::kDefault},
                           {"csr", StorageType::kCsr},
                           {"row_sparse", StorageType::kRowSparse}})
        .set_default(std::nullopt)
        .describe("desired output storage type (accepted; outputs are always dense)");
  }
};

/// The GEMM of a dot: lhs memory (ra × ca), rhs memory (rb × cb), output M × N, contraction K.
/// The CPU and CUDA kernels both use it.
struct DotGemm {
  int64_t ra, ca, rb, cb, m, n, k;
};
inline DotGemm dot_gemm(const DotParam& p, const Shape& l, const Shape& r) {
  DotGemm g{};
  const int ln = l.ndim(), rn = r.ndim();
  if (p.transpose_a) {
    g.ra = l[0];
    g.ca = l.prod(1, ln);
  } else {
    g.ra = l.prod(0, ln - 1);
    g.ca = l[ln - 1];
  }
  if (p.transpose_b) {
    g.rb = r.prod(0, rn - 1);
    g.cb = r[rn - 1];
  } else {
    g.rb = r[0];
    g.cb = r.prod(1, rn);
  }
  g.m = p.transpose_a ? g.ca : g.ra;
  g.k = p.transpose_a ? g.ra : g.ca;
  g.n = p.transpose_b ? g.rb : g.cb;
  return g;
}

}  // namespace weft::detail
