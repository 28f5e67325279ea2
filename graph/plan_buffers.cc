// The abstract memory planner behind plan_memory: buffers with lifetimes and in-place requests
// grouped into blocks for the offset search (plan_search.cc), the lower bound, MXNet-style block
// sharing as the baseline, and the plan checker.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "graph/plan.h"
#include "graph/plan_search.h"

namespace weft::graph {
namespace {

size_t align_up(size_t bytes, size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// Note [Plan size limit] (plan.cc): the sum of every aligned buffer stays at most 2^60 bytes, so
// no offset, block size or arena size computed here can overflow.
constexpr size_t kMaxPlanBytes = size_t{1} << 60;

void check_options(const PlanOptions& options) {
  WEFT_CHECK(options.alignment > 0)
      << "memory plan: alignment must be positive, got " << options.alignment;
  WEFT_CHECK(options.alignment <= (size_t{1} << 30))
      << "memory plan: alignment " << options.alignment << " is larger than 2^30";
}

void check_total(const std::vector<PlanBuffer>& buffers, const PlanOptions& options) {
  size_t total = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const size_t bytes = buffers[i].bytes;
    WEFT_CHECK_AS(OutOfMemory, bytes <= kMaxPlanBytes &&
                                   align_up(bytes, options.alignment) <= kMaxPlanBytes - total)
        << "memory plan: buffer " << i << " (" << bytes
        << " bytes) brings the buffers past 2^60 bytes in total";
    total += align_up(bytes, options.alignment);
  }
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
    WEFT_CHECK(b.first <= b.last) << "memory plan: buffer " << i << " is written at step "
                                  << b.first << " after its last read at step " << b.last;
    WEFT_CHECK(b.inplace_from < static_cast<int64_t>(n) &&
               b.inplace_from != static_cast<int64_t>(i) && b.inplace_from >= -1)
        << "memory plan: buffer " << i << " names buffer " << b.inplace_from
        << " as its in-place source (" << n << " buffers)";
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
      WEFT_ICHECK(src >= 0) << "memory plan: buffer " << b << " is in place of buffer "
                            << buf.inplace_from << ", which is written later";
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

// The groups as blocks for the offset search: steps renumbered densely (the search only needs
// their order, and a graph numbers them by node id, sparse once variables are left out).
detail::Blocks to_blocks(const Groups& g) {
  std::vector<uint32_t> steps;
  steps.reserve(2 * g.num_groups());
  steps.insert(steps.end(), g.glo.begin(), g.glo.end());
  steps.insert(steps.end(), g.ghi.begin(), g.ghi.end());
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  auto index = [&](uint32_t step) {
    return static_cast<uint32_t>(std::lower_bound(steps.begin(), steps.end(), step) -
                                 steps.begin());
  };
  detail::Blocks blocks;
  blocks.size = g.gsize;
  blocks.lo.resize(g.num_groups());
  blocks.hi.resize(g.num_groups());
  for (size_t k = 0; k < g.num_groups(); ++k) {
    blocks.lo[k] = index(g.glo[k]);
    blocks.hi[k] = index(g.ghi[k]);
  }
  blocks.num_steps = static_cast<uint32_t>(steps.size());
  return blocks;
}

size_t sum_sizes(const Groups& g) {
  return std::accumulate(g.size.begin(), g.size.end(), size_t{0});
}

// The figures every plan reports, and the in-place flags.
BufferPlan plan_figures(const Groups& g) {
  BufferPlan plan;
  plan.inplace = g.inplace;
  plan.no_reuse = sum_sizes(g);
  plan.lower_bound = detail::peak_live_bytes(to_blocks(g));
  return plan;
}

}  // namespace

BufferPlan plan_buffers(const std::vector<PlanBuffer>& buffers, const PlanOptions& options) {
  check_options(options);
  validate(buffers);
  check_total(buffers, options);
  const Groups g = resolve_groups(buffers, options);
  BufferPlan plan = plan_figures(g);
  std::vector<size_t> group_offsets;
  plan.arena_bytes = detail::assign_offsets(to_blocks(g), group_offsets);
  plan.offsets.resize(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) plan.offsets[b] = group_offsets[g.group_of[b]];
  return plan;
}

// ---- the block-sharing baseline ---------------------------------------------------------------

// Like MXNet's GraphExecutor storage allocator (nnvm PlanMemory's GraphAllocator): buffers are
// requested in the order they are written and released after their last reader; a request takes
// the smallest free block of at least its size within a factor of 16, else the largest free block
// above size/16 (growing it), else a new block. Blocks never move, so the arena is the sum of the
// blocks' final sizes. In-place pairs share a block as in weft's plan.
BufferPlan plan_buffers_block_sharing(const std::vector<PlanBuffer>& buffers,
                                      const PlanOptions& options) {
  check_options(options);
  validate(buffers);
  check_total(buffers, options);
  const Groups g = resolve_groups(buffers, options);
  constexpr size_t kMatchRange = 16;

  BufferPlan plan = plan_figures(g);
  const size_t ng = g.num_groups();
  std::vector<int32_t> by_first(ng), by_last(ng);
  std::iota(by_first.begin(), by_first.end(), 0);
  std::iota(by_last.begin(), by_last.end(), 0);
  std::stable_sort(by_first.begin(), by_first.end(),
                   [&](int32_t a, int32_t b) { return g.glo[a] < g.glo[b]; });
  std::stable_sort(by_last.begin(), by_last.end(),
                   [&](int32_t a, int32_t b) { return g.ghi[a] < g.ghi[b]; });

  std::vector<size_t> block_size;
  std::vector<int32_t> block_of(ng, -1);
  std::multimap<size_t, int32_t> free_blocks;  // size -> block
  size_t fi = 0, li = 0;
  while (fi < ng || li < ng) {
    // All writes of a step come before its releases: a buffer read for the last time at step t
    // is still needed while step t writes its outputs.
    const uint32_t step =
        fi < ng ? std::min(g.glo[by_first[fi]], g.ghi[by_last[li]]) : g.ghi[by_last[li]];
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

void check_buffer_plan(const std::vector<PlanBuffer>& buffers, const BufferPlan& plan,
                       const PlanOptions& options) {
  check_options(options);
  validate(buffers);
  check_total(buffers, options);
  const size_t n = buffers.size();
  const size_t align = options.alignment;
  WEFT_ICHECK(plan.offsets.size() == n && plan.inplace.size() == n)
      << "memory plan: " << plan.offsets.size() << " offsets and " << plan.inplace.size()
      << " in-place flags for " << n << " buffers";
  // In-place pairs: valid requests, each source taken once, the same memory.
  std::vector<bool> taken(n, false);
  for (size_t b = 0; b < n; ++b) {
    if (!plan.inplace[b]) continue;
    const int32_t a = buffers[b].inplace_from;
    WEFT_ICHECK(options.allow_inplace && a >= 0)
        << "memory plan: buffer " << b << " is marked in place but "
        << (a < 0 ? "requested no source" : "in-place is off");
    WEFT_ICHECK(!taken[a]) << "memory plan: buffer " << a
                           << " is taken over in place by two buffers";
    taken[a] = true;
    WEFT_ICHECK(buffers[a].last == buffers[b].first && buffers[a].first < buffers[b].first)
        << "memory plan: buffer " << b << " (steps " << buffers[b].first << ".." << buffers[b].last
        << ") is in place of buffer " << a << " (steps " << buffers[a].first << ".."
        << buffers[a].last << "), which does not die where it is written";
    WEFT_ICHECK(align_up(buffers[a].bytes, align) == align_up(buffers[b].bytes, align))
        << "memory plan: buffer " << b << " (" << buffers[b].bytes
        << " bytes) is in place of buffer " << a << " (" << buffers[a].bytes << " bytes)";
    WEFT_ICHECK(plan.offsets[a] == plan.offsets[b])
        << "memory plan: buffer " << b << " is in place of buffer " << a << " but has offset "
        << plan.offsets[b] << ", not " << plan.offsets[a];
  }
  const Groups g = groups_from_flags(buffers, plan.inplace, align);

  // Alignment and bounds.
  for (size_t b = 0; b < n; ++b) {
    WEFT_ICHECK(plan.offsets[b] % align == 0) << "memory plan: buffer " << b << " has offset "
                                              << plan.offsets[b] << ", not a multiple of " << align;
    WEFT_ICHECK(plan.offsets[b] <= plan.arena_bytes &&
                g.size[b] <= plan.arena_bytes - plan.offsets[b])
        << "memory plan: buffer " << b << " (" << g.size[b] << " bytes at offset "
        << plan.offsets[b] << ") ends past the arena of " << plan.arena_bytes << " bytes";
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
            << "memory plan: buffers " << a << " (steps " << buffers[a].first << ".."
            << buffers[a].last << ", bytes " << alo << ".." << ahi << ") and " << b << " (steps "
            << buf.first << ".." << buf.last << ", bytes " << lo << ".." << hi
            << ") are alive at once and overlap";
      }
      alive.push_back(b);
    }
  }

  // The figures.
  const size_t lower_bound = detail::peak_live_bytes(to_blocks(g));
  WEFT_ICHECK(plan.lower_bound == lower_bound) << "memory plan: lower bound " << plan.lower_bound
                                               << ", the live bytes peak at " << lower_bound;
  WEFT_ICHECK(plan.no_reuse == sum_sizes(g)) << "memory plan: no-reuse total " << plan.no_reuse
                                             << ", the buffers add up to " << sum_sizes(g);
}

}  // namespace weft::graph
