// cuDNN convolution in conv terms (ConvGeom of ops/defs/conv_common.h): x (batch, in_c, in),
// w (out_c, in_cg, k), y (batch, out_c, out). Convolution, Deconvolution (the roles swapped) and
// the fused convolution share these. Each call writes its output, or adds to it with `add`, on
// the op's stream. CUDA builds only.
#pragma once

#include "ops/defs/conv_common.h"
#include "ops/op.h"

namespace weft::cuda {

void cudnn_conv_forward(const OpContext& ctx, const detail::ConvGeom& g, DType dtype, const void* x,
                        const void* w, void* y, bool add);
void cudnn_conv_backward_data(const OpContext& ctx, const detail::ConvGeom& g, DType dtype,
                              const void* dy, const void* w, void* dx, bool add);
void cudnn_conv_backward_filter(const OpContext& ctx, const detail::ConvGeom& g, DType dtype,
                                const void* x, const void* dy, void* dw, bool add);
/// y[n, c, s] += b[c] for y of shape (batch, channels, size).
void cudnn_add_channel_bias(const OpContext& ctx, DType dtype, void* y, const void* b,
                            int64_t batch, int64_t channels, int64_t size);
/// db[c] (=, or += when `add`) Σ_{n, s} dy[n, c, s].
void cudnn_channel_bias_grad(const OpContext& ctx, DType dtype, const void* dy, int64_t batch,
                             int64_t channels, int64_t size, void* db, bool add);

}  // namespace weft::cuda
