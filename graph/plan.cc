// Memory planning of a graph: the op nodes' outputs and workspaces as buffers with lifetimes in
// node order, in-place sharing where the op allows it, placed by plan_buffers (plan_buffers.cc).
#include "graph/plan.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "ops/op_call.h"

namespace weft::graph {
namespace {

std::string node_label(const Graph& g, uint32_t nid) {
  const Node& n = g.nodes[nid];
  std::string s = "node " + std::to_string(nid) + " ('" + n.name + "'";
  if (n.op) s += ", op " + n.op->name();
  return s + ")";
}

size_t entry_size(const Graph& g, const InferResult& inferred, uint32_t eid) {
  const Shape& shape = inferred.shapes[eid];
  const DType dtype = inferred.dtypes[eid];
  if (!shape.known() || dtype == DType::kUnknown) {
    const NodeEntry e = g.entry_of(eid);
    WEFT_THROW(ShapeError) << "memory plan: output " << e.index << " of " << node_label(g, e.node)
                           << " has "
                           << (shape.known() ? "an unknown dtype" : "shape " + shape.to_string())
                           << "; planning needs complete shape and type inference";
  }
  if (!shape.within_limits()) {
    const NodeEntry e = g.entry_of(eid);
    WEFT_THROW(ShapeError) << "memory plan: output " << e.index << " of " << node_label(g, e.node)
                           << " has shape " << shape
                           << ", larger than weft's limit for one array (2^56 elements)";
  }
  return shape_bytes(shape, dtype_size(dtype), "memory plan");
}

// Note [Plan size limit]
// Each entry is at most 2^56 elements of at most 8 bytes, but a plan adds many of them: offsets
// and the arena size are sums. Capping the sum of every buffer (aligned) at kMaxPlanBytes keeps
// every offset and sum inside plan_buffers far from overflowing, and no device comes near it.
constexpr size_t kMaxPlanBytes = size_t{1} << 60;

// Adds `bytes` to the running total of a plan, or throws OutOfMemory naming `what`.
void add_plan_bytes(size_t* total, size_t bytes, size_t alignment, const std::string& what) {
  const size_t aligned =
      bytes <= kMaxPlanBytes ? (bytes + alignment - 1) / alignment * alignment : kMaxPlanBytes + 1;
  if (aligned > kMaxPlanBytes - *total) {
    WEFT_THROW(OutOfMemory) << "memory plan: " << what
                            << " brings the graph's buffers past 2^60 bytes, more "
                            << "than any device holds";
  }
  *total += aligned;
}

// Whether node `nid` reads or writes an entry whose layout is not plain.
bool has_layouts(const Graph& g, uint32_t nid, const std::vector<LayoutRef>& layouts) {
  for (const NodeEntry& in : g.nodes[nid].inputs) {
    if (layouts[g.entry_id(in)]) return true;
  }
  for (int o = 0; o < g.nodes[nid].num_outputs(); ++o) {
    if (layouts[g.entry_id(nid, o)]) return true;
  }
  return false;
}

// The workspace requests of node `nid` on its layouts (FLayoutResourceRequest).
std::vector<ResourceRequest> layout_requests(const Graph& g, uint32_t nid,
                                             const InferResult& inferred,
                                             const std::vector<LayoutRef>& layouts,
                                             const std::vector<Shape>& in_shapes,
                                             const std::vector<Shape>& out_shapes) {
  const Node& n = g.nodes[nid];
  LayoutQuery q;
  q.in_shapes = in_shapes;
  q.out_shapes = out_shapes;
  std::vector<LayoutRef> in, out;
  for (const NodeEntry& e : n.inputs) {
    q.in_types.push_back(inferred.dtypes[g.entry_id(e)]);
    in.push_back(layouts[g.entry_id(e)]);
  }
  for (int o = 0; o < n.num_outputs(); ++o) {
    q.out_types.push_back(inferred.dtypes[g.entry_id(nid, o)]);
    out.push_back(layouts[g.entry_id(nid, o)]);
  }
  return n.op->attr<FLayoutResourceRequest>()(*n.op_attrs, q, in, out);
}

// Note [Plans across streams]
// With one stream a buffer lives from its writer's step to its last reader's step, and any two
// buffers whose steps do not overlap may share memory: node order is execution order. With a
// stream plan, nodes of different streams run in any interleaving their event edges allow, so
// a later node (in node order) may run while an earlier buffer is still being read. The planner
// still works on intervals of node order, but a buffer's interval now ends at the last node that
// is not ordered after every access of it (its writer and readers; StreamPlan::ordered). A
// buffer written later than that end is written by a node that every access of the first
// buffer happens before, so the two may share memory; buffers whose intervals overlap never do.
// Along one stream "ordered after" is monotone, so the end is found by a binary search per
// stream. With one stream the end is the last reader, as before.
//
// In place: a node may take over its input's memory when every other reader of that input
// happens before it. The input's interval then ends at that node (the pair is one block from the
// input's writer to the output's end, Note [In-place groups]); when the planner does not honour
// the request, the input's interval goes back to its conservative end and the plan is redone.
class Concurrency {
 public:
  explicit Concurrency(const StreamPlan& plan) : plan_(plan), members_(stream_members(plan)) {}

  // The last node in node order that is not ordered after every node of `accesses` (not empty).
  uint32_t end_of(const std::vector<uint32_t>& accesses) const {
    uint32_t end = *std::max_element(accesses.begin(), accesses.end());
    for (const std::vector<uint32_t>& m : members_) {
      auto it = std::partition_point(m.begin(), m.end(), [&](uint32_t p) {
        for (uint32_t a : accesses) {
          if (!plan_.ordered(a, p)) return true;
        }
        return false;
      });
      if (it != m.begin()) end = std::max(end, *(it - 1));
    }
    return end;
  }

  // Whether `node` may take over the memory of an entry read by `readers` (node among them).
  bool last_reader(uint32_t node, const std::vector<uint32_t>& readers) const {
    for (uint32_t r : readers) {
      if (r != node && !plan_.ordered(r, node)) return false;
    }
    return true;
  }

 private:
  const StreamPlan& plan_;
  std::vector<std::vector<uint32_t>> members_;
};

}  // namespace

MemoryPlan plan_memory(const Graph& graph, const InferResult& inferred,
                       const GraphPlanOptions& options) {
  const Graph& g = graph;
  const uint32_t num_entries = g.num_entries();
  WEFT_CHECK_AS(ShapeError,
                inferred.shapes.size() == num_entries && inferred.dtypes.size() == num_entries)
      << "memory plan: inference results cover " << inferred.shapes.size() << " shapes and "
      << inferred.dtypes.size() << " dtypes, the graph has " << num_entries << " entries";
  WEFT_CHECK(options.layouts.empty() || options.layouts.size() == num_entries)
      << "memory plan: " << options.layouts.size() << " layouts for " << num_entries << " entries";

  MemoryPlan mp;
  mp.entry_offset.assign(num_entries, -1);
  mp.entry_bytes.assign(num_entries, 0);
  mp.entry_inplace_of.assign(num_entries, -1);
  mp.entry_buffer.assign(num_entries, -1);
  mp.workspace_offset.assign(g.nodes.size(), -1);
  mp.workspace_bytes.assign(g.nodes.size(), 0);
  mp.workspace_buffer.assign(g.nodes.size(), -1);

  // What the arena holds: op outputs that are neither heads nor external.
  std::vector<bool> planned(num_entries, false);
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    if (g.nodes[nid].is_variable()) continue;
    for (int o = 0; o < g.nodes[nid].num_outputs(); ++o) planned[g.entry_id(nid, o)] = true;
  }
  WEFT_CHECK(options.off_arena.empty() || options.off_arena.size() == g.nodes.size())
      << "memory plan: off_arena covers " << options.off_arena.size() << " nodes, the graph has "
      << g.nodes.size();
  auto off_arena = [&](uint32_t nid) {
    return !options.off_arena.empty() && options.off_arena[nid];
  };
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    if (!off_arena(nid) || g.nodes[nid].is_variable()) continue;
    for (int o = 0; o < g.nodes[nid].num_outputs(); ++o) planned[g.entry_id(nid, o)] = false;
  }
  for (const NodeEntry& h : g.heads) planned[g.entry_id(h)] = false;
  for (uint32_t eid : options.external) {
    WEFT_CHECK(eid < num_entries) << "memory plan: external entry " << eid << " out of range ("
                                  << num_entries << " entries)";
    planned[eid] = false;
  }

  // Lifetimes: written at the producer's step, alive until the last reader's step (with streams,
  // Note [Plans across streams]).
  std::vector<uint32_t> last_read(num_entries, 0);
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    for (const NodeEntry& in : g.nodes[nid].inputs) {
      const uint32_t eid = g.entry_id(in);
      last_read[eid] = std::max(last_read[eid], nid);
    }
  }
  const StreamPlan* sp =
      options.streams && options.streams->num_streams > 1 ? options.streams : nullptr;
  std::unique_ptr<Concurrency> conc;
  std::vector<std::vector<uint32_t>> readers;  // per entry, with streams only
  std::vector<uint32_t> accesses;
  if (sp) {
    WEFT_CHECK(sp->node_stream.size() == g.nodes.size())
        << "memory plan: the stream plan covers " << sp->node_stream.size()
        << " nodes, the graph has " << g.nodes.size();
    conc = std::make_unique<Concurrency>(*sp);
    readers.resize(num_entries);
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
      for (const NodeEntry& in : g.nodes[nid].inputs) readers[g.entry_id(in)].push_back(nid);
    }
  }
  // Per buffer: its end before any in-place request shortened it (with streams).
  std::vector<uint32_t> own_end;

  std::vector<size_t> in_bytes;
  std::vector<Shape> in_shapes, out_shapes;
  // See Note [Plan size limit].
  size_t total_bytes = 0;
  const size_t alignment = std::max<size_t>(options.plan.alignment, 1);
  WEFT_CHECK(alignment <= (size_t{1} << 30))
      << "memory plan: alignment " << alignment << " is too large";
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    if (n.is_variable()) continue;
    const int num_out = n.num_outputs();
    // Outputs.
    for (int o = 0; o < num_out; ++o) {
      const uint32_t eid = g.entry_id(nid, o);
      if (!planned[eid]) continue;
      PlanBuffer b;
      b.bytes = entry_size(g, inferred, eid);
      if (eid < options.entry_bytes.size()) b.bytes = std::max(b.bytes, options.entry_bytes[eid]);
      add_plan_bytes(&total_bytes, b.bytes, alignment,
                     "output " + std::to_string(o) + " of " + node_label(g, nid) + " (shape " +
                         inferred.shapes[eid].to_string() + ")");
      b.first = nid;
      b.last = std::max(last_read[eid], nid);
      if (sp) {
        accesses = readers[eid];
        accesses.push_back(nid);
        b.last = conc->end_of(accesses);
      }
      own_end.push_back(b.last);
      mp.entry_bytes[eid] = b.bytes;
      mp.entry_buffer[eid] = static_cast<int32_t>(mp.buffers.size());
      mp.buffers.push_back(b);
    }
    // In-place requests (FInplaceOption pairs): the input must be an arena entry this node reads
    // once and for the last time, of the output's size; mutated inputs keep their memory. Each
    // input and each output is paired at most once.
    if (const auto& option = n.op->attr<FInplaceOption>()) {
      std::vector<int> mutated;
      if (const auto& fm = n.op->attr<FMutateInputs>()) mutated = fm(*n.op_attrs);
      std::vector<uint32_t> used_inputs;
      for (const auto& [i, o] : option(*n.op_attrs)) {
        if (i < 0 || i >= static_cast<int>(n.inputs.size()) || o < 0 || o >= num_out) continue;
        const uint32_t in_eid = g.entry_id(n.inputs[i]);
        const uint32_t out_eid = g.entry_id(nid, o);
        if (!planned[in_eid] || !planned[out_eid]) continue;
        if (sp ? !conc->last_reader(nid, readers[in_eid]) : last_read[in_eid] != nid) continue;
        if (std::find(mutated.begin(), mutated.end(), i) != mutated.end()) continue;
        if (std::count(n.inputs.begin(), n.inputs.end(), n.inputs[i]) != 1) continue;
        if (std::find(used_inputs.begin(), used_inputs.end(), in_eid) != used_inputs.end())
          continue;
        PlanBuffer& out = mp.buffers[mp.entry_buffer[out_eid]];
        if (out.inplace_from >= 0 || mp.entry_bytes[in_eid] != out.bytes) continue;
        out.inplace_from = mp.entry_buffer[in_eid];
        if (sp) mp.buffers[out.inplace_from].last = nid;
        used_inputs.push_back(in_eid);
      }
    }
    // Workspace, alive during this step only.
    const DeviceType node_device =
        options.node_devices.empty() ? options.device : options.node_devices[nid];
    if (n.op->resource_request(node_device)) {
      in_shapes.clear();
      out_shapes.clear();
      for (const NodeEntry& in : n.inputs) in_shapes.push_back(inferred.shapes[g.entry_id(in)]);
      for (int o = 0; o < num_out; ++o) out_shapes.push_back(inferred.shapes[g.entry_id(nid, o)]);
      // What the node's kernel on its device asks for (Note [One call path] in ops/op_call.cc),
      // or, on layouts other than plain, what FLayoutResourceRequest asks for.
      size_t bytes = 0;
      if (!options.layouts.empty() && n.op->attr<FLayoutResourceRequest>() &&
          has_layouts(g, nid, options.layouts)) {
        for (const ResourceRequest& r :
             layout_requests(g, nid, inferred, options.layouts, in_shapes, out_shapes)) {
          if (r.kind != ResourceRequest::Kind::kWorkspace) continue;
          WEFT_CHECK_AS(OutOfMemory, r.bytes <= kMaxPlanBytes - bytes)
              << "memory plan: the workspace of " << node_label(g, nid)
              << " is larger than 2^60 bytes";
          bytes += r.bytes;
        }
      } else {
        bytes = OpResources::of(*n.op_attrs, node_device, in_shapes, out_shapes).workspace_bytes;
        WEFT_CHECK_AS(OutOfMemory, bytes <= kMaxPlanBytes)
            << "memory plan: the workspace of " << node_label(g, nid)
            << " is larger than 2^60 bytes";
      }
      if (bytes > 0 && off_arena(nid)) {
        mp.workspace_bytes[nid] = bytes;  // the executor allocates it on the node's device
      } else if (bytes > 0) {
        add_plan_bytes(&total_bytes, bytes, alignment, "the workspace of " + node_label(g, nid));
        PlanBuffer b;
        b.bytes = bytes;
        b.first = b.last = nid;
        if (sp) b.last = conc->end_of({nid});
        own_end.push_back(b.last);
        mp.workspace_bytes[nid] = bytes;
        mp.workspace_buffer[nid] = static_cast<int32_t>(mp.buffers.size());
        mp.buffers.push_back(b);
      }
    }
  }

  auto plan = [&] {
    return options.baseline ? plan_buffers_block_sharing(mp.buffers, options.plan)
                            : plan_buffers(mp.buffers, options.plan);
  };
  mp.plan = plan();
  if (sp) {
    // Requests the planner turned down: their inputs' intervals go back to their own ends.
    bool again = false;
    for (size_t b = 0; b < mp.buffers.size(); ++b) {
      PlanBuffer& buf = mp.buffers[b];
      if (buf.inplace_from < 0 || mp.plan.inplace[b]) continue;
      mp.buffers[buf.inplace_from].last = own_end[buf.inplace_from];
      buf.inplace_from = -1;
      again = true;
    }
    if (again) mp.plan = plan();
  }

  std::vector<int64_t> entry_of_buffer(mp.buffers.size(), -1);
  for (uint32_t eid = 0; eid < num_entries; ++eid) {
    const int32_t b = mp.entry_buffer[eid];
    if (b < 0) continue;
    entry_of_buffer[b] = eid;
    mp.entry_offset[eid] = static_cast<int64_t>(mp.plan.offsets[b]);
  }
  for (uint32_t eid = 0; eid < num_entries; ++eid) {
    const int32_t b = mp.entry_buffer[eid];
    if (b >= 0 && mp.plan.inplace[b])
      mp.entry_inplace_of[eid] = entry_of_buffer[mp.buffers[b].inplace_from];
  }
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const int32_t b = mp.workspace_buffer[nid];
    if (b >= 0) mp.workspace_offset[nid] = static_cast<int64_t>(mp.plan.offsets[b]);
  }
  return mp;
}

std::string describe_plan(const Graph& graph, const MemoryPlan& plan) {
  const Graph& g = graph;
  const size_t nbuf = plan.buffers.size();
  std::vector<std::string> what(nbuf);
  size_t entries = 0, workspaces = 0, inplace = 0;
  for (uint32_t eid = 0; eid < plan.entry_buffer.size(); ++eid) {
    const int32_t b = plan.entry_buffer[eid];
    if (b < 0 || static_cast<size_t>(b) >= nbuf) continue;
    const NodeEntry e = g.entry_of(eid);
    what[b] = "#" + std::to_string(eid) + " " + g.nodes[e.node].name;
    if (g.nodes[e.node].num_outputs() > 1) what[b] += ":" + std::to_string(e.index);
    if (plan.entry_inplace_of[eid] >= 0) {
      what[b] += " (in place of #" + std::to_string(plan.entry_inplace_of[eid]) + ")";
      ++inplace;
    }
    ++entries;
  }
  for (uint32_t nid = 0; nid < plan.workspace_buffer.size(); ++nid) {
    const int32_t b = plan.workspace_buffer[nid];
    if (b < 0 || static_cast<size_t>(b) >= nbuf) continue;
    what[b] = "workspace of " + g.nodes[nid].name;
    ++workspaces;
  }

  std::ostringstream os;
  os << "memory plan: " << nbuf << " buffers (" << entries << " entries, " << workspaces
     << " workspaces), " << inplace << " in place\n";
  os << "  buffer      offset        bytes  steps        what\n";
  char line[96];
  for (size_t b = 0; b < nbuf; ++b) {
    const PlanBuffer& buf = plan.buffers[b];
    const size_t offset = b < plan.plan.offsets.size() ? plan.plan.offsets[b] : 0;
    std::snprintf(line, sizeof line, "  %6zu %11zu %12zu  %5u..%-5u  ", b, offset, buf.bytes,
                  buf.first, buf.last);
    os << line << what[b] << "\n";
  }
  std::snprintf(line, sizeof line, "%.4f", plan.plan.ratio());
  os << "plan arena=" << plan.plan.arena_bytes << " lower_bound=" << plan.plan.lower_bound
     << " no_reuse=" << plan.plan.no_reuse << " ratio=" << line << "\n";
  return os.str();
}

}  // namespace weft::graph
