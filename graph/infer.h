// Shape and type inference over a graph: op rules applied forward and backward until nothing
// changes (a fixed point), with input shapes and a batch size supplied by the caller.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace weft::graph {

/// What the caller knows about the variables.
struct InferInputs {
  /// Shapes of variables by name (data inputs, or any argument). Override `__shape__`.
  std::map<std::string, Shape, std::less<>> shapes;
  /// Shapes used exactly as given, the batch size aside (arrays already bound).
  std::map<std::string, Shape, std::less<>> fixed_shapes;
  /// Types of variables by name. Default: `__dtype__`, else inferred (float32 when nothing says).
  std::map<std::string, DType, std::less<>> dtypes;
  /// When > 0: the batch size. It replaces the first dimension of every shape given in `shapes`
  /// and fills a first dimension that `__shape__` leaves unknown (0 or -1).
  int64_t batch = -1;
  /// When set, every entry inferred completely must fit in this device's memory
  /// (device_memory_capacity): a larger one throws OutOfMemory naming the node and its shape,
  /// before anything is allocated. Unset: only weft's size limit is checked (planning for
  /// another machine).
  std::optional<Device> device;
};

/// Inference results, indexed by entry id (Graph::entry_id).
struct InferResult {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  /// Entries whose shape (or dtype) is not fully known.
  uint32_t unknown_shapes = 0;
  uint32_t unknown_dtypes = 0;
  /// Sweeps until the fixed point.
  int passes = 0;

  bool complete() const { return unknown_shapes == 0 && unknown_dtypes == 0; }
};

/// Runs inference. Contradictions throw ShapeError naming the node (name, index, op) and shapes,
/// as does a shape beyond weft's size limit (Note [Checked sizes] in base/shape.h) from an input,
/// a `__shape__` attribute or an op's rule.
/// With `require_complete`, an entry left unknown throws ShapeError naming the first variable
/// whose shape is missing (what the caller must supply) or else the first node stuck.
InferResult infer_shapes_types(const Graph& graph, const InferInputs& inputs,
                               bool require_complete = true);

}  // namespace weft::graph
