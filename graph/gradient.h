// The gradient pass: appends the backward graph built from each op's FGradient (the same
// definitions eager autograd uses), adding up gradients of entries used more than once as they
// are produced and giving zeros to inputs nothing flows back to.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace weft::graph {

struct GradientOptions {
  /// Variables (node ids) to differentiate with respect to. Empty: every argument that is not a
  /// data or label input is not inferable here, so the caller must say.
  std::vector<uint32_t> wrt;
};

/// The result: `graph` = forward nodes (same ids) + backward nodes; its heads are the forward
/// heads followed by one gradient per `wrt` variable.
struct GradientGraph {
  Graph graph;
  uint32_t num_forward_nodes = 0;
  size_t num_forward_heads = 0;
  /// Per forward head: the variable node fed the head's gradient, or -1 for heads that need none
  /// (loss heads, whose backward ignores the incoming gradient, get a ones-like variable anyway
  /// so that one signature fits every head).
  std::vector<int64_t> head_grad_nodes;
  /// Per wrt variable, the gradient entry in `graph`.
  std::vector<NodeEntry> grads;
};

/// Builds the backward graph of `forward` (which must be reindexed). Throws NotImplemented
/// naming the op when a node on a gradient path has no FGradient.
GradientGraph build_gradient(const Graph& forward, const GradientOptions& options);

}  // namespace weft::graph
