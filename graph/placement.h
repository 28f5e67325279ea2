// Device placement with fallback: each op node runs on the target device when its op has a
// kernel there, else on a fallback device that has one; a copy node is inserted on every edge
// that crosses devices.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace weft::graph {

struct PlacementOptions {
  Device target = Device::cpu();
  /// Tried in order for nodes whose op has no kernel on `target`.
  std::vector<Device> fallbacks = {Device::cpu()};
  /// Where variables (arguments, aux states) live; default: the target device.
  bool variables_on_target = true;
};

struct Placement {
  Graph graph;  ///< the input graph with copy nodes (op `_copy`, attribute `__copy_to__` =
                ///< destination device) inserted
  std::vector<Device> node_device;  ///< per node of `graph`
  int fallback_nodes = 0;           ///< op nodes that could not run on the target
  int copy_nodes = 0;               ///< copies inserted
};

/// Places `graph`. Throws NotImplemented naming the node and op when no device can run it.
Placement place_devices(const Graph& graph, const PlacementOptions& options);

}  // namespace weft::graph
