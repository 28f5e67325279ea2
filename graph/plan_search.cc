// The offset search of the memory planner: greedy placements in several orders, then a large
// neighbourhood search that re-places the blocks around the ones sticking out above the lower
// bound.
#include "graph/plan_search.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

namespace weft::graph::detail {
namespace {

// Note [Offset assignment]
// Giving blocks with fixed lifetimes offsets so that blocks alive at the same step do not overlap,
// in the least total space, is dynamic storage allocation (NP-hard); the peak of live bytes over
// the steps is a lower bound. The search runs in phases and stops as soon as it meets the bound.
//
// 1. Greedy placements: blocks are placed one by one, each into the best-fitting gap (or the
//    lowest one, "first fit") left by the blocks already placed that are alive at the same time,
//    or on top of them. Which order works depends on the graph: by size suits inference chains,
//    training graphs (activations live from the forward pass to their use in the backward pass)
//    do better with long lifetimes first or the blocks of the busiest steps first. Five orders and
//    both fit rules are tried and the smallest arena kept.
// 2. Reordering: a block that ends above the bound moves to a random earlier place in the best
//    order and the greedy runs again; the new order is kept when the arena is not larger and no
//    more blocks end above the bound (equal is accepted, so the search crosses plateaus). The
//    blocks that set the arena get first choice of the space.
// 3. Large neighbourhood search ("ruin and recreate"): pick a block above the bound, remove every
//    block alive within a few steps of one of its steps (capped in number) and place those again
//    into the rest of the layout, in a random order rule with a random fit rule; keep the result
//    when the arena is not larger and the bytes above the bound are not more, else restore.
//    Unlike re-running the greedy, this leaves the rest of the layout alone.
//
// The work is counted in blocks visited and rounds, not time, and bounded per phase, so the result
// is deterministic and planning time stays bounded on large graphs. They stop once the arena is
// within 0.05% of the bound. Some layouts stay out of reach:
// the unrolled char-LSTM's inference graph needs its large gate blocks to shift position from one
// time step to the next to fit the lower bound (a constraint solver finds such layouts), which no
// phase here constructs; it ends one state block (7%) above the bound.

enum class Fit { kBest, kFirst };

// Work bounds of the searches, in blocks visited.
constexpr double kReorderBudget = 3e7;
constexpr double kNeighbourhoodBudget = 2e7;
// And in rounds, which bounds the time spent on small problems.
constexpr int kReorderRounds = 400;
constexpr int kNeighbourhoodRounds = 4000;
constexpr size_t kNeighbourhoodCap = 48;
// The searches stop within 1/kCloseEnough of the bound (0.05%).
constexpr size_t kCloseEnough = 2048;

// The blocks placed so far and the query "where does block k go?". Finding the placed blocks
// alive at the same time as k is the inner loop: with short lifetimes (inference, unrolled
// recurrences) an interval index visits only those; with long ones (training, where most blocks
// overlap most others) scanning every placed block in address order is cheaper, as it needs no
// sorting. Both give the same answers.
class Placer {
 public:
  explicit Placer(const Blocks& b) : b_(b), n_(b.count()) {
    // Overlapping pairs, counted from the sorted ends: j overlaps k iff lo_j <= hi_k, hi_j >= lo_k.
    std::vector<uint32_t> los(b.lo), his(b.hi);
    std::sort(los.begin(), los.end());
    std::sort(his.begin(), his.end());
    double pairs = 0;
    for (size_t k = 0; k < n_; ++k) {
      pairs +=
          static_cast<double>(std::upper_bound(los.begin(), los.end(), b.hi[k]) - los.begin()) -
          static_cast<double>(std::lower_bound(his.begin(), his.end(), b.lo[k]) - his.begin());
    }
    indexed_ = pairs * 8 < static_cast<double>(n_) * static_cast<double>(n_) / 2;
    if (indexed_) build_index();
    offsets_.assign(n_, 0);
    placed_.assign(n_, 0);
  }

  bool indexed() const { return indexed_; }
  uint64_t work() const { return work_; }
  void add_work(uint64_t w) { work_ += w; }
  const std::vector<size_t>& offsets() const { return offsets_; }
  size_t offset(int32_t k) const { return offsets_[k]; }

  void clear() {
    std::fill(placed_.begin(), placed_.end(), 0);
    by_offset_.clear();
  }

  /// Where block k (not placed) goes among the placed blocks under `fit`.
  size_t fit(int32_t k, Fit fit) {
    const size_t size = b_.size[k];
    if (size == 0) return 0;
    if (indexed_) {
      conflicts_.clear();
      for_overlapping(b_.lo[k], b_.hi[k], [&](int32_t j) {
        if (placed_[j] && b_.size[j] > 0)
          conflicts_.push_back({offsets_[j], offsets_[j] + b_.size[j], 0, 0, j});
      });
      std::sort(conflicts_.begin(), conflicts_.end(),
                [](const Entry& a, const Entry& c) { return a.offset < c.offset; });
      work_ += conflicts_.size();
      return choose(conflicts_.begin(), conflicts_.end(), size, fit,
                    [](const Entry&) { return true; });
    }
    const uint32_t lo = b_.lo[k], hi = b_.hi[k];
    work_ += by_offset_.size();
    return choose(by_offset_.begin(), by_offset_.end(), size, fit,
                  [&](const Entry& p) { return p.hi >= lo && p.lo <= hi; });
  }

  void add(int32_t k, size_t offset) {
    offsets_[k] = offset;
    placed_[k] = 1;
    if (!indexed_ && b_.size[k] > 0) {
      const Entry e{offset, offset + b_.size[k], b_.lo[k], b_.hi[k], k};
      by_offset_.insert(std::upper_bound(by_offset_.begin(), by_offset_.end(), e, by_offset_less),
                        e);
    }
  }

  void remove(int32_t k) {
    placed_[k] = 0;
    if (!indexed_ && b_.size[k] > 0) {
      auto it = std::lower_bound(by_offset_.begin(), by_offset_.end(),
                                 Entry{offsets_[k], 0, 0, 0, 0}, by_offset_less);
      while (it->id != k) ++it;
      by_offset_.erase(it);
    }
  }

  /// Places every block in `order` from scratch; returns the arena size.
  size_t place_all(const std::vector<int32_t>& order, Fit rule) {
    clear();
    size_t arena = 0;
    for (int32_t k : order) {
      const size_t off = fit(k, rule);
      add(k, off);
      arena = std::max(arena, off + b_.size[k]);
    }
    return arena;
  }

  /// Calls visit(j) for every block j whose lifetime meets [lo, hi] (each once; k itself too).
  template <typename Visit>
  void for_overlapping(uint32_t lo, uint32_t hi, Visit&& visit) {
    if (!indexed_) {
      for (size_t j = 0; j < n_; ++j) {
        if (b_.hi[j] >= lo && b_.lo[j] <= hi) visit(static_cast<int32_t>(j));
      }
      work_ += n_;
      return;
    }
    // Blocks alive at `lo` (a stabbing query up the segment tree)...
    for (size_t node = leaves_ + lo; node >= 1; node >>= 1) {
      for (uint32_t i = node_begin_[node]; i < node_begin_[node + 1]; ++i) visit(node_items_[i]);
      work_ += node_begin_[node + 1] - node_begin_[node] + 1;
    }
    // ...and those written after `lo`, up to `hi`.
    for (uint32_t i = start_pos_[lo + 1];
         i < start_pos_[std::min<size_t>(hi, b_.num_steps - 1) + 1]; ++i) {
      visit(by_start_[i]);
    }
    work_ += start_pos_[std::min<size_t>(hi, b_.num_steps - 1) + 1] - start_pos_[lo + 1];
  }

 private:
  struct Entry {
    size_t offset;
    size_t end;
    uint32_t lo;
    uint32_t hi;
    int32_t id;
  };
  static bool by_offset_less(const Entry& a, const Entry& b) { return a.offset < b.offset; }

  // The gap rule over the conflicting blocks in address order: the smallest gap that fits (best
  // fit) or the lowest (first fit); on top of them all when none does.
  template <typename It, typename Conflicts>
  static size_t choose(It begin, It end, size_t size, Fit fit, Conflicts&& conflicts) {
    size_t best = std::numeric_limits<size_t>::max();
    size_t best_gap = std::numeric_limits<size_t>::max();
    size_t top = 0;  // lowest address above every conflicting block seen so far
    for (It p = begin; p != end; ++p) {
      if (!conflicts(*p)) continue;
      if (p->offset >= top + size) {
        const size_t gap = p->offset - top;
        if (gap < best_gap) {
          best_gap = gap;
          best = top;
          if (fit == Fit::kFirst || gap == size) break;
        }
      }
      top = std::max(top, p->end);
    }
    return best != std::numeric_limits<size_t>::max() ? best : top;
  }

  // A segment tree over the steps holding each block at the O(log steps) nodes that cover its
  // lifetime (flattened into node_begin_/node_items_), and the blocks sorted by first step.
  void build_index() {
    const size_t steps = b_.num_steps;
    leaves_ = 1;
    while (leaves_ < steps) leaves_ *= 2;
    auto for_nodes = [&](size_t k, auto&& visit) {
      for (size_t l = leaves_ + b_.lo[k], r = leaves_ + b_.hi[k] + 1; l < r; l >>= 1, r >>= 1) {
        if (l & 1) visit(l++);
        if (r & 1) visit(--r);
      }
    };
    node_begin_.assign(2 * leaves_ + 1, 0);
    for (size_t k = 0; k < n_; ++k) for_nodes(k, [&](size_t node) { ++node_begin_[node + 1]; });
    for (size_t i = 1; i < node_begin_.size(); ++i) node_begin_[i] += node_begin_[i - 1];
    node_items_.resize(node_begin_.back());
    std::vector<uint32_t> fill(node_begin_.begin(), node_begin_.end() - 1);
    for (size_t k = 0; k < n_; ++k) {
      for_nodes(k, [&](size_t node) { node_items_[fill[node]++] = static_cast<int32_t>(k); });
    }
    by_start_.resize(n_);
    std::iota(by_start_.begin(), by_start_.end(), 0);
    std::stable_sort(by_start_.begin(), by_start_.end(),
                     [&](int32_t a, int32_t c) { return b_.lo[a] < b_.lo[c]; });
    // start_pos_[t]: the first position in by_start_ of a block written at step t or later.
    start_pos_.assign(steps + 1, 0);
    for (size_t t = 0, i = 0; t <= steps; ++t) {
      while (i < n_ && b_.lo[by_start_[i]] < t) ++i;
      start_pos_[t] = static_cast<uint32_t>(i);
    }
  }

  const Blocks& b_;
  const size_t n_;
  bool indexed_ = false;
  uint64_t work_ = 0;
  std::vector<size_t> offsets_;
  std::vector<char> placed_;
  std::vector<Entry> by_offset_;  // scan mode: the placed blocks (non-empty) by offset
  std::vector<Entry> conflicts_;  // indexed mode: scratch
  size_t leaves_ = 0;
  std::vector<uint32_t> node_begin_;
  std::vector<int32_t> node_items_;
  std::vector<int32_t> by_start_;
  std::vector<uint32_t> start_pos_;
};

std::vector<size_t> live_profile(const Blocks& b) {
  std::vector<int64_t> delta(b.num_steps + 1, 0);
  for (size_t k = 0; k < b.count(); ++k) {
    delta[b.lo[k]] += static_cast<int64_t>(b.size[k]);
    delta[b.hi[k] + 1] -= static_cast<int64_t>(b.size[k]);
  }
  std::vector<size_t> live(b.num_steps);
  int64_t sum = 0;
  for (size_t t = 0; t < live.size(); ++t) {
    sum += delta[t];
    live[t] = static_cast<size_t>(sum);
  }
  return live;
}

// Per block, the most bytes alive at any step of its lifetime: how crowded its steps are.
std::vector<size_t> crowding(const Blocks& b, const std::vector<size_t>& live) {
  const size_t t = live.size();
  std::vector<std::vector<size_t>> table{live};  // sparse table of range maxima
  for (size_t w = 1; 2 * w <= t; w *= 2) {
    const std::vector<size_t>& prev = table.back();
    std::vector<size_t> next(t - 2 * w + 1);
    for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + w]);
    table.push_back(std::move(next));
  }
  std::vector<size_t> out(b.count());
  for (size_t k = 0; k < b.count(); ++k) {
    const size_t lo = b.lo[k], hi = b.hi[k] + 1;
    size_t level = 0;
    while ((size_t{2} << level) <= hi - lo) ++level;
    out[k] = std::max(table[level][lo], table[level][hi - (size_t{1} << level)]);
  }
  return out;
}

// The greedy orders of phase 1. Each breaks ties by further keys and finally by index, so every
// order is total and deterministic.
std::vector<std::vector<int32_t>> greedy_orders(const Blocks& b, const std::vector<size_t>& crowd) {
  const size_t n = b.count();
  auto length = [&](int32_t k) { return b.hi[k] - b.lo[k]; };
  std::vector<int32_t> base(n);
  std::iota(base.begin(), base.end(), 0);
  auto sorted = [&](auto less) {
    std::vector<int32_t> o = base;
    std::stable_sort(o.begin(), o.end(), less);
    return o;
  };
  std::vector<std::vector<int32_t>> orders;
  orders.push_back(sorted([&](int32_t x, int32_t y) {  // size, then lifetime
    if (b.size[x] != b.size[y]) return b.size[x] > b.size[y];
    if (length(x) != length(y)) return length(x) > length(y);
    return b.lo[x] < b.lo[y];
  }));
  orders.push_back(sorted([&](int32_t x, int32_t y) {  // crowding, then size
    if (crowd[x] != crowd[y]) return crowd[x] > crowd[y];
    if (b.size[x] != b.size[y]) return b.size[x] > b.size[y];
    return length(x) > length(y);
  }));
  orders.push_back(sorted([&](int32_t x, int32_t y) {  // lifetime, then size
    if (length(x) != length(y)) return length(x) > length(y);
    return b.size[x] > b.size[y];
  }));
  orders.push_back(sorted([&](int32_t x, int32_t y) {  // area (bytes x steps)
    const double ax = static_cast<double>(b.size[x]) * (length(x) + 1.0);
    const double ay = static_cast<double>(b.size[y]) * (length(y) + 1.0);
    if (ax != ay) return ax > ay;
    return b.size[x] > b.size[y];
  }));
  orders.push_back(sorted([&](int32_t x, int32_t y) {  // first use, as an allocator sees them
    if (b.lo[x] != b.lo[y]) return b.lo[x] < b.lo[y];
    return b.size[x] > b.size[y];
  }));
  return orders;
}

// The bytes of a block at `offset` that lie above `line`.
size_t above(size_t offset, size_t size, size_t line) {
  const size_t end = offset + size;
  return end > line ? end - std::max(offset, line) : 0;
}

}  // namespace

size_t peak_live_bytes(const Blocks& blocks) {
  const std::vector<size_t> live = live_profile(blocks);
  return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

size_t assign_offsets(const Blocks& b, std::vector<size_t>& offsets) {
  const size_t n = b.count();
  offsets.assign(n, 0);
  const std::vector<size_t> live = live_profile(b);
  const size_t bound = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  if (bound == 0) return 0;
  // Searching on for the last bytes costs more time than they are worth.
  const size_t good_enough = bound + bound / kCloseEnough;

  // Phase 1: greedy placements.
  Placer placer(b);
  size_t arena = std::numeric_limits<size_t>::max();
  std::vector<int32_t> best_order;
  Fit best_rule = Fit::kBest;
  for (const std::vector<int32_t>& order : greedy_orders(b, crowding(b, live))) {
    for (Fit rule : {Fit::kBest, Fit::kFirst}) {
      const size_t a = placer.place_all(order, rule);
      if (a < arena) {
        arena = a;
        offsets = placer.offsets();
        best_order = order;
        best_rule = rule;
      }
      if (arena <= good_enough) return arena;
    }
  }

  // Phase 2: reordering search. The greedy layout is judged by its arena, then by how many blocks
  // end above the bound.
  auto sticking_out = [&](const std::vector<size_t>& offs, std::vector<int32_t>* list) {
    size_t count = 0;
    for (size_t k = 0; k < n; ++k) {
      if (b.size[k] > 0 && offs[k] + b.size[k] > bound) {
        ++count;
        if (list) list->push_back(static_cast<int32_t>(k));
      }
    }
    return count;
  };
  std::mt19937_64 rng(0x5eed);
  {
    size_t over = sticking_out(offsets, nullptr);
    std::vector<int32_t> position(n), trial, top;
    const uint64_t budget = placer.work() + static_cast<uint64_t>(kReorderBudget);
    for (int round = 0; round < kReorderRounds && arena > good_enough && placer.work() < budget;
         ++round) {
      top.clear();
      sticking_out(offsets, &top);
      for (size_t i = 0; i < n; ++i) position[best_order[i]] = static_cast<int32_t>(i);
      placer.add_work(4 * n);  // the bookkeeping around the greedy run
      const int32_t from = position[top[rng() % top.size()]];
      if (from == 0) continue;
      const int32_t to = static_cast<int32_t>(rng() % static_cast<uint64_t>(from));
      trial = best_order;
      std::rotate(trial.begin() + to, trial.begin() + from, trial.begin() + from + 1);
      const size_t a = placer.place_all(trial, best_rule);
      const size_t o = sticking_out(placer.offsets(), nullptr);
      if (a < arena || (a == arena && o <= over)) {
        arena = a;
        over = o;
        best_order.swap(trial);
        offsets = placer.offsets();
      }
    }
    if (arena <= good_enough) return arena;
  }

  // Phase 3: large neighbourhood search from the best layout so far.
  placer.clear();
  for (size_t k = 0; k < n; ++k) placer.add(static_cast<int32_t>(k), offsets[k]);
  size_t excess = 0;  // bytes above the bound, summed over blocks
  for (size_t k = 0; k < n; ++k) excess += above(offsets[k], b.size[k], bound);
  const uint64_t budget = placer.work() + static_cast<uint64_t>(kNeighbourhoodBudget);
  std::vector<int32_t> stuck, hood, order;
  std::vector<size_t> old_offsets;
  for (int round = 0; round < kNeighbourhoodRounds && arena > good_enough && placer.work() < budget;
       ++round) {
    stuck.clear();
    sticking_out(placer.offsets(), &stuck);
    placer.add_work(2 * n);  // this scan and the arena's below
    const int32_t pick = stuck[rng() % stuck.size()];
    // The neighbourhood: blocks alive within `reach` steps of a step of the picked block.
    const uint32_t step = b.lo[pick] + static_cast<uint32_t>(rng() % (b.hi[pick] - b.lo[pick] + 1));
    const uint32_t reach = static_cast<uint32_t>(rng() % 4);
    const uint32_t lo = step > reach ? step - reach : 0;
    const uint32_t hi = std::min(step + reach, b.num_steps - 1);
    hood.clear();
    placer.for_overlapping(lo, hi, [&](int32_t j) {
      if (b.size[j] > 0 && j != pick) hood.push_back(j);
    });
    if (hood.size() + 1 > kNeighbourhoodCap) {  // a random subset
      for (size_t i = 0; i + 1 < kNeighbourhoodCap; ++i)
        std::swap(hood[i], hood[i + rng() % (hood.size() - i)]);
      hood.resize(kNeighbourhoodCap - 1);
    }
    hood.push_back(pick);

    // Re-place the neighbourhood in a random order rule with a random fit rule.
    old_offsets.clear();
    size_t old_excess = 0;
    for (int32_t k : hood) {
      old_offsets.push_back(placer.offset(k));
      old_excess += above(placer.offset(k), b.size[k], bound);
      placer.remove(k);
    }
    order = hood;
    switch (rng() % 4) {
      case 0:
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t x, int32_t y) { return b.size[x] > b.size[y]; });
        break;
      case 1:
        std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
          return b.hi[x] - b.lo[x] > b.hi[y] - b.lo[y];
        });
        break;
      case 2:
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t x, int32_t y) { return b.lo[x] < b.lo[y]; });
        break;
      default:  // random (Fisher-Yates on the seeded generator: the same on every platform)
        for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
        break;
    }
    const Fit rule = rng() % 2 ? Fit::kBest : Fit::kFirst;
    size_t new_excess = excess - old_excess;
    for (int32_t k : order) {
      const size_t off = placer.fit(k, rule);
      placer.add(k, off);
      new_excess += above(off, b.size[k], bound);
    }
    size_t new_arena = 0;
    for (size_t k = 0; k < n; ++k)
      new_arena = std::max(new_arena, placer.offset(static_cast<int32_t>(k)) + b.size[k]);
    placer.add_work(16 * hood.size());  // sorting and restoring the neighbourhood
    if (new_arena < arena || (new_arena == arena && new_excess <= excess)) {
      arena = new_arena;
      excess = new_excess;
    } else {
      for (int32_t k : hood) placer.remove(k);
      for (size_t i = 0; i < hood.size(); ++i) placer.add(hood[i], old_offsets[i]);
    }
  }
  offsets = placer.offsets();
  return arena;
}

}  // namespace weft::graph::detail
