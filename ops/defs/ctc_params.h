// Param struct of _contrib_CTCLoss, shared by its definition (ops/defs/ctc_loss.cc), its CPU
// kernel (ops/cpu/ctc_loss.cc) and the CUDA one; the CPU kernel's workspace size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/params.h"

namespace weft::detail {

enum class BlankLabel { kFirst, kLast };

struct CTCLossParam {
  bool use_data_lengths = false;
  bool use_label_lengths = false;
  BlankLabel blank_label = BlankLabel::kFirst;
  static void declare(ParamSchema<CTCLossParam>& s) {
    s.field("use_data_lengths", &CTCLossParam::use_data_lengths)
        .set_default(false)
        .describe("take per-sequence lengths from the data_lengths input");
    s.field("use_label_lengths", &CTCLossParam::use_label_lengths)
        .set_default(false)
        .describe("take per-sequence label lengths from the label_lengths input");
    s.enum_field("blank_label", &CTCLossParam::blank_label,
                 {{"first", BlankLabel::kFirst}, {"last", BlankLabel::kLast}})
        .set_default(BlankLabel::kFirst)
        .describe(
            "first: blank is channel 0, labels pad with 0; last: blank is the last channel, pad "
            "-1");
  }
  int num_inputs() const { return 2 + use_data_lengths + use_label_lengths; }
};

// The CPU kernel's workspace (FResourceRequest asks for it, the kernel checks it):
// log-probabilities (T*N*A) and alpha, beta (N*T*S each), as doubles.
inline size_t ctc_workspace_doubles(int64_t T, int64_t N, int64_t A, int64_t L) {
  const int64_t S = 2 * L + 1;
  return static_cast<size_t>(T * N * A + 2 * N * T * S);
}

}  // namespace weft::detail
