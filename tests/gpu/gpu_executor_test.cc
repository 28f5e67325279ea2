// The graph executor bound on cuda:0 (Note [Executor on a GPU] in graph/executor.cc) against
// the same graph bound on the CPU, with the same values: every MXNet model of ../shared/models
// (or $WEFT_MODELS_DIR) at batch 1, fused for inference, and a training step of the MLP file
// (outputs and every parameter's gradient). Skips without a CUDA device or the model folder.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/gpu/gpu_model_case.h"

namespace weft::graph {
namespace {

using namespace gpu_testing;  // NOLINT: the shared test helpers

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
