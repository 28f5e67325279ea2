// Every MXNet model of ../shared/models replays at batch 1 through the executor, and its heads
// equal an independent reference: the same nodes run one by one through the imperative path
// (NDArray invoke), without planning, arena or fusion. The fused inference graph is checked the
// same way, and each fused node against the unfused operators it replaces.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/executor.h"
#include "graph/fuse.h"
#include "graph/json.h"
#include "ndarray/runtime.h"
#include "ops/params.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"
#include "tests/ndarray/allclose.h"

namespace weft::graph {
namespace {

using Arrays = std::map<std::string, NDArray, std::less<>>;

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

// Runs `g` node by node through the imperative path; variable nodes take copies of `vars` (by
// name), so arrays bound to an executor are never touched. Returns the value of every entry.
std::vector<NDArray> run_imperative(const Graph& g, const Arrays& vars) {
  std::vector<NDArray> values(g.num_entries());
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    if (n.is_variable()) {
      values[g.entry_id(nid, 0)] = vars.at(n.name).copy();
      continue;
    }
    std::vector<NDArray> in;
    for (const NodeEntry& e : n.inputs) in.push_back(values[g.entry_id(e)]);
    std::vector<NDArray> out = invoke_all(n.op_attrs, in);
    WEFT_CHECK(static_cast<int>(out.size()) == n.num_outputs())
        << n.name << ": " << out.size() << " outputs";
    for (int o = 0; o < n.num_outputs(); ++o) values[g.entry_id(nid, o)] = out[o];
  }
  return values;
}

// The single node of `g` reading output 0 of node `nid` (-1 when none or several).
int64_t only_consumer(const Graph& g, uint32_t nid) {
  int64_t found = -1;
  for (uint32_t c = 0; c < g.nodes.size(); ++c) {
    for (const NodeEntry& e : g.nodes[c].inputs) {
      if (e.node != nid || e.index != 0) continue;
      if (found >= 0 && found != c) return -1;
      found = c;
    }
  }
  return found;
}

// Note [Fused convolution rounding bound]
// A fused node computes y' = relu(conv(x, w') + b') with the folded w' = fl(w * s) and
// b' = fl(beta + (b - mean) * s), s = fl(gamma / sqrt(var + eps)); the unfused chain computes
// y = relu(fl(conv(x, w) + b) * s + (beta - mean * s)). With u = 2^-24 (float32 rounding), a
// convolution summing K = C_in/groups * prod(kernel) products plus a bias, in any order and with
// or without FMA, is off by at most gamma(K + 1) = (K + 1)u / (1 - (K + 1)u) times the sum of the
// terms' magnitudes. The folding rounds s (3 operations) and each w' and b' (at most 3 more), and
// the unfused BatchNorm rounds its scale, shift and the multiply-add (4). Per element, with
// T = |s| (sum|w||x| + |b| + |mean|) + |beta|, the two differ by at most
//   2 gamma(K + 1) T + 10 u T + 4 u |y|,
// and ReLU (1-Lipschitz) keeps that bound. The test allows 2 gamma(K + 1) T + 16 u T + 4 u |y|:
// a worst-case bound, per element, scaled by that element's own terms rather than by the largest
// output, so any wrong element (a channel with the wrong scale, a lost bias) fails it.
// The nodes of the original graph that one fused node replaces.
struct Chain {
  uint32_t conv = 0;
  uint32_t bn = 0;
  int64_t relu = -1;
};

// The chain that fused node `f` replaces: the rewrite names the fused node after its convolution,
// whose only consumer is the BatchNorm, whose only consumer is the ReLU when one was fused.
::testing::AssertionResult find_chain(const Graph& g, const Node& f, Chain* chain) {
  uint32_t conv = 0;
  while (conv < g.nodes.size() && g.nodes[conv].name != f.name) ++conv;
  if (conv == g.nodes.size() || !g.nodes[conv].op || g.nodes[conv].op->name() != "Convolution") {
    return ::testing::AssertionFailure()
           << "no convolution of the original graph is named '" << f.name << "'";
  }
  const int64_t bn = only_consumer(g, conv);
  if (bn < 0 || g.nodes[bn].op->name() != "BatchNorm") {
    return ::testing::AssertionFailure()
           << f.name << ": the convolution's only consumer is no BatchNorm";
  }
  chain->conv = conv;
  chain->bn = static_cast<uint32_t>(bn);
  if (f.attrs.at("__act_type__") == "relu") {
    chain->relu = only_consumer(g, chain->bn);
    if (chain->relu < 0 || g.nodes[chain->relu].op->name() != "Activation") {
      return ::testing::AssertionFailure()
             << f.name << ": the BatchNorm's only consumer is no Activation";
    }
  }
  return ::testing::AssertionSuccess();
}

// Checks fused node `fid` of `fg` against the chain it replaces in `g`, on the same data input.
// `folded_into` maps each original node folded into a fused node to that node's name.
void expect_fused_node_matches_chain(const Graph& fg, uint32_t fid, const Chain& chain,
                                     const std::map<uint32_t, std::string>& folded_into,
                                     const std::vector<NDArray>& fused_values, const Graph& g,
                                     const std::vector<NDArray>& values, const std::string& what) {
  const Node& f = fg.nodes[fid];
  SCOPED_TRACE(what + ": fused node '" + f.name + "'");
  const Node& conv = g.nodes[chain.conv];
  const Node& bn = g.nodes[chain.bn];
  const bool relu = chain.relu >= 0;
  // Inputs: the data is the fused graph's (the same producer as the convolution's, by name), the
  // parameters are the original graph's (so a parameter wired to the wrong slot shows).
  const size_t nconv = conv.inputs.size();
  ASSERT_EQ(f.inputs.size(), nconv + 4) << f.name;
  // The data comes from the node that produces the convolution's input after the rewrite.
  const NodeEntry src = conv.inputs[0];
  // (Unless a fused node that is not of this kind made it: a sum or another activation.)
  const auto folded = folded_into.find(src.node);
  const Node& producer = fg.nodes[f.inputs[0].node];
  if (folded != folded_into.end() || !producer.op || !producer.op->name().starts_with("_fused_")) {
    EXPECT_EQ(producer.name, folded != folded_into.end() ? folded->second : g.nodes[src.node].name);
    EXPECT_EQ(f.inputs[0].index, folded != folded_into.end() ? 0u : src.index);
  }
  const NDArray& x = fused_values[fg.entry_id(f.inputs[0])];
  std::vector<NDArray> conv_in{x};
  for (size_t i = 1; i < nconv; ++i) conv_in.push_back(values[g.entry_id(conv.inputs[i])]);
  std::vector<NDArray> bn_in{invoke_all(conv.op_attrs, conv_in)[0]};
  for (size_t i = 1; i < 5; ++i) bn_in.push_back(values[g.entry_id(bn.inputs[i])]);
  NDArray y = invoke_all(bn.op_attrs, bn_in)[0];
  if (relu) y = invoke_all(g.nodes[chain.relu].op_attrs, {y})[0];

  // sum |w||x| per output element: the same convolution of the magnitudes, without bias.
  AttrMap abs_attrs = conv.attrs;
  abs_attrs["no_bias"] = "True";
  const NDArray wx = invoke_all(make_op_attrs("Convolution", abs_attrs),
                                {invoke1("abs", {x}), invoke1("abs", {conv_in[1]})})[0];
  const std::vector<double> sum_wx = wx.to_doubles();
  const std::vector<double> bias = nconv == 3 ? conv_in[2].to_doubles() : std::vector<double>();
  const std::vector<double> gamma = bn_in[1].to_doubles(), beta = bn_in[2].to_doubles();
  const std::vector<double> mean = bn_in[3].to_doubles(), var = bn_in[4].to_doubles();
  const double eps = parse_float(f.attrs.at("__bn_eps__"));
  const bool fix_gamma = parse_bool(f.attrs.at("__bn_fix_gamma__"));
  const NDArray& actual = fused_values[fg.entry_id(fid, 0)];
  const Shape& shape = actual.shape();
  ASSERT_EQ(shape, y.shape()) << f.name;
  const int64_t channels = shape[1];
  const int64_t inner = shape.size() / (shape[0] * channels);
  const double k = static_cast<double>(conv_in[1].shape().size() / conv_in[1].shape()[0]);
  const double u = std::ldexp(1.0, -24);
  const double gamma_k = (k + 1) * u / (1 - (k + 1) * u);
  auto allowed = [&](size_t i, double expected) {
    const int64_t c = (static_cast<int64_t>(i) / inner) % channels;
    const double s = std::abs((fix_gamma ? 1.0 : gamma[c]) / std::sqrt(var[c] + eps));
    const double t =
        s * (sum_wx[i] + (bias.empty() ? 0.0 : std::abs(bias[c])) + std::abs(mean[c])) +
        std::abs(beta[c]);
    return (2 * gamma_k + 16 * u) * t + 4 * u * std::abs(expected);
  };
  EXPECT_TRUE(testing::all_within(actual.to_doubles(), y.to_doubles(), allowed,
                                  "the rounding bound of Note [Fused convolution rounding bound]",
                                  &shape));
}

// Note [Replay with a fixed thread count]
// The comparisons below are exact because both sides run the same kernels on the same inputs. A
// kernel's arithmetic may also depend on how many threads it is given: oneDNN's GEMM splits the
// reduction of a small-M FullyConnected across threads (crnn-ocr's pred_fc, M = 20, K = 200,
// differs by up to 5 ulp between 1 and 2 threads). The default adaptive policy gives each kernel
// cores / (kernels running now), which differs between the executor and the reference as they
// overlap, so these tests run every kernel with the same thread count (one per core).
class ModelReplay : public ::testing::TestWithParam<std::string> {
  testing::FixedIntraOpThreads fixed_threads_;
};

TEST_P(ModelReplay, ExecutorEqualsImperativeAtBatch1) {
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  auto g = std::make_shared<const Graph>(load_json_file(testing::models_dir() / file));
  const InferInputs inputs = testing::model_inputs(file, 1);
  const InferResult inferred = infer_shapes_types(*g, inputs);
  random_seed(42);

  // Values for every variable: labels zero, the rest deterministic.
  const std::vector<uint32_t> labels = label_variables(*g);
  Arrays args, aux, vars;
  const std::vector<uint32_t> aux_nodes = g->aux_nodes();
  for (uint32_t nid : g->variable_nodes()) {
    const std::string& name = g->nodes[nid].name;
    const uint32_t eid = g->entry_id(nid, 0);
    const bool is_label = std::binary_search(labels.begin(), labels.end(), nid);
    NDArray v = is_label ? NDArray::zeros(inferred.shapes[eid], inferred.dtypes[eid])
                         : init_value(name, inferred.shapes[eid], inferred.dtypes[eid],
                                      inputs.shapes.count(name) > 0);
    vars[name] = v;
    (std::binary_search(aux_nodes.begin(), aux_nodes.end(), nid) ? aux : args)[name] = v;
  }
  // The references: the graph and its fused rewrite, node by node through the imperative path.
  FuseStats stats;
  const Graph fg = fuse_for_inference(*g, &stats);
  const std::vector<NDArray> values = run_imperative(*g, vars);
  const std::vector<NDArray> fused_values = run_imperative(fg, vars);

  // No wait here: the reference's kernels and the executor's run concurrently on purpose (this
  // found primitives shared across threads).
  for (bool fuse : {false, true}) {
    BindOptions bo;
    bo.inputs = inputs;
    bo.fuse = fuse;
    bo.layouts = false;  // exact against the plain imperative path (layouts: layout_test.cc)
    auto ex = Executor::bind(g, bo, args, aux);
    ex->forward(false);
    ASSERT_EQ(ex->outputs().size(), g->heads.size());
    const auto& plan = ex->memory_plan().plan;
    EXPECT_LE(plan.arena_bytes, plan.no_reuse);
    check_buffer_plan(ex->memory_plan().buffers, plan);
    const Graph& ref_graph = fuse ? fg : *g;
    const std::vector<NDArray>& ref = fuse ? fused_values : values;
    for (size_t h = 0; h < g->heads.size(); ++h) {
      const NDArray& expected = ref[ref_graph.entry_id(ref_graph.heads[h])];
      // The executor runs the same kernels on the same inputs with the same thread count as the
      // reference (only the memory they write differs): equal to the last bit.
      EXPECT_TRUE(testing::all_equal(ex->outputs()[h], expected))
          << file << (fuse ? " (fused)" : "") << " head " << h;
      for (double v : expected.to_doubles()) {
        ASSERT_TRUE(std::isfinite(v)) << file << " head " << h << ": the reference is not finite";
      }
    }
  }

  // The rewrite: each fused node against the operators it replaces, on the same inputs.
  // Only conv → BatchNorm (→ ReLU) nodes here: the other rewrites (sums, other activations,
  // FullyConnected) are checked against the unfused graph in fuse_test.cc.
  std::vector<std::pair<uint32_t, Chain>> chains;
  std::map<uint32_t, std::string> folded_into;
  int other_fused = 0;
  for (uint32_t nid = 0; nid < fg.nodes.size(); ++nid) {
    const Node& f = fg.nodes[nid];
    if (!f.op || (f.op->name() != "_fused_conv_bn_act" && f.op->name() != "_fused_fc_act"))
      continue;
    const std::string act = f.attrs.at("__act_type__");
    if (f.op->name() == "_fused_fc_act" || f.attrs.at("__with_bn__") != "True" ||
        f.attrs.count("__with_sum__") || (act != "relu" && act != "none")) {
      ++other_fused;
      continue;
    }
    Chain c;
    ASSERT_TRUE(find_chain(*g, f, &c)) << file;
    chains.emplace_back(nid, c);
    for (int64_t member : {int64_t{c.conv}, int64_t{c.bn}, c.relu}) {
      if (member >= 0) folded_into[static_cast<uint32_t>(member)] = f.name;
    }
  }
  for (const auto& [nid, chain] : chains) {
    expect_fused_node_matches_chain(fg, nid, chain, folded_into, fused_values, *g, values, file);
  }
  const int fused_nodes = static_cast<int>(chains.size()) + other_fused;
  EXPECT_EQ(fused_nodes, stats.fused_nodes);
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

INSTANTIATE_TEST_SUITE_P(Models, ModelReplay, ::testing::ValuesIn(testing::mxnet_model_files()),
                         model_label);

}  // namespace
}  // namespace weft::graph
