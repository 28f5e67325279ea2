// Kernels given fewer intra-op threads than the most they may get (the thread budget shrinking
// beside other processes, Note [Thread budget] in engine/cpu_budget.cc) compute what kernels with
// every thread compute. The workspace each op asks for is sized when it is bound, for the most
// threads (Note [Primitive thread count] in ops/cpu/dnnl_util.cc); each model of ../shared/models
// runs with the executor's full rewrites (fusion, layouts) once with every kernel on the whole
// budget and once with every kernel on one thread, and the heads must agree within rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph/executor.h"
#include "graph/json.h"
#include "ndarray/runtime.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"
#include "tests/ndarray/allclose.h"

namespace weft::graph {
namespace {

constexpr int kBudget = 2;

// A runtime with a budget of kBudget threads whose kernels all get `threads` of them.
RuntimeConfig config_with_kernel_threads(int threads) {
  RuntimeConfig config;
  config.engine.num_threads = kBudget;
  config.intra_op_policy = IntraOpPolicy::kFixed;
  config.intra_op_threads = threads;
  return config;
}

// Binds `file` (fused, with layouts) on the current runtime, runs one forward pass on
// deterministic values and returns the heads' values.
std::vector<std::vector<double>> run_model(const std::string& file) {
  auto g = std::make_shared<const Graph>(load_json_file(testing::models_dir() / file));
  const InferInputs inputs = testing::model_inputs(file, 1);
  const InferResult inferred = infer_shapes_types(*g, inputs);
  random_seed(7);
  const std::vector<uint32_t> labels = label_variables(*g);
  const std::vector<uint32_t> aux_nodes = g->aux_nodes();
  std::map<std::string, NDArray, std::less<>> args, aux;
  for (uint32_t nid : g->variable_nodes()) {
    const std::string& name = g->nodes[nid].name;
    const uint32_t eid = g->entry_id(nid, 0);
    const Shape& s = inferred.shapes[eid];
    NDArray v;
    if (std::binary_search(labels.begin(), labels.end(), nid)) {
      v = NDArray::zeros(s, inferred.dtypes[eid]);
    } else if (name.ends_with("_var")) {
      v = NDArray::uniform(s, 0.5, 1.5, inferred.dtypes[eid]);
    } else {
      const double a =
          s.ndim() >= 2 ? std::sqrt(3.0 / static_cast<double>(s.prod(1, s.ndim()))) : 0.1;
      v = NDArray::uniform(s, -a, a, inferred.dtypes[eid]);
    }
    (std::binary_search(aux_nodes.begin(), aux_nodes.end(), nid) ? aux : args)[name] = v;
  }
  BindOptions bo;
  bo.inputs = inputs;
  auto ex = Executor::bind(g, bo, args, aux);
  ex->forward(false);
  std::vector<std::vector<double>> heads;
  for (const NDArray& out : ex->outputs()) heads.push_back(out.to_doubles());
  return heads;
}

class ThreadCount : public ::testing::TestWithParam<std::string> {
 protected:
  ~ThreadCount() override { Runtime::reset(RuntimeConfig{}); }
};

TEST_P(ThreadCount, KernelsOnOneThreadMatchKernelsOnTheWholeBudget) {
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  Runtime::reset(config_with_kernel_threads(kBudget));
  const auto wide = run_model(file);
  Runtime::reset(config_with_kernel_threads(1));
  ASSERT_EQ(Runtime::get().thread_budget(), kBudget);
  const auto narrow = run_model(file);
  ASSERT_EQ(wide.size(), narrow.size());
  for (size_t h = 0; h < wide.size(); ++h) {
    // Only the order of float32 sums differs; allow a few thousandths of the head's scale.
    double scale = 0;
    for (double v : wide[h]) scale = std::max(scale, std::abs(v));
    const testing::Tolerance tol{2e-3 * std::max(scale, 1e-3), 2e-3};
    EXPECT_TRUE(testing::all_close(narrow[h], wide[h], tol)) << file << " head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ThreadCount, ::testing::ValuesIn(testing::mxnet_model_files()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return "model" + std::to_string(info.index);
                         });

}  // namespace
}  // namespace weft::graph
