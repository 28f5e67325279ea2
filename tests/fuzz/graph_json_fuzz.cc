// libFuzzer entry point for the graph JSON readers (MXNet symbol JSON and TVM graph JSON): any
// input must load or throw weft::Error, what loads must save and load back unchanged, and an
// MXNet graph that loads is inferred, planned and bound (graph_bind_step.h), so that whatever
// the reader lets through is used as a replay would use it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "graph/json.h"
#include "graph/tvm.h"
#include "tests/fuzz/fuzz_runtime.h"
#include "tests/fuzz/graph_bind_step.h"

namespace {

bool same_graph(const weft::graph::Graph& a, const weft::graph::Graph& b) {
  if (a.nodes.size() != b.nodes.size() || !(a.heads == b.heads)) return false;
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const weft::graph::Node& x = a.nodes[i];
    const weft::graph::Node& y = b.nodes[i];
    if (x.name != y.name || x.op != y.op || x.written_op_name() != y.written_op_name() ||
        x.attrs != y.attrs || x.inputs != y.inputs || x.control_deps != y.control_deps) {
      return false;
    }
    for (size_t k = 0; k < x.inputs.size(); ++k) {
      if (x.inputs[k].version != y.inputs[k].version) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::fuzz::use_sync_runtime();
  return 0;
}

/// Feeds `data` to both readers. A weft::Error is the expected outcome for bad input; anything else
/// (a crash, another exception, a sanitizer report, a graph that does not survive a save) is a
/// finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto g =
        std::make_shared<const weft::graph::Graph>(weft::graph::load_json(text, nullptr, "fuzz"));
    // The saved text is the current layout: it loads without upgrades to the same graph, and
    // saving that gives the same text again.
    const std::string saved = weft::graph::save_json(*g);
    weft::graph::JsonInfo info;
    const weft::graph::Graph again = weft::graph::load_json(saved, &info, "fuzz-resaved");
    if (info.upgraded || !same_graph(*g, again) || weft::graph::save_json(again) != saved)
      __builtin_trap();
    weft::fuzz::infer_plan_bind(g);
  } catch (const weft::Error&) {
  }
  try {
    const weft::graph::TvmGraph t = weft::graph::load_tvm_json(text, "fuzz");
    const weft::graph::TvmStoragePlan plan = weft::graph::tvm_storage_plan(t);
    if (plan.planned_bytes > plan.unshared_bytes || plan.num_storage_ids > plan.num_entries)
      __builtin_trap();
  } catch (const weft::Error&) {
  }
  return 0;
}
