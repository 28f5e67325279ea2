// The registration functions of the built-in operator groups, called once by OpRegistry::global().
#pragma once

namespace weft {
class OpRegistry;
namespace detail {

void register_builtin_ops(OpRegistry& r);

// The device-neutral definitions (ops/defs/): names, params, inference, gradients. The kernels
// come after them: ops/cpu/register.h, then (CUDA builds) ops/cuda/register.h.

// ops/defs/elemwise*.cc: arithmetic, unary, scalar, compare
void register_elemwise_ops(OpRegistry& r);
// ops/defs/reduce.cc: sum, mean, max, min, argmax
void register_reduce_ops(OpRegistry& r);
// ops/defs/shape_ops.cc: Reshape, Concat, slice, ...
void register_shape_ops(OpRegistry& r);
// ops/defs/nn_conv.cc: Convolution, Pooling, FC, dot, ...
void register_conv_dense_ops(OpRegistry& r);
// ops/defs/nn_norm.cc: BatchNorm, softmax, Dropout, ...
void register_nn_norm_ops(OpRegistry& r);
// ops/defs/rnn.cc: the fused RNN
void register_rnn_ops(OpRegistry& r);
// ops/defs/init_ops.cc: zeros, ones, arange, random
void register_init_ops(OpRegistry& r);
// ops/defs/optimizer.cc: sgd_update, sgd_mom_update, adam_update, adamw_update
void register_optimizer_ops(OpRegistry& r);
// ops/defs/pick.cc: pick, one_hot
void register_pick_ops(OpRegistry& r);
// ops/defs/image.cc: _image_to_tensor, _image_normalize, _image_flip_*, _image_random_flip_*,
// _image_crop (calls register_image_resize_op)
void register_image_ops(OpRegistry& r);
// ops/defs/image_resize.cc: _image_resize
void register_image_resize_op(OpRegistry& r);

}  // namespace detail
}  // namespace weft
