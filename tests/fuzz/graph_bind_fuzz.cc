// libFuzzer entry point for graph JSON -> shape/type inference -> memory plan -> bind: a graph
// must bind or throw weft::Error. Inputs are small graphs whose variables carry `__shape__`
// (the seeds from make_seeds.py); binding is skipped, not run, when the graph's arrays would
// take more than kMaxAllocatedBytes, so no run allocates gigabytes (graph_bind_step.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "base/error.h"
#include "graph/json.h"
#include "tests/fuzz/fuzz_runtime.h"
#include "tests/fuzz/graph_bind_step.h"

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
  weft::fuzz::infer_plan_bind(g);
  return 0;
}
