// Bulk execution in the executor (Note [Bulk segments]): graphs bound with every segment size
// give the values of a plain loop computed here, run after run, forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/profiler.h"
#include "graph/executor.h"
#include "ndarray/runtime.h"
#include "tests/ndarray/allclose.h"

namespace weft::graph {
namespace {

NodeEntry E(uint32_t n) { return NodeEntry{n, 0, 0}; }

uint32_t add_var(Graph& g, const std::string& name) {
  Node n;
  n.name = name;
  return g.add_node(std::move(n));
}

uint32_t add_op(Graph& g, const std::string& op, const std::string& name, std::vector<NodeEntry> in,
                AttrMap attrs = {}) {
  Node n;
  n.op = &get_op(op);
  n.name = name;
  n.inputs = std::move(in);
  n.attrs = std::move(attrs);
  return g.add_node(std::move(n));
}

// Two chains of `depth` steps y = tanh(0.5 * y + 0.25 * k) from x, the second scaled by w
// first, joined by an add: long chains with one join, the shape bulking groups.
std::shared_ptr<const Graph> two_chains(int depth) {
  Graph g;
  const uint32_t x = add_var(g, "x");
  const uint32_t w = add_var(g, "w");
  uint32_t a = x;
  uint32_t b = add_op(g, "elemwise_mul", "scale", {E(x), E(w)});
  for (int k = 0; k < depth; ++k) {
    const std::string s = std::to_string(k);
    const std::string c = std::to_string(0.25 * k);
    a = add_op(g, "_mul_scalar", "a_mul" + s, {E(a)}, {{"scalar", "0.5"}});
    a = add_op(g, "_plus_scalar", "a_plus" + s, {E(a)}, {{"scalar", c}});
    a = add_op(g, "tanh", "a_tanh" + s, {E(a)});
    b = add_op(g, "_mul_scalar", "b_mul" + s, {E(b)}, {{"scalar", "0.5"}});
    b = add_op(g, "_plus_scalar", "b_plus" + s, {E(b)}, {{"scalar", c}});
    b = add_op(g, "tanh", "b_tanh" + s, {E(b)});
  }
  const uint32_t sum = add_op(g, "elemwise_add", "sum", {E(a), E(b)});
  g.heads = {E(sum)};
  g.reindex();
  return std::make_shared<const Graph>(g);
}

// The same computation in double, element by element.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, int depth) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double a = x[i];
    double b = static_cast<double>(x[i]) * w[i];
    for (int k = 0; k < depth; ++k) {
      a = std::tanh(0.5 * a + 0.25 * k);
      b = std::tanh(0.5 * b + 0.25 * k);
    }
    out[i] = a + b;
  }
  return out;
}

void expect_near_all(const NDArray& got, const std::vector<double>& want, const char* what) {
  const std::vector<float> g = got.to_vector<float>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    // float steps of a contracting map: the error stays a few ulp of the O(1) values.
    EXPECT_NEAR(g[i], want[i], 2e-6 + 2e-6 * std::fabs(want[i])) << what << " element " << i;
  }
}

TEST(Bulk, EverySegmentSizeGivesTheReferenceRunAfterRun) {
  constexpr int kDepth = 12;  // 74 nodes
  auto g = two_chains(kDepth);
  const Shape shape({3, 5});
  for (uint32_t bulk : {1u, 2u, 5u, 16u, 1000u}) {
    BindOptions bo;
    bo.bulk_max_nodes = bulk;
    bo.inputs.shapes["x"] = shape;
    std::map<std::string, NDArray, std::less<>> args;
    args["w"] = NDArray::uniform(shape, -1.5, 1.5);
    auto ex = Executor::bind(g, bo, args);
    for (int run = 0; run < 3; ++run) {
      NDArray x = NDArray::uniform(shape, -2, 2);
      NDArray xa = ex->arg("x");
      x.copy_to(xa);
      if (run == 2) {
        // A new weight between runs must be seen by the segments that read it.
        NDArray w2 = NDArray::uniform(shape, -1, 1);
        NDArray wa = ex->arg("w");
        w2.copy_to(wa);
      }
      ex->forward();
      expect_near_all(ex->outputs()[0],
                      reference(x.to_vector<float>(), ex->arg("w").to_vector<float>(), kDepth),
                      ("bulk " + std::to_string(bulk) + " run " + std::to_string(run)).c_str());
    }
  }
}

TEST(Bulk, GradientsMatchTheUnbulkedRunExactly) {
  // The same kernels in the same order on one worker: bulking must not change a single bit.
  auto g = two_chains(6);
  const Shape shape({4, 3});
  NDArray x = NDArray::uniform(shape, -2, 2);
  NDArray w = NDArray::uniform(shape, -1.5, 1.5);
  std::vector<std::vector<float>> grads;
  for (uint32_t bulk : {1u, 16u}) {
    BindOptions bo;
    bo.bulk_max_nodes = bulk;
    bo.grad_req["x"] = GradReq::kWrite;
    bo.grad_req["w"] = GradReq::kWrite;
    std::map<std::string, NDArray, std::less<>> args;
    args["x"] = x.copy();
    args["w"] = w.copy();
    auto ex = Executor::bind(g, bo, args);
    ex->forward(true);
    ex->backward({NDArray::ones(shape)});
    grads.push_back(ex->grad("w").to_vector<float>());
    grads.push_back(ex->grad("x").to_vector<float>());
  }
  EXPECT_EQ(grads[0], grads[2]);
  EXPECT_EQ(grads[1], grads[3]);
  // And the gradient is right: d/dw of b-chain at depth 6 by central differences in double.
  const std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {
    auto f = [&](double wi) {
      double b = xv[i] * wi;
      for (int k = 0; k < 6; ++k) b = std::tanh(0.5 * b + 0.25 * k);
      return b;
    };
    const double h = 1e-5;
    const double fd = (f(wv[i] + h) - f(wv[i] - h)) / (2 * h);
    EXPECT_NEAR(grads[0][i], fd, 1e-5 + 1e-4 * std::fabs(fd)) << "dw element " << i;
  }
}

TEST(Bulk, ProfilerSeesEveryNode) {
  // While the profiler records, nodes are pushed alone: the trace names each op.
  auto g = two_chains(2);
  BindOptions bo;
  bo.inputs.shapes["x"] = Shape({2, 2});
  auto ex = Executor::bind(g, bo);
  Profiler::global().clear();
  Profiler::global().start();
  ex->forward();
  ex->outputs()[0].wait_to_read();
  waitall();
  Profiler::global().stop();
  EXPECT_GE(Profiler::global().op_count(), 14u);  // 14 nodes (1 + 6 * 2 + 1), each its own op
  Profiler::global().clear();
}

}  // namespace
}  // namespace weft::graph
