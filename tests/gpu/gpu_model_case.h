// What the GPU executor tests share: a model file bound with deterministic values drawn on the
// CPU, and a per-element comparison of a GPU result with the CPU's.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "devices/device_api.h"
#include "graph/executor.h"
#include "graph/json.h"
#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"

namespace weft::graph::gpu_testing {

using Arrays = std::map<std::string, NDArray, std::less<>>;

inline bool have_gpu() {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  return api != nullptr && api->device_count() > 0;
}

// ‖gpu − cpu‖ / ‖cpu‖ and the largest element error against the largest reference magnitude:
// cuDNN and cuBLAS in FMA math (no TF32) and oneDNN sum in other orders, so the two agree to
// float32 rounding grown over the depth of the network, not bit for bit.
inline ::testing::AssertionResult close(const NDArray& gpu, const NDArray& cpu, double rel_norm,
                                        double rel_max) {
  const std::vector<double> g = gpu.to_doubles(), c = cpu.to_doubles();
  if (g.size() != c.size()) return ::testing::AssertionFailure() << "sizes differ";
  double diff2 = 0, ref2 = 0, worst = 0, scale = 0;
  size_t at = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i]))
      return ::testing::AssertionFailure() << "element " << i << " is " << g[i];
    const double d = g[i] - c[i];
    diff2 += d * d;
    ref2 += c[i] * c[i];
    scale = std::max(scale, std::abs(c[i]));
    if (std::abs(d) > worst) worst = std::abs(d), at = i;
  }
  const double norm = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (norm <= rel_norm && worst <= rel_max * std::max(scale, 1e-6)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "relative norm error " << norm << ", element " << at << ": gpu " << g[at] << " cpu "
         << c[at] << " (scale " << scale << ")";
}

// Deterministic values drawn on the CPU: labels zero, the rest uniform at a scale that keeps
// activations in range (as the CPU replay tests do).
inline Arrays initial_values(const Graph& g, const InferInputs& inputs,
                             const InferResult& inferred) {
  const std::vector<uint32_t> labels = label_variables(g);
  Arrays vars;
  for (uint32_t nid : g.variable_nodes()) {
    const std::string& name = g.nodes[nid].name;
    const uint32_t eid = g.entry_id(nid, 0);
    const Shape& s = inferred.shapes[eid];
    if (std::binary_search(labels.begin(), labels.end(), nid)) {
      vars[name] = NDArray::zeros(s, inferred.dtypes[eid]);
      continue;
    }
    double a = 0.1;
    if (inputs.shapes.count(name)) {
      a = 1;
    } else if (s.ndim() >= 2) {
      a = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(s.size() / s[0], 1)));
    }
    NDArray v = NDArray::uniform(s, -a, a, inferred.dtypes[eid]);
    if (name.ends_with("_var")) v = NDArray::uniform(s, 0.5, 1.5, inferred.dtypes[eid]);
    if (name.ends_with("gamma")) v = NDArray::uniform(s, 0.8, 1.2, inferred.dtypes[eid]);
    vars[name] = v;
  }
  return vars;
}

inline std::pair<Arrays, Arrays> split(const Graph& g, const Arrays& vars, Device device) {
  const std::vector<uint32_t> aux_nodes = g.aux_nodes();
  Arrays args, aux;
  for (uint32_t nid : g.variable_nodes()) {
    const std::string& name = g.nodes[nid].name;
    NDArray v = vars.at(name).copy_to(device);
    (std::binary_search(aux_nodes.begin(), aux_nodes.end(), nid) ? aux : args)[name] = v;
  }
  return {args, aux};
}

// A model file with its inputs at `batch` and deterministic values (seeded by `seed`).
struct Case {
  std::shared_ptr<const Graph> graph;
  InferInputs inputs;
  Arrays vars;
  Case(const std::string& file, int64_t batch, uint64_t seed)
      : graph(std::make_shared<const Graph>(load_json_file(testing::models_dir() / file))),
        inputs(testing::model_inputs(file, batch)) {
    random_seed(seed);
    vars = initial_values(*graph, inputs, infer_shapes_types(*graph, inputs));
  }
};

}  // namespace weft::graph::gpu_testing
