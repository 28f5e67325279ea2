// build_segments: which node operations the executor pushes together (Note [Bulk segments]).
#include "graph/segments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace weft::graph {
namespace {

// Handles that are only compared, never dereferenced.
VarHandle v(uintptr_t id) { return VarHandle(reinterpret_cast<Var*>(id * 64), 1); }

SegmentNode node(std::vector<VarHandle> reads, std::vector<VarHandle> writes, bool async = false,
                 std::vector<VarHandle> keyed = {}) {
  SegmentNode n;
  n.reads = std::move(reads);
  n.writes = std::move(writes);
  n.async = async;
  n.keyed_ins = std::move(keyed);
  return n;
}

std::vector<VarHandle> sorted(std::vector<VarHandle> a) {
  std::sort(a.begin(), a.end());
  return a;
}

std::vector<std::pair<uint32_t, uint32_t>> ranges(const std::vector<Segment>& s) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const Segment& g : s) out.emplace_back(g.begin, g.end);
  return out;
}

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

TEST(Segments, ChainBecomesOneSegmentWithUnionVars) {
  // x -> a -> b -> c, each node also reads a weight and the arena fence var.
  const VarHandle fence = v(1), x = v(2), w1 = v(3), w2 = v(4), w3 = v(5);
  const VarHandle a = v(10), b = v(11), c = v(12);
  std::vector<SegmentNode> nodes = {node({fence, x, w1}, {a}), node({fence, a, w2}, {b}),
                                    node({fence, b, w3}, {c})};
  const auto segs = build_segments(nodes, SegmentOptions{});
  ASSERT_EQ(ranges(segs), (Ranges{{0, 3}}));
  EXPECT_EQ(segs[0].writes, sorted({a, b, c}));
  // a and b are written inside the segment: they are writes, not reads.
  EXPECT_EQ(segs[0].reads, sorted({fence, x, w1, w2, w3}));
}

TEST(Segments, MaxNodesSplitsLongChains) {
  std::vector<SegmentNode> nodes;
  for (uintptr_t i = 0; i < 7; ++i) nodes.push_back(node({v(100 + i)}, {v(101 + i)}));
  SegmentOptions o;
  o.max_nodes = 3;
  EXPECT_EQ(ranges(build_segments(nodes, o)), (Ranges{{0, 3}, {3, 6}, {6, 7}}));
  o.max_nodes = 1;
  EXPECT_EQ(build_segments(nodes, o).size(), 7u);
}

TEST(Segments, AsyncNodesRunAlone) {
  std::vector<SegmentNode> nodes = {node({v(1)}, {v(2)}), node({v(2)}, {v(3)}),
                                    node({v(3)}, {v(4)}, /*async=*/true), node({v(4)}, {v(5)}),
                                    node({v(5)}, {v(6)})};
  EXPECT_EQ(ranges(build_segments(nodes, SegmentOptions{})), (Ranges{{0, 2}, {2, 3}, {3, 5}}));
}

TEST(Segments, KeyedInputWrittenInsideEndsTheSegment) {
  // Node 1 writes a bound array (var 7) that node 2 reads as a cached weight: node 2 must see the
  // advanced version, so it starts a new segment.
  std::vector<SegmentNode> nodes = {node({v(1)}, {v(2)}), node({v(2)}, {v(3), v(7)}),
                                    node({v(3), v(7)}, {v(4)}, false, {v(7)})};
  EXPECT_EQ(ranges(build_segments(nodes, SegmentOptions{})), (Ranges{{0, 2}, {2, 3}}));
  // A keyed input written elsewhere (before the segment) does not split it.
  std::vector<SegmentNode> nodes2 = {node({v(1)}, {v(2)}),
                                     node({v(2), v(9)}, {v(3)}, false, {v(9)})};
  EXPECT_EQ(ranges(build_segments(nodes2, SegmentOptions{})), (Ranges{{0, 2}}));
}

TEST(Segments, IndependentBranchesStaySeparateUnlessAsked) {
  // Two towers from x: x->a->b and x->c->d, pushed interleaved a, c, b, d, then concat(b, d).
  const VarHandle x = v(1), a = v(2), b = v(3), c = v(4), d = v(5), e = v(6);
  std::vector<SegmentNode> nodes = {node({x}, {a}), node({x}, {c}), node({a}, {b}), node({c}, {d}),
                                    node({b, d}, {e})};
  // chains_only: c does not read what {a} writes, b not what {c} writes, d not what {b} writes;
  // the concat reads d, which {d} writes, and joins it.
  EXPECT_EQ(ranges(build_segments(nodes, SegmentOptions{})),
            (Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 5}}));
  SegmentOptions all;
  all.chains_only = false;
  const auto segs = build_segments(nodes, all);
  ASSERT_EQ(ranges(segs), (Ranges{{0, 5}}));
  EXPECT_EQ(segs[0].reads, std::vector<VarHandle>{x});
  EXPECT_EQ(segs[0].writes, sorted({a, b, c, d, e}));
}

TEST(Segments, ChainAfterBranchesJoinsTheLastProducer) {
  // a, then b reading a, then c reading x (independent), then d reading c.
  const VarHandle x = v(1), a = v(2), b = v(3), c = v(4), d = v(5);
  std::vector<SegmentNode> nodes = {node({x}, {a}), node({a}, {b}), node({x}, {c}), node({c}, {d})};
  EXPECT_EQ(ranges(build_segments(nodes, SegmentOptions{})), (Ranges{{0, 2}, {2, 4}}));
}

TEST(Segments, EmptyAndRejectsZeroMax) {
  EXPECT_TRUE(build_segments({}, SegmentOptions{}).empty());
  SegmentOptions o;
  o.max_nodes = 0;
  EXPECT_THROW(build_segments({node({v(1)}, {v(2)})}, o), Error);
}

}  // namespace
}  // namespace weft::graph
