// The inference rewrite (graph/fuse.cc) against the graph as written: each pattern is bound twice
// on the same random weights, with and without the rewrite, and the outputs compared per element;
// the rewritten graph's node kinds and FuseStats say what fused and what must not have.
#include "graph/fuse.h"

#include <gtest/gtest.h>

#include <map>

#include "graph/executor.h"
#include "graph/infer.h"
#include "graph/symbol.h"
#include "ndarray/runtime.h"
#include "tests/ndarray/allclose.h"

namespace weft::graph {
namespace {

using namespace sym;
using Arrays = std::map<std::string, NDArray, std::less<>>;

// Node counts by op name.
std::map<std::string, int> op_counts(const Graph& g) {
  std::map<std::string, int> c;
  for (const Node& n : g.nodes) {
    if (n.op) ++c[n.op->name()];
  }
  return c;
}

struct Bound {
  std::unique_ptr<Executor> ex;
  std::vector<NDArray> outputs;
};

Bound run(const std::shared_ptr<const Graph>& g, const InferInputs& inputs, const Arrays& args,
          const Arrays& aux, bool fuse, bool layouts) {
  BindOptions bo;
  bo.inputs = inputs;
  bo.fuse = fuse;
  bo.layouts = layouts;
  Bound b;
  b.ex = Executor::bind(g, bo, args, aux);
  b.ex->forward(false);
  for (const NDArray& o : b.ex->outputs()) b.outputs.push_back(o.copy());
  return b;
}

// Binds `s` with and without the rewrite (and with and without layout propagation) on the same
// random values and expects equal outputs within float rounding. Returns the rewrite's stats.
FuseStats expect_fused_matches(const Symbol& s, const std::map<std::string, Shape>& data_shapes,
                               std::map<std::string, int>* fused_ops = nullptr) {
  auto g = std::make_shared<const Graph>(s.to_graph());
  InferInputs inputs;
  for (const auto& [k, v] : data_shapes) inputs.shapes[k] = v;
  const InferResult inferred = infer_shapes_types(*g, inputs);
  Arrays args, aux;
  const std::vector<uint32_t> aux_nodes = g->aux_nodes();
  for (uint32_t nid : g->variable_nodes()) {
    const std::string& name = g->nodes[nid].name;
    const Shape& shape = inferred.shapes[g->entry_id(nid, 0)];
    const bool var = name.ends_with("_var");
    const bool gamma = name.ends_with("_gamma");
    NDArray v = NDArray::uniform(shape,
                                 var     ? 0.5
                                 : gamma ? 0.5
                                         : -1.0,
                                 var     ? 1.5
                                 : gamma ? 1.5
                                         : 1.0,
                                 DType::kFloat32);
    (std::binary_search(aux_nodes.begin(), aux_nodes.end(), nid) ? aux : args)[name] = v;
  }
  FuseStats stats;
  const Graph fg = fuse_for_inference(*g, &stats);
  if (fused_ops) *fused_ops = op_counts(fg);
  const Bound plain = run(g, inputs, args, aux, false, false);
  for (bool layouts : {false, true}) {
    const Bound fused = run(g, inputs, args, aux, true, layouts);
    EXPECT_EQ(fused.outputs.size(), plain.outputs.size());
    for (size_t h = 0; h < plain.outputs.size(); ++h) {
      EXPECT_TRUE(testing::all_close(fused.outputs[h], plain.outputs[h], {1e-4, 1e-4}))
          << "head " << h << (layouts ? " (layouts)" : "");
    }
  }
  return stats;
}

Symbol times(const Symbol& x, double k) {
  return Symbol::op("_mul_scalar", {x}, {{"scalar", std::to_string(k)}});
}

Symbol conv(const Symbol& x, const std::string& name, int64_t filters, int64_t k = 3,
            int64_t stride = 1, int64_t groups = 1, bool no_bias = true) {
  return Convolution(x, name, filters, {k, k}, {stride, stride}, {(k - 1) / 2, (k - 1) / 2},
                     no_bias, groups);
}

Symbol conv_bn(const Symbol& x, const std::string& name, int64_t filters, int64_t k = 3,
               int64_t stride = 1, int64_t groups = 1) {
  return BatchNorm(conv(x, name, filters, k, stride, groups), name + "_bn", false, 1e-5);
}

const std::map<std::string, Shape> kData{{"data", Shape{2, 8, 9, 9}}};

TEST(Fuse, ResidualBlockV1FusesBatchNormAddAndRelu) {
  // x = relu(conv0(data)) feeds conv1 and the shortcut: the add's other addend is an arena entry
  // whose last reader is the fused node, so the planner may give the output its memory.
  Symbol x = Activation(conv(Variable("data"), "c0", 8), "r0", "relu");
  Symbol y = Activation(conv_bn(x, "c1", 8), "r1", "relu");
  y = Activation(elemwise_add(conv_bn(y, "c2", 8), x, "add"), "r2", "relu");
  std::map<std::string, int> ops;
  const FuseStats st = expect_fused_matches(y, kData, &ops);
  EXPECT_EQ(st.conv_bn, 2);
  EXPECT_EQ(st.conv_relu, 3);
  EXPECT_EQ(st.conv_sum, 1);
  EXPECT_EQ(st.fused_nodes, 3);
  EXPECT_EQ(ops["_fused_conv_bn_act"], 3);
  EXPECT_EQ(ops.count("elemwise_add") + ops.count("BatchNorm") + ops.count("Activation"), 0u);
}

TEST(Fuse, SumTakesTheAddendsMemoryInPlace) {
  Symbol x = Activation(conv(Variable("data"), "c0", 8), "r0", "relu");
  Symbol y = elemwise_add(x, conv_bn(conv(x, "c1", 8), "c2", 8), "add");  // addend first
  // (Heads live outside the arena: the fused result feeds one more op.)
  const Symbol out = times(Activation(y, "r2", "relu"), 2.0);
  auto g = std::make_shared<const Graph>(out.to_graph());
  BindOptions bo;
  bo.inputs.shapes["data"] = kData.at("data");
  bo.layouts = false;
  auto ex = Executor::bind(g, bo);
  const Graph& eg = ex->exec_graph();
  const MemoryPlan& plan = ex->memory_plan();
  int inplace = 0;
  for (uint32_t nid = 0; nid < eg.nodes.size(); ++nid) {
    const Node& n = eg.nodes[nid];
    if (!n.op || n.op->name() != "_fused_conv_bn_act" || !n.attrs.count("__with_sum__")) continue;
    ++inplace;
    EXPECT_EQ(plan.entry_inplace_of[eg.entry_id(nid, 0)],
              static_cast<int64_t>(eg.entry_id(n.inputs.back())));
  }
  EXPECT_EQ(inplace, 1);
  // And the values, both orders of the add's inputs.
  expect_fused_matches(out, kData);
}

TEST(Fuse, SumWithOneOutputChannel) {
  // One output channel: the primitive writes the plain layout itself, so the sum is its post-op
  // (Note [Sum post-op and plain outputs] in ops/cpu/conv_fused.cc), in place and copied.
  Symbol x = Activation(conv(Variable("data"), "c0", 1), "r0", "relu");
  Symbol y = Activation(elemwise_add(conv_bn(x, "c1", 1), x), "r1", "relu");
  Symbol z = elemwise_add(conv_bn(y, "c2", 1), Variable("other", {{"__shape__", "(2, 1, 9, 9)"}}));
  EXPECT_EQ(expect_fused_matches(times(z, 2.0), kData).conv_sum, 2);
}

TEST(Fuse, DownsampleBlockFusesOneBranchIntoTheOther) {
  Symbol data = Variable("data");
  Symbol a = conv_bn(Activation(conv_bn(data, "a1", 16, 3, 2), "ar", "relu"), "a2", 16);
  Symbol b = conv_bn(data, "sc", 16, 1, 2);
  const FuseStats st =
      expect_fused_matches(Activation(elemwise_add(a, b, "add"), "out", "relu"), kData);
  EXPECT_EQ(st.conv_bn, 3);
  EXPECT_EQ(st.conv_sum, 1);
  EXPECT_EQ(st.fused_nodes, 3);
}

TEST(Fuse, PreActivationBlockFusesTheSumIntoAConvolutionWithoutBatchNorm) {
  // ResNet v2: BN → ReLU → conv, and the conv's result added to the shortcut.
  Symbol data = Variable("data");
  Symbol pre = Activation(BatchNorm(data, "bn0", false), "r0", "relu");
  Symbol y = conv(Activation(BatchNorm(conv(pre, "c1", 8), "bn1", false), "r1", "relu"), "c2", 8);
  std::map<std::string, int> ops;
  const FuseStats st =
      expect_fused_matches(BatchNorm(elemwise_add(y, data, "add"), "bn2", false), kData, &ops);
  EXPECT_EQ(st.conv_sum, 1);
  EXPECT_EQ(st.conv_bn, 1);        // c1 + bn1 (+ r1)
  EXPECT_EQ(ops["BatchNorm"], 2);  // bn0 (no convolution before it) and bn2 (after the add)
}

TEST(Fuse, DepthwiseConvolutionFoldsBatchNormAndClip) {
  // MobileNetV2's depthwise step: conv (num_group = channels) → BN → ReLU6 as clip(0, 6).
  Symbol x = conv(Variable("data"), "dw", 8, 3, 1, /*groups=*/8);
  x = clip(BatchNorm(x, "dw_bn", false, 1e-5), "relu6", 0, 6);
  const FuseStats st = expect_fused_matches(times(x, 4.0), kData);
  EXPECT_EQ(st.conv_bn, 1);
  EXPECT_EQ(st.conv_act, 1);
  Symbol r = Activation(conv_bn(Variable("data"), "dw2", 8, 3, 2, 8), "r", "relu");
  EXPECT_EQ(expect_fused_matches(r, kData).conv_relu, 1);
}

TEST(Fuse, EveryActivationKindMatches) {
  std::vector<Symbol> acts;
  Symbol data = Variable("data");
  for (const char* t : {"relu", "sigmoid", "tanh", "softrelu"})
    acts.push_back(Activation(conv(data, std::string("c_") + t, 4, 3, 1, 1, false), "", t));
  acts.push_back(Symbol::op("LeakyReLU", {conv(data, "c_leaky", 4)},
                            {{"act_type", "leaky"}, {"slope", "0.1"}}));
  acts.push_back(
      Symbol::op("LeakyReLU", {conv(data, "c_elu", 4)}, {{"act_type", "elu"}, {"slope", "0.7"}}));
  acts.push_back(clip(conv(data, "c_clip", 4), "", -0.3, 0.4));
  acts.push_back(Symbol::op("sigmoid", {conv(data, "c_sig", 4)}));
  std::map<std::string, int> ops;
  const FuseStats st = expect_fused_matches(Symbol::group(acts), kData, &ops);
  EXPECT_EQ(st.conv_relu, 1);
  EXPECT_EQ(st.conv_act, 7);
  EXPECT_EQ(ops.count("Convolution"), 0u);
  // softsign has no post-op: it stays.
  Symbol s = Activation(conv(data, "c_ss", 4), "", "softsign");
  EXPECT_EQ(expect_fused_matches(s, kData).fused_nodes, 0);
}

TEST(Fuse, PReluBecomesAPostOpWithItsSlopes) {
  // MobileFaceNet: conv → BN → PReLU (slopes per channel), and a residual add before one; a
  // shared slope (1,) too.
  Symbol data = Variable("data");
  Symbol a = Symbol::op("LeakyReLU", {conv_bn(data, "c1", 8)}, {{"act_type", "prelu"}}, "p1");
  Symbol b = Symbol::op("LeakyReLU", {elemwise_add(conv_bn(a, "c2", 8), data)},
                        {{"act_type", "prelu"}}, "p2");
  Symbol shared = Variable("p3_gamma", {{"__shape__", "(1,)"}});
  Symbol c = Symbol::op("LeakyReLU", {conv(b, "c3", 8, 1), shared}, {{"act_type", "prelu"}}, "p3");
  std::map<std::string, int> ops;
  const FuseStats st = expect_fused_matches(c, kData, &ops);
  EXPECT_EQ(st.conv_act, 3);
  EXPECT_EQ(st.conv_sum, 1);
  EXPECT_EQ(ops.count("LeakyReLU"), 0u);
}

TEST(Fuse, FullyConnectedFusesItsActivation) {
  Symbol x = FullyConnected(Variable("data"), "fc1", 32);
  x = FullyConnected(Activation(x, "r1", "relu"), "fc2", 16, /*no_bias=*/true);
  x = FullyConnected(Activation(x, "t2", "tanh"), "fc3", 8);
  std::map<std::string, int> ops;
  const FuseStats st = expect_fused_matches(Activation(x, "s3", "sigmoid"), kData, &ops);
  EXPECT_EQ(st.fc_act, 3);
  EXPECT_EQ(ops["_fused_fc_act"], 3);
  EXPECT_EQ(ops.count("Activation"), 0u);
}

TEST(Fuse, BroadcastAddKeepsBroadcasting) {
  Symbol data = Variable("data");
  // The addend broadcasts to the convolution's output...
  Symbol a =
      broadcast_add(conv_bn(data, "c1", 8), Variable("shift", {{"__shape__", "(1, 8, 1, 1)"}}));
  // ...and the convolution's output (N, 8, 1, 1) broadcasts to the addend's shape.
  Symbol pooled = Pooling(data, "gp", {1, 1}, "avg", {}, {}, /*global_pool=*/true);
  Symbol b = broadcast_add(conv(pooled, "c2", 8, 1), Activation(data, "r", "relu"));
  // ...and equal shapes (MobileNetV2's residual adds): the sum post-op.
  Symbol c = broadcast_add(conv_bn(data, "c3", 8), Activation(data, "r3", "relu"));
  std::map<std::string, int> ops;
  const FuseStats st = expect_fused_matches(
      Symbol::group({Activation(a, "ra", "relu"), Activation(b, "rb", "tanh"), c}), kData, &ops);
  EXPECT_EQ(st.conv_sum, 3);
  EXPECT_EQ(ops.count("broadcast_add"), 0u);
}

TEST(Fuse, IntermediatesWithOtherReadersAreNotFused) {
  Symbol data = Variable("data");
  // The convolution's output is read twice: nothing fuses into it.
  Symbol c = conv(data, "c0", 8);
  Symbol twice = elemwise_add(BatchNorm(c, "bn0", false), Activation(c, "r0", "relu"));
  // The BatchNorm's output is a head and feeds a ReLU: conv + BN fuse, the ReLU stays.
  Symbol bn = conv_bn(data, "c1", 8);
  // The add's output is read twice: conv + BN + add fuse, the ReLU after it does not.
  Symbol sum = elemwise_add(conv_bn(data, "c2", 8), data);
  // add(y, y): the same entry on both sides.
  Symbol self = conv_bn(data, "c3", 8);
  std::map<std::string, int> ops;
  const FuseStats st = expect_fused_matches(
      Symbol::group({twice, bn, Activation(bn, "r1", "relu"), Activation(sum, "r2", "relu"),
                     times(sum, 2.0), elemwise_add(self, self)}),
      kData, &ops);
  EXPECT_EQ(st.conv_bn, 3);  // c1, c2, c3 (not c0)
  EXPECT_EQ(st.conv_sum, 1);
  EXPECT_EQ(st.conv_relu, 0);
  EXPECT_EQ(ops["Convolution"], 1);
  EXPECT_EQ(ops["BatchNorm"], 1);
  EXPECT_EQ(ops["Activation"], 3);
  EXPECT_EQ(ops["elemwise_add"], 2);
}

}  // namespace
}  // namespace weft::graph
