// The infer -> plan -> bind step shared by the graph JSON fuzz targets (graph_json_fuzz and
// graph_bind_fuzz): whatever a reader accepts is taken through to a bound executor, so that an
// index or count the reader let through is exercised where it is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/error.h"
#include "graph/executor.h"
#include "graph/infer.h"
#include "graph/plan.h"
#include "tests/fuzz/fuzz_runtime.h"

namespace weft::fuzz {

/// Graphs larger than these are not inferred or bound (kept small so each run stays fast).
inline constexpr size_t kMaxBoundNodes = 64;
inline constexpr uint32_t kMaxBoundEntries = 1024;

/// Inputs for inference: `__shape__` attributes and a batch size of 2 for an unknown first
/// dimension; a variable called "data" without one gets a small image batch.
inline graph::InferInputs bind_inputs_for(const graph::Graph& g) {
  graph::InferInputs in;
  in.batch = 2;
  in.device = Device::cpu();
  const int64_t data = g.find_variable("data");
  if (data >= 0 && !g.nodes[static_cast<uint32_t>(data)].attrs.count("__shape__")) {
    in.shapes["data"] = Shape{2, 3, 8, 8};
  }
  return in;
}

/// Bytes that binding allocates: every entry (variables, outputs; an upper bound of the arena),
/// checked with the same function inference uses.
inline size_t bound_bytes(const graph::Graph& g, const graph::InferResult& r) {
  size_t total = 0;
  for (uint32_t eid = 0; eid < g.num_entries(); ++eid) {
    total += shape_bytes(r.shapes[eid], dtype_size(r.dtypes[eid]), "fuzz");
    if (total > kMaxAllocatedBytes) return total;
  }
  return total;
}

/// Infers, plans and binds a loaded graph. A weft::Error is the expected outcome for a graph
/// that cannot run; a crash, a sanitizer report, a shape beyond the limits after inference or a
/// bound executor whose shapes differ from inference is a finding (trap). Every entry index of a
/// loaded graph must be within its node's outputs: checked first, independently of the loader.
inline void infer_plan_bind(const std::shared_ptr<const graph::Graph>& g) {
  for (const graph::Node& n : g->nodes) {
    for (const graph::NodeEntry& e : n.inputs) {
      if (e.node >= g->nodes.size() || e.index >= g->row_ptr()[e.node + 1] - g->row_ptr()[e.node])
        __builtin_trap();
    }
  }
  for (const graph::NodeEntry& e : g->heads) {
    if (e.node >= g->nodes.size() || e.index >= g->row_ptr()[e.node + 1] - g->row_ptr()[e.node])
      __builtin_trap();
  }
  // Small graphs only: a node's output count comes from its attributes (SliceChannel's
  // num_outputs), and inference holds a shape per entry.
  if (g->nodes.size() > kMaxBoundNodes || g->num_entries() > kMaxBoundEntries) return;
  const graph::InferInputs in = bind_inputs_for(*g);
  graph::InferResult inferred;
  try {
    inferred = graph::infer_shapes_types(*g, in, true);
    // Inference left every shape within limits and every entry on the device.
    for (const Shape& s : inferred.shapes) {
      if (!s.within_limits()) __builtin_trap();
    }
    if (bound_bytes(*g, inferred) > kMaxAllocatedBytes) return;
    const graph::MemoryPlan plan = graph::plan_memory(*g, inferred);
    graph::check_buffer_plan(plan.buffers, plan.plan);
  } catch (const Error&) {
    return;
  }
  try {
    graph::BindOptions options;
    options.inputs = in;
    auto exec = graph::Executor::bind(g, options);
    if (exec->output_shapes().size() != g->heads.size()) __builtin_trap();
    for (size_t h = 0; h < g->heads.size(); ++h) {
      if (exec->output_shapes()[h] != inferred.shapes[g->entry_id(g->heads[h])]) __builtin_trap();
    }
  } catch (const Error&) {
  }
}

}  // namespace weft::fuzz
