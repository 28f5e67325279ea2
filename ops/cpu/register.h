// The CPU kernel families. Each adds CPU kernels (FCompute, stateful kernels, the oneDNN layouts a
// kernel takes) to operators that the device-neutral definitions in ops/defs/ registered, by name:
// r.kernels("exp").set_attr<FCompute>(DeviceType::kCPU, ...). The CUDA families in ops/cuda/
// do the same for cuda:N.
#pragma once

namespace weft {
class OpRegistry;
namespace cpu {

// Elementwise unary/binary/scalar ops, broadcasts, the layout kernels of add/mul (elemwise*.cc,
// layout_ops.cc).
void register_elemwise_kernels(OpRegistry& r);
// sum, mean, max, min, argmax, argmin, norm and their backward ops (reduce.cc).
void register_reduce_kernels(OpRegistry& r);
// Reshape and friends, Concat, stack, slice, transpose, tile, indexing ops (shape*.cc,
// indexing_ops.cc).
void register_shape_kernels(OpRegistry& r);
// Convolution, fused convolution, Deconvolution, Pooling, FullyConnected, dot, batch_dot.
void register_conv_dense_kernels(OpRegistry& r);
// BatchNorm, LayerNorm, softmax, the loss heads, Activation, LeakyReLU, Dropout, CTC loss.
void register_nn_norm_kernels(OpRegistry& r);
// The fused RNN (rnn.cc).
void register_rnn_kernels(OpRegistry& r);
// Creation ops: zeros, ones, full, arange, random draws (init.cc).
void register_init_kernels(OpRegistry& r);
// Optimizer updates (optimizer.cc).
void register_optimizer_kernels(OpRegistry& r);
// pick and its backward (pick.cc).
void register_pick_kernels(OpRegistry& r);
// The _image_* ops and resize (image*.cc).
void register_image_kernels(OpRegistry& r);

}  // namespace cpu
}  // namespace weft
