// Inference-time rewrites (see fuse.h).
//
// Note [Inference fusion]
// A chain starts at a Convolution (or FullyConnected) and grows, one consumer at a time, through
//   BatchNorm (convolution only; axis 1, no mean/var outputs read): folded into the weights;
//   elementwise add (elemwise_add, or broadcast_add, convolution only) of any other entry: the
//     oneDNN sum post-op, accumulating into an output that holds the other addend (the fused op
//     lets the planner give its output the addend's memory in place, FInplaceOption, and copies
//     the addend otherwise); broadcast_add keeps NumPy broadcasting in a second pass when the
//     shapes differ at run time (the rewrite runs before shapes are known);
//   an activation (Activation relu/sigmoid/tanh/softrelu, LeakyReLU leaky/elu, clip, and the
//     relu/sigmoid/tanh ops): a oneDNN eltwise post-op; LeakyReLU prelu (convolution only): a
//     oneDNN prelu post-op reading the slopes input;
// in that order, each step optional. It grows only while the current result has exactly one
// reader, is not a head and is no node's control dependency, so no intermediate value that anyone
// could observe disappears. The fused node is emitted where the chain's last node was: every input
// of the chain (the convolution's, BatchNorm's parameters, the other addend) comes before it in
// node order, so the rewritten graph stays topologically sorted. It takes the convolution's (or
// FullyConnected's) name: errors about its shapes name the node whose attributes they concern.
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

bool is_op(const Node& n, std::string_view name) { return n.op && n.op->name() == name; }

/// The post-op form of an activation node: (__act_type__, __act_alpha__, __act_beta__), and for
/// prelu its slopes (an input of the fused node).
struct ActSpec {
  std::string type, alpha = "0", beta = "0";
  std::optional<NodeEntry> slopes;
};

std::optional<ActSpec> activation_of(const Node& n) {
  if (n.op && n.op->name() == "LeakyReLU" && n.inputs.size() == 2 &&
      attr_or(n, "act_type", "leaky") == "prelu") {
    ActSpec a{"prelu"};
    a.slopes = n.inputs[1];
    return a;
  }
  if (!n.op || n.inputs.size() != 1) return std::nullopt;
  const std::string& op = n.op->name();
  if (op == "relu" || op == "sigmoid" || op == "tanh") return ActSpec{op};
  if (op == "Activation") {
    const std::string t = attr_or(n, "act_type", "");
    if (t == "relu" || t == "sigmoid" || t == "tanh" || t == "softrelu") return ActSpec{t};
    return std::nullopt;
  }
  if (op == "LeakyReLU") {
    const std::string t = attr_or(n, "act_type", "leaky");
    if (t != "leaky" && t != "elu") return std::nullopt;
    return ActSpec{t, attr_or(n, "slope", "0.25")};
  }
  if (op == "clip") {
    if (!n.attrs.count("a_min") || !n.attrs.count("a_max")) return std::nullopt;
    return ActSpec{"clip", n.attrs.at("a_min"), n.attrs.at("a_max")};
  }
  return std::nullopt;
}

// A chain that becomes one node (Note [Inference fusion]).
struct Chain {
  uint32_t head = 0;  // the Convolution / FullyConnected
  std::optional<uint32_t> bn, add, act;
  NodeEntry addend;
  bool broadcast = false;
  ActSpec act_spec;
  uint32_t tail() const { return act ? *act : add ? *add : bn ? *bn : head; }
};

class Fuser {
 public:
  explicit Fuser(const Graph& g) : g_(g), refs_(g.entry_ref_counts()) {
    blocked_.assign(g.num_entries(), false);
    for (const NodeEntry& h : g.heads) blocked_[g.entry_id(h)] = true;
    consumer_.assign(g.nodes.size(), -1);
    ctrl_target_.assign(g.nodes.size(), false);
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
      for (const NodeEntry& e : g.nodes[nid].inputs) {
        if (e.index == 0) consumer_[e.node] = nid;
      }
      for (uint32_t c : g.nodes[nid].control_deps) ctrl_target_[c] = true;
    }
    claimed_.assign(g.nodes.size(), false);
  }

  /// The only reader of output 0 of `nid`, when the chain may grow through it.
  std::optional<uint32_t> next(uint32_t nid) const {
    const uint32_t eid = g_.entry_id(nid, 0);
    if (refs_[eid] != 1 || blocked_[eid] || ctrl_target_[nid] || consumer_[nid] < 0)
      return std::nullopt;
    const auto c = static_cast<uint32_t>(consumer_[nid]);
    if (claimed_[c]) return std::nullopt;
    return c;
  }

  std::optional<Chain> conv_chain(uint32_t nid) {
    const Node& conv = g_.nodes[nid];
    if (!is_op(conv, "Convolution") || claimed_[nid]) return std::nullopt;
    const std::string layout = attr_or(conv, "layout", "None");
    if (layout != "None" && layout != "NCHW" && layout != "NCW" && layout != "NCDHW")
      return std::nullopt;
    Chain c;
    c.head = nid;
    uint32_t cur = nid;
    if (auto n = next(cur); n && batch_norm_foldable(*n)) cur = *(c.bn = *n);
    if (auto n = next(cur)) {
      const Node& add = g_.nodes[*n];
      const bool bcast = is_op(add, "broadcast_add");
      if ((is_op(add, "elemwise_add") || bcast) && add.inputs.size() == 2) {
        const bool first = add.inputs[0].node == cur && add.inputs[0].index == 0;
        const NodeEntry other = add.inputs[first ? 1 : 0];
        if (!(other.node == cur && other.index == 0)) {
          c.add = *n;
          c.addend = other;
          c.broadcast = bcast;
          cur = *n;
        }
      }
    }
    if (auto n = next(cur)) {
      if (auto spec = activation_of(g_.nodes[*n]); spec && g_.nodes[*n].inputs[0].node == cur &&
                                                   !(spec->slopes && spec->slopes->node == cur)) {
        c.act = *n;
        c.act_spec = *spec;
      }
    }
    if (!c.bn && !c.add && !c.act) return std::nullopt;
    claim(c);
    return c;
  }

  std::optional<Chain> fc_chain(uint32_t nid) {
    if (!is_op(g_.nodes[nid], "FullyConnected") || claimed_[nid]) return std::nullopt;
    const auto n = next(nid);
    if (!n) return std::nullopt;
    const auto spec = activation_of(g_.nodes[*n]);
    if (!spec || spec->slopes) return std::nullopt;  // (no prelu post-op on inner products)
    Chain c;
    c.head = nid;
    c.act = *n;
    c.act_spec = *spec;
    claim(c);
    return c;
  }

 private:
  bool batch_norm_foldable(uint32_t nid) const {
    const Node& bn = g_.nodes[nid];
    if (!is_op(bn, "BatchNorm") || bn.inputs.size() != 5) return false;
    if (attr_or(bn, "axis", "1") != "1" || parse_bool(attr_or(bn, "output_mean_var", "False")))
      return false;
    return refs_[g_.entry_id(nid, 1)] == 0 && refs_[g_.entry_id(nid, 2)] == 0;
  }

  void claim(const Chain& c) {
    for (const auto& m : {std::optional<uint32_t>(c.head), c.bn, c.add, c.act}) {
      if (m) claimed_[*m] = true;
    }
  }

  const Graph& g_;
  std::vector<uint32_t> refs_;
  std::vector<bool> blocked_;      // per entry: a head
  std::vector<int64_t> consumer_;  // per node: a reader of its output 0
  std::vector<bool> ctrl_target_;  // per node: some node's control dependency
  std::vector<bool> claimed_;      // per node: in a chain already
};

}  // namespace

Graph fuse_for_inference(const Graph& in, FuseStats* stats) {
  FuseStats st;
  Fuser fuser(in);
  // The chains, by their last node.
  std::vector<std::optional<Chain>> chain_at(in.nodes.size());
  std::vector<bool> folded(in.nodes.size(), false);  // emitted as part of a chain
  for (uint32_t nid = 0; nid < in.nodes.size(); ++nid) {
    std::optional<Chain> c = fuser.conv_chain(nid);
    if (!c) c = fuser.fc_chain(nid);
    if (!c) continue;
    for (const auto& m : {std::optional<uint32_t>(c->head), c->bn, c->add, c->act}) {
      if (m) folded[*m] = true;
    }
    chain_at[c->tail()] = std::move(c);
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
    if (chain_at[nid]) {
      const Chain& c = *chain_at[nid];
      const Node& head = in.nodes[c.head];
      const bool conv = is_op(head, "Convolution");
      Node f;
      f.op = &get_op(conv ? "_fused_conv_bn_act" : "_fused_fc_act");
      f.name = head.name;
      f.attrs = head.attrs;
      for (const NodeEntry& e : head.inputs) f.inputs.push_back(mapped(e));
      if (conv) {
        f.attrs["__with_bn__"] = c.bn ? "True" : "False";
        if (c.bn) {
          const Node& bn = in.nodes[*c.bn];
          f.attrs["__bn_eps__"] = attr_or(bn, "eps", "0.001");
          f.attrs["__bn_fix_gamma__"] = attr_or(bn, "fix_gamma", "True");
          for (size_t i = 1; i < 5; ++i) f.inputs.push_back(mapped(bn.inputs[i]));
          ++st.conv_bn;
        }
        if (c.add) {
          f.attrs["__with_sum__"] = "True";
          if (c.broadcast) f.attrs["__sum_broadcast__"] = "True";
          f.inputs.push_back(mapped(c.addend));
          ++st.conv_sum;
        }
      }
      f.attrs["__act_type__"] = c.act ? c.act_spec.type : "none";
      if (c.act) {
        f.attrs["__act_alpha__"] = c.act_spec.alpha;
        f.attrs["__act_beta__"] = c.act_spec.beta;
        if (c.act_spec.slopes) f.inputs.push_back(mapped(*c.act_spec.slopes));
        if (!conv) {
          ++st.fc_act;
        } else if (c.act_spec.type == "relu") {
          ++st.conv_relu;
        } else {
          ++st.conv_act;
        }
      }
      for (const auto& m : {std::optional<uint32_t>(c.head), c.bn, c.add, c.act}) {
        if (!m) continue;
        for (uint32_t d : in.nodes[*m].control_deps) f.control_deps.push_back(remap[d].at(0).node);
      }
      const uint32_t fid = out.add_node(std::move(f));
      ++st.fused_nodes;
      // Every member's visible results become the fused output (BN's hidden outputs are unused).
      for (const auto& m : {std::optional<uint32_t>(c.head), c.bn, c.add, c.act}) {
        if (m) remap[*m].assign(in.nodes[*m].num_outputs(), NodeEntry{fid, 0, 0});
      }
      continue;
    }
    if (folded[nid]) continue;  // emitted with its chain, at the chain's last node
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
