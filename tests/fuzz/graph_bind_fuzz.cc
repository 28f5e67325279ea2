// libFuzzer entry point for graph JSON -> shape/type inference -> memory plan -> bind: a graph
// must bind or throw weft::Error. Inputs are small graphs whose variables carry `__shape__`
// (the seeds from make_seeds.py); binding is skipped, not run, when the graph's arrays would
// take more than kMaxAllocatedBytes, so no run allocates gigabytes.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "base/error.h"
#include "graph/executor.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "graph/plan.h"
#include "tests/fuzz/fuzz_runtime.h"

namespace {

constexpr size_t kMaxNodes = 64;
constexpr uint32_t kMaxEntries = 1024;

// Inputs for inference: `__shape__` attributes and a batch size of 2 for an unknown first
// dimension; a variable called "data" without one gets a small image batch.
weft::graph::InferInputs inputs_for(const weft::graph::Graph& g) {
  weft::graph::InferInputs in;
  in.batch = 2;
  in.device = weft::Device::cpu();
  const int64_t data = g.find_variable("data");
  if (data >= 0 && !g.nodes[static_cast<uint32_t>(data)].attrs.count("__shape__")) {
    in.shapes["data"] = weft::Shape{2, 3, 8, 8};
  }
  return in;
}

// Bytes that binding allocates: every entry (variables, outputs; an upper bound of the arena),
// checked with the same function inference uses.
size_t bound_bytes(const weft::graph::Graph& g, const weft::graph::InferResult& r) {
  size_t total = 0;
  for (uint32_t eid = 0; eid < g.num_entries(); ++eid) {
    total += weft::shape_bytes(r.shapes[eid], weft::dtype_size(r.dtypes[eid]), "fuzz");
    if (total > weft::fuzz::kMaxAllocatedBytes) return total;
  }
  return total;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::fuzz::use_sync_runtime();
  return 0;
}

/// A weft::Error is the expected outcome for bad input; anything else (a crash, another
/// exception, a sanitizer report, a bound executor whose shapes differ from inference) is a
/// finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const weft::graph::Graph> g;
  try {
    g = std::make_shared<const weft::graph::Graph>(weft::graph::load_json(text, nullptr, "fuzz"));
  } catch (const weft::Error&) {
    return 0;
  }
  // Small graphs only: a node's output count comes from its attributes (SliceChannel's
  // num_outputs), and inference holds a shape per entry.
  if (g->nodes.size() > kMaxNodes || g->num_entries() > kMaxEntries) return 0;
  const weft::graph::InferInputs in = inputs_for(*g);
  weft::graph::InferResult inferred;
  try {
    inferred = weft::graph::infer_shapes_types(*g, in, true);
    // Inference left every shape within limits and every entry on the device.
    for (const weft::Shape& s : inferred.shapes) {
      if (!s.within_limits()) __builtin_trap();
    }
    if (bound_bytes(*g, inferred) > weft::fuzz::kMaxAllocatedBytes) return 0;
    const weft::graph::MemoryPlan plan = weft::graph::plan_memory(*g, inferred);
    weft::graph::check_buffer_plan(plan.buffers, plan.plan);
  } catch (const weft::Error&) {
    return 0;
  }
  try {
    weft::graph::BindOptions options;
    options.inputs = in;
    auto exec = weft::graph::Executor::bind(g, options);
    if (exec->output_shapes().size() != g->heads.size()) __builtin_trap();
    for (size_t h = 0; h < g->heads.size(); ++h) {
      if (exec->output_shapes()[h] != inferred.shapes[g->entry_id(g->heads[h])]) __builtin_trap();
    }
  } catch (const weft::Error&) {
  }
  return 0;
}
