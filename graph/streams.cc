// Multi-stream plans (see streams.h, Note [Stream plans]).
#include "graph/streams.h"

#include <algorithm>
#include <unordered_map>

#include "base/error.h"
#include "ops/op.h"

namespace weft::graph {

StreamPlan plan_streams(const Graph& g, int max_streams) {
  WEFT_CHECK(max_streams >= 1) << "stream plan: " << max_streams << " streams (need at least 1)";
  WEFT_CHECK(g.nodes.size() < static_cast<size_t>(INT32_MAX))
      << "stream plan: too many nodes (" << g.nodes.size() << ")";
  const int k = max_streams;
  const size_t n = g.nodes.size();
  StreamPlan p;
  p.num_streams = k;
  p.node_stream.assign(n, -1);
  p.waits.assign(n, {});
  p.clock.assign(n * static_cast<size_t>(k), -1);
  // Per stream: its last node (-1: none yet) and its clock after that node.
  std::vector<int32_t> tail(static_cast<size_t>(k), -1);
  std::vector<std::vector<int32_t>> tail_clock(static_cast<size_t>(k),
                                               std::vector<int32_t>(static_cast<size_t>(k), -1));
  std::vector<int32_t> merged(static_cast<size_t>(k));
  std::vector<uint32_t> producers;
  std::vector<bool> used(static_cast<size_t>(k), false);
  // Note [Mutated inputs across streams]: an op that mutates an input (FMutateInputs: BatchNorm's
  // moving statistics, an optimizer's state) writes an entry it did not produce. Producer edges
  // alone would leave it unordered with the entry's other readers, which the engine's variables
  // order in node-by-node runs but nothing orders inside a captured pass. So such an entry gets
  // the edges of a write: its mutator follows every earlier reader and mutator of it, and later
  // readers follow the mutator.
  struct Access {
    int32_t writer = -1;            // the last node that mutated the entry
    std::vector<uint32_t> readers;  // nodes that read it since
  };
  std::unordered_map<uint64_t, Access> mutated;
  const auto key = [](const NodeEntry& e) { return (uint64_t{e.node} << 32) | e.index; };
  std::vector<std::vector<int>> mutates(n);
  for (uint32_t v = 0; v < n; ++v) {
    const Node& node = g.nodes[v];
    if (node.is_variable()) continue;
    const auto& fm = node.op->attr<FMutateInputs>();
    if (!fm) continue;
    for (int i : fm(*node.op_attrs)) {
      if (i < 0 || static_cast<size_t>(i) >= node.inputs.size()) continue;
      mutates[v].push_back(i);
      mutated.try_emplace(key(node.inputs[static_cast<size_t>(i)]));
    }
  }

  for (uint32_t v = 0; v < n; ++v) {
    const Node& node = g.nodes[v];
    if (node.is_variable()) continue;
    producers.clear();
    for (const NodeEntry& e : node.inputs) {
      if (!g.nodes[e.node].is_variable()) producers.push_back(e.node);
    }
    for (uint32_t c : node.control_deps) {
      if (!g.nodes[c].is_variable()) producers.push_back(c);
    }
    if (!mutated.empty()) {
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        auto it = mutated.find(key(node.inputs[i]));
        if (it == mutated.end()) continue;
        Access& a = it->second;
        if (a.writer >= 0 && a.writer != static_cast<int32_t>(v)) producers.push_back(a.writer);
        if (std::find(mutates[v].begin(), mutates[v].end(), static_cast<int>(i)) !=
            mutates[v].end()) {
          for (uint32_t r : a.readers) {
            if (r != v) producers.push_back(r);
          }
          a.readers.clear();
          a.writer = static_cast<int32_t>(v);
        } else {
          a.readers.push_back(v);
        }
      }
    }
    // What the node needs done, whatever stream it lands on: its producers and their clocks.
    std::fill(merged.begin(), merged.end(), -1);
    for (uint32_t u : producers) {
      const int32_t* cu = &p.clock[static_cast<size_t>(u) * k];
      for (int t = 0; t < k; ++t) merged[t] = std::max(merged[t], cu[t]);
    }
    // The stream: continue a producer's chain; else a stream whose last node is already done
    // before this node may start; else the stream whose last node is oldest.
    int s = -1;
    for (uint32_t u : producers) {
      const int t = p.node_stream[u];
      if (tail[t] == static_cast<int32_t>(u)) {
        s = t;
        break;
      }
    }
    if (s < 0) {
      for (int t = 0; t < k && s < 0; ++t) {
        if (tail[t] < 0 || merged[t] >= tail[t]) s = t;
      }
    }
    if (s < 0) {
      s = 0;
      for (int t = 1; t < k; ++t) {
        if (tail[t] < tail[s]) s = t;
      }
    }
    // Event edges: the producers on other streams that this stream does not already follow,
    // latest first, so that one wait may cover an earlier producer through the later one's clock.
    std::vector<int32_t> vc = tail_clock[s];
    std::sort(producers.begin(), producers.end(), std::greater<>());
    producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
    for (uint32_t u : producers) {
      const int t = p.node_stream[u];
      if (t == s) continue;
      ++p.cross_edges;
      if (vc[t] >= static_cast<int32_t>(u)) continue;
      p.waits[v].push_back(u);
      ++p.event_edges;
      const int32_t* cu = &p.clock[static_cast<size_t>(u) * k];
      for (int x = 0; x < k; ++x) vc[x] = std::max(vc[x], cu[x]);
    }
    vc[s] = static_cast<int32_t>(v);
    std::copy(vc.begin(), vc.end(), p.clock.begin() + static_cast<ptrdiff_t>(v) * k);
    tail[s] = static_cast<int32_t>(v);
    tail_clock[s] = std::move(vc);
    p.node_stream[v] = s;
    if (!used[s]) {
      used[s] = true;
      ++p.streams_used;
    }
  }
  return p;
}

std::vector<std::vector<uint32_t>> stream_members(const StreamPlan& plan) {
  std::vector<std::vector<uint32_t>> out(static_cast<size_t>(plan.num_streams));
  for (uint32_t v = 0; v < plan.node_stream.size(); ++v) {
    if (plan.node_stream[v] >= 0) out[plan.node_stream[v]].push_back(v);
  }
  return out;
}

}  // namespace weft::graph
