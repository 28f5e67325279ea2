// Multi-stream plans: which GPU compute stream runs each node of a bound graph, the cross-stream
// event edges that order them, and the happens-before relation the memory planner needs so that
// buffers alive at the same time on different streams never share memory (Note [Stream plans]).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace weft::graph {

/// Note [Stream plans]
/// Streams are numbered 0..num_streams-1; each runs its nodes in node order (the executor's
/// topological order). A node waits for a producer on another stream through an event edge, and
/// only where the graph has a dependency (an input or a control dependency) that the stream does
/// not already wait for through an earlier edge: the edges are transitively reduced with vector
/// clocks. Node `a` happens before node `b` when `b`'s clock covers `a` (ordered()).
struct StreamPlan {
  int num_streams = 1;
  /// Per node of the graph: its stream, or -1 for variables.
  std::vector<int32_t> node_stream;
  /// Per node: the producers on other streams it waits for (event edges), in no special order.
  std::vector<std::vector<uint32_t>> waits;
  /// Per node × stream (flattened, num_streams per node): the latest node of that stream known
  /// to complete before this node starts, -1 for none; on the node's own stream, the node itself.
  std::vector<int32_t> clock;
  /// Figures: streams that run at least one node, event edges, and cross-stream data edges
  /// before the reduction.
  int streams_used = 0;
  int event_edges = 0;
  int cross_edges = 0;

  /// Whether node `a` completes before node `b` starts (false when a == b, or for variables).
  bool ordered(uint32_t a, uint32_t b) const {
    if (a == b || node_stream[a] < 0 || node_stream[b] < 0) return false;
    return clock[static_cast<size_t>(b) * num_streams + node_stream[a]] >= static_cast<int32_t>(a);
  }
};

/// Assigns the op nodes of `graph` to at most `max_streams` streams (>= 1): a node continues the
/// stream of an input's producer when that producer is still the stream's last node (chains stay
/// on one stream); otherwise (the second branch of a fork, a node with no op inputs) it takes a
/// stream whose last node it already follows, else the stream idle longest. With one stream
/// every node is on stream 0 and the plan is the plain node order.
StreamPlan plan_streams(const Graph& graph, int max_streams);

/// Nodes of each stream in order (per stream, ascending node ids).
std::vector<std::vector<uint32_t>> stream_members(const StreamPlan& plan);

}  // namespace weft::graph
