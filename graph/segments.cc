#include "graph/segments.h"

#include <algorithm>

#include "base/error.h"

namespace weft::graph {

// Note [Bulk segments]
// ~~~~~~~~~~~~~~~~~~~~
// Every node of a bound graph is a cached engine operation. For a small graph at batch 1 the
// kernels take a few microseconds each, and handing each one to a worker (queueing, the ready
// check, a wake-up when the worker had gone idle, the completion bookkeeping) costs as much as
// the kernel. A segment pushes a run of consecutive nodes as one engine operation whose body
// runs them in order on one worker: one dispatch instead of many.
//
// A segment's reads and writes are the union of its members', a variable written by any member
// counting as a write. That orders the segment after everything its members wait for and makes
// everything after it wait for all of it: correct, and only coarser than per-node operations.
// The cost is parallelism: members run one after another. With `chains_only` a node joins the
// open segment only when it reads something the segment writes — a node that depends on the
// segment could not have started before the segment's end anyway — so independent branches
// (Inception's towers, a residual block's shortcut) remain separate operations that other
// workers can pick up.
//
// Kernels key caches (reordered weights) on an input's (storage id, variable version); the
// version advances when the operation writing it completes. Inside a segment a member that
// writes a bound array would not yet have advanced its version for a later member reading it, so
// a segment ends before such a reader. Async nodes complete through a callback from another
// thread and cannot be sequenced inside a synchronous body: each is pushed alone.

std::vector<Segment> build_segments(const std::vector<SegmentNode>& nodes,
                                    const SegmentOptions& options) {
  WEFT_CHECK(options.max_nodes >= 1) << "build_segments: max_nodes must be at least 1";
  std::vector<Segment> out;
  // The open segment's variables. Segments are short (max_nodes), so flat lists searched
  // linearly beat hashing.
  std::vector<VarHandle> written, read;
  auto has = [](const std::vector<VarHandle>& set, VarHandle v) {
    return std::find(set.begin(), set.end(), v) != set.end();
  };
  auto add = [&](std::vector<VarHandle>& set, VarHandle v) {
    if (!has(set, v)) set.push_back(v);
  };
  auto close = [&](uint32_t end) {
    if (out.empty() || out.back().end != 0) return;
    Segment& s = out.back();
    s.end = end;
    s.writes = written;
    for (VarHandle v : read) {
      if (!has(written, v)) s.reads.push_back(v);
    }
    // Deterministic order (pointer order) keeps pushes reproducible run to run.
    std::sort(s.writes.begin(), s.writes.end());
    std::sort(s.reads.begin(), s.reads.end());
    written.clear();
    read.clear();
  };
  auto open = [&](uint32_t begin) {
    out.push_back(Segment{});
    out.back().begin = begin;
  };
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const SegmentNode& n = nodes[i];
    bool join = !out.empty() && out.back().end == 0 && !n.async;
    if (join) {
      const Segment& s = out.back();
      if (i - s.begin >= options.max_nodes) join = false;
      if (n.stream != nodes[s.begin].stream) join = false;  // a segment runs on one stream
    }
    if (join) {
      for (VarHandle v : n.keyed_ins) {
        if (has(written, v)) {
          join = false;
          break;
        }
      }
    }
    if (join && options.chains_only) {
      join =
          std::any_of(n.reads.begin(), n.reads.end(), [&](VarHandle v) { return has(written, v); });
    }
    if (!join) {
      close(i);
      open(i);
    }
    for (VarHandle v : n.reads) add(read, v);
    for (VarHandle v : n.writes) add(written, v);
    if (n.async) close(i + 1);  // an async node is alone
  }
  close(static_cast<uint32_t>(nodes.size()));
  return out;
}

}  // namespace weft::graph
