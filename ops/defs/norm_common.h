// Private helpers of the definitions of the normalisation / softmax / activation / dropout / CTC
// op group: the registration functions of its parts and the inference helpers they share.
#pragma once

#include <utility>
#include <vector>

#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {

// Registration of the group's parts (each in its own file); register_nn_norm_ops calls them all.
void register_batch_norm_ops(OpRegistry& r);  ///< ops/defs/batch_norm.cc: BatchNorm
void register_layer_norm_ops(OpRegistry& r);  ///< ops/defs/layer_norm.cc: LayerNorm, LRN
void register_softmax_ops(
    OpRegistry& r);  ///< ops/defs/softmax.cc: softmax, log_softmax, SoftmaxActivation
void register_activation_ops(OpRegistry& r);  ///< ops/defs/activation.cc: Activation, LeakyReLU
void register_dropout_ops(OpRegistry& r);     ///< ops/defs/dropout.cc: Dropout
void register_ctc_loss_ops(OpRegistry& r);    ///< ops/defs/ctc_loss.cc: _contrib_CTCLoss

namespace norm {

/// FInplaceOption: output 0 may reuse input 0.
inline std::vector<std::pair<int, int>> inplace_first(const OpAttrs&) { return {{0, 0}}; }

/// Throws ValueError naming the op when `type` is not float32/float64.
inline void check_float_type(const OpAttrs& attrs, DType type, const char* what) {
  WEFT_CHECK(type == DType::kFloat32 || type == DType::kFloat64 || type == DType::kUnknown)
      << attrs.where() << ": " << what << " must be float32 or float64, got " << dtype_name(type);
}

/// Throws ValueError naming the op when `type` is not a floating type (float16 and bfloat16 run
/// on the GPU; the CPU kernels reject them with NotImplemented when called).
inline void check_any_float_type(const OpAttrs& attrs, DType type, const char* what) {
  WEFT_CHECK(type == DType::kFloat32 || type == DType::kFloat64 || type == DType::kFloat16 ||
             type == DType::kBFloat16 || type == DType::kUnknown)
      << attrs.where() << ": " << what << " must be a floating type, got " << dtype_name(type);
}

/// FInferType for ops whose inputs and outputs all share one floating type (float16 and bfloat16
/// included: CUDA runs them, the CPU kernels refuse them with NotImplemented). `what` names the
/// data in the message.
inline bool infer_one_float_type(const OpAttrs& attrs, std::vector<DType>& in,
                                 std::vector<DType>& out, const char* what) {
  DType t = DType::kUnknown;
  for (size_t i = 0; i < in.size() && t == DType::kUnknown; ++i) t = in[i];
  for (size_t o = 0; o < out.size() && t == DType::kUnknown; ++o) t = out[o];
  if (t == DType::kUnknown) return false;
  check_any_float_type(attrs, t, what);
  for (size_t i = 0; i < in.size(); ++i) assign_input_type(attrs, in, static_cast<int>(i), t);
  for (size_t o = 0; o < out.size(); ++o) assign_output_type(attrs, out, static_cast<int>(o), t);
  return true;
}

}  // namespace norm
}  // namespace weft::detail
