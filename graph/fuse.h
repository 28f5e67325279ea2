// Inference-time graph rewrites run by the executor when no gradient is requested.
#pragma once

#include "graph/graph.h"

namespace weft::graph {

/// Statistics of fuse_for_inference.
struct FuseStats {
  int conv_bn = 0;    ///< BatchNorm nodes folded into the preceding convolution
  int conv_relu = 0;  ///< ReLU activations fused into the convolution as a post-op
};

/// Returns `graph` rewritten for inference: Convolution → BatchNorm (→ ReLU) chains whose
/// intermediate results nothing else reads become one `_fused_conv_bn_act` node. Results equal the
/// unfused graph within float rounding.
Graph fuse_for_inference(const Graph& graph, FuseStats* stats = nullptr);

}  // namespace weft::graph
