// Inference-time graph rewrites run by the executor when no gradient is requested.
#pragma once

#include "graph/graph.h"

namespace weft::graph {

/// Statistics of fuse_for_inference (counts of original nodes folded away, by kind).
struct FuseStats {
  int conv_bn = 0;    ///< BatchNorm nodes folded into the preceding convolution
  int conv_relu = 0;  ///< ReLU activations fused into a convolution as a post-op
  int conv_act = 0;   ///< other activations (sigmoid, tanh, softrelu, leaky, elu, clip) likewise
  int conv_sum = 0;   ///< elementwise adds fused into a convolution (oneDNN sum post-op)
  int fc_act = 0;     ///< activations fused into a FullyConnected as a post-op
  /// Fused nodes made (each replaces two or more original nodes).
  int fused_nodes = 0;
};

/// Returns `graph` rewritten for inference (Note [Inference fusion] in fuse.cc):
///  - Convolution [→ BatchNorm] [→ elementwise add] [→ activation] chains become one
///    `_fused_conv_bn_act` node (BatchNorm folded into the weights, the add and activation as
///    oneDNN post-ops);
///  - FullyConnected → activation becomes one `_fused_fc_act` node.
/// A chain is cut before any intermediate result that another node (or a head) also reads.
/// Results equal the unfused graph within float rounding. Pure function; thread-safe.
Graph fuse_for_inference(const Graph& graph, FuseStats* stats = nullptr);

}  // namespace weft::graph
