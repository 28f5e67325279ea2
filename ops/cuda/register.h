// The CUDA kernel families. Each adds a CUDA FCompute (or stateful kernel) to operators that the
// device-neutral definitions in ops/ registered, by name: r.kernels("exp").set_attr(...).
#pragma once

#include "ops/op.h"

namespace weft::cuda {

// elemwise.cu, elemwise_binary.cu, elemwise_scalar.cu, broadcast.cu: unary math, elemwise and
// broadcast binary ops, scalar ops, comparisons, clip, where, add_n, Cast, _copy, BlockGrad and
// their backward ops.
void register_elemwise_kernels(OpRegistry& r);
// init_ops.cu: _zeros, _ones, _full, _arange, zeros_like, ones_like, _random_uniform,
// _random_normal.
void register_init_kernels(OpRegistry& r);
// reduce.cu: sum, mean, max, min, argmax, argmin, softmax, log_softmax, SoftmaxActivation and
// their backward ops.
void register_reduce_kernels(OpRegistry& r);
// shape.cu: Reshape, Flatten, expand_dims, squeeze, transpose, slice, slice_axis, Concat, stack,
// SliceChannel, tile, broadcast_to, Crop, _layout_reorder and their backward ops.
void register_shape_kernels(OpRegistry& r);
// indexing_ops.cu: Embedding, one_hot, pick, take-like ops and their backward ops.
void register_indexing_kernels(OpRegistry& r);
// fully_connected.cc: FullyConnected, _fused_fc_act and backward (cuBLAS GEMMs, blas.cc).
void register_fully_connected_kernels(OpRegistry& r);
// dot.cc: dot, batch_dot and backward (cuBLAS GEMMs, blas.cc).
void register_dot_kernels(OpRegistry& r);
// conv.cc, conv_fused.cc, cudnn_nn.cc: Convolution, Deconvolution, _fused_conv_bn_act, Pooling,
// Activation, LeakyReLU, LRN, Dropout (cuDNN) and backward.
void register_cudnn_kernels(OpRegistry& r);
// norm.cu: BatchNorm, LayerNorm and the regression/softmax outputs and their backward ops.
void register_norm_kernels(OpRegistry& r);
// rnn.cc: RNN (cuDNN RNN) forward and backward.
void register_rnn_kernels(OpRegistry& r);
// misc.cu: optimizer updates, _contrib_CTCLoss, UpSampling, the _image_* ops, MakeLoss.
void register_misc_kernels(OpRegistry& r);
// image_crop_resize.cu: _image_crop, _backward_image_crop, _image_resize (called by
// register_misc_kernels).
void register_image_crop_resize_kernels(OpRegistry& r);

}  // namespace weft::cuda
