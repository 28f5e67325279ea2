// The executor against independent references: the same ops run imperatively (NDArray invoke),
// eager autograd, and finite differences; plus inference, placement and rebinding.
#include "graph/executor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "graph/gradient.h"
#include "graph/infer.h"
#include "graph/placement.h"
#include "ndarray/autograd.h"
#include "ndarray/runtime.h"
#include "tests/ndarray/allclose.h"

namespace weft::graph {
namespace {

// A small builder over the IR for these tests.
struct G {
  Graph g;
  uint32_t var(const std::string& name, AttrMap attrs = {}) {
    Node n;
    n.name = name;
    n.attrs = std::move(attrs);
    return g.add_node(std::move(n));
  }
  uint32_t op(const std::string& op, const std::string& name, std::vector<NodeEntry> in,
              AttrMap attrs = {}) {
    Node n;
    n.op = &get_op(op);
    n.name = name;
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    return g.add_node(std::move(n));
  }
  std::shared_ptr<const Graph> done(std::vector<NodeEntry> heads) {
    g.heads = std::move(heads);
    g.reindex();
    return std::make_shared<const Graph>(g);
  }
};

NodeEntry E(uint32_t n, uint32_t i = 0) { return NodeEntry{n, i, 0}; }

// data(4,6) -> FC(5) -> tanh -> FC(3) -> heads: fc2 output.
std::shared_ptr<const Graph> mlp_graph() {
  G b;
  auto data = b.var("data");
  auto w1 = b.var("fc1_weight");
  auto b1 = b.var("fc1_bias");
  auto fc1 = b.op("FullyConnected", "fc1", {E(data), E(w1), E(b1)}, {{"num_hidden", "5"}});
  auto act = b.op("Activation", "act", {E(fc1)}, {{"act_type", "tanh"}});
  auto w2 = b.var("fc2_weight");
  auto b2 = b.var("fc2_bias");
  auto fc2 = b.op("FullyConnected", "fc2", {E(act), E(w2), E(b2)}, {{"num_hidden", "3"}});
  return b.done({E(fc2)});
}

TEST(GraphInfer, FillsWeightsFromDataAndBatch) {
  auto g = mlp_graph();
  InferInputs in;
  in.shapes["data"] = Shape({1, 6});
  in.batch = 4;
  InferResult r = infer_shapes_types(*g, in);
  EXPECT_TRUE(r.complete());
  EXPECT_EQ(r.shapes[g->entry_id(g->heads[0])], Shape({4, 3}));
  EXPECT_EQ(r.shapes[g->entry_id(1, 0)], Shape({5, 6}));  // fc1_weight, inferred backward
  EXPECT_EQ(r.dtypes[g->entry_id(g->heads[0])], DType::kFloat32);
}

TEST(GraphInfer, MissingInputIsNamed) {
  auto g = mlp_graph();
  try {
    infer_shapes_types(*g, InferInputs{});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'data'"), std::string::npos) << e.what();
  }
}

TEST(GraphInfer, ContradictionNamesTheNode) {
  auto g = mlp_graph();
  InferInputs in;
  in.shapes["data"] = Shape({4, 6});
  in.shapes["fc2_weight"] = Shape({3, 7});  // act has 5 features
  try {
    infer_shapes_types(*g, in);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("fc2"), std::string::npos) << e.what();
  }
}

TEST(GraphInfer, UnknownDimensionsInShapeAttributes) {
  // Gluon exports write deferred dimensions as 0: "(3, 0)" is completed from the data.
  G b;
  auto data = b.var("data", {{"__shape__", "(0, 6)"}});
  auto w = b.var("w", {{"__shape__", "(3, 0)"}});
  auto fc =
      b.op("FullyConnected", "fc", {E(data), E(w)}, {{"num_hidden", "3"}, {"no_bias", "True"}});
  auto g = b.done({E(fc)});
  InferInputs in;
  in.batch = 2;
  InferResult r = infer_shapes_types(*g, in);
  EXPECT_EQ(r.shapes[g->entry_id(1, 0)], Shape({3, 6}));
  EXPECT_EQ(r.shapes[g->entry_id(E(fc))], Shape({2, 3}));
}

std::map<std::string, NDArray, std::less<>> random_args(const Executor& ex, uint64_t seed) {
  random_seed(seed);
  std::map<std::string, NDArray, std::less<>> out;
  for (const auto& name : ex.arg_names()) {
    NDArray a = ex.arg(name);
    out[name] = NDArray::uniform(a.shape(), -1, 1);
  }
  return out;
}

// The executor and the imperative path run the same kernels with the same thread count
// (FixedIntraOpThreads): results agree exactly.
TEST(Executor, ForwardEqualsImperative) {
  testing::FixedIntraOpThreads fixed_threads;
  auto g = mlp_graph();
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({4, 6});
  auto probe = Executor::bind(g, bo);
  auto args = random_args(*probe, 7);
  auto ex = Executor::bind(g, bo, args);
  ex->forward();
  NDArray h = invoke1("FullyConnected", {args["data"], args["fc1_weight"], args["fc1_bias"]},
                      {{"num_hidden", "5"}});
  h = invoke1("Activation", {h}, {{"act_type", "tanh"}});
  h = invoke1("FullyConnected", {h, args["fc2_weight"], args["fc2_bias"]}, {{"num_hidden", "3"}});
  EXPECT_TRUE(testing::all_equal(ex->outputs()[0], h));
  // Running again with new data gives the new result (no stale arena contents).
  NDArray d2 = NDArray::uniform(Shape({4, 6}), -2, 2);
  NDArray data_arg = ex->arg("data");
  d2.copy_to(data_arg);
  ex->forward();
  NDArray h2 =
      invoke1("FullyConnected", {d2, args["fc1_weight"], args["fc1_bias"]}, {{"num_hidden", "5"}});
  h2 = invoke1("Activation", {h2}, {{"act_type", "tanh"}});
  h2 = invoke1("FullyConnected", {h2, args["fc2_weight"], args["fc2_bias"]}, {{"num_hidden", "3"}});
  EXPECT_TRUE(testing::all_equal(ex->outputs()[0], h2));
}

// A branchy CNN: conv -> BN -> relu, two branches (pool / conv) concatenated, FC, softmax head.
std::shared_ptr<const Graph> cnn_graph() {
  G b;
  auto data = b.var("data");
  auto c1 = b.op("Convolution", "c1", {E(data), E(b.var("c1_weight")), E(b.var("c1_bias"))},
                 {{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"pad", "(1, 1)"}});
  auto bn = b.op("BatchNorm", "bn",
                 {E(c1), E(b.var("bn_gamma")), E(b.var("bn_beta")), E(b.var("bn_moving_mean")),
                  E(b.var("bn_moving_var"))},
                 {{"fix_gamma", "False"}});
  auto r = b.op("Activation", "r", {E(bn)}, {{"act_type", "relu"}});
  auto p = b.op("Pooling", "p", {E(r)},
                {{"kernel", "(2, 2)"}, {"stride", "(2, 2)"}, {"pool_type", "max"}});
  auto c2 =
      b.op("Convolution", "c2", {E(r), E(b.var("c2_weight"))},
           {{"kernel", "(2, 2)"}, {"stride", "(2, 2)"}, {"num_filter", "3"}, {"no_bias", "True"}});
  auto cat = b.op("Concat", "cat", {E(p), E(c2)}, {{"num_args", "2"}, {"dim", "1"}});
  auto fc = b.op("FullyConnected", "fc", {E(cat), E(b.var("fc_weight")), E(b.var("fc_bias"))},
                 {{"num_hidden", "5"}});
  auto sm = b.op("SoftmaxOutput", "softmax", {E(fc), E(b.var("softmax_label"))});
  return b.done({E(sm), E(cat)});
}

// Fused (BatchNorm folded into c1's weights) against the unfused reference, per element. The
// folding changes c1's rounding by a few ulp of its terms (27 products of magnitude <= 1, BatchNorm
// scale <= ~1.5), which c2, the FC and the softmax carry on: measured at most 5e-7 on these O(1)
// values. 5e-6 + 1e-5 * |expected| leaves 10x room; an element computed wrongly is off by O(0.1).
// The thorough check, per fused node with a rounding bound, is in replay_models_test.cc.
constexpr testing::Tolerance kFusedTolerance{5e-6, 1e-5};

TEST(Executor, BranchyCnnForwardEqualsImperativeAndRepeats) {
  testing::FixedIntraOpThreads fixed_threads;
  auto g = cnn_graph();
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({2, 3, 8, 8});
  bo.layouts = false;  // exact against the plain imperative path (layouts: layout_test.cc)
  auto probe = Executor::bind(g, bo);
  auto args = random_args(*probe, 11);
  args.erase("softmax_label");  // filled with zeros by bind
  std::map<std::string, NDArray, std::less<>> aux;
  aux["bn_moving_mean"] = NDArray::uniform(Shape({4}), -0.2, 0.2);
  aux["bn_moving_var"] = NDArray::uniform(Shape({4}), 0.5, 1.5);
  for (bool fuse : {false, true}) {
    bo.fuse = fuse;
    auto ex = Executor::bind(g, bo, args, aux);
    NDArray x = args["data"];
    NDArray c1 = invoke1("Convolution", {x, args["c1_weight"], args["c1_bias"]},
                         {{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"pad", "(1, 1)"}});
    NDArray bn =
        invoke("BatchNorm",
               {c1, args["bn_gamma"], args["bn_beta"], aux["bn_moving_mean"], aux["bn_moving_var"]},
               {{"fix_gamma", "False"}})[0];
    NDArray r = invoke1("Activation", {bn}, {{"act_type", "relu"}});
    NDArray p =
        invoke1("Pooling", {r}, {{"kernel", "(2, 2)"}, {"stride", "(2, 2)"}, {"pool_type", "max"}});
    NDArray c2 = invoke1(
        "Convolution", {r, args["c2_weight"]},
        {{"kernel", "(2, 2)"}, {"stride", "(2, 2)"}, {"num_filter", "3"}, {"no_bias", "True"}});
    NDArray cat = invoke1("Concat", {p, c2}, {{"num_args", "2"}, {"dim", "1"}});
    NDArray fc =
        invoke1("FullyConnected", {cat, args["fc_weight"], args["fc_bias"]}, {{"num_hidden", "5"}});
    NDArray sm = invoke1("SoftmaxOutput", {fc, NDArray::zeros(Shape({2}))});
    for (int rep = 0; rep < 5; ++rep) {
      ex->forward();
      if (!fuse) {
        EXPECT_TRUE(testing::all_equal(ex->outputs()[0], sm)) << "softmax, run " << rep;
        EXPECT_TRUE(testing::all_equal(ex->outputs()[1], cat)) << "concat, run " << rep;
      } else {
        EXPECT_TRUE(testing::all_close(ex->outputs()[0], sm, kFusedTolerance))
            << "softmax (fused), run " << rep;
        EXPECT_TRUE(testing::all_close(ex->outputs()[1], cat, kFusedTolerance))
            << "concat (fused), run " << rep;
      }
    }
    EXPECT_EQ(ex->output_shapes()[0], Shape({2, 5}));
    const auto& plan = ex->memory_plan().plan;
    EXPECT_GE(plan.arena_bytes, plan.lower_bound);
    EXPECT_LE(plan.arena_bytes, plan.no_reuse);
  }
}

TEST(Executor, GradientsEqualAutogradAndFiniteDifferences) {
  testing::FixedIntraOpThreads fixed_threads;
  auto g = mlp_graph();
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({4, 6});
  bo.default_grad_req = GradReq::kWrite;
  bo.grad_req["data"] = GradReq::kNull;
  auto probe = Executor::bind(g, bo);
  auto args = random_args(*probe, 3);
  auto ex = Executor::bind(g, bo, args);
  NDArray head_grad = NDArray::uniform(Shape({4, 3}), -1, 1);
  ex->forward(true);
  ex->backward({head_grad});

  // Eager autograd on the same computation.
  std::map<std::string, NDArray, std::less<>> leaves;
  for (auto& [k, v] : args) {
    leaves[k] = v.copy();
    if (k != "data") leaves[k].attach_grad();
  }
  NDArray out;
  {
    autograd::RecordScope rec;
    NDArray h =
        invoke1("FullyConnected", {leaves["data"], leaves["fc1_weight"], leaves["fc1_bias"]},
                {{"num_hidden", "5"}});
    h = invoke1("Activation", {h}, {{"act_type", "tanh"}});
    out = invoke1("FullyConnected", {h, leaves["fc2_weight"], leaves["fc2_bias"]},
                  {{"num_hidden", "3"}});
  }
  autograd::backward({out}, {head_grad});
  for (const char* name : {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"}) {
    EXPECT_TRUE(testing::all_equal(ex->grad(name), leaves[name].grad())) << name;
  }
  EXPECT_TRUE(ex->grad("data").is_none());

  // Finite differences of L = sum(head_grad * out) on a few weight elements.
  const auto hg = head_grad.to_doubles();
  auto loss = [&](const std::map<std::string, NDArray, std::less<>>& a) {
    BindOptions inference;
    inference.inputs = bo.inputs;
    auto e = Executor::bind(g, inference, a);
    e->forward();
    const auto o = e->outputs()[0].to_doubles();
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += hg[i] * o[i];
    return s;
  };
  const auto analytic = ex->grad("fc1_weight").to_doubles();
  for (int idx : {0, 7, 13, 29}) {
    auto plus = args, minus = args;
    std::vector<float> w = args["fc1_weight"].to_vector<float>();
    const float h = 1e-2f;
    auto wp = w, wm = w;
    wp[idx] += h;
    wm[idx] -= h;
    plus["fc1_weight"] = NDArray::from_vector(Shape({5, 6}), wp);
    minus["fc1_weight"] = NDArray::from_vector(Shape({5, 6}), wm);
    const double numeric = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(analytic[idx], numeric, 2e-3 * (1 + std::abs(numeric)))
        << "fc1_weight[" << idx << "]";
  }
}

TEST(Executor, GradReqAddAccumulates) {
  auto g = mlp_graph();
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({4, 6});
  bo.grad_req["fc2_bias"] = GradReq::kAdd;
  auto probe = Executor::bind(g, bo);
  auto args = random_args(*probe, 5);
  auto ex = Executor::bind(g, bo, args);
  NDArray head_grad = NDArray::ones(Shape({4, 3}));
  ex->forward(true);
  ex->backward({head_grad});
  const auto once = ex->grad("fc2_bias").to_doubles();
  ex->forward(true);
  ex->backward({head_grad});
  const auto twice = ex->grad("fc2_bias").to_doubles();
  for (size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(once[i], 4.0, 1e-5);  // the bias gradient is the column sum of ones
    EXPECT_NEAR(twice[i], 8.0, 1e-5);
  }
}

TEST(Executor, LossHeadTrainsWithoutHeadGradient) {
  auto g = cnn_graph();
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({2, 3, 8, 8});
  bo.default_grad_req = GradReq::kWrite;
  bo.grad_req["data"] = GradReq::kNull;
  auto ex = Executor::bind(g, bo);
  random_seed(1);
  for (const auto& name : ex->arg_names()) {
    if (name == "softmax_label") continue;
    NDArray a = ex->arg(name);
    NDArray::uniform(a.shape(), -0.5, 0.5).copy_to(a);
  }
  NDArray var = ex->aux("bn_moving_var");
  NDArray::ones(var.shape()).copy_to(var);
  ex->forward(true);
  ex->backward();
  // SoftmaxOutput's gradient wrt fc's output is softmax - onehot(label); fc_bias gets its column
  // sums.
  const auto probs = ex->outputs()[0].to_doubles();
  const auto gb = ex->grad("fc_bias").to_doubles();
  for (int j = 0; j < 5; ++j) {
    double expect = 0;
    for (int n = 0; n < 2; ++n) expect += probs[n * 5 + j] - (j == 0 ? 1.0 : 0.0);
    EXPECT_NEAR(gb[j], expect, 1e-4) << "fc_bias grad " << j;
  }
  // Training updated the moving statistics (BatchNorm mutates its aux states in training).
  const auto mv = ex->aux("bn_moving_var").to_doubles();
  bool changed = false;
  for (double v : mv) changed = changed || std::abs(v - 1.0) > 1e-6;
  EXPECT_TRUE(changed);
}

TEST(Executor, ReshapeToAnotherBatchReusesArena) {
  auto g = cnn_graph();
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({8, 3, 8, 8});
  auto ex = Executor::bind(g, bo);
  ex->forward();
  ex->outputs()[0].wait_to_read();
  InferInputs small;
  small.shapes["data"] = Shape({2, 3, 8, 8});
  EXPECT_TRUE(ex->reshape(small));
  EXPECT_EQ(ex->output_shapes()[0], Shape({2, 5}));
  ex->forward();
  EXPECT_EQ(ex->outputs()[0].shape(), Shape({2, 5}));
  const auto p = ex->outputs()[0].to_doubles();
  for (int n = 0; n < 2; ++n) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += p[n * 5 + j];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
  InferInputs big;
  big.shapes["data"] = Shape({32, 3, 8, 8});
  EXPECT_FALSE(ex->reshape(big));
  ex->forward();
  EXPECT_EQ(ex->outputs()[0].shape(), Shape({32, 5}));
}

TEST(Executor, BadArrayShapeIsNamed) {
  auto g = mlp_graph();
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({4, 6});
  std::map<std::string, NDArray, std::less<>> args;
  args["fc2_weight"] = NDArray::zeros(Shape({3, 4}));
  try {
    Executor::bind(g, bo, args);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc2"), std::string::npos) << e.what();
  }
}

TEST(GradientPass, SumsGradientsOfReusedEntries) {
  // y = x * x + x: x is used three times; dy/dx = 2x + 1.
  G b;
  auto x = b.var("x");
  auto sq = b.op("elemwise_mul", "sq", {E(x), E(x)});
  auto y = b.op("elemwise_add", "y", {E(sq), E(x)});
  auto g = b.done({E(y)});
  GradientGraph gg = build_gradient(*g, GradientOptions{{x}});
  // Three contributions to x's gradient, added as they are produced: two additions.
  int sums = 0;
  for (const Node& n : gg.graph.nodes)
    sums += n.op && n.name.find("_grad_acc") != std::string::npos;
  EXPECT_EQ(sums, 2);
  BindOptions bo;
  bo.grad_req["x"] = GradReq::kWrite;
  std::map<std::string, NDArray, std::less<>> args;
  args["x"] = NDArray::from_vector(Shape({3}), std::vector<float>{1, -2, 0.5});
  auto ex = Executor::bind(g, bo, args);
  ex->forward(true);
  ex->backward();
  const auto gx = ex->grad("x").to_doubles();
  EXPECT_NEAR(gx[0], 3.0, 1e-6);
  EXPECT_NEAR(gx[1], -3.0, 1e-6);
  EXPECT_NEAR(gx[2], 2.0, 1e-6);
}

TEST(GradientPass, UnusedVariableGetsZeros) {
  G b;
  auto x = b.var("x");
  auto z = b.var("z");
  auto y = b.op("Activation", "y", {E(x)}, {{"act_type", "relu"}});
  b.g.heads = {E(y)};
  auto g = b.done({E(y)});
  BindOptions bo;
  bo.default_grad_req = GradReq::kWrite;
  bo.inputs.shapes["z"] = Shape({2});
  std::map<std::string, NDArray, std::less<>> args;
  args["x"] = NDArray::from_vector(Shape({2}), std::vector<float>{1, -1});
  auto ex = Executor::bind(g, bo, args);
  ex->forward(true);
  ex->backward();
  EXPECT_EQ(ex->grad("x").to_vector<float>(), (std::vector<float>{1, 0}));
  EXPECT_EQ(ex->grad("z").to_vector<float>(), (std::vector<float>{0, 0}));
  (void)z;
}

TEST(Placement, FallsBackToCpuWithCopies) {
  auto g = mlp_graph();
  PlacementOptions po;
  po.target = Device::cuda(0);
  po.fallbacks = {Device::cpu()};
  Placement p = place_devices(*g, po);
  if (get_op("FullyConnected").has_kernel(DeviceType::kCUDA)) {
    // A CUDA build: every op of the MLP has a CUDA kernel, so nothing falls back or is copied.
    EXPECT_EQ(p.fallback_nodes, 0);
    EXPECT_EQ(p.copy_nodes, 0);
    for (uint32_t nid = 0; nid < p.graph.nodes.size(); ++nid) {
      EXPECT_EQ(p.node_device[nid], Device::cuda(0)) << p.graph.nodes[nid].name;
    }
    return;
  }
  // No op has a CUDA kernel in this build: every op node falls back; the 5 variables live on
  // the GPU and are copied once each; the head is copied back to the GPU.
  EXPECT_EQ(p.fallback_nodes, 3);
  EXPECT_EQ(p.copy_nodes, 6);
  for (uint32_t nid = 0; nid < p.graph.nodes.size(); ++nid) {
    const Node& n = p.graph.nodes[nid];
    if (n.op && n.op->name() != "_copy") {
      EXPECT_EQ(p.node_device[nid], Device::cpu()) << n.name;
      for (const NodeEntry& e : n.inputs) EXPECT_EQ(p.node_device[e.node], Device::cpu()) << n.name;
    }
  }
  EXPECT_EQ(p.node_device[p.graph.heads[0].node], Device::cuda(0));
  // On the CPU nothing falls back and nothing is copied.
  Placement cpu = place_devices(*g, PlacementOptions{});
  EXPECT_EQ(cpu.fallback_nodes, 0);
  EXPECT_EQ(cpu.copy_nodes, 0);
  EXPECT_EQ(cpu.graph.nodes.size(), g->nodes.size());
}

}  // namespace
}  // namespace weft::graph
