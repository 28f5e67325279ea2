// Data-parallel backward against one process: every rank binds the MLP for the whole batch and
// for its slice of it, with the same weights; the gradients averaged over ranks, times the number
// of ranks (SoftmaxOutput sums over the batch), equal the whole batch's, per element.
#include <gtest/gtest.h>

#include <cmath>

#include "dist/dist.h"
#include "graph/executor.h"
#include "graph/models.h"
#include "ndarray/runtime.h"

namespace weft::dist {
namespace {

using graph::BindOptions;
using graph::Executor;

TEST(DataParallel, AveragedSliceGradientsEqualTheWholeBatch) {
  const int64_t batch = 8;
  if (batch % size() != 0) GTEST_SKIP() << "batch " << batch << " over " << size() << " ranks";
  const int64_t part = batch / size();
  auto g = std::make_shared<const graph::Graph>(graph::models::mlp(4, {16}).to_graph());
  auto bind = [&](int64_t n, std::map<std::string, NDArray, std::less<>> args) {
    BindOptions bo;
    bo.inputs.shapes["data"] = Shape({n, 784});
    bo.inputs.shapes["softmax_label"] = Shape({n});
    bo.default_grad_req = weft::GradReq::kWrite;
    bo.grad_req["data"] = weft::GradReq::kNull;
    bo.grad_req["softmax_label"] = weft::GradReq::kNull;
    return Executor::bind(g, bo, std::move(args));
  };
  // The same weights and batch on every rank: a seeded generator in the same order everywhere.
  Runtime::get().seed(1234);
  auto whole = bind(batch, {});
  std::map<std::string, NDArray, std::less<>> weights;
  for (const auto& name : whole->arg_names()) {
    if (name == "data" || name == "softmax_label") continue;
    NDArray w = NDArray::uniform(whole->arg(name).shape(), -0.1, 0.1);
    NDArray bound = whole->arg(name);  // shares the executor's storage
    w.copy_to(bound);
    weights[name] = w;
  }
  NDArray data = NDArray::uniform(Shape({batch, 784}), 0, 1);
  std::vector<float> labels;
  for (int64_t i = 0; i < batch; ++i) labels.push_back(static_cast<float>(i % 4));
  NDArray label = NDArray::from_vector(Shape({batch}), labels);
  {
    NDArray d = whole->arg("data"), l = whole->arg("softmax_label");
    data.copy_to(d);
    label.copy_to(l);
  }
  whole->forward(true);
  whole->backward();

  auto args = weights;
  for (auto& [k, v] : args) v = v.copy();
  args["data"] = data.slice(rank() * part, (rank() + 1) * part).copy();
  args["softmax_label"] = label.slice(rank() * part, (rank() + 1) * part).copy();
  auto mine = bind(part, args);
  mine->forward(true);
  data_parallel_backward(*mine, {}, {"data", "softmax_label"});

  for (const auto& [name, w] : weights) {
    auto want = whole->grad(name).to_doubles();
    auto got = mine->grad(name).to_doubles();
    ASSERT_EQ(got.size(), want.size()) << name;
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i] * size(), want[i], 1e-5 * scale + 1e-6 * std::abs(want[i]))
          << name << "[" << i << "] on rank " << rank();
    }
  }
}

}  // namespace
}  // namespace weft::dist
