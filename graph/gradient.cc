// The gradient pass: runs each op's FGradient against a GradBuilder that appends graph nodes.
#include "graph/gradient.h"

#include <algorithm>

#include "base/error.h"

namespace weft::graph {
namespace {

class GraphGradBuilder final : public GradBuilder {
 public:
  GraphGradBuilder(Graph& g, std::vector<NodeEntry>& table, uint32_t fwd_nid,
                   std::vector<GradEntry> out_grads, int& counter)
      : g_(g),
        table_(table),
        fwd_nid_(fwd_nid),
        out_grads_(std::move(out_grads)),
        counter_(counter) {}

  const OpAttrs& attrs() const override { return *g_.nodes[fwd_nid_].op_attrs; }
  GradEntry input(int i) override { return add(g_.nodes[fwd_nid_].inputs.at(i)); }
  GradEntry output(int i) override {
    WEFT_CHECK(i >= 0 && i < g_.nodes[fwd_nid_].num_outputs())
        << "gradient: output " << i << " out of range";
    return add(NodeEntry{fwd_nid_, static_cast<uint32_t>(i), 0});
  }
  GradEntry out_grad(int i) override {
    GradEntry& e = out_grads_.at(i);
    if (!e.valid()) {
      // Nothing flows into this output: its gradient is zeros of its shape.
      e = emit1("zeros_like", {output(i)});
    }
    return e;
  }
  std::vector<GradEntry> emit(std::string_view op, std::vector<GradEntry> inputs,
                              AttrMap attrs) override {
    const Op& o = get_op(op);
    Node n;
    n.op = &o;
    n.attrs = std::move(attrs);
    n.op_attrs = std::make_shared<const OpAttrs>(o.make_attrs(n.attrs, name_for(o)));
    return append(std::move(n), inputs);
  }
  std::vector<GradEntry> emit_with_forward_attrs(std::string_view op,
                                                 std::vector<GradEntry> inputs) override {
    const Op& o = get_op(op);
    Node n;
    n.op = &o;
    const Node& fwd = g_.nodes[fwd_nid_];
    n.attrs = fwd.op_attrs->dict;
    n.op_attrs = std::make_shared<const OpAttrs>(o.make_attrs_like(*fwd.op_attrs));
    return append(std::move(n), inputs);
  }
  NodeEntry entry(GradEntry e) const { return table_.at(e.id); }

 private:
  std::string name_for(const Op& o) {
    return g_.nodes[fwd_nid_].name + "_" +
           (o.name().starts_with("_") ? o.name().substr(1) : o.name()) + std::to_string(counter_++);
  }
  GradEntry add(NodeEntry e) {
    table_.push_back(e);
    return {static_cast<int32_t>(table_.size() - 1)};
  }
  std::vector<GradEntry> append(Node n, const std::vector<GradEntry>& inputs) {
    if (n.name.empty())
      n.name = n.op_attrs->node_name.empty() ? name_for(*n.op) : n.op_attrs->node_name;
    for (GradEntry e : inputs) {
      WEFT_CHECK_AS(InternalError, e.valid())
          << "gradient of node '" << g_.nodes[fwd_nid_].name << "': op " << n.op->name()
          << " given an invalid entry";
      n.inputs.push_back(table_.at(e.id));
    }
    const int nout = n.op->num_outputs(*n.op_attrs);
    const uint32_t nid = g_.add_node(std::move(n));
    std::vector<GradEntry> out;
    for (int o = 0; o < nout; ++o) out.push_back(add(NodeEntry{nid, static_cast<uint32_t>(o), 0}));
    return out;
  }

  Graph& g_;
  std::vector<NodeEntry>& table_;
  uint32_t fwd_nid_;
  std::vector<GradEntry> out_grads_;
  int& counter_;
};

}  // namespace

GradientGraph build_gradient(const Graph& forward, const GradientOptions& options) {
  WEFT_CHECK(forward.row_ptr().size() == forward.nodes.size() + 1)
      << "gradient: the graph is not indexed";
  WEFT_CHECK(!options.wrt.empty()) << "gradient: no variable to differentiate with respect to";
  GradientGraph out;
  out.graph = forward;
  Graph& g = out.graph;
  const auto nfwd = static_cast<uint32_t>(forward.nodes.size());
  out.num_forward_nodes = nfwd;
  out.num_forward_heads = forward.heads.size();

  // Which forward nodes lie on a path from a wrt variable (their outputs depend on one).
  std::vector<bool> depends(nfwd, false);
  for (uint32_t v : options.wrt) {
    WEFT_CHECK(v < nfwd && forward.nodes[v].is_variable())
        << "gradient: node " << v << " is not a variable";
    depends[v] = true;
  }
  for (uint32_t nid = 0; nid < nfwd; ++nid) {
    for (const NodeEntry& e : forward.nodes[nid].inputs)
      depends[nid] = depends[nid] || depends[e.node];
  }

  // Gradient contributions per forward entry; `table` maps GradEntry ids to graph entries.
  std::vector<NodeEntry> table;
  std::vector<std::vector<NodeEntry>> contrib(forward.num_entries());
  auto to_grad = [&](NodeEntry e) {
    table.push_back(e);
    return GradEntry{static_cast<int32_t>(table.size() - 1)};
  };

  int counter = 0;
  // Gradients of an entry used several times are added as they are produced (a running sum), so
  // at most one partial sum per entry is alive: an RNN's shared weights get one contribution per
  // time step, and summing them all at the end would keep every step's gradient alive at once.
  auto accumulate = [&](uint32_t eid, NodeEntry e, const std::string& name) {
    auto& parts = contrib[eid];
    if (parts.empty()) {
      parts.push_back(e);
      return;
    }
    Node n;
    n.op = &get_op("elemwise_add");
    n.name = name + "_grad_acc" + std::to_string(counter++);
    n.inputs = {parts[0], e};
    parts = {NodeEntry{g.add_node(std::move(n)), 0, 0}};
  };
  auto sum_of = [&](uint32_t eid) -> GradEntry {
    const auto& parts = contrib[eid];
    if (parts.empty()) return {};
    return to_grad(parts[0]);
  };

  // One head-gradient variable per forward head.
  for (size_t h = 0; h < forward.heads.size(); ++h) {
    Node v;
    v.name = "__head_grad_" + std::to_string(h) + "__";
    const uint32_t nid = g.add_node(std::move(v));
    out.head_grad_nodes.push_back(nid);
    if (depends[forward.heads[h].node])
      accumulate(forward.entry_id(forward.heads[h]), {nid, 0, 0}, g.nodes[nid].name);
  }

  for (uint32_t nid = nfwd; nid-- > 0;) {
    const Node& fwd = forward.nodes[nid];
    if (fwd.is_variable() || !depends[nid]) continue;
    std::vector<GradEntry> ograds;
    bool any = false;
    for (int o = 0; o < fwd.num_outputs(); ++o) {
      ograds.push_back(sum_of(forward.entry_id(nid, o)));
      any = any || ograds.back().valid();
    }
    if (!any) continue;  // nothing downstream needs this node's gradient
    const auto& fgrad = fwd.op->attr<FGradient>();
    WEFT_CHECK_AS(NotImplemented, static_cast<bool>(fgrad))
        << "gradient: node " << nid << " ('" << fwd.name << "'): op " << fwd.op->name()
        << " has no gradient (FGradient)";
    GraphGradBuilder builder(g, table, nid, std::move(ograds), counter);
    std::vector<GradEntry> igrads = fgrad(builder);
    WEFT_CHECK_AS(InternalError, igrads.size() == fwd.inputs.size())
        << "gradient of op " << fwd.op->name() << " returned " << igrads.size() << " entries for "
        << fwd.inputs.size() << " inputs";
    for (size_t i = 0; i < igrads.size(); ++i) {
      if (!igrads[i].valid() || !depends[fwd.inputs[i].node]) continue;
      accumulate(forward.entry_id(fwd.inputs[i]), builder.entry(igrads[i]),
                 forward.nodes[fwd.inputs[i].node].name);
    }
  }

  for (uint32_t v : options.wrt) {
    GradEntry ge = sum_of(forward.entry_id(v, 0));
    NodeEntry e;
    if (ge.valid()) {
      e = table[ge.id];
    } else {
      // The variable does not influence any head: its gradient is zeros.
      Node n;
      n.op = &get_op("zeros_like");
      n.name = forward.nodes[v].name + "_zero_grad";
      n.inputs = {NodeEntry{v, 0, 0}};
      e = NodeEntry{g.add_node(std::move(n)), 0, 0};
    }
    // A gradient head must be an op output of its own (the executor writes it into the gradient
    // array): copy when it is a variable (identity paths) or already a head.
    const bool taken = std::find(g.heads.begin(), g.heads.end(), e) != g.heads.end();
    if (g.nodes[e.node].is_variable() || taken) {
      Node n;
      n.op = &get_op("_copy");
      n.name = forward.nodes[v].name + "_grad_copy";
      n.inputs = {e};
      e = NodeEntry{g.add_node(std::move(n)), 0, 0};
    }
    out.grads.push_back(e);
    g.heads.push_back(e);
  }
  g.reindex();
  return out;
}

}  // namespace weft::graph
