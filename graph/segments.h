// Bulk execution: groups an executor's cached node operations into segments that run as one
// engine operation each (Note [Bulk segments]).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine.h"

namespace weft::graph {

/// What the segment builder needs to know of one node operation, in push order.
struct SegmentNode {
  bool async = false;                ///< completes through the engine's callback: runs alone
  std::vector<VarHandle> reads;      ///< as pushed (may repeat)
  std::vector<VarHandle> writes;     ///< as pushed (may repeat)
  std::vector<VarHandle> keyed_ins;  ///< input vars whose version a kernel reads (weight caches)
  int stream = -1;                   ///< the node's stream in a stream plan (graph/streams.h)
};

/// A run of consecutive node operations pushed as one engine operation.
struct Segment {
  uint32_t begin = 0;  ///< first node (index into the list given to build_segments)
  uint32_t end = 0;    ///< one past the last
  /// Union of the members' variables: a variable written by any member is a write; the rest
  /// are reads. Each variable appears once.
  std::vector<VarHandle> reads, writes;
};

/// Options of build_segments.
struct SegmentOptions {
  /// Most nodes in one segment (>= 1; 1 disables bulking).
  uint32_t max_nodes = 16;
  /// Only chains are merged: a node joins the open segment when it reads a variable the segment
  /// writes (it could not have started earlier anyway). Independent branches then stay separate
  /// engine operations, free to run on other workers (inter-op parallelism).
  bool chains_only = true;
};

/// Splits `nodes` (in push order) into consecutive segments. A segment ends before an async node
/// (which is always alone), before a node on another stream, before a node whose `keyed_ins`
/// include a variable the segment writes (its version only advances when the whole segment
/// completes), when it reaches `max_nodes`, and with `chains_only` before a node that does not read
/// what the segment writes.
std::vector<Segment> build_segments(const std::vector<SegmentNode>& nodes,
                                    const SegmentOptions& options);

}  // namespace weft::graph
