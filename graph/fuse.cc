// Inference-time rewrites (see fuse.h).
#include "graph/fuse.h"

#include <optional>

#include "base/error.h"
#include "ops/params.h"

namespace weft::graph {
namespace {

std::string attr_or(const Node& n, const char* key, const char* fallback) {
  auto it = n.attrs.find(key);
  return it == n.attrs.end() ? fallback : it->second;
}

// A Convolution → BatchNorm (→ ReLU) chain that can become one node.
struct Chain {
  uint32_t conv = 0, bn = 0;
  std::optional<uint32_t> relu;
};

}  // namespace

Graph fuse_for_inference(const Graph& in, FuseStats* stats) {
  FuseStats st;
  const std::vector<uint32_t> refs = in.entry_ref_counts();
  std::vector<bool> is_head(in.num_entries(), false);
  for (const NodeEntry& h : in.heads) is_head[in.entry_id(h)] = true;
  // The single consumer of each node's output 0 (when it has exactly one).
  std::vector<int64_t> consumer(in.nodes.size(), -1);
  for (uint32_t nid = 0; nid < in.nodes.size(); ++nid) {
    for (const NodeEntry& e : in.nodes[nid].inputs) {
      if (e.index == 0) consumer[e.node] = nid;
    }
  }

  // Find the chains: role per node (0 none, 1 conv folded away, 2 BN → fused, 3 relu folded away).
  std::vector<int> role(in.nodes.size(), 0);
  std::vector<Chain> chain_of(in.nodes.size());
  for (uint32_t nid = 0; nid < in.nodes.size(); ++nid) {
    const Node& bn = in.nodes[nid];
    if (!bn.op || bn.op->name() != "BatchNorm" || bn.inputs.size() != 5) continue;
    const NodeEntry src = bn.inputs[0];
    const Node& conv = in.nodes[src.node];
    if (!conv.op || conv.op->name() != "Convolution" || src.index != 0) continue;
    if (refs[in.entry_id(src)] != 1 || is_head[in.entry_id(src)]) continue;
    if (attr_or(bn, "axis", "1") != "1" || parse_bool(attr_or(bn, "output_mean_var", "False")))
      continue;
    if (refs[in.entry_id(nid, 1)] != 0 || refs[in.entry_id(nid, 2)] != 0) continue;
    const std::string layout = attr_or(conv, "layout", "None");
    if (layout != "None" && layout != "NCHW" && layout != "NCW" && layout != "NCDHW") continue;
    Chain c{src.node, nid, std::nullopt};
    const uint32_t out = in.entry_id(nid, 0);
    if (refs[out] == 1 && !is_head[out] && consumer[nid] >= 0) {
      const Node& act = in.nodes[consumer[nid]];
      if (act.op && act.op->name() == "Activation" && attr_or(act, "act_type", "") == "relu") {
        c.relu = static_cast<uint32_t>(consumer[nid]);
      }
    }
    role[c.conv] = 1;
    role[nid] = 2;
    if (c.relu) role[*c.relu] = 3;
    chain_of[nid] = c;
  }

  Graph out;
  out.attrs = in.attrs;
  std::vector<std::vector<NodeEntry>> remap(in.nodes.size());
  auto mapped = [&](const NodeEntry& e) {
    NodeEntry m = remap[e.node].at(e.index);
    m.version = e.version;
    return m;
  };
  for (uint32_t nid = 0; nid < in.nodes.size(); ++nid) {
    const Node& n = in.nodes[nid];
    if (role[nid] == 1 || role[nid] == 3) continue;  // emitted as part of their chain
    if (role[nid] == 2) {
      const Chain& c = chain_of[nid];
      const Node& conv = in.nodes[c.conv];
      Node f;
      f.op = &get_op("_fused_conv_bn_act");
      f.name = conv.name;
      f.attrs = conv.attrs;
      f.attrs["__bn_eps__"] = attr_or(n, "eps", "0.001");
      f.attrs["__bn_fix_gamma__"] = attr_or(n, "fix_gamma", "True");
      f.attrs["__act_type__"] = c.relu ? "relu" : "none";
      for (const NodeEntry& e : conv.inputs) f.inputs.push_back(mapped(e));
      for (size_t i = 1; i < 5; ++i) f.inputs.push_back(mapped(n.inputs[i]));
      const uint32_t fid = out.add_node(std::move(f));
      // The chain's visible results all become the fused output (BN's hidden outputs are unused).
      remap[c.conv] = {NodeEntry{fid, 0, 0}};
      remap[nid] = {NodeEntry{fid, 0, 0}, NodeEntry{fid, 0, 0}, NodeEntry{fid, 0, 0}};
      if (c.relu) {
        remap[*c.relu] = {NodeEntry{fid, 0, 0}};
        ++st.conv_relu;
      }
      ++st.conv_bn;
      continue;
    }
    Node copy = n;
    for (NodeEntry& e : copy.inputs) e = mapped(e);
    for (uint32_t& c : copy.control_deps) c = remap[c].at(0).node;
    const uint32_t id = out.add_node(std::move(copy));
    for (int o = 0; o < n.num_outputs(); ++o)
      remap[nid].push_back(NodeEntry{id, static_cast<uint32_t>(o), 0});
  }
  for (const NodeEntry& h : in.heads) out.heads.push_back(mapped(h));
  out.reindex();
  if (stats) *stats = st;
  return out;
}

}  // namespace weft::graph
