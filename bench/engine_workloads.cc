// The engine benchmark's workloads (see engine_workloads.h): chain, tree, embarrassing
// parallelism, wavefront and MXNet's random engine workload, on weft and on oneTBB's flow graph.
//
// Note [What is timed]
// Both sides are timed from an empty start to the last task's completion ("build + run"):
//  * weft: new_var for every variable, push every operation, wait_for_all. Deleting the variables
//    (delete_var for each, then wait_for_all) happens after the timer stops.
//  * TBB: construct the graph, its continue_nodes (one std::make_unique each, the form Taskflow's
//    TBB benchmarks use) and edges, try_put on the sources, wait_for_all. Destroying the nodes and
//    the graph happens after the timer stops.
// Containers sized by the workload (the vector of VarHandles, the vector of node pointers, the
// value arrays) are allocated before the timer on both sides. Each measurement is repeated
// `--reps` times; the reported figure is the median run divided by the number of tasks.
//
// Note [Verification]
// A broken engine must not report fast numbers, so every run is checked after the timer:
//  * chain, tree, wavefront and mxnet_workload bodies compute an order-sensitive hash of the
//    values they read into the value they write; the final values are compared with a serial
//    reference. A body that runs before its inputs were written reads a sentinel and mismatches.
//  * embarrassing_*: weft bodies add one to a per-worker counter (RunContext::worker selects a
//    cache-line-padded slot; about 1 ns) and the total must equal the number of operations. TBB's
//    bodies stay empty: TBB is the trusted peer, and the counter only makes weft's side slower.
// Any mismatch prints VERIFICATION FAILED and exits with status 1.
//
// Note [Embarrassing parallelism forms]
// weft: operations with no variables at all (neither reads nor writes), the cheapest form the
// engine offers: nothing to track, each operation is ready when pushed.
// TBB: one source continue_node (empty body) with an edge to each of the n independent
// continue_nodes, and a single try_put on the source. Of the forms tried this is the cheapest:
// the source's body runs as a task inside the graph's arena, so its n successors are spawned as
// local tasks that the other thread steals. Feeding each node its own try_put from the main
// thread (interleaved with construction, or all after it) goes through the arena's submission
// path from an external thread, which cost ~300 ns per task here and made TBB at threads=2 about
// 1.3-2x slower than the broadcast; at threads=1 the forms were within noise of each other.
// The source is not counted as a task (ns/task divides by n), which favours TBB slightly.

#include "engine_workloads.h"

#include <oneapi/tbb/flow_graph.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>

#include "bench_util.h"

namespace weft::bench {

const WorkloadSizes kFullSizes{
    int64_t{1} << 20, (int64_t{1} << 20) - 1, int64_t{1} << 20, 2048, 10000, 100};
const WorkloadSizes kQuickSizes{
    int64_t{1} << 16, (int64_t{1} << 16) - 1, int64_t{1} << 16, 256, 10000, 100};

namespace {

using TbbNode = tbb::flow::continue_node<tbb::flow::continue_msg>;
using tbb::flow::continue_msg;

/// Odd multipliers of the order-sensitive hashes (Note [Verification]).
constexpr uint64_t kMulA = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMulB = 0xC2B2AE3D27D4EB4Full;
/// What value arrays hold before a run: a body that reads it produces a wrong final value.
constexpr uint64_t kUnset = 0xDEADBEEFDEADBEEFull;

[[noreturn]] void fail_verification(const char* workload, const char* runner,
                                    const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "engine_bench: VERIFICATION FAILED: %s (%s): %s\n", workload, runner,
               what.c_str());
  std::exit(1);
}

/// Counts completed bodies per weft worker without sharing cache lines. Slots are written by one
/// thread each; the total is read after wait_for_all.
class WorkerCounts {
 public:
  explicit WorkerCounts(int workers) : slots_(static_cast<size_t>(workers)) {}

  /// Counts one body run by worker `worker` (RunContext::worker). Thread-safe as long as worker
  /// indices are distinct per thread, as RunContext promises; if two threads shared an index,
  /// counts would be lost and verification would fail, which is the point.
  void add(int worker) {
    if (worker >= 0 && static_cast<size_t>(worker) < slots_.size()) {
      std::atomic<uint64_t>& slot = slots_[static_cast<size_t>(worker)].count;
      // relaxed: the slot is written by one thread only (a load+store, not an RMW, to keep the
      // body as cheap as a plain increment); the reader runs after wait_for_all, which orders it
      // after every operation's completion.
      slot.store(slot.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    } else {
      // relaxed: a plain counter shared by non-worker threads; read after wait_for_all.
      other_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  /// Call after wait_for_all, from the thread that waited.
  uint64_t total() const {
    uint64_t sum = other_.load(std::memory_order_relaxed);
    for (const Slot& s : slots_) sum += s.count.load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> count{0};
  };
  std::vector<Slot> slots_;
  alignas(64) std::atomic<uint64_t> other_{0};
};

/// Deletes `vars` and waits: the untimed tail of every weft run.
void delete_vars(Engine& engine, std::span<const VarHandle> vars) {
  for (VarHandle v : vars) engine.delete_var(v);
  engine.wait_for_all();
}

/// chain: n operations in a line. weft: every operation writes the same variable; TBB: a chain
/// of continue_nodes.
class ChainWorkload final : public Workload {
 public:
  explicit ChainWorkload(int64_t n) : n_(n) {
    expected_ = 0;
    for (int64_t i = 0; i < n_; ++i) expected_ = step(expected_, i);
  }
  const char* name() const override { return "chain"; }
  int64_t tasks() const override { return n_; }

  RunTime run_weft(Engine& engine) override {
    uint64_t state = 0;
    uint64_t* s = &state;
    auto start = Clock::now();
    VarHandle var = engine.new_var();
    for (int64_t i = 0; i < n_; ++i) {
      engine.push([s, i](const RunContext&) { *s = step(*s, i); }, Device::cpu(), {}, {var});
    }
    auto built = Clock::now();
    engine.wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    delete_vars(engine, {&var, 1});
    verify(state, "weft");
    return ns;
  }

  RunTime run_tbb() override {
    uint64_t state = 0;
    uint64_t* s = &state;
    std::vector<std::unique_ptr<TbbNode>> nodes;
    nodes.reserve(static_cast<size_t>(n_));
    auto start = Clock::now();
    auto graph = std::make_unique<tbb::flow::graph>();
    for (int64_t i = 0; i < n_; ++i) {
      nodes.push_back(std::make_unique<TbbNode>(*graph, [s, i](const continue_msg&) {
        *s = step(*s, i);
        return continue_msg();
      }));
      if (i > 0) tbb::flow::make_edge(*nodes[static_cast<size_t>(i - 1)], *nodes.back());
    }
    auto built = Clock::now();
    nodes.front()->try_put(continue_msg());
    graph->wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    nodes.clear();
    graph.reset();
    verify(state, "tbb");
    return ns;
  }

 private:
  static uint64_t step(uint64_t state, int64_t i) {
    return state * kMulA + static_cast<uint64_t>(i) + 1;
  }
  void verify(uint64_t state, const char* runner) const {
    if (state != expected_) {
      fail_verification(name(), runner, "final chain state differs from the serial reference");
    }
  }

  int64_t n_;
  uint64_t expected_;
};

/// tree: a complete binary tree of n = 2^k - 1 operations, root first. Operation i writes
/// variable i and reads the variable of its parent (i-1)/2; TBB: edges parent -> children.
class TreeWorkload final : public Workload {
 public:
  explicit TreeWorkload(int64_t n)
      : n_(n),
        expected_(static_cast<size_t>(n)),
        values_(static_cast<size_t>(n)),
        vars_(static_cast<size_t>(n)) {
    for (int64_t i = 0; i < n_; ++i) {
      expected_[static_cast<size_t>(i)] = body_value(expected_.data(), i);
    }
  }
  const char* name() const override { return "tree"; }
  int64_t tasks() const override { return n_; }

  RunTime run_weft(Engine& engine) override {
    std::fill(values_.begin(), values_.end(), kUnset);
    uint64_t* v = values_.data();
    auto start = Clock::now();
    for (int64_t i = 0; i < n_; ++i) vars_[static_cast<size_t>(i)] = engine.new_var();
    engine.push([v](const RunContext&) { v[0] = body_value(v, 0); }, Device::cpu(), {}, {vars_[0]});
    for (int64_t i = 1; i < n_; ++i) {
      engine.push([v, i](const RunContext&) { v[i] = body_value(v, i); }, Device::cpu(),
                  {vars_[static_cast<size_t>((i - 1) / 2)]}, {vars_[static_cast<size_t>(i)]});
    }
    auto built = Clock::now();
    engine.wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    delete_vars(engine, vars_);
    verify("weft");
    return ns;
  }

  RunTime run_tbb() override {
    std::fill(values_.begin(), values_.end(), kUnset);
    uint64_t* v = values_.data();
    std::vector<std::unique_ptr<TbbNode>> nodes;
    nodes.reserve(static_cast<size_t>(n_));
    auto start = Clock::now();
    auto graph = std::make_unique<tbb::flow::graph>();
    for (int64_t i = 0; i < n_; ++i) {
      nodes.push_back(std::make_unique<TbbNode>(*graph, [v, i](const continue_msg&) {
        v[i] = body_value(v, i);
        return continue_msg();
      }));
      if (i > 0) tbb::flow::make_edge(*nodes[static_cast<size_t>((i - 1) / 2)], *nodes.back());
    }
    auto built = Clock::now();
    nodes.front()->try_put(continue_msg());
    graph->wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    nodes.clear();
    graph.reset();
    verify("tbb");
    return ns;
  }

 private:
  /// The value operation i writes, from its parent's (the root's parent value is 1).
  static uint64_t body_value(const uint64_t* values, int64_t i) {
    uint64_t parent = i == 0 ? 1 : values[(i - 1) / 2];
    return parent * kMulA + static_cast<uint64_t>(i) + 1;
  }
  void verify(const char* runner) const {
    auto bad = std::mismatch(values_.begin(), values_.end(), expected_.begin());
    if (bad.first != values_.end()) {
      fail_verification(name(), runner,
                        "node " + std::to_string(bad.first - values_.begin()) +
                            " differs from the serial reference");
    }
  }

  int64_t n_;
  std::vector<uint64_t> expected_;
  std::vector<uint64_t> values_;
  std::vector<VarHandle> vars_;
};

/// embarrassing_empty / embarrassing_1us: n independent operations (Note [Embarrassing
/// parallelism forms]), with an empty body (spin = 0) or one that spins `spin` iterations
/// (about 1 us).
class EmbarrassingWorkload final : public Workload {
 public:
  EmbarrassingWorkload(int64_t n, uint64_t spin) : n_(n), spin_(spin) {}
  const char* name() const override {
    return spin_ > 0 ? "embarrassing_1us" : "embarrassing_empty";
  }
  int64_t tasks() const override { return n_; }

  RunTime run_weft(Engine& engine) override {
    return spin_ > 0 ? run_weft_impl<true>(engine) : run_weft_impl<false>(engine);
  }
  RunTime run_tbb() override { return spin_ > 0 ? run_tbb_impl<true>() : run_tbb_impl<false>(); }

 private:
  template <bool kBusy>
  RunTime run_weft_impl(Engine& engine) {
    WorkerCounts counts(engine.num_workers(Device::cpu()));
    WorkerCounts* c = &counts;
    const uint64_t spin = spin_;
    auto start = Clock::now();
    for (int64_t i = 0; i < n_; ++i) {
      engine.push(
          [c, spin](const RunContext& ctx) {
            if constexpr (kBusy) spin_iterations(spin);
            c->add(ctx.worker);
          },
          Device::cpu(), {}, {});
    }
    auto built = Clock::now();
    engine.wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    if (counts.total() != static_cast<uint64_t>(n_)) {
      fail_verification(
          name(), "weft",
          std::to_string(counts.total()) + " bodies ran, expected " + std::to_string(n_));
    }
    return ns;
  }

  template <bool kBusy>
  RunTime run_tbb_impl() {
    const uint64_t spin = spin_;
    std::vector<std::unique_ptr<TbbNode>> nodes;
    nodes.reserve(static_cast<size_t>(n_));
    auto start = Clock::now();
    auto graph = std::make_unique<tbb::flow::graph>();
    TbbNode source(*graph, [](const continue_msg&) { return continue_msg(); });
    for (int64_t i = 0; i < n_; ++i) {
      nodes.push_back(std::make_unique<TbbNode>(*graph, [spin](const continue_msg&) {
        if constexpr (kBusy) spin_iterations(spin);
        return continue_msg();
      }));
      tbb::flow::make_edge(source, *nodes.back());
    }
    auto built = Clock::now();
    source.try_put(continue_msg());
    graph->wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    nodes.clear();
    return ns;
  }

  int64_t n_;
  uint64_t spin_;
};

/// wavefront: a side x side grid of blocks; block (i,j) reads (i-1,j) and (i,j-1) and writes
/// (i,j). TBB: edges from the up and left neighbours.
class WavefrontWorkload final : public Workload {
 public:
  explicit WavefrontWorkload(int32_t side)
      : side_(side),
        n_(int64_t{side} * side),
        expected_(static_cast<size_t>(n_)),
        values_(static_cast<size_t>(n_)),
        vars_(static_cast<size_t>(n_)) {
    for (int32_t i = 0; i < side_; ++i) {
      for (int32_t j = 0; j < side_; ++j) {
        expected_[index(i, j)] = body_value(expected_.data(), side_, i, j);
      }
    }
  }
  const char* name() const override { return "wavefront"; }
  int64_t tasks() const override { return n_; }

  RunTime run_weft(Engine& engine) override {
    std::fill(values_.begin(), values_.end(), kUnset);
    uint64_t* v = values_.data();
    const int32_t side = side_;
    auto start = Clock::now();
    for (int64_t k = 0; k < n_; ++k) vars_[static_cast<size_t>(k)] = engine.new_var();
    for (int32_t i = 0; i < side; ++i) {
      for (int32_t j = 0; j < side; ++j) {
        VarHandle reads[2];
        size_t num_reads = 0;
        if (i > 0) reads[num_reads++] = vars_[index(i - 1, j)];
        if (j > 0) reads[num_reads++] = vars_[index(i, j - 1)];
        engine.push(
            [v, side, i, j](const RunContext&) {
              v[static_cast<size_t>(i) * side + j] = body_value(v, side, i, j);
            },
            Device::cpu(), std::span<const VarHandle>(reads, num_reads), {vars_[index(i, j)]});
      }
    }
    auto built = Clock::now();
    engine.wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    delete_vars(engine, vars_);
    verify("weft");
    return ns;
  }

  RunTime run_tbb() override {
    std::fill(values_.begin(), values_.end(), kUnset);
    uint64_t* v = values_.data();
    const int32_t side = side_;
    std::vector<std::unique_ptr<TbbNode>> nodes;
    nodes.reserve(static_cast<size_t>(n_));
    auto start = Clock::now();
    auto graph = std::make_unique<tbb::flow::graph>();
    for (int32_t i = 0; i < side; ++i) {
      for (int32_t j = 0; j < side; ++j) {
        nodes.push_back(std::make_unique<TbbNode>(*graph, [v, side, i, j](const continue_msg&) {
          v[static_cast<size_t>(i) * side + j] = body_value(v, side, i, j);
          return continue_msg();
        }));
        if (i > 0) tbb::flow::make_edge(*nodes[index(i - 1, j)], *nodes.back());
        if (j > 0) tbb::flow::make_edge(*nodes[index(i, j - 1)], *nodes.back());
      }
    }
    auto built = Clock::now();
    nodes.front()->try_put(continue_msg());
    graph->wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    nodes.clear();
    graph.reset();
    verify("tbb");
    return ns;
  }

 private:
  size_t index(int32_t i, int32_t j) const { return static_cast<size_t>(i) * side_ + j; }
  /// The value block (i,j) writes, from its up and left neighbours (1 outside the grid).
  static uint64_t body_value(const uint64_t* values, int32_t side, int32_t i, int32_t j) {
    uint64_t up = i > 0 ? values[static_cast<size_t>(i - 1) * side + j] : 1;
    uint64_t left = j > 0 ? values[static_cast<size_t>(i) * side + j - 1] : 1;
    return up * kMulA + left * kMulB + 1;
  }
  void verify(const char* runner) const {
    auto bad = std::mismatch(values_.begin(), values_.end(), expected_.begin());
    if (bad.first != values_.end()) {
      int64_t k = bad.first - values_.begin();
      fail_verification(name(), runner,
                        "block (" + std::to_string(k / side_) + "," + std::to_string(k % side_) +
                            ") differs from the serial reference");
    }
  }

  int32_t side_;
  int64_t n_;
  std::vector<uint64_t> expected_;
  std::vector<uint64_t> values_;
  std::vector<VarHandle> vars_;
};

/// mxnet_workload: MXNet's engine benchmark shape. `num_ops` operations over `num_vars`
/// variables; each reads 2-5 distinct random variables and writes one other, and spins 1-9 us.
/// Deterministic (fixed seed, no std distributions, so every standard library draws the same).
/// weft gets the read/write sets; TBB gets the equivalent DAG, computed before the timer: an edge
/// from the last writer of every read variable, and for the written variable from its last
/// writer and every reader since. Also runs the same bodies serially on the main thread.
class MxnetWorkload final : public Workload {
 public:
  static constexpr int kMaxReads = 5;

  MxnetWorkload(int num_ops, int num_vars, uint64_t spin_per_us)
      : ops_(static_cast<size_t>(num_ops)),
        predecessors_(static_cast<size_t>(num_ops)),
        expected_(static_cast<size_t>(num_vars)),
        values_(static_cast<size_t>(num_vars)),
        vars_(static_cast<size_t>(num_vars)) {
    uint64_t rng_state = 20240601;
    auto next = [&rng_state](uint64_t bound) {  // splitmix64, reduced to [0, bound)
      uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return (z ^ (z >> 31)) % bound;
    };
    for (Op& op : ops_) {
      op.write = static_cast<int>(next(static_cast<uint64_t>(num_vars)));
      op.num_reads = 2 + static_cast<int>(next(kMaxReads - 1));
      for (int r = 0; r < op.num_reads;) {
        int var = static_cast<int>(next(static_cast<uint64_t>(num_vars)));
        bool taken = var == op.write ||
                     std::find(op.reads.begin(), op.reads.begin() + r, var) != op.reads.begin() + r;
        if (!taken) op.reads[static_cast<size_t>(r++)] = var;
      }
      op.spin_us = 1 + static_cast<int>(next(9));
      op.spin_iterations = static_cast<uint64_t>(op.spin_us) * spin_per_us;
    }
    // The DAG TBB runs (what weft derives from the read/write sets).
    std::vector<int> last_writer(static_cast<size_t>(num_vars), -1);
    std::vector<std::vector<int>> readers_since(static_cast<size_t>(num_vars));
    for (int k = 0; k < num_ops; ++k) {
      const Op& op = ops_[static_cast<size_t>(k)];
      std::vector<int>& preds = predecessors_[static_cast<size_t>(k)];
      for (int r = 0; r < op.num_reads; ++r) {
        size_t var = static_cast<size_t>(op.reads[static_cast<size_t>(r)]);
        if (last_writer[var] >= 0) preds.push_back(last_writer[var]);
        readers_since[var].push_back(k);
      }
      size_t w = static_cast<size_t>(op.write);
      if (last_writer[w] >= 0) preds.push_back(last_writer[w]);
      preds.insert(preds.end(), readers_since[w].begin(), readers_since[w].end());
      readers_since[w].clear();
      last_writer[w] = k;
      std::sort(preds.begin(), preds.end());
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      num_edges_ += static_cast<int64_t>(preds.size());
    }
    for (size_t i = 0; i < expected_.size(); ++i) expected_[i].v = initial_value(i);
    for (int k = 0; k < num_ops; ++k) {
      apply(ops_[static_cast<size_t>(k)], k, expected_.data(), /*spin=*/false);
    }
  }
  const char* name() const override { return "mxnet_workload"; }
  int64_t tasks() const override { return static_cast<int64_t>(ops_.size()); }
  std::string facts() const override {
    int64_t spin_us = 0;
    for (const Op& op : ops_) spin_us += op.spin_us;
    return std::to_string(num_edges_) + " edges in the TBB graph, " + std::to_string(spin_us) +
           " us of nominal spin (" + std::to_string(spin_us / static_cast<int64_t>(ops_.size())) +
           "." + std::to_string(spin_us * 10 / static_cast<int64_t>(ops_.size()) % 10) +
           " us per op)";
  }
  bool has_serial() const override { return true; }

  RunTime run_weft(Engine& engine) override {
    reset_values();
    Value* v = values_.data();
    auto start = Clock::now();
    for (VarHandle& var : vars_) var = engine.new_var();
    for (size_t k = 0; k < ops_.size(); ++k) {
      const Op* op = &ops_[k];
      std::array<VarHandle, kMaxReads> reads;
      for (int r = 0; r < op->num_reads; ++r) {
        reads[static_cast<size_t>(r)] =
            vars_[static_cast<size_t>(op->reads[static_cast<size_t>(r)])];
      }
      engine.push([op, k, v](const RunContext&) { apply(*op, static_cast<int64_t>(k), v, true); },
                  Device::cpu(),
                  std::span<const VarHandle>(reads.data(), static_cast<size_t>(op->num_reads)),
                  {vars_[static_cast<size_t>(op->write)]});
    }
    auto built = Clock::now();
    engine.wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    delete_vars(engine, vars_);
    verify("weft");
    return ns;
  }

  RunTime run_tbb() override {
    reset_values();
    Value* v = values_.data();
    std::vector<std::unique_ptr<TbbNode>> nodes;
    nodes.reserve(ops_.size());
    auto start = Clock::now();
    auto graph = std::make_unique<tbb::flow::graph>();
    for (size_t k = 0; k < ops_.size(); ++k) {
      const Op* op = &ops_[k];
      nodes.push_back(std::make_unique<TbbNode>(*graph, [op, k, v](const continue_msg&) {
        apply(*op, static_cast<int64_t>(k), v, true);
        return continue_msg();
      }));
      for (int p : predecessors_[k]) {
        tbb::flow::make_edge(*nodes[static_cast<size_t>(p)], *nodes.back());
      }
    }
    auto built = Clock::now();
    for (size_t k = 0; k < ops_.size(); ++k) {
      if (predecessors_[k].empty()) nodes[k]->try_put(continue_msg());
    }
    graph->wait_for_all();
    RunTime ns{elapsed_ns(start, Clock::now()), elapsed_ns(start, built)};
    nodes.clear();
    graph.reset();
    verify("tbb");
    return ns;
  }

  /// The same bodies, in push order, on the calling thread.
  double run_serial() override {
    reset_values();
    auto start = Clock::now();
    for (size_t k = 0; k < ops_.size(); ++k) {
      apply(ops_[k], static_cast<int64_t>(k), values_.data(), true);
    }
    double ns = elapsed_ns(start, Clock::now());
    verify("serial");
    return ns;
  }

 private:
  struct Op {
    int write = 0;
    int num_reads = 0;
    int spin_us = 0;               ///< nominal body duration, 1-9 us
    uint64_t spin_iterations = 0;  ///< spin_us in busy-loop iterations
    std::array<int, kMaxReads> reads{};
  };
  /// One variable's value on its own cache line, so that neighbouring writers do not interfere.
  struct alignas(64) Value {
    uint64_t v;
  };

  /// Operation k's body: spins, then hashes what it reads into the variable it writes.
  static void apply(const Op& op, int64_t k, Value* values, bool spin) {
    if (spin) spin_iterations(op.spin_iterations);
    uint64_t h = values[op.write].v;
    for (int r = 0; r < op.num_reads; ++r)
      h = h * kMulA + values[op.reads[static_cast<size_t>(r)]].v;
    values[op.write].v = h * kMulB + static_cast<uint64_t>(k) + 1;
  }
  static uint64_t initial_value(size_t var) { return var; }
  void reset_values() {
    for (size_t i = 0; i < values_.size(); ++i) values_[i].v = initial_value(i);
  }
  void verify(const char* runner) const {
    for (size_t i = 0; i < values_.size(); ++i) {
      if (values_[i].v != expected_[i].v) {
        fail_verification(name(), runner,
                          "variable " + std::to_string(i) + " differs from the serial reference");
      }
    }
  }

  std::vector<Op> ops_;
  std::vector<std::vector<int>> predecessors_;
  int64_t num_edges_ = 0;
  std::vector<Value> expected_;
  std::vector<Value> values_;
  std::vector<VarHandle> vars_;
};

}  // namespace

const std::vector<std::string>& workload_names() {
  static const std::vector<std::string> names = {
      "chain", "tree", "embarrassing_empty", "embarrassing_1us", "wavefront", "mxnet_workload"};
  return names;
}

std::unique_ptr<Workload> make_workload(const std::string& name, const WorkloadSizes& sizes,
                                        uint64_t spin_per_us) {
  if (name == "chain") return std::make_unique<ChainWorkload>(sizes.chain);
  if (name == "tree") return std::make_unique<TreeWorkload>(sizes.tree);
  if (name == "embarrassing_empty") {
    return std::make_unique<EmbarrassingWorkload>(sizes.embarrassing, 0);
  }
  if (name == "embarrassing_1us") {
    return std::make_unique<EmbarrassingWorkload>(sizes.embarrassing, spin_per_us);
  }
  if (name == "wavefront") return std::make_unique<WavefrontWorkload>(sizes.wavefront_side);
  if (name == "mxnet_workload") {
    return std::make_unique<MxnetWorkload>(sizes.mxnet_ops, sizes.mxnet_vars, spin_per_us);
  }
  throw std::invalid_argument("unknown workload '" + name + "'");
}

}  // namespace weft::bench
