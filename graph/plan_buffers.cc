// The abstract memory planner behind plan_memory: offsets for buffers with lifetimes (dynamic
// storage allocation), the lower bound it is measured against, MXNet-style block sharing as the
// baseline, and the plan checker.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "base/error.h"
#include "graph/plan.h"

namespace weft::graph {
namespace {

size_t align_up(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

void check_options(const PlanOptions& options) {
  WEFT_CHECK(options.alignment > 0) << "memory plan: alignment must be positive, got " << options.alignment;
}

// Note [In-place groups]
// A buffer that takes over its inplace_from buffer's memory continues that buffer's block: the
// two (and longer chains: relu after relu after add) form one group, a single block live from
// the first member's write to the last member's last read. A request is honoured when the
// source dies exactly where this buffer is written (source.last == first), the source was
// written earlier (source.first < first, which also rules out cycles), both have the same
// aligned size, and no other buffer took the source over already (requests are resolved in
// order of first step, then index: the earliest wins). Everything downstream (planners, lower
// bound, checker) works on groups, so an honoured pair counts once.
struct Groups {
  std::vector<size_t> size;        // per buffer, aligned
  std::vector<int32_t> group_of;   // per buffer
  std::vector<bool> inplace;       // per buffer: honoured in-place request
  std::vector<size_t> gsize;       // per group, aligned
  std::vector<uint32_t> glo, ghi;  // per group: first and last step (inclusive)
  size_t num_groups() const { return gsize.size(); }
};

void validate(const std::vector<PlanBuffer>& buffers) {
  const size_t n = buffers.size();
  WEFT_CHECK(n < static_cast<size_t>(std::numeric_limits<int32_t>::max()))
      << "memory plan: too many buffers (" << n << ")";
  for (size_t i = 0; i < n; ++i) {
    const PlanBuffer& b = buffers[i];
    WEFT_CHECK(b.first <= b.last) << "memory plan: buffer " << i << " is written at step " << b.first
                                  << " after its last read at step " << b.last;
    WEFT_CHECK(b.inplace_from < static_cast<int64_t>(n) && b.inplace_from != static_cast<int64_t>(i) &&
               b.inplace_from >= -1)
        << "memory plan: buffer " << i << " names buffer " << b.inplace_from << " as its in-place source ("
        << n << " buffers)";
  }
}

// Order of first step, then index: the order in which buffers are written.
std::vector<int32_t> write_order(const std::vector<PlanBuffer>& buffers) {
  std::vector<int32_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return buffers[a].first < buffers[b].first; });
  return order;
}

// Groups from the in-place flags already decided (`inplace[b]`: b shares inplace_from's memory).
Groups groups_from_flags(const std::vector<PlanBuffer>& buffers, const std::vector<bool>& inplace,
                         size_t alignment) {
  Groups g;
  const size_t n = buffers.size();
  g.size.resize(n);
  g.group_of.assign(n, -1);
  g.inplace = inplace;
  for (size_t i = 0; i < n; ++i) g.size[i] = align_up(buffers[i].bytes, alignment);
  for (int32_t b : write_order(buffers)) {
    const PlanBuffer& buf = buffers[b];
    if (inplace[b]) {
      const int32_t src = g.group_of[buf.inplace_from];
      WEFT_ICHECK(src >= 0) << "memory plan: buffer " << b << " is in place of buffer " << buf.inplace_from
                            << ", which is written later";
      g.group_of[b] = src;
      g.ghi[src] = std::max(g.ghi[src], buf.last);
      g.gsize[src] = std::max(g.gsize[src], g.size[b]);
    } else {
      g.group_of[b] = static_cast<int32_t>(g.gsize.size());
      g.gsize.push_back(g.size[b]);
      g.glo.push_back(buf.first);
      g.ghi.push_back(buf.last);
    }
  }
  return g;
}

// Decides which in-place requests are honoured (Note [In-place groups]) and groups the buffers.
Groups resolve_groups(const std::vector<PlanBuffer>& buffers, const PlanOptions& options) {
  const size_t n = buffers.size();
  std::vector<bool> inplace(n, false);
  if (options.allow_inplace) {
    std::vector<bool> taken(n, false);
    for (int32_t b : write_order(buffers)) {
      const PlanBuffer& buf = buffers[b];
      if (buf.inplace_from < 0) continue;
      const PlanBuffer& src = buffers[buf.inplace_from];
      if (taken[buf.inplace_from] || src.last != buf.first || src.first >= buf.first ||
          align_up(src.bytes, options.alignment) != align_up(buf.bytes, options.alignment)) {
        continue;
      }
      taken[buf.inplace_from] = true;
      inplace[b] = true;
    }
  }
  return groups_from_flags(buffers, inplace, options.alignment);
}

// The steps at which something is written or last read, sorted and unique: the planner only
// needs the order of steps, and a graph numbers them by node id (sparse once variables are out).
struct StepIndex {
  std::vector<uint32_t> steps;
  uint32_t operator()(uint32_t step) const {
    return static_cast<uint32_t>(std::lower_bound(steps.begin(), steps.end(), step) - steps.begin());
  }
};

StepIndex compress_steps(const Groups& g) {
  StepIndex s;
  s.steps.reserve(2 * g.num_groups());
  s.steps.insert(s.steps.end(), g.glo.begin(), g.glo.end());
  s.steps.insert(s.steps.end(), g.ghi.begin(), g.ghi.end());
  std::sort(s.steps.begin(), s.steps.end());
  s.steps.erase(std::unique(s.steps.begin(), s.steps.end()), s.steps.end());
  return s;
}

// Live bytes at each compressed step (groups, so in-place pairs count once).
std::vector<size_t> live_profile(const Groups& g, const StepIndex& index) {
  std::vector<int64_t> delta(index.steps.size() + 1, 0);
  for (size_t k = 0; k < g.num_groups(); ++k) {
    delta[index(g.glo[k])] += static_cast<int64_t>(g.gsize[k]);
    delta[index(g.ghi[k]) + 1] -= static_cast<int64_t>(g.gsize[k]);
  }
  std::vector<size_t> live(index.steps.size());
  int64_t sum = 0;
  for (size_t t = 0; t < live.size(); ++t) {
    sum += delta[t];
    live[t] = static_cast<size_t>(sum);
  }
  return live;
}

size_t sum_sizes(const Groups& g) { return std::accumulate(g.size.begin(), g.size.end(), size_t{0}); }

// ---- weft's planner ---------------------------------------------------------------------------
//
// Note [Offset assignment]
// Placing blocks with fixed lifetimes at offsets so that blocks alive at the same time do not
// overlap, in the least total space, is dynamic storage allocation (NP-hard). The peak of live
// bytes over the steps is a lower bound. Greedy placement gets close when the order is right:
// each block goes into the best-fitting gap left by the blocks already placed that are alive at
// the same time (or on top of them). Which order is right depends on the graph (by size suits
// inference chains; training graphs, where activations live from the forward pass to their use
// in the backward pass, prefer long lifetimes first or the blocks alive at the peak first), so
// several orders and two fit rules are tried and the smallest arena kept. Then a local search
// repeatedly moves a block that reaches the top of the arena earlier in the order and keeps the
// new order when the arena does not grow: the blocks that set the arena size get first choice.
// Every step is deterministic (fixed seeds, counted iterations).

struct Placed {
  size_t offset;
  size_t end;
  uint32_t lo;
  uint32_t hi;
};

enum class Fit { kBest, kFirst };

// Places the groups in `order`; returns the arena size. `offsets` gets one offset per group.
size_t place_greedy(const Groups& g, const std::vector<int32_t>& order, Fit fit, std::vector<size_t>& offsets,
                    std::vector<Placed>& placed) {
  offsets.assign(g.num_groups(), 0);
  placed.clear();
  size_t arena = 0;
  for (int32_t k : order) {
    const size_t size = g.gsize[k];
    if (size == 0) continue;  // takes no space: offset 0
    const uint32_t lo = g.glo[k], hi = g.ghi[k];
    size_t best = std::numeric_limits<size_t>::max();
    size_t best_gap = std::numeric_limits<size_t>::max();
    size_t top = 0;  // lowest address above every conflicting block seen so far
    for (const Placed& p : placed) {
      if (p.hi < lo || p.lo > hi) continue;
      if (p.offset >= top + size) {
        const size_t gap = p.offset - top;
        if (gap < best_gap) {
          best_gap = gap;
          best = top;
          if (fit == Fit::kFirst || gap == size) break;
        }
      }
      top = std::max(top, p.end);
    }
    const size_t offset = best != std::numeric_limits<size_t>::max() ? best : top;
    offsets[k] = offset;
    const Placed entry{offset, offset + size, lo, hi};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), entry,
                                   [](const Placed& a, const Placed& b) { return a.offset < b.offset; }),
                  entry);
    arena = std::max(arena, offset + size);
  }
  return arena;
}

// Maximum over each group's lifetime of the live bytes: how crowded the steps are that it spans.
std::vector<size_t> crowding(const Groups& g, const StepIndex& index, const std::vector<size_t>& live) {
  // Sparse table for range maxima.
  const size_t t = live.size();
  std::vector<std::vector<size_t>> table{live};
  for (size_t w = 1; 2 * w <= t; w *= 2) {
    const std::vector<size_t>& prev = table.back();
    std::vector<size_t> next(t - 2 * w + 1);
    for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + w]);
    table.push_back(std::move(next));
  }
  std::vector<size_t> out(g.num_groups());
  for (size_t k = 0; k < g.num_groups(); ++k) {
    const size_t a = index(g.glo[k]), b = index(g.ghi[k]) + 1;
    size_t level = 0;
    while ((size_t{2} << level) <= b - a) ++level;
    out[k] = std::max(table[level][a], table[level][b - (size_t{1} << level)]);
  }
  return out;
}

struct Candidate {
  size_t arena = std::numeric_limits<size_t>::max();
  std::vector<int32_t> order;
  Fit fit = Fit::kBest;
  std::vector<size_t> offsets;
};

// Work budget of the local search, in visits of placed blocks (the greedy's inner loop).
constexpr double kSearchBudget = 4e8;
constexpr int kMaxSearchIterations = 400;

BufferPlan plan_groups(const std::vector<PlanBuffer>& buffers, const Groups& g, const PlanOptions& options) {
  BufferPlan plan;
  plan.inplace = g.inplace;
  plan.no_reuse = sum_sizes(g);
  const size_t n = g.num_groups();
  const StepIndex index = compress_steps(g);
  const std::vector<size_t> live = live_profile(g, index);
  plan.lower_bound = live.empty() ? 0 : *std::max_element(live.begin(), live.end());

  std::vector<size_t> group_offsets(n, 0);
  if (n > 0 && plan.lower_bound > 0) {
    const std::vector<size_t> crowd = crowding(g, index, live);
    auto length = [&](int32_t k) { return static_cast<uint64_t>(index(g.ghi[k]) - index(g.glo[k])); };
    std::vector<int32_t> base(n);
    std::iota(base.begin(), base.end(), 0);
    // Each order breaks ties by the others and finally by index, so it is total and deterministic.
    auto sorted = [&](auto less) {
      std::vector<int32_t> o = base;
      std::stable_sort(o.begin(), o.end(), less);
      return o;
    };
    std::vector<std::vector<int32_t>> orders;
    orders.push_back(sorted([&](int32_t a, int32_t b) {  // size, then lifetime
      if (g.gsize[a] != g.gsize[b]) return g.gsize[a] > g.gsize[b];
      if (length(a) != length(b)) return length(a) > length(b);
      return g.glo[a] < g.glo[b];
    }));
    orders.push_back(sorted([&](int32_t a, int32_t b) {  // crowding at the peak, then size
      if (crowd[a] != crowd[b]) return crowd[a] > crowd[b];
      if (g.gsize[a] != g.gsize[b]) return g.gsize[a] > g.gsize[b];
      return length(a) > length(b);
    }));
    orders.push_back(sorted([&](int32_t a, int32_t b) {  // lifetime, then size
      if (length(a) != length(b)) return length(a) > length(b);
      return g.gsize[a] > g.gsize[b];
    }));
    orders.push_back(sorted([&](int32_t a, int32_t b) {  // area (bytes × steps)
      const double area_a = static_cast<double>(g.gsize[a]) * static_cast<double>(length(a) + 1);
      const double area_b = static_cast<double>(g.gsize[b]) * static_cast<double>(length(b) + 1);
      if (area_a != area_b) return area_a > area_b;
      return g.gsize[a] > g.gsize[b];
    }));
    orders.push_back(sorted([&](int32_t a, int32_t b) {  // first use: as an allocator would see them
      if (g.glo[a] != g.glo[b]) return g.glo[a] < g.glo[b];
      return g.gsize[a] > g.gsize[b];
    }));

    Candidate best;
    std::vector<size_t> offsets;
    std::vector<Placed> placed;
    placed.reserve(n);
    for (const auto& order : orders) {
      for (Fit fit : {Fit::kBest, Fit::kFirst}) {
        const size_t arena = place_greedy(g, order, fit, offsets, placed);
        if (arena < best.arena) {
          best.arena = arena;
          best.order = order;
          best.fit = fit;
          best.offsets = offsets;
        }
        if (best.arena == plan.lower_bound) break;
      }
      if (best.arena == plan.lower_bound) break;
    }

    // Local search (Note [Offset assignment]): move a block that reaches the top earlier.
    const double per_run = static_cast<double>(n) * static_cast<double>(n) / 2 + 1;
    const int iterations = static_cast<int>(std::min<double>(kMaxSearchIterations, kSearchBudget / per_run));
    std::mt19937 rng(0x5eed);
    std::vector<int32_t> position(n);
    std::vector<int32_t> trial;
    for (int it = 0; it < iterations && best.arena > plan.lower_bound; ++it) {
      std::vector<int32_t> top;
      for (size_t k = 0; k < n; ++k) {
        if (g.gsize[k] > 0 && best.offsets[k] + g.gsize[k] == best.arena) top.push_back(static_cast<int32_t>(k));
      }
      for (size_t i = 0; i < n; ++i) position[best.order[i]] = static_cast<int32_t>(i);
      const int32_t moved = top[rng() % top.size()];
      const int32_t from = position[moved];
      if (from == 0) continue;
      const int32_t to = static_cast<int32_t>(rng() % static_cast<uint32_t>(from));
      trial = best.order;
      std::rotate(trial.begin() + to, trial.begin() + from, trial.begin() + from + 1);
      const size_t arena = place_greedy(g, trial, best.fit, offsets, placed);
      if (arena <= best.arena) {
        best.arena = arena;
        best.order.swap(trial);
        best.offsets = offsets;
      }
    }
    group_offsets = std::move(best.offsets);
    plan.arena_bytes = best.arena;
  }

  plan.offsets.resize(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) plan.offsets[b] = group_offsets[g.group_of[b]];
  return plan;
}

}  // namespace

BufferPlan plan_buffers(const std::vector<PlanBuffer>& buffers, const PlanOptions& options) {
  check_options(options);
  validate(buffers);
  return plan_groups(buffers, resolve_groups(buffers, options), options);
}

// ---- the block-sharing baseline ---------------------------------------------------------------

// Like MXNet's GraphExecutor storage allocator (nnvm PlanMemory's GraphAllocator): buffers are
// requested in the order they are written and released after their last reader; a request takes
// the smallest free block of at least its size within a factor of 16, else the largest free block
// above size/16 (growing it), else a new block. Blocks never move, so the arena is the sum of the
// blocks' final sizes. In-place pairs share a block as in weft's plan.
BufferPlan plan_buffers_block_sharing(const std::vector<PlanBuffer>& buffers, const PlanOptions& options) {
  check_options(options);
  validate(buffers);
  const Groups g = resolve_groups(buffers, options);
  constexpr size_t kMatchRange = 16;

  BufferPlan plan;
  plan.inplace = g.inplace;
  plan.no_reuse = sum_sizes(g);
  const StepIndex index = compress_steps(g);
  const std::vector<size_t> live = live_profile(g, index);
  plan.lower_bound = live.empty() ? 0 : *std::max_element(live.begin(), live.end());

  const size_t ng = g.num_groups();
  std::vector<int32_t> by_first(ng), by_last(ng);
  std::iota(by_first.begin(), by_first.end(), 0);
  std::iota(by_last.begin(), by_last.end(), 0);
  std::stable_sort(by_first.begin(), by_first.end(), [&](int32_t a, int32_t b) { return g.glo[a] < g.glo[b]; });
  std::stable_sort(by_last.begin(), by_last.end(), [&](int32_t a, int32_t b) { return g.ghi[a] < g.ghi[b]; });

  std::vector<size_t> block_size;
  std::vector<int32_t> block_of(ng, -1);
  std::multimap<size_t, int32_t> free_blocks;  // size -> block
  size_t fi = 0, li = 0;
  while (fi < ng || li < ng) {
    // All writes of a step come before its releases: a buffer read for the last time at step t
    // is still needed while step t writes its outputs.
    const uint32_t step = fi < ng ? std::min(g.glo[by_first[fi]], g.ghi[by_last[li]]) : g.ghi[by_last[li]];
    for (; fi < ng && g.glo[by_first[fi]] == step; ++fi) {
      const int32_t k = by_first[fi];
      const size_t size = g.gsize[k];
      if (size == 0) continue;
      auto begin = free_blocks.lower_bound(size / kMatchRange);
      auto mid = free_blocks.lower_bound(size);
      auto end = free_blocks.upper_bound(size * kMatchRange);
      auto chosen = free_blocks.end();
      if (mid != end) {
        chosen = mid;  // the smallest block large enough
      } else if (mid != begin) {
        chosen = std::prev(mid);  // the largest smaller one, which grows
      }
      if (chosen != free_blocks.end()) {
        block_of[k] = chosen->second;
        block_size[chosen->second] = std::max(block_size[chosen->second], size);
        free_blocks.erase(chosen);
      } else {
        block_of[k] = static_cast<int32_t>(block_size.size());
        block_size.push_back(size);
      }
    }
    for (; li < ng && g.ghi[by_last[li]] == step; ++li) {
      const int32_t k = by_last[li];
      if (block_of[k] >= 0) free_blocks.emplace(block_size[block_of[k]], block_of[k]);
    }
  }
  std::vector<size_t> block_offset(block_size.size());
  size_t arena = 0;
  for (size_t b = 0; b < block_size.size(); ++b) {
    block_offset[b] = arena;
    arena += block_size[b];
  }
  plan.arena_bytes = arena;
  plan.offsets.resize(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    const int32_t block = block_of[g.group_of[b]];
    plan.offsets[b] = block >= 0 ? block_offset[block] : 0;
  }
  return plan;
}

// ---- the checker ------------------------------------------------------------------------------

void check_buffer_plan(const std::vector<PlanBuffer>& buffers, const BufferPlan& plan, const PlanOptions& options) {
  check_options(options);
  validate(buffers);
  const size_t n = buffers.size();
  const size_t align = options.alignment;
  WEFT_ICHECK(plan.offsets.size() == n && plan.inplace.size() == n)
      << "memory plan: " << plan.offsets.size() << " offsets and " << plan.inplace.size() << " in-place flags for "
      << n << " buffers";
  // In-place pairs: valid requests, each source taken once, the same memory.
  std::vector<bool> taken(n, false);
  for (size_t b = 0; b < n; ++b) {
    if (!plan.inplace[b]) continue;
    const int32_t a = buffers[b].inplace_from;
    WEFT_ICHECK(options.allow_inplace && a >= 0) << "memory plan: buffer " << b << " is marked in place but "
                                                 << (a < 0 ? "requested no source" : "in-place is off");
    WEFT_ICHECK(!taken[a]) << "memory plan: buffer " << a << " is taken over in place by two buffers";
    taken[a] = true;
    WEFT_ICHECK(buffers[a].last == buffers[b].first && buffers[a].first < buffers[b].first)
        << "memory plan: buffer " << b << " (steps " << buffers[b].first << ".." << buffers[b].last
        << ") is in place of buffer " << a << " (steps " << buffers[a].first << ".." << buffers[a].last
        << "), which does not die where it is written";
    WEFT_ICHECK(align_up(buffers[a].bytes, align) == align_up(buffers[b].bytes, align))
        << "memory plan: buffer " << b << " (" << buffers[b].bytes << " bytes) is in place of buffer " << a << " ("
        << buffers[a].bytes << " bytes)";
    WEFT_ICHECK(plan.offsets[a] == plan.offsets[b])
        << "memory plan: buffer " << b << " is in place of buffer " << a << " but has offset " << plan.offsets[b]
        << ", not " << plan.offsets[a];
  }
  const Groups g = groups_from_flags(buffers, plan.inplace, align);

  // Alignment and bounds.
  for (size_t b = 0; b < n; ++b) {
    WEFT_ICHECK(plan.offsets[b] % align == 0)
        << "memory plan: buffer " << b << " has offset " << plan.offsets[b] << ", not a multiple of " << align;
    WEFT_ICHECK(plan.offsets[b] + g.size[b] <= plan.arena_bytes)
        << "memory plan: buffer " << b << " (" << g.size[b] << " bytes at offset " << plan.offsets[b]
        << ") ends past the arena of " << plan.arena_bytes << " bytes";
  }

  // Overlaps: sweep the steps, comparing each buffer with those still alive when it is written.
  // Buffers of one in-place group share memory by design.
  std::vector<int32_t> order = write_order(buffers);
  std::vector<int32_t> alive;
  for (int32_t b : order) {
    const PlanBuffer& buf = buffers[b];
    std::erase_if(alive, [&](int32_t a) { return buffers[a].last < buf.first; });
    if (g.size[b] > 0) {
      const size_t lo = plan.offsets[b], hi = lo + g.size[b];
      for (int32_t a : alive) {
        if (g.group_of[a] == g.group_of[b]) continue;
        const size_t alo = plan.offsets[a], ahi = alo + g.size[a];
        WEFT_ICHECK(ahi <= lo || hi <= alo)
            << "memory plan: buffers " << a << " (steps " << buffers[a].first << ".." << buffers[a].last << ", bytes "
            << alo << ".." << ahi << ") and " << b << " (steps " << buf.first << ".." << buf.last << ", bytes " << lo
            << ".." << hi << ") are alive at once and overlap";
      }
      alive.push_back(b);
    }
  }

  // The figures.
  const StepIndex index = compress_steps(g);
  const std::vector<size_t> live = live_profile(g, index);
  const size_t lower_bound = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  WEFT_ICHECK(plan.lower_bound == lower_bound)
      << "memory plan: lower bound " << plan.lower_bound << ", the live bytes peak at " << lower_bound;
  WEFT_ICHECK(plan.no_reuse == sum_sizes(g))
      << "memory plan: no-reuse total " << plan.no_reuse << ", the buffers add up to " << sum_sizes(g);
}

}  // namespace weft::graph
