// Device placement with fallback (see placement.h).
#include "graph/placement.h"

#include <map>

#include "base/error.h"

namespace weft::graph {

Placement place_devices(const Graph& in, const PlacementOptions& options) {
  WEFT_CHECK(in.row_ptr().size() == in.nodes.size() + 1)
      << "place_devices: the graph is not indexed";
  Placement out;
  Graph& g = out.graph;
  g.attrs = in.attrs;
  // Per input node: its index in the output graph, and its device.
  std::vector<uint32_t> remap(in.nodes.size());
  std::vector<Device> device_of(in.nodes.size());
  // Copies already made: (source node in output graph, output index, destination) → copy node.
  std::map<std::tuple<uint32_t, uint32_t, int, int>, uint32_t> copies;

  for (uint32_t nid = 0; nid < in.nodes.size(); ++nid) {
    const Node& n = in.nodes[nid];
    Device dev = options.target;
    if (n.is_variable()) {
      dev = options.variables_on_target ? options.target : Device::cpu();
    } else if (!n.op->has_kernel(options.target.type)) {
      bool found = false;
      for (const Device& f : options.fallbacks) {
        if (n.op->has_kernel(f.type)) {
          dev = f;
          found = true;
          break;
        }
      }
      WEFT_CHECK_AS(NotImplemented, found)
          << "place_devices: node " << nid << " ('" << n.name << "'): op " << n.op->name()
          << " has no kernel on " << to_string(options.target) << " nor on any fallback device";
      ++out.fallback_nodes;
    }
    Node copy = n;
    for (NodeEntry& e : copy.inputs) {
      const uint32_t src = remap[e.node];
      const Device src_dev = device_of[e.node];
      if (src_dev == dev) {
        e.node = src;
        continue;
      }
      const auto key = std::make_tuple(src, e.index, static_cast<int>(dev.type), dev.id);
      auto it = copies.find(key);
      if (it == copies.end()) {
        Node c;
        c.op = &get_op("_copy");
        c.name = g.nodes[src].name + "_to_" + to_string(dev);
        c.attrs = {{"__copy_to__", to_string(dev)}};
        c.inputs = {NodeEntry{src, e.index, 0}};
        const uint32_t cid = g.add_node(std::move(c));
        out.node_device.push_back(dev);
        ++out.copy_nodes;
        it = copies.emplace(key, cid).first;
      }
      e = NodeEntry{it->second, 0, e.version};
    }
    for (uint32_t& c : copy.control_deps) c = remap[c];
    remap[nid] = g.add_node(std::move(copy));
    device_of[nid] = dev;
    out.node_device.push_back(dev);
  }
  // Heads are delivered on the target device.
  for (const NodeEntry& h : in.heads) {
    NodeEntry e{remap[h.node], h.index, h.version};
    if (device_of[h.node] != options.target) {
      Node c;
      c.op = &get_op("_copy");
      c.name = g.nodes[e.node].name + "_to_" + to_string(options.target);
      c.attrs = {{"__copy_to__", to_string(options.target)}};
      c.inputs = {e};
      e = NodeEntry{g.add_node(std::move(c)), 0, 0};
      out.node_device.push_back(options.target);
      ++out.copy_nodes;
    }
    g.heads.push_back(e);
  }
  g.reindex();
  return out;
}

}  // namespace weft::graph
