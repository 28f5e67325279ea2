// Layout propagation (see layout.h).
#include "graph/layout.h"

#include <map>
#include <sstream>
#include <tuple>

#include "base/build_config.h"
#include "base/error.h"

namespace weft::graph {

// Note [Layout propagation]
// oneDNN's convolutions run fastest on the activation format they choose themselves (asked with
// format_tag::any): channels-last (acdb) for float32 on AVX-512 machines, blocked nChw8c/nChw16c
// (aBcd8b, aBcd16b: channels in blocks of 8 or 16, zero-padded to a whole block) elsewhere.
// Converting every convolution's input into that format and its output back costs two passes
// over each activation per layer. This pass keeps the chosen format from one op to the next:
// - An entry's layout is a MemoryLayout (ops/op.h), in practice a oneDNN memory descriptor;
//   null means plain. The logical shape never changes; the bytes may (padding), and the memory
//   planner reserves the layout's size (GraphPlanOptions::entry_bytes).
// - Ops say what they read and write through FInferLayout, given what their producers write:
//   a convolution asks for the source format of its primitive and announces its destination
//   format; pooling, batch norm, activations, elementwise add (both operands in one layout) and
//   channel concat pass the format on. An op without FInferLayout, or whose FInferLayout
//   declines (returns false), reads and writes plain.
// - Where a consumer reads another layout than the producer writes, the pass inserts a
//   `_layout_reorder` node (one per entry and target layout, shared by every consumer that needs
//   it), just before the first such consumer so its output lives no longer than needed. Graph
//   inputs (variables) and heads are plain: a head whose producer writes another layout is
//   reordered to plain. The reorders are ordinary nodes: the profiler and op_times show them,
//   LayoutStats counts them.
// - A descriptor that places every element where plain row-major does (acdb of a 1x1 image) is
//   plain (dnnl_util::make_layout), so such entries never need a reorder.
// Kernels get their inputs' and outputs' layouts through OpContext; a kernel handed a layout it
// did not ask for in the form it prefers may convert internally, so a mismatch between the
// format chosen here (on the binding thread) and at run time costs time, never correctness.
// The pass runs for inference binds on the CPU only: gradient graphs stay plain.

namespace {

std::string short_name(const MemoryLayout* l) { return l ? l->name() : std::string("plain"); }

}  // namespace

bool layouts_available() { return WEFT_USE_ONEDNN != 0; }

std::vector<size_t> LayoutPlan::entry_bytes() const {
  std::vector<size_t> bytes(layouts.size(), 0);
  for (size_t e = 0; e < layouts.size(); ++e) {
    if (layouts[e]) bytes[e] = layouts[e]->bytes();
  }
  return bytes;
}

LayoutPlan propagate_layouts(const Graph& in, const InferResult& inferred) {
  WEFT_CHECK_AS(ShapeError, inferred.shapes.size() == in.num_entries() &&
                                inferred.dtypes.size() == in.num_entries())
      << "layout propagation: inference covers " << inferred.shapes.size() << " entries, the "
      << "graph has " << in.num_entries();
  LayoutPlan plan;
  Graph& out = plan.graph;
  out.attrs = in.attrs;
  // Per new node: its outputs' layouts, shapes and types.
  std::vector<std::vector<LayoutRef>> layouts;
  std::vector<std::vector<Shape>> shapes;
  std::vector<std::vector<DType>> dtypes;
  std::vector<std::vector<NodeEntry>> remap(in.nodes.size());
  // (node, output, layout key) -> the reorder node that converts that entry into that layout.
  std::map<std::tuple<uint32_t, uint32_t, std::string>, uint32_t> reorders;
  const Op* reorder_op = layouts_available() ? &get_op(kLayoutReorderOp) : nullptr;

  auto add = [&](Node n, std::vector<LayoutRef> ls, std::vector<Shape> ss, std::vector<DType> ds) {
    const uint32_t id = out.add_node(std::move(n));
    layouts.push_back(std::move(ls));
    shapes.push_back(std::move(ss));
    dtypes.push_back(std::move(ds));
    return id;
  };
  // The entry `e` of the new graph in layout `want`: itself, or a (shared) reorder of it.
  auto convert = [&](const NodeEntry& e, const LayoutRef& want) -> NodeEntry {
    const LayoutRef have = layouts[e.node][e.index];  // a copy: add() grows `layouts`
    if (same_layout(have.get(), want.get())) return e;
    const auto key = std::make_tuple(e.node, e.index, want ? want->key() : std::string());
    if (auto it = reorders.find(key); it != reorders.end()) return NodeEntry{it->second, 0, 0};
    Node r;
    r.op = reorder_op;
    r.name = out.nodes[e.node].name;
    if (out.nodes[e.node].num_outputs() > 1) r.name += "_" + std::to_string(e.index);
    r.name += "_to_" + short_name(want.get());
    r.attrs["__layout__"] = short_name(want.get());
    r.inputs = {NodeEntry{e.node, e.index, 0}};
    const uint32_t id =
        add(std::move(r), {want}, {shapes[e.node][e.index]}, {dtypes[e.node][e.index]});
    reorders.emplace(key, id);
    ++plan.stats.reorders;
    if (!want) ++plan.stats.to_plain;
    if (!have) ++plan.stats.from_plain;
    return NodeEntry{id, 0, 0};
  };

  for (uint32_t nid = 0; nid < in.nodes.size(); ++nid) {
    const Node& n = in.nodes[nid];
    const int nout = n.num_outputs();
    std::vector<Shape> out_shapes;
    std::vector<DType> out_types;
    for (int o = 0; o < nout; ++o) {
      out_shapes.push_back(inferred.shapes[in.entry_id(nid, o)]);
      out_types.push_back(inferred.dtypes[in.entry_id(nid, o)]);
    }
    Node copy = n;
    std::vector<LayoutRef> out_layouts(nout);
    if (!n.is_variable()) {
      std::vector<NodeEntry> inputs;
      std::vector<LayoutRef> want;
      for (const NodeEntry& e : n.inputs) {
        NodeEntry m = remap[e.node].at(e.index);
        inputs.push_back(m);
        want.push_back(layouts[m.node][m.index]);
      }
      const auto& infer = n.op->attr<FInferLayout>();
      bool custom = false;
      if (infer && layouts_available()) {
        LayoutQuery q;
        for (const NodeEntry& e : n.inputs) {
          q.in_shapes.push_back(inferred.shapes[in.entry_id(e)]);
          q.in_types.push_back(inferred.dtypes[in.entry_id(e)]);
        }
        q.out_shapes = out_shapes;
        q.out_types = out_types;
        custom = infer(*n.op_attrs, q, want, out_layouts);
        WEFT_CHECK_AS(InternalError, want.size() == n.inputs.size() &&
                                         out_layouts.size() == static_cast<size_t>(nout))
            << "layout propagation: node " << nid << " ('" << n.name << "', op " << n.op->name()
            << "): FInferLayout changed the number of inputs or outputs";
      }
      if (!custom) {
        want.assign(n.inputs.size(), nullptr);
        out_layouts.assign(nout, nullptr);
      }
      for (size_t i = 0; i < inputs.size(); ++i) {
        const NodeEntry c = convert(inputs[i], want[i]);
        copy.inputs[i] = NodeEntry{c.node, c.index, n.inputs[i].version};
      }
      for (uint32_t& c : copy.control_deps) c = remap[c].at(0).node;
    }
    const uint32_t id = add(std::move(copy), out_layouts, out_shapes, out_types);
    for (int o = 0; o < nout; ++o) remap[nid].push_back(NodeEntry{id, static_cast<uint32_t>(o), 0});
  }
  for (const NodeEntry& h : in.heads) {
    const NodeEntry m = convert(remap[h.node].at(h.index), nullptr);
    out.heads.push_back(NodeEntry{m.node, m.index, h.version});
  }
  out.reindex();

  const uint32_t ne = out.num_entries();
  plan.layouts.resize(ne);
  plan.inferred.shapes.resize(ne);
  plan.inferred.dtypes.resize(ne);
  plan.inferred.passes = inferred.passes;
  for (uint32_t nid = 0; nid < out.nodes.size(); ++nid) {
    for (size_t o = 0; o < layouts[nid].size(); ++o) {
      const uint32_t eid = out.entry_id(nid, static_cast<uint32_t>(o));
      plan.layouts[eid] = layouts[nid][o];
      plan.inferred.shapes[eid] = shapes[nid][o];
      plan.inferred.dtypes[eid] = dtypes[nid][o];
      if (const LayoutRef& l = layouts[nid][o]) {
        ++plan.stats.entries;
        const Shape& s = shapes[nid][o];
        const size_t plain = static_cast<size_t>(s.size()) * dtype_size(dtypes[nid][o]);
        if (l->bytes() > plain) plan.stats.padded_bytes += l->bytes() - plain;
      }
    }
  }
  return plan;
}

std::string describe_layouts(const LayoutPlan& plan) {
  const Graph& g = plan.graph;
  std::ostringstream os;
  os << "layouts: " << plan.stats.entries << " entries not plain, " << plan.stats.reorders
     << " reorders (" << plan.stats.from_plain << " from plain, " << plan.stats.to_plain
     << " to plain), " << plan.stats.padded_bytes << " bytes of padding\n";
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    if (n.is_variable()) continue;
    const bool reorder = n.op->name() == kLayoutReorderOp;
    for (int o = 0; o < n.num_outputs(); ++o) {
      const LayoutRef& l = plan.layouts[g.entry_id(nid, static_cast<uint32_t>(o))];
      if (!l && !reorder) continue;
      os << "  " << (reorder ? "reorder " : "        ") << n.name;
      if (n.num_outputs() > 1) os << ":" << o;
      os << " " << plan.inferred.shapes[g.entry_id(nid, static_cast<uint32_t>(o))] << " "
         << short_name(l.get()) << "\n";
    }
  }
  return os.str();
}

}  // namespace weft::graph
