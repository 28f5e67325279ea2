// Param struct of dot and batch_dot, shared by the CPU kernels (ops/dot.cc) and the CUDA ones
// (ops/cuda/blas.cc).
#pragma once

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

}  // namespace weft::detail
