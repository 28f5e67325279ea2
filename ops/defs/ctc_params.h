// Param struct of _contrib_CTCLoss, shared by its CPU kernel (ops/ctc_loss.cc) and the CUDA one.
#pragma once

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

}  // namespace weft::detail
