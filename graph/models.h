// Model builders written with the symbolic API, named the way MXNet's symbol examples name their
// layers: an MLP, ResNet v1, MobileNetV2, and an LSTM language model (unrolled or fused).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "graph/infer.h"
#include "graph/symbol.h"

namespace weft::graph::models {

/// data (N, 784) → [FullyConnected `fc<i>` → relu `relu<i>`] per hidden size → FullyConnected
/// → SoftmaxOutput `softmax`. Throws ValueError for a non-positive size.
Symbol mlp(int num_classes = 10, std::vector<int> hidden = {128, 64});

/// ResNet v1 (He et al. 2015, post-activation) for 224×224 images: conv 7×7/2 → BN → relu →
/// max pool 3×3/2 → four stages (basic blocks for depth 18 and 34, bottlenecks with the stride
/// on the first 1×1 convolution for 50, 101 and 152; projection shortcuts where the shape
/// changes) → global average pool → FullyConnected → SoftmaxOutput. Convolutions have no bias,
/// BatchNorm learns gamma (fix_gamma false). Throws ValueError for another depth.
Symbol resnet(int depth, int num_classes = 1000);

/// MobileNetV2 (Sandler et al. 2018) for 224×224 images: inverted residual blocks (1×1 expand →
/// depthwise 3×3 → linear 1×1 projection, each with BatchNorm; ReLU6 as clip(0, 6)), residual
/// elemwise_add where stride is 1 and the width is unchanged, 1×1 conv to 1280 → global average
/// pool → dropout 0.2 → FullyConnected → SoftmaxOutput. Widths scale by `multiplier`, rounded
/// to multiples of 8 as in the reference implementation.
Symbol mobilenet_v2(int num_classes = 1000, float multiplier = 1.0f);

/// A word-level LSTM language model: data (N, seq_len) token ids → Embedding `embed` →
/// `layers` LSTM layers of `hidden` units → FullyConnected over the vocabulary → SoftmaxOutput,
/// one prediction per (time, batch) position, rows time-major: output (seq_len·N, vocab).
///
/// fused = false unrolls the recurrence over time like MXNet's char-rnn example: SliceChannel
/// over time, per step and layer two FullyConnected (`t<t>_l<l>_i2h`, `_h2h`) sharing the
/// layer's weights, a 4-way SliceChannel into gates [i, f, g, o], sigmoid/tanh Activations and
/// elemwise ops. Initial states are the variables `l<l>_init_c` and `l<l>_init_h` (N, hidden).
/// fused = true uses one RNN op (mode lstm) named `lstm`, with its packed `lstm_parameters`
/// and initial states `lstm_state`, `lstm_state_cell` (layers, N, hidden). Both variants use
/// the same gate order and have the same number of learned values.
Symbol lstm_lm(int vocab, int embed, int hidden, int seq_len, int layers = 2, bool fused = false);

/// Shapes of lstm_lm's inputs for a batch: data and softmax_label (batch, seq_len) and the
/// initial states.
InferInputs lstm_lm_inputs(int64_t batch, int hidden, int seq_len, int layers = 2,
                           bool fused = false);

/// The bundled models by name: "mlp", "resnet18", "resnet50", "mobilenetv2", "lstm_lm",
/// "lstm_lm_fused" (the LSTM models in the PTB "small" configuration: vocabulary 10000,
/// embedding and hidden 200, 35 steps, 2 layers). Built in a fresh NameScope, so repeated builds
/// are identical. Throws ValueError for an unknown name, listing the known ones.
Symbol build(std::string_view name);
/// The known names, in the order above.
std::vector<std::string> model_names();
/// Input shapes for build(name) at batch size `batch`: data, softmax_label and, for the LSTM
/// models, the initial states. Throws ValueError for an unknown name or a batch below 1.
InferInputs default_inputs(std::string_view name, int64_t batch);

}  // namespace weft::graph::models
