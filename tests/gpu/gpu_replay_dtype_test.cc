// Reduced-precision replay on cuda:0 (graph/precision.h, Note [Reduced-precision binds]):
// ResNet-like models of ../shared/models (or $WEFT_MODELS_DIR) at batch 1, bound in bfloat16 and
// float16 with the plan's types, unfused, their float32 values cast once, against the float32
// CPU executor with the same values: within the documented tolerances (precision_tolerance,
// what `weft replay --compare` uses) element by element, and in relative norm. Skips without a
// CUDA device or the model folder.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "graph/precision.h"
#include "tests/gpu/gpu_model_case.h"

namespace weft::graph {
namespace {

using namespace gpu_testing;  // NOLINT: the shared test helpers

// Element by element as `weft replay --compare` does: |a - b| <= atol + rtol * |b|.
::testing::AssertionResult within(const NDArray& got, const NDArray& ref, Tolerance tol) {
  const std::vector<double> a = got.to_doubles(), b = ref.to_doubles();
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::abs(a[i] - b[i]) <= tol.atol + tol.rtol * std::abs(b[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << ", float32 " << b[i] << " (rtol " << tol.rtol
             << ", atol " << tol.atol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

using Param = std::tuple<std::string, DType>;

class GpuReplayDtype : public ::testing::TestWithParam<Param> {};

TEST_P(GpuReplayDtype, MatchesTheFloat32CpuExecutorWithinTheDocumentedTolerance) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  WEFT_REQUIRE_MODELS();
  const auto& [file, dtype] = GetParam();
  if (!std::filesystem::exists(testing::models_dir() / file)) GTEST_SKIP() << file << " absent";
  InferInputs inputs;
  inputs.shapes["data"] = Shape{1, 3, 224, 224};
  auto g = std::make_shared<const Graph>(load_json_file(testing::models_dir() / file));
  random_seed(13);
  const Arrays vars = initial_values(*g, inputs, infer_shapes_types(*g, inputs));

  // The reference: float32 on the CPU (fused, as a float32 replay runs).
  std::vector<NDArray> ref;
  {
    auto [args, aux] = split(*g, vars, Device::cpu());
    BindOptions bo;
    bo.inputs = inputs;
    bo.layouts = false;
    auto ex = Executor::bind(g, bo, args, aux);
    ex->forward(false);
    ref = ex->outputs();
  }

  // 16-bit on cuda:0: the plan's types, the float32 values cast once.
  const PrecisionPlan plan = plan_precision(*g, inputs, dtype);
  Arrays cast;
  for (const auto& [name, v] : vars) {
    auto t = plan.dtypes.find(name);
    cast[name] = cast_array(v, t == plan.dtypes.end() ? v.dtype() : t->second, Device::cpu());
  }
  auto [args, aux] = split(*g, cast, Device::cuda(0));
  BindOptions bo;
  bo.device = Device::cuda(0);
  bo.inputs = inputs;
  bo.inputs.dtypes = plan.dtypes;
  bo.fuse = false;
  auto ex = Executor::bind(g, bo, args, aux);
  for (const auto& [name, reason] : plan.kept_float32) {
    const NDArray a = aux.count(name) ? ex->aux(name) : ex->arg(name);
    EXPECT_EQ(a.dtype(), DType::kFloat32) << name << " (" << reason << ")";
  }
  EXPECT_EQ(ex->arg("data").dtype(), dtype);
  ex->forward(false);
  ex->forward(false);  // a second run (a captured replay) gives the same values
  const std::vector<NDArray> outs = ex->outputs();
  ASSERT_EQ(outs.size(), ref.size());
  const Tolerance tol = precision_tolerance(dtype);
  for (size_t h = 0; h < outs.size(); ++h) {
    EXPECT_EQ(outs[h].dtype(), dtype) << file << " head " << h;
    const NDArray f32 = cast_array(outs[h], DType::kFloat32, Device::cpu());
    EXPECT_TRUE(within(f32, ref[h], tol)) << file << " head " << h;
    // Softmax probabilities are far below atol: the relative norm checks them too.
    EXPECT_TRUE(close(f32, ref[h], tol.rtol, 1.0)) << file << " head " << h;
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const std::string& file = std::get<0>(info.param);
  std::string name;
  for (char ch : file.substr(file.find("__") + 2, file.find('.') - file.find("__") - 2)) {
    name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  }
  return name + "_" + dtype_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    ResNets, GpuReplayDtype,
    ::testing::Combine(
        ::testing::Values("pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json",
                          "fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json",
                          "soeaver__mxnet-model__se-resnext50-32x4d-symbol.json"),
        ::testing::Values(DType::kBFloat16, DType::kFloat16)),
    param_name);

}  // namespace
}  // namespace weft::graph
