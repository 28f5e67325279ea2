// Every MXNet model of ../shared/models replays at batch 1 through the executor, and its heads
// equal an independent reference: the same nodes run one by one through the imperative path
// (NDArray invoke), without planning, arena or fusion. The fused inference graph is checked too.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/executor.h"
#include "graph/json.h"
#include "ndarray/runtime.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"

namespace weft::graph {
namespace {

// Deterministic, scale-preserving values: He-uniform weights, positive variances, data in [-1, 1).
NDArray init_value(const std::string& name, const Shape& s, DType t, bool is_input) {
  double low = -0.1, high = 0.1;
  if (is_input) {
    low = -1, high = 1;
  } else if (name.ends_with("_var")) {
    low = 0.5, high = 1.5;
  } else if (name.ends_with("gamma")) {
    low = 0.8, high = 1.2;
  } else if (s.ndim() >= 2) {
    int64_t fan_in = 1;
    for (int i = 1; i < s.ndim(); ++i) fan_in *= s[i];
    const double a = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
    low = -a, high = a;
  }
  return NDArray::uniform(s, low, high, t);
}

class ModelReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelReplay, ExecutorEqualsImperativeAtBatch1) {
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  auto g = std::make_shared<const Graph>(load_json_file(testing::models_dir() / file));
  const InferInputs inputs = testing::model_inputs(file, 1);
  const InferResult inferred = infer_shapes_types(*g, inputs);
  random_seed(42);

  // Values for every variable: labels zero, the rest deterministic.
  const std::vector<uint32_t> labels = label_variables(*g);
  std::map<std::string, NDArray, std::less<>> args, aux;
  std::vector<NDArray> values(g->num_entries());
  const std::vector<uint32_t> aux_nodes = g->aux_nodes();
  for (uint32_t nid : g->variable_nodes()) {
    const std::string& name = g->nodes[nid].name;
    const uint32_t eid = g->entry_id(nid, 0);
    const bool is_label = std::binary_search(labels.begin(), labels.end(), nid);
    NDArray v = is_label ? NDArray::zeros(inferred.shapes[eid], inferred.dtypes[eid])
                         : init_value(name, inferred.shapes[eid], inferred.dtypes[eid], inputs.shapes.count(name) > 0);
    values[eid] = v;
    (std::binary_search(aux_nodes.begin(), aux_nodes.end(), nid) ? aux : args)[name] = v;
  }
  // The reference: node by node through the imperative path (copies of the variables, so the
  // executor's arrays are untouched).
  for (uint32_t nid = 0; nid < g->nodes.size(); ++nid) {
    const Node& n = g->nodes[nid];
    if (n.is_variable()) {
      values[g->entry_id(nid, 0)] = values[g->entry_id(nid, 0)].copy();
      continue;
    }
    std::vector<NDArray> in;
    for (const NodeEntry& e : n.inputs) in.push_back(values[g->entry_id(e)]);
    std::vector<NDArray> out = invoke_all(n.op_attrs, in);
    ASSERT_EQ(static_cast<int>(out.size()), n.num_outputs()) << n.name;
    for (int o = 0; o < n.num_outputs(); ++o) values[g->entry_id(nid, o)] = out[o];
  }

  // No wait here: the reference's kernels and the executor's run concurrently on purpose (this
  // found primitives shared across threads).
  for (bool fuse : {false, true}) {
    BindOptions bo;
    bo.inputs = inputs;
    bo.fuse = fuse;
    auto ex = Executor::bind(g, bo, args, aux);
    ex->forward(false);
    ASSERT_EQ(ex->outputs().size(), g->heads.size());
    const auto& plan = ex->memory_plan().plan;
    EXPECT_LE(plan.arena_bytes, plan.no_reuse);
    check_buffer_plan(ex->memory_plan().buffers, plan);
    for (size_t h = 0; h < g->heads.size(); ++h) {
      const NDArray& ref = values[g->entry_id(g->heads[h])];
      ASSERT_EQ(ex->outputs()[h].shape(), ref.shape()) << file << " head " << h;
      const auto a = ex->outputs()[h].to_doubles();
      const auto b = ref.to_doubles();
      double scale = 0;
      for (double x : b) scale = std::max(scale, std::abs(x));
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_TRUE(std::isfinite(a[i])) << file << " head " << h << " element " << i;
        // Fusion folds BatchNorm into the weights, which changes rounding: compare relative to
        // the head's magnitude.
        ASSERT_NEAR(a[i], b[i], 2e-3 * (scale + 1e-6) + 1e-6)
            << file << (fuse ? " (fused)" : "") << " head " << h << " element " << i;
      }
    }
  }
}

std::string model_label(const ::testing::TestParamInfo<std::string>& info) {
  for (const auto& s : testing::mxnet_model_specs()) {
    if (s.file == info.param) {
      std::string l = s.name;
      for (char& c : l) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return l;
    }
  }
  return "model" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelReplay, ::testing::ValuesIn(testing::mxnet_model_files()), model_label);

}  // namespace
}  // namespace weft::graph
