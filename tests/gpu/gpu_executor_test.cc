// The graph executor bound on cuda:0 (Note [Executor on a GPU] in graph/executor.cc) against
// the same graph bound on the CPU, with the same values: every MXNet model of ../shared/models
// (or $WEFT_MODELS_DIR) at batch 1, fused for inference, and a training step of the MLP file
// (outputs and every parameter's gradient). Skips without a CUDA device or the model folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "graph/executor.h"
#include "graph/json.h"
#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"

namespace weft::graph {
namespace {

using Arrays = std::map<std::string, NDArray, std::less<>>;

bool have_gpu() {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  return api != nullptr && api->device_count() > 0;
}

// ‖gpu − cpu‖ / ‖cpu‖ and the largest element error against the largest reference magnitude:
// cuDNN and cuBLAS in FMA math (no TF32) and oneDNN sum in other orders, so the two agree to
// float32 rounding grown over the depth of the network, not bit for bit.
::testing::AssertionResult close(const NDArray& gpu, const NDArray& cpu, double rel_norm,
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
Arrays initial_values(const Graph& g, const InferInputs& inputs, const InferResult& inferred) {
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

std::pair<Arrays, Arrays> split(const Graph& g, const Arrays& vars, Device device) {
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

class GpuExecutor : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuExecutor, EqualsTheCpuExecutorAtBatch1) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  const Case c(file, 1, 7);
  const auto& g = c.graph;
  const InferInputs& inputs = c.inputs;
  const Arrays& vars = c.vars;
  std::vector<NDArray> heads[2];
  for (int d = 0; d < 2; ++d) {
    const Device device = d == 0 ? Device::cpu() : Device::cuda(0);
    auto [args, aux] = split(*g, vars, device);
    BindOptions bo;
    bo.device = device;
    bo.inputs = inputs;
    bo.layouts = false;
    auto ex = Executor::bind(g, bo, args, aux);
    ex->forward(false);
    ex->forward(false);  // a second run reuses the arena behind the first (the fence)
    heads[d] = ex->outputs();
    ASSERT_EQ(heads[d].size(), g->heads.size());
    for (const NDArray& h : heads[d]) EXPECT_EQ(h.device(), device) << file;
  }
  for (size_t h = 0; h < heads[0].size(); ++h) {
    EXPECT_TRUE(close(heads[1][h], heads[0][h], 1e-4, 1e-3)) << file << " head " << h;
  }
}

std::vector<std::string> model_files() {
  std::vector<std::string> files;
  for (const auto& spec : testing::mxnet_model_specs()) files.emplace_back(spec.file);
  return files;
}

INSTANTIATE_TEST_SUITE_P(Models, GpuExecutor, ::testing::ValuesIn(model_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name;
                           for (char ch : info.param.substr(0, info.param.find('.'))) {
                             name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           }
                           return name;
                         });

// A training step of the MLP file on the GPU: forward outputs and every parameter's gradient
// equal the CPU executor's.
TEST(GpuExecutorTraining, MlpGradientsEqualTheCpus) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  WEFT_REQUIRE_MODELS();
  const Case c("apache__mxnet__save_000800.json", 16, 11);
  const auto& g = c.graph;
  const InferInputs& inputs = c.inputs;
  const Arrays& vars = c.vars;
  std::vector<NDArray> outs[2];
  std::map<std::string, NDArray> grads[2];
  for (int d = 0; d < 2; ++d) {
    const Device device = d == 0 ? Device::cpu() : Device::cuda(0);
    auto [args, aux] = split(*g, vars, device);
    BindOptions bo;
    bo.device = device;
    bo.inputs = inputs;
    bo.default_grad_req = GradReq::kWrite;
    for (uint32_t nid : label_variables(*g)) bo.grad_req[g->nodes[nid].name] = GradReq::kNull;
    for (const auto& [name, s] : inputs.shapes) bo.grad_req[name] = GradReq::kNull;
    auto ex = Executor::bind(g, bo, args, aux);
    ex->forward(true);
    ex->backward();
    outs[d] = ex->outputs();
    for (const auto& [name, v] : args) {
      if (bo.grad_req.count(name) == 0) grads[d][name] = ex->grad(name);
    }
  }
  ASSERT_FALSE(grads[0].empty());
  for (size_t h = 0; h < outs[0].size(); ++h) {
    EXPECT_TRUE(close(outs[1][h], outs[0][h], 1e-5, 1e-4)) << "output " << h;
  }
  for (const auto& [name, cpu] : grads[0]) {
    EXPECT_TRUE(close(grads[1].at(name), cpu, 1e-4, 1e-3)) << "gradient of " << name;
  }
}

}  // namespace
}  // namespace weft::graph
