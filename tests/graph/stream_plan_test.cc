// Multi-stream plans (graph/streams.h) and memory plans across streams: the event edges carry every
// dependency of the graph, and no two buffers that may be alive at the same time on different
// streams share memory. The reference is reachability computed here by a plain sweep over the
// edges that order execution (stream order and event edges), not the planner's vector clocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "graph/json.h"
#include "graph/plan.h"
#include "graph/streams.h"
#include "graph/symbol.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"

namespace weft::graph {
namespace {

// Execution order of a stream plan as bit sets: reach[v] holds every node that completes before
// v starts, following only stream order and event edges.
class Reach {
 public:
  explicit Reach(const StreamPlan& p) : n_(p.node_stream.size()), words_((n_ + 63) / 64) {
    bits_.assign(n_ * words_, 0);
    std::vector<int64_t> prev_on_stream(static_cast<size_t>(p.num_streams), -1);
    for (size_t v = 0; v < n_; ++v) {
      const int s = p.node_stream[v];
      if (s < 0) continue;
      auto add_from = [&](size_t u) {
        set(v, u);
        for (size_t w = 0; w < words_; ++w) bits_[v * words_ + w] |= bits_[u * words_ + w];
      };
      if (prev_on_stream[s] >= 0) add_from(static_cast<size_t>(prev_on_stream[s]));
      for (uint32_t u : p.waits[v]) add_from(u);
      prev_on_stream[s] = static_cast<int64_t>(v);
    }
  }
  // Whether `a` completes before `b` starts.
  bool before(size_t a, size_t b) const { return (bits_[b * words_ + a / 64] >> (a % 64)) & 1; }

 private:
  void set(size_t v, size_t u) { bits_[v * words_ + u / 64] |= uint64_t{1} << (u % 64); }
  size_t n_, words_;
  std::vector<uint64_t> bits_;
};

// Checks `p` against `g`: every op node on a stream, event edges only along graph dependencies
// and across streams, every dependency carried, and ordered() equal to the reference.
// Dependencies through mutated inputs (FMutateInputs), pair by pair: for two op nodes a < b that
// access an entry some node mutates, where at least one of them mutates it, b depends on a.
std::vector<std::vector<uint32_t>> mutation_deps(const Graph& g) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint32_t, bool>>> accesses;
  for (uint32_t v = 0; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    if (n.is_variable() || !n.op->attr<FMutateInputs>()) continue;
    for (int i : n.op->attr<FMutateInputs>()(*n.op_attrs)) {
      accesses[{n.inputs[i].node, n.inputs[i].index}];
    }
  }
  for (uint32_t v = 0; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    if (n.is_variable()) continue;
    std::vector<int> mut;
    if (n.op->attr<FMutateInputs>()) mut = n.op->attr<FMutateInputs>()(*n.op_attrs);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      auto it = accesses.find({n.inputs[i].node, n.inputs[i].index});
      if (it == accesses.end()) continue;
      const bool writes = std::find(mut.begin(), mut.end(), static_cast<int>(i)) != mut.end();
      it->second.emplace_back(v, writes);
    }
  }
  std::vector<std::vector<uint32_t>> deps(g.nodes.size());
  for (const auto& [entry, list] : accesses) {
    for (const auto& [a, wa] : list) {
      for (const auto& [b, wb] : list) {
        if (a < b && (wa || wb)) deps[b].push_back(a);
      }
    }
  }
  return deps;
}

void check_stream_plan(const Graph& g, const StreamPlan& p) {
  ASSERT_EQ(p.node_stream.size(), g.nodes.size());
  const Reach reach(p);
  const std::vector<std::vector<uint32_t>> mdeps = mutation_deps(g);
  for (uint32_t v = 0; v < g.nodes.size(); ++v) {
    const Node& n = g.nodes[v];
    if (n.is_variable()) {
      ASSERT_EQ(p.node_stream[v], -1);
      continue;
    }
    ASSERT_GE(p.node_stream[v], 0);
    ASSERT_LT(p.node_stream[v], p.num_streams);
    std::vector<uint32_t> deps(n.control_deps.begin(), n.control_deps.end());
    for (const NodeEntry& e : n.inputs) deps.push_back(e.node);
    deps.insert(deps.end(), mdeps[v].begin(), mdeps[v].end());
    for (uint32_t u : p.waits[v]) {
      EXPECT_NE(std::find(deps.begin(), deps.end(), u), deps.end())
          << "node " << v << " waits for node " << u << ", which it does not depend on";
      EXPECT_NE(p.node_stream[u], p.node_stream[v]) << "an event edge within stream";
    }
    for (uint32_t u : deps) {
      if (g.nodes[u].is_variable()) continue;
      ASSERT_TRUE(reach.before(u, v)) << "node " << v << " may start before its input node " << u;
    }
  }
  // ordered() against the reference on a sample of pairs (all pairs of small graphs).
  const uint32_t n = static_cast<uint32_t>(g.nodes.size());
  const uint32_t step = std::max<uint32_t>(1, n / 300);
  for (uint32_t a = 0; a < n; a += step) {
    for (uint32_t b = 0; b < n; b += step) {
      if (p.node_stream[a] < 0 || p.node_stream[b] < 0) continue;
      ASSERT_EQ(p.ordered(a, b), reach.before(a, b)) << a << " before " << b;
    }
  }
}

// The nodes that touch each planned buffer: its writer and readers (workspaces: their node).
std::vector<std::vector<uint32_t>> buffer_accesses(const Graph& g, const MemoryPlan& mp) {
  std::vector<std::vector<uint32_t>> acc(mp.buffers.size());
  for (uint32_t eid = 0; eid < mp.entry_buffer.size(); ++eid) {
    if (mp.entry_buffer[eid] >= 0) acc[mp.entry_buffer[eid]].push_back(g.entry_of(eid).node);
  }
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    if (mp.workspace_buffer[nid] >= 0) acc[mp.workspace_buffer[nid]].push_back(nid);
    for (const NodeEntry& e : g.nodes[nid].inputs) {
      const int32_t b = mp.entry_buffer[g.entry_id(e)];
      if (b >= 0) acc[b].push_back(nid);
    }
  }
  return acc;
}

// No two buffers whose bytes overlap may be alive at once: every access of one completes before
// the other's writer starts. The one exception is an in-place pair, where the later buffer's
// writer is the earlier one's last reader.
struct MemoryCheck {
  size_t pairs = 0;       // buffers that overlap in memory
  size_t violations = 0;  // of those, pairs that may be alive at the same time
  std::string first;      // the first violation
};
MemoryCheck check_memory_across_streams(const Graph& g, const StreamPlan& p, const MemoryPlan& mp) {
  const Reach reach(p);
  const auto acc = buffer_accesses(g, mp);
  const size_t nb = mp.buffers.size();
  std::vector<int64_t> inplace_src(nb, -1);  // buffer -> buffer it is in place of
  for (uint32_t eid = 0; eid < mp.entry_buffer.size(); ++eid) {
    const int32_t b = mp.entry_buffer[eid];
    if (b >= 0 && mp.entry_inplace_of[eid] >= 0)
      inplace_src[b] = mp.entry_buffer[mp.entry_inplace_of[eid]];
  }
  auto writer = [&](size_t b) { return mp.buffers[b].first; };
  // All of x's accesses are done before y's writer starts (y's writer itself may be x's last
  // reader when y is in place of x).
  auto done_before = [&](size_t x, size_t y) {
    for (uint32_t a : acc[x]) {
      if (a == writer(y) && inplace_src[y] == static_cast<int64_t>(x)) continue;
      if (!reach.before(a, writer(y))) return false;
    }
    return true;
  };
  std::vector<size_t> order(nb);
  for (size_t b = 0; b < nb; ++b) order[b] = b;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return mp.plan.offsets[a] < mp.plan.offsets[b]; });
  MemoryCheck out;
  for (size_t i = 0; i < nb; ++i) {
    const size_t x = order[i];
    const size_t x_end = mp.plan.offsets[x] + std::max<size_t>(mp.buffers[x].bytes, 1);
    for (size_t j = i + 1; j < nb && mp.plan.offsets[order[j]] < x_end; ++j) {
      const size_t y = order[j];
      ++out.pairs;
      if (done_before(x, y) || done_before(y, x)) continue;
      if (out.violations++ == 0) {
        out.first = "buffers " + std::to_string(x) + " (writer node " + std::to_string(writer(x)) +
                    ") and " + std::to_string(y) + " (writer node " + std::to_string(writer(y)) +
                    ") share memory but may be alive at once";
      }
    }
  }
  return out;
}

uint32_t node_named(const Graph& g, const std::string& name) {
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name == name) return i;
  }
  ADD_FAILURE() << "no node " << name;
  return 0;
}

// a → (b, c) → d: a fork and a join.
Graph diamond() {
  Symbol x = Symbol::variable("x");
  Symbol a = Symbol::op("relu", {x}, {}, "a");
  Symbol b = Symbol::op("sigmoid", {a}, {}, "b");
  Symbol b2 = Symbol::op("tanh", {b}, {}, "b2");
  Symbol c = Symbol::op("exp", {a}, {}, "c");
  Symbol d = Symbol::op("elemwise_add", {b2, c}, {}, "d");
  return d.to_graph();
}

TEST(StreamPlan, ForkAndJoin) {
  const Graph g = diamond();
  const StreamPlan p = plan_streams(g, 2);
  check_stream_plan(g, p);
  const uint32_t a = node_named(g, "a"), b = node_named(g, "b"), b2 = node_named(g, "b2");
  const uint32_t c = node_named(g, "c"), d = node_named(g, "d");
  EXPECT_EQ(p.node_stream[b], p.node_stream[a]);  // the chain continues
  EXPECT_EQ(p.node_stream[b2], p.node_stream[b]);
  EXPECT_NE(p.node_stream[c], p.node_stream[a]);  // the fork's second branch
  EXPECT_EQ(p.streams_used, 2);
  EXPECT_EQ(p.event_edges, 2);  // c waits for a, d for the other branch
  EXPECT_FALSE(p.ordered(b, c));
  EXPECT_FALSE(p.ordered(c, b2));
  EXPECT_TRUE(p.ordered(a, c));
  EXPECT_TRUE(p.ordered(c, d));
  EXPECT_TRUE(p.ordered(b2, d));
}

// BatchNorm mutates its moving mean, which two other branches read: one before it in node order
// (the mutation must wait for that read) and one after it (that read must see the mutation).
// Neither is a producer or consumer of the BatchNorm, so only the mutation orders them.
TEST(StreamPlan, MutatedInputsOrderEarlierAndLaterReaders) {
  Symbol x = Symbol::variable("x");
  Symbol mm = Symbol::variable("mm");
  Symbol r1 = Symbol::op("sigmoid", {mm}, {}, "r1");
  Symbol bn = Symbol::op(
      "BatchNorm",
      {x, Symbol::variable("gamma"), Symbol::variable("beta"), mm, Symbol::variable("mv")}, {},
      "bn");
  Symbol r2 = Symbol::op("tanh", {mm}, {}, "r2");
  Symbol z = Symbol::op("broadcast_add", {bn, r2}, {}, "z");
  const Graph g = Symbol::group({r1, z}).to_graph();
  const uint32_t n1 = node_named(g, "r1"), nb = node_named(g, "bn"), n2 = node_named(g, "r2");
  ASSERT_LT(n1, nb);
  ASSERT_LT(nb, n2);
  for (int streams : {2, 3}) {
    const StreamPlan p = plan_streams(g, streams);
    check_stream_plan(g, p);
    EXPECT_TRUE(p.ordered(n1, nb)) << streams << " streams";
    EXPECT_TRUE(p.ordered(nb, n2)) << streams << " streams";
  }
}

TEST(StreamPlan, OneStreamIsNodeOrder) {
  const Graph g = diamond();
  const StreamPlan p = plan_streams(g, 1);
  check_stream_plan(g, p);
  EXPECT_EQ(p.event_edges, 0);
  EXPECT_EQ(p.streams_used, 1);
  EXPECT_THROW(plan_streams(g, 0), Error);
}

TEST(StreamPlan, BranchesDoNotShareMemory) {
  // Two long independent branches of equal buffers: one stream may reuse one branch's memory for
  // the other (node order runs them one after the other); two streams may not.
  Symbol x = Symbol::variable("x");
  Symbol l = x, r = x;
  for (int i = 0; i < 6; ++i) {
    l = Symbol::op("sigmoid", {l}, {}, "l" + std::to_string(i));
    r = Symbol::op("tanh", {r}, {}, "r" + std::to_string(i));
  }
  const Graph g = Symbol::op("elemwise_add", {l, r}, {}, "sum").to_graph();
  InferInputs in;
  in.shapes["x"] = Shape({1024});
  const InferResult inferred = infer_shapes_types(g, in, true);
  const StreamPlan p = plan_streams(g, 2);
  check_stream_plan(g, p);
  GraphPlanOptions without;  // in place, each chain would need one block however it runs
  without.plan.allow_inplace = false;
  GraphPlanOptions with = without;
  with.streams = &p;
  const MemoryPlan one = plan_memory(g, inferred, without);
  const MemoryPlan two = plan_memory(g, inferred, with);
  ASSERT_NO_THROW(check_buffer_plan(two.buffers, two.plan));
  const MemoryCheck ok = check_memory_across_streams(g, p, two);
  EXPECT_EQ(ok.violations, 0u) << ok.first;
  EXPECT_GT(two.plan.arena_bytes, one.plan.arena_bytes);
  // The single-stream plan is wrong across streams: the reference check finds shared memory.
  EXPECT_GT(check_memory_across_streams(g, p, one).violations, 0u);
}

std::string short_name(const std::string& file) {
  for (const testing::ModelInputSpec& spec : testing::mxnet_model_specs()) {
    if (file == spec.file) return spec.name;
  }
  return file;
}

class ModelStreams : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelStreams, PlansNeverShareMemoryBetweenConcurrentBuffers) {
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  const Graph forward = load_json_file(testing::models_dir() / file);
  for (bool train : {false, true}) {
    SCOPED_TRACE(file + (train ? " training" : " inference"));
    const InferInputs inputs = testing::model_inputs(file, 1);
    const testing::InferredGraph ig = train ? testing::training_graph(forward, inputs)
                                            : testing::inference_graph(forward, inputs);
    const MemoryPlan single = plan_memory(ig.graph, ig.inferred);
    for (int k : {2, 4}) {
      SCOPED_TRACE(std::to_string(k) + " streams");
      const StreamPlan p = plan_streams(ig.graph, k);
      check_stream_plan(ig.graph, p);
      GraphPlanOptions o;
      o.streams = &p;
      const MemoryPlan mp = plan_memory(ig.graph, ig.inferred, o);
      ASSERT_NO_THROW(check_buffer_plan(mp.buffers, mp.plan));
      const MemoryCheck check = check_memory_across_streams(ig.graph, p, mp);
      EXPECT_EQ(check.violations, 0u) << check.first;
      const size_t pairs = check.pairs;
      // Concurrency costs memory, never saves it.
      EXPECT_GE(mp.plan.lower_bound, single.plan.lower_bound);
      std::printf(
          "  %-28s %-9s streams %d/%d  event edges %4d of %4d cross  arena %.2f MB (one stream "
          "%.2f MB)  overlapping pairs %zu\n",
          short_name(file).c_str(), train ? "training" : "inference", p.streams_used, k,
          p.event_edges, p.cross_edges, mp.plan.arena_bytes / 1e6, single.plan.arena_bytes / 1e6,
          pairs);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelStreams, ::testing::ValuesIn(testing::mxnet_model_files()),
                         testing::ModelTestName());

}  // namespace
}  // namespace weft::graph
