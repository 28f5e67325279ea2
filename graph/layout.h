// Layout propagation: which memory layout each entry of an inference graph has (plain, or a
// blocked / channels-last format a oneDNN kernel prefers), with reorder nodes where a consumer
// needs another layout than its producer writes (Note [Layout propagation] in graph/layout.cc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/infer.h"

namespace weft::graph {

/// The name of the op the pass inserts: one input, one output of the same shape and type, copied
/// from the input's layout into the output's (OpContext carries both).
inline constexpr const char* kLayoutReorderOp = "_layout_reorder";

/// What the pass did.
struct LayoutStats {
  size_t reorders = 0;      ///< reorder nodes in the graph
  size_t to_plain = 0;      ///< ... of which write the plain layout
  size_t from_plain = 0;    ///< ... of which read the plain layout
  size_t entries = 0;       ///< entries in a layout other than plain (reorder outputs included)
  size_t padded_bytes = 0;  ///< bytes those entries take beyond their plain size (padding)
};

/// The graph with its layouts.
struct LayoutPlan {
  /// The input graph with reorder nodes inserted, each just before its first consumer. Variable
  /// nodes keep their names; node ids shift.
  Graph graph;
  /// Inference of `graph`, taken over from the input's (a reorder keeps shape and type).
  InferResult inferred;
  /// Per entry id of `graph`: its layout (null = plain). Variables and heads are plain.
  std::vector<LayoutRef> layouts;
  LayoutStats stats;

  /// Per entry id: the bytes the entry takes in its layout, 0 for plain entries (for
  /// GraphPlanOptions::entry_bytes).
  std::vector<size_t> entry_bytes() const;
};

/// Whether this build can give entries layouts other than plain (it has oneDNN).
bool layouts_available();

/// Assigns layouts to the entries of `graph`, an inference graph to run on the CPU, whose
/// inference `inferred` is complete: each op with FInferLayout says what it reads and writes
/// given what its inputs' producers write; everything else reads and writes plain. Inserts a
/// reorder wherever a consumer reads another layout than the producer writes (one per entry and
/// layout, shared by the consumers) and before every head that is not plain. Without oneDNN the
/// result is the input graph with every entry plain. Throws what an op's FInferLayout throws.
LayoutPlan propagate_layouts(const Graph& graph, const InferResult& inferred);

/// One line per non-plain entry and per reorder (for `weft plan` style listings).
std::string describe_layouts(const LayoutPlan& plan);

}  // namespace weft::graph
