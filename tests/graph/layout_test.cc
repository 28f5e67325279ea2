// Layout propagation (graph/layout.h): the executor with propagation on against the same graph
// with every entry plain (BindOptions::layouts = false), on synthetic graphs (channel counts that
// are no multiple of the block, concat, add, pooling, an op without layout support in the
// middle) and on the real models of ../shared/models; plus the pass's structure (reorders only
// where needed, plain edges) and the planner's padded sizes.
#include "graph/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "base/build_config.h"
#include "graph/executor.h"
#include "graph/json.h"
#include "ndarray/runtime.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"
#include "tests/ndarray/allclose.h"

#if WEFT_USE_ONEDNN
#include "ops/cpu/dnnl_util.h"
#endif

namespace weft::graph {
namespace {

using Arrays = std::map<std::string, NDArray, std::less<>>;

struct G {
  Graph g;
  uint32_t var(const std::string& name) {
    Node n;
    n.name = name;
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

#if WEFT_USE_ONEDNN
// Test ops that write their (plain) input in a fixed oneDNN format, as a convolution would: the
// sources of non-plain layouts for the synthetic graphs, independent of what the convolutions of
// this machine prefer. "_test_layout_<tag>" for acdb, aBcd8b and aBcd16b.
const Op& layout_source_op(const std::string& tag) {
  const std::string name = "_test_layout_" + tag;
  if (const Op* op = OpRegistry::global().find(name)) return *op;
  using dnnl::memory;
  const memory::format_tag ft = tag == "acdb"     ? memory::format_tag::acdb
                                : tag == "aBcd8b" ? memory::format_tag::aBcd8b
                                                  : memory::format_tag::aBcd16b;
  return OpRegistry::register_runtime(name, [ft](Op& op) {
    op.set_num_inputs(1).set_num_outputs(1);
    op.set_attr<FInferShape>([](const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (!in[0].known()) return false;
      out[0] = in[0];
      return true;
    });
    op.set_attr<FInferLayout>([ft](const OpAttrs&, const LayoutQuery& q, std::vector<LayoutRef>& in,
                                   std::vector<LayoutRef>& out) {
      in[0] = nullptr;
      out[0] = dnnl_util::make_layout(
          memory::desc(dnnl_util::to_dims(q.out_shapes[0]), memory::data_type::f32, ft));
      return true;
    });
    op.set_attr(DeviceType::kCPU,
                FCompute([](const OpAttrs&, const OpContext& ctx, std::span<const TensorView> in,
                            std::span<const OpReq>, std::span<const TensorView> out) {
                  dnnl_util::reorder_data(dnnl_util::input_desc(ctx, 0, in[0]), in[0].raw(),
                                          dnnl_util::output_desc(ctx, 0, out[0]), out[0].raw(),
                                          ctx.num_threads);
                }));
  });
}
#endif

// Values for every variable of `g` for the given input shapes: data in [-1, 1), variances
// positive, the rest small.
void make_values(const Graph& g, const InferInputs& inputs, Arrays* args, Arrays* aux) {
  const InferResult r = infer_shapes_types(g, inputs);
  const std::vector<uint32_t> aux_nodes = g.aux_nodes();
  const std::vector<uint32_t> labels = label_variables(g);
  random_seed(7);
  for (uint32_t nid : g.variable_nodes()) {
    const std::string& name = g.nodes[nid].name;
    const Shape& s = r.shapes[g.entry_id(nid, 0)];
    const DType t = r.dtypes[g.entry_id(nid, 0)];
    NDArray v;
    if (std::binary_search(labels.begin(), labels.end(), nid)) {
      v = NDArray::zeros(s, t);
    } else if (name.ends_with("_var")) {
      v = NDArray::uniform(s, 0.5, 1.5, t);
    } else if (name.ends_with("gamma")) {
      v = NDArray::uniform(s, 0.8, 1.2, t);
    } else if (inputs.shapes.count(name)) {
      v = NDArray::uniform(s, -1, 1, t);
    } else {
      int64_t fan_in = 1;
      for (int i = 1; i < s.ndim(); ++i) fan_in *= s[i];
      const double a = s.ndim() >= 2 ? std::sqrt(6.0 / static_cast<double>(fan_in)) : 0.1;
      v = NDArray::uniform(s, -a, a, t);
    }
    (std::binary_search(aux_nodes.begin(), aux_nodes.end(), nid) ? *aux : *args)[name] = v;
  }
}

struct Compared {
  LayoutStats stats;
  Graph exec;
  std::vector<LayoutRef> layouts;
  InferResult inferred;
  MemoryPlan plan;
  std::string describe() const { return describe_layouts({exec, inferred, layouts, stats}); }
};

// Binds `g` twice, layouts on and off, runs both and compares every head per element: atol is
// 1e-5 of the head's largest magnitude, rtol 1e-4.
Compared compare_layouts(const std::shared_ptr<const Graph>& g, const InferInputs& inputs,
                         bool fuse = true, const std::string& what = "") {
  Arrays args, aux;
  make_values(*g, inputs, &args, &aux);
  BindOptions on;
  on.inputs = inputs;
  on.fuse = fuse;
  BindOptions off = on;
  off.layouts = false;
  auto a = Executor::bind(g, on, args, aux);
  auto b = Executor::bind(g, off, args, aux);
  a->forward(false);
  b->forward(false);
  EXPECT_EQ(b->layout_stats().reorders, 0u);
  EXPECT_TRUE(b->entry_layouts().empty());
  for (size_t h = 0; h < g->heads.size(); ++h) {
    const NDArray& ref = b->outputs()[h];
    double scale = 0;
    for (double v : ref.to_doubles()) {
      EXPECT_TRUE(std::isfinite(v)) << what << " head " << h;
      scale = std::max(scale, std::abs(v));
    }
    EXPECT_TRUE(testing::all_close(a->outputs()[h], ref, {1e-5 * scale, 1e-4}))
        << what << " head " << h;
  }
  check_buffer_plan(a->memory_plan().buffers, a->memory_plan().plan);
  return Compared{a->layout_stats(), a->exec_graph(), a->entry_layouts(), a->inferred(),
                  a->memory_plan()};
}

size_t count_op(const Graph& g, const std::string& op) {
  return static_cast<size_t>(std::count_if(
      g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op && n.op->name() == op; }));
}

#if WEFT_USE_ONEDNN

class LayoutSynthetic : public ::testing::TestWithParam<std::string> {
  testing::FixedIntraOpThreads fixed_threads_;
};

// data -> [layout source] -> BN -> relu -> max pool -> add(pool, sigmoid(pool)) -> clip (no
// layout support) -> [source] -> avg pool, concat with tanh of [a source of another format] ->
// relu -> head; `add` is a head too. Channels: 12 (no multiple of 8 or 16: blocked formats pad).
TEST_P(LayoutSynthetic, ChainEqualsPlain) {
  const std::string tag = GetParam();
  const std::string src = layout_source_op(tag).name();
  const std::string other = layout_source_op(tag == "acdb" ? "aBcd16b" : "acdb").name();
  G b;
  auto data = b.var("data");
  auto s1 = b.op(src, "to_layout", {E(data)});
  auto gamma = b.var("bn_gamma"), beta = b.var("bn_beta");
  auto mean = b.var("bn_moving_mean"), var = b.var("bn_moving_var");
  auto bn = b.op("BatchNorm", "bn", {E(s1), E(gamma), E(beta), E(mean), E(var)},
                 {{"fix_gamma", "False"}});
  auto relu = b.op("Activation", "relu", {E(bn)}, {{"act_type", "relu"}});
  auto pool =
      b.op("Pooling", "pool", {E(relu)},
           {{"kernel", "(3, 3)"}, {"stride", "(2, 2)"}, {"pad", "(1, 1)"}, {"pool_type", "max"}});
  auto sig = b.op("Activation", "sig", {E(pool)}, {{"act_type", "sigmoid"}});
  auto add = b.op("elemwise_add", "add", {E(pool), E(sig)});
  auto clip = b.op("clip", "clip", {E(add)}, {{"a_min", "-0.5"}, {"a_max", "0.9"}});
  auto s2 = b.op(src, "to_layout2", {E(clip)});
  auto avg =
      b.op("Pooling", "avg", {E(s2)},
           {{"kernel", "(3, 3)"}, {"stride", "(1, 1)"}, {"pad", "(1, 1)"}, {"pool_type", "avg"}});
  auto s3 = b.op(other, "to_other", {E(clip)});
  auto tanh = b.op("Activation", "tanh", {E(s3)}, {{"act_type", "tanh"}});
  auto cat = b.op("Concat", "cat", {E(avg), E(tanh)}, {{"num_args", "2"}, {"dim", "1"}});
  auto out = b.op("Activation", "out", {E(cat)}, {{"act_type", "relu"}});
  auto g = b.done({E(out), E(add)});
  InferInputs in;
  in.shapes["data"] = Shape({2, 12, 9, 9});
  const Compared c = compare_layouts(g, in, true, tag);
  // Reorders: `add` to plain (for clip and the head, shared) and `out` to plain (the head).
  EXPECT_EQ(c.stats.reorders, 2u) << c.describe();
  EXPECT_EQ(c.stats.to_plain, 2u);
  EXPECT_GT(c.stats.entries, 0u);
  EXPECT_GT(c.stats.padded_bytes, 0u);  // 12 channels pad to 16 in aBcd16b
}

INSTANTIATE_TEST_SUITE_P(Formats, LayoutSynthetic, ::testing::Values("acdb", "aBcd8b", "aBcd16b"));

// Two producers in different layouts feed one add: the second operand is reordered to the
// first's layout, and the planner reserves the padded size.
TEST(Layout, AddOfTwoLayoutsAndPaddedPlan) {
  testing::FixedIntraOpThreads fixed;
  G b;
  auto data = b.var("data");
  auto x = b.op(layout_source_op("aBcd16b").name(), "x", {E(data)});
  auto y = b.op(layout_source_op("acdb").name(), "y", {E(data)});
  auto add = b.op("elemwise_add", "add", {E(x), E(y)});
  auto relu = b.op("Activation", "relu", {E(add)}, {{"act_type", "relu"}});
  auto g = b.done({E(relu)});
  InferInputs in;
  in.shapes["data"] = Shape({1, 5, 4, 3});
  const Compared c = compare_layouts(g, in);
  // y is converted into x's layout, the head back to plain.
  EXPECT_EQ(c.stats.reorders, 2u);
  EXPECT_EQ(c.stats.to_plain, 1u);
  EXPECT_EQ(count_op(c.exec, kLayoutReorderOp), 2u);
  // 5 channels in blocks of 16: 16 * 4 * 3 floats per padded entry.
  const uint32_t x_eid = c.exec.entry_id(1, 0);  // data is node 0, x node 1
  ASSERT_TRUE(c.layouts[x_eid]);
  EXPECT_EQ(c.layouts[x_eid]->bytes(), 16u * 4 * 3 * 4);
  EXPECT_EQ(c.layouts[x_eid]->name(), "aBcd16b");
  EXPECT_EQ(c.plan.entry_bytes[x_eid], 16u * 4 * 3 * 4);  // the arena holds the padding
}

// SE-style channel broadcast: x (blocked) * s (plain, N x C x 1 x 1).
TEST(Layout, BroadcastMulByChannel) {
  testing::FixedIntraOpThreads fixed;
  for (const char* tag : {"acdb", "aBcd8b", "aBcd16b"}) {
    G b;
    auto data = b.var("data");
    auto scale = b.var("scale");
    auto x = b.op(layout_source_op(tag).name(), "x", {E(data)});
    auto s = b.op("Activation", "s", {E(scale)}, {{"act_type", "sigmoid"}});
    auto mul = b.op("broadcast_mul", "mul", {E(x), E(s)});
    auto add = b.op("broadcast_add", "add", {E(mul), E(x)});
    auto g = b.done({E(add)});
    InferInputs in;
    in.shapes["data"] = Shape({2, 10, 3, 3});
    in.shapes["scale"] = Shape({2, 10, 1, 1});
    const Compared c = compare_layouts(g, in, true, tag);
    EXPECT_EQ(c.stats.reorders, 1u) << tag;  // the head only
  }
}

// A head that is also read inside the graph: the consumer reads the layout, the head is a
// reordered plain copy; a node reading one entry twice gets one reorder.
TEST(Layout, SharedReordersAndHeads) {
  testing::FixedIntraOpThreads fixed;
  G b;
  auto data = b.var("data");
  auto x = b.op(layout_source_op("aBcd8b").name(), "x", {E(data)});
  auto relu = b.op("Activation", "relu", {E(x)}, {{"act_type", "relu"}});
  auto c1 = b.op("clip", "c1", {E(relu)}, {{"a_min", "0"}, {"a_max", "0.5"}});
  auto m = b.op("elemwise_mul", "m", {E(relu), E(relu)});
  auto g = b.done({E(relu), E(c1), E(m)});
  InferInputs in;
  in.shapes["data"] = Shape({1, 3, 2, 2});
  const Compared c = compare_layouts(g, in);
  // relu -> plain once, shared by the head, clip and both operands of the multiply.
  EXPECT_EQ(c.stats.reorders, 1u);
}

TEST(Layout, OffWhenTraining) {
  G b;
  auto data = b.var("data");
  auto relu = b.op("Activation", "relu", {E(data)}, {{"act_type", "relu"}});
  auto g = b.done({E(relu)});
  BindOptions bo;
  bo.inputs.shapes["data"] = Shape({1, 3, 2, 2});
  bo.default_grad_req = GradReq::kWrite;
  EXPECT_TRUE(Executor::bind(g, bo)->entry_layouts().empty());
  bo.default_grad_req = GradReq::kNull;
  EXPECT_FALSE(Executor::bind(g, bo)->entry_layouts().empty());  // the pass ran (all plain)
}

// reshape() to another batch size reruns the pass and keeps the arrays bound by name.
TEST(Layout, ReshapeKeepsArrays) {
  testing::FixedIntraOpThreads fixed;
  G b;
  auto data = b.var("data");
  auto x = b.op(layout_source_op("aBcd16b").name(), "x", {E(data)});
  auto gamma = b.var("bn_gamma"), beta = b.var("bn_beta");
  auto mean = b.var("bn_moving_mean"), var = b.var("bn_moving_var");
  auto bn =
      b.op("BatchNorm", "bn", {E(x), E(gamma), E(beta), E(mean), E(var)}, {{"fix_gamma", "False"}});
  auto g = b.done({E(bn)});
  InferInputs in;
  in.shapes["data"] = Shape({1, 6, 2, 2});
  Arrays args, aux;
  make_values(*g, in, &args, &aux);
  BindOptions bo;
  bo.inputs = in;
  auto ex = Executor::bind(g, bo, {}, {});
  for (auto& [k, v] : args) {
    NDArray dst = ex->arg(k);
    v.copy_to(dst);
  }
  for (auto& [k, v] : aux) {
    NDArray dst = ex->aux(k);
    v.copy_to(dst);
  }
  InferInputs in2 = in;
  in2.shapes["data"] = Shape({3, 6, 2, 2});
  ex->reshape(in2);
  NDArray d = NDArray::uniform(Shape({3, 6, 2, 2}), -1, 1);
  NDArray dst = ex->arg("data");
  d.copy_to(dst);
  ex->forward(false);
  args["data"] = d;
  BindOptions off;
  off.inputs = in2;
  off.layouts = false;
  auto ref = Executor::bind(g, off, args, aux);
  ref->forward(false);
  EXPECT_TRUE(testing::all_close(ex->outputs()[0], ref->outputs()[0], {1e-6, 1e-5}));
}

#endif  // WEFT_USE_ONEDNN

// ---- real models --------------------------------------------------------------------------------

class LayoutModels : public ::testing::TestWithParam<std::string> {
  testing::FixedIntraOpThreads fixed_threads_;
};

TEST_P(LayoutModels, EqualPlainAtBatch1) {
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  auto g = std::make_shared<const Graph>(load_json_file(testing::models_dir() / file));
  const Compared c = compare_layouts(g, testing::model_inputs(file, 1), true, file);
  if (layouts_available()) {
    // Inputs and heads are plain; everything between stays in the convolutions' formats. Each
    // reorder is at an edge or before an op without layout support.
    for (const NodeEntry& h : c.exec.heads) EXPECT_FALSE(c.layouts[c.exec.entry_id(h)]) << file;
    std::cout << file << ": " << c.stats.entries << " entries not plain, " << c.stats.reorders
              << " reorders (" << c.stats.from_plain << " from plain, " << c.stats.to_plain
              << " to plain)\n";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, LayoutModels,
    ::testing::Values("fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json",
                      "pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json",
                      "KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json",
                      "soeaver__mxnet-model__inception_v3-symbol.json",
                      "soeaver__mxnet-model__se-resnext50-32x4d-symbol.json"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      for (const auto& s : testing::mxnet_model_specs()) {
        if (s.file == info.param) {
          std::string l = s.name;
          for (char& ch : l) {
            if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
          }
          return l;
        }
      }
      return std::string("model");
    });

}  // namespace
}  // namespace weft::graph
