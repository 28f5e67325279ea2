// Engine benchmark: weft's threaded engine beside oneTBB's flow graph on the same dependency
// shapes, in one run; prints one `compare` line per workload and thread count.
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
// Note [Thread counts]
// threads=t means, for weft, EngineConfig{.kind = kThreaded, .cpu_workers = t}: t worker threads
// run the operations while the main thread pushes them (so up to t+1 threads are busy during the
// push phase; afterwards the main thread blocks in wait_for_all). For TBB it means
// tbb::global_control(max_allowed_parallelism, t), which COUNTS THE CALLING THREAD: t-1 TBB worker
// threads plus the main thread, which builds the graph and then executes tasks inside
// wait_for_all. With t=1 TBB runs everything on the main thread, after the build.
// The weft engine is destroyed before the TBB runs of the same thread count start, so idle weft
// workers never compete with TBB, and vice versa (TBB workers are given a moment to go to sleep).
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
// engine offers: nothing to track, each is ready at push. TBB: independent continue_nodes, each
// fed by its own try_put right after construction. This is the cheapest fair TBB form: no edges
// are built (a broadcast_node source would add one make_edge per node and still spawn one task
// per node), and, like weft's push, every task becomes runnable as soon as it is created.

#include <sys/utsname.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/version.h>

#include "base/build_config.h"
#include "engine/engine.h"

namespace {

using weft::Device;
using weft::Engine;
using weft::EngineConfig;
using weft::EngineKind;
using weft::RunContext;
using weft::VarHandle;

using Clock = std::chrono::steady_clock;
using TbbNode = tbb::flow::continue_node<tbb::flow::continue_msg>;
using tbb::flow::continue_msg;

/// Odd multipliers of the order-sensitive hashes (Note [Verification]).
constexpr uint64_t kMulA = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMulB = 0xC2B2AE3D27D4EB4Full;
/// What value arrays hold before a run: a body that reads it produces a wrong final value.
constexpr uint64_t kUnset = 0xDEADBEEFDEADBEEFull;

double elapsed_ns(Clock::time_point start, Clock::time_point stop) {
  return std::chrono::duration<double, std::nano>(stop - start).count();
}

[[noreturn]] void fail_verification(const char* workload, const char* runner,
                                    const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "engine_bench: VERIFICATION FAILED: %s (%s): %s\n", workload, runner,
               what.c_str());
  std::exit(1);
}

// ---- the busy body ------------------------------------------------------------------------------

/// Spin-loop iterations that take about one microsecond on this machine; set by calibrate_spin().
uint64_t g_spin_per_us = 1000;

/// Burns `iterations` loop iterations; the empty volatile asm keeps the compiler from removing or
/// vectorising the loop. Not inlined, so that every caller runs the same machine code.
[[gnu::noinline]] void spin_iterations(uint64_t iterations) {
  for (uint64_t i = 0; i < iterations; ++i) asm volatile("");
}

/// Measures the spin loop (best of several ~5-10 ms probes) and sets g_spin_per_us. Returns the
/// measured mean duration of one 1 us body, in ns, as a check.
double calibrate_spin() {
  constexpr uint64_t kProbe = uint64_t{1} << 23;
  spin_iterations(kProbe);  // warm up the core's clock
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < 7; ++r) {
    auto start = Clock::now();
    spin_iterations(kProbe);
    best = std::min(best, elapsed_ns(start, Clock::now()));
  }
  g_spin_per_us = std::max<uint64_t>(1, std::llround(static_cast<double>(kProbe) * 1000.0 / best));
  constexpr int kCheck = 20000;
  auto start = Clock::now();
  for (int i = 0; i < kCheck; ++i) spin_iterations(g_spin_per_us);
  return elapsed_ns(start, Clock::now()) / kCheck;
}

// ---- per-worker counters ------------------------------------------------------------------------

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

// ---- workloads ----------------------------------------------------------------------------------

/// One dependency shape, runnable on weft and on TBB. Not thread-safe: call from the main thread.
class Workload {
 public:
  virtual ~Workload() = default;
  virtual const char* name() const = 0;
  /// Operations (weft) = continue_nodes (TBB) per run.
  virtual int64_t tasks() const = 0;
  /// One run on `engine`; returns the timed ns (Note [What is timed]); verifies afterwards.
  virtual double run_weft(Engine& engine) = 0;
  /// One run on a fresh TBB flow graph, under the caller's global_control; returns the timed ns.
  virtual double run_tbb() = 0;
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

  double run_weft(Engine& engine) override {
    uint64_t state = 0;
    uint64_t* s = &state;
    auto start = Clock::now();
    VarHandle var = engine.new_var();
    for (int64_t i = 0; i < n_; ++i) {
      engine.push([s, i](const RunContext&) { *s = step(*s, i); }, Device::cpu(), {}, {var});
    }
    engine.wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
    delete_vars(engine, {&var, 1});
    verify(state, "weft");
    return ns;
  }

  double run_tbb() override {
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
    nodes.front()->try_put(continue_msg());
    graph->wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
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
      : n_(n), expected_(static_cast<size_t>(n)), values_(static_cast<size_t>(n)),
        vars_(static_cast<size_t>(n)) {
    for (int64_t i = 0; i < n_; ++i) {
      expected_[static_cast<size_t>(i)] = body_value(expected_.data(), i);
    }
  }
  const char* name() const override { return "tree"; }
  int64_t tasks() const override { return n_; }

  double run_weft(Engine& engine) override {
    std::fill(values_.begin(), values_.end(), kUnset);
    uint64_t* v = values_.data();
    auto start = Clock::now();
    for (int64_t i = 0; i < n_; ++i) vars_[static_cast<size_t>(i)] = engine.new_var();
    engine.push([v](const RunContext&) { v[0] = body_value(v, 0); }, Device::cpu(), {},
                {vars_[0]});
    for (int64_t i = 1; i < n_; ++i) {
      engine.push([v, i](const RunContext&) { v[i] = body_value(v, i); }, Device::cpu(),
                  {vars_[static_cast<size_t>((i - 1) / 2)]}, {vars_[static_cast<size_t>(i)]});
    }
    engine.wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
    delete_vars(engine, vars_);
    verify("weft");
    return ns;
  }

  double run_tbb() override {
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
    nodes.front()->try_put(continue_msg());
    graph->wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
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
/// parallelism forms]), with an empty body or one that spins for about 1 us.
class EmbarrassingWorkload final : public Workload {
 public:
  EmbarrassingWorkload(int64_t n, bool busy) : n_(n), busy_(busy) {}
  const char* name() const override { return busy_ ? "embarrassing_1us" : "embarrassing_empty"; }
  int64_t tasks() const override { return n_; }

  double run_weft(Engine& engine) override {
    return busy_ ? run_weft_impl<true>(engine) : run_weft_impl<false>(engine);
  }
  double run_tbb() override { return busy_ ? run_tbb_impl<true>() : run_tbb_impl<false>(); }

 private:
  template <bool kBusy>
  double run_weft_impl(Engine& engine) {
    WorkerCounts counts(engine.num_workers(Device::cpu()));
    WorkerCounts* c = &counts;
    const uint64_t spin = g_spin_per_us;
    auto start = Clock::now();
    for (int64_t i = 0; i < n_; ++i) {
      engine.push(
          [c, spin](const RunContext& ctx) {
            if constexpr (kBusy) spin_iterations(spin);
            c->add(ctx.worker);
          },
          Device::cpu(), {}, {});
    }
    engine.wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
    if (counts.total() != static_cast<uint64_t>(n_)) {
      fail_verification(name(), "weft",
                        std::to_string(counts.total()) + " bodies ran, expected " +
                            std::to_string(n_));
    }
    return ns;
  }

  template <bool kBusy>
  double run_tbb_impl() {
    const uint64_t spin = g_spin_per_us;
    std::vector<std::unique_ptr<TbbNode>> nodes;
    nodes.reserve(static_cast<size_t>(n_));
    auto start = Clock::now();
    auto graph = std::make_unique<tbb::flow::graph>();
    for (int64_t i = 0; i < n_; ++i) {
      nodes.push_back(std::make_unique<TbbNode>(*graph, [spin](const continue_msg&) {
        if constexpr (kBusy) spin_iterations(spin);
        return continue_msg();
      }));
      nodes.back()->try_put(continue_msg());
    }
    graph->wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
    nodes.clear();
    graph.reset();
    return ns;
  }

  int64_t n_;
  bool busy_;
};

/// wavefront: a side x side grid of blocks; block (i,j) reads (i-1,j) and (i,j-1) and writes
/// (i,j). TBB: edges from the up and left neighbours.
class WavefrontWorkload final : public Workload {
 public:
  explicit WavefrontWorkload(int32_t side)
      : side_(side), n_(int64_t{side} * side), expected_(static_cast<size_t>(n_)),
        values_(static_cast<size_t>(n_)), vars_(static_cast<size_t>(n_)) {
    for (int32_t i = 0; i < side_; ++i) {
      for (int32_t j = 0; j < side_; ++j) {
        expected_[index(i, j)] = body_value(expected_.data(), side_, i, j);
      }
    }
  }
  const char* name() const override { return "wavefront"; }
  int64_t tasks() const override { return n_; }

  double run_weft(Engine& engine) override {
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
    engine.wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
    delete_vars(engine, vars_);
    verify("weft");
    return ns;
  }

  double run_tbb() override {
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
    nodes.front()->try_put(continue_msg());
    graph->wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
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

  MxnetWorkload(int num_ops, int num_vars)
      : num_vars_(num_vars), ops_(static_cast<size_t>(num_ops)),
        predecessors_(static_cast<size_t>(num_ops)), expected_(static_cast<size_t>(num_vars)),
        values_(static_cast<size_t>(num_vars)), vars_(static_cast<size_t>(num_vars)) {
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
  int64_t edges() const { return num_edges_; }
  /// Sum of the bodies' nominal spin times, in us.
  int64_t total_spin_us() const {
    int64_t sum = 0;
    for (const Op& op : ops_) sum += op.spin_us;
    return sum;
  }

  double run_weft(Engine& engine) override {
    reset_values();
    Value* v = values_.data();
    auto start = Clock::now();
    for (VarHandle& var : vars_) var = engine.new_var();
    for (size_t k = 0; k < ops_.size(); ++k) {
      const Op* op = &ops_[k];
      std::array<VarHandle, kMaxReads> reads;
      for (int r = 0; r < op->num_reads; ++r) {
        reads[static_cast<size_t>(r)] = vars_[static_cast<size_t>(op->reads[static_cast<size_t>(r)])];
      }
      engine.push([op, k, v](const RunContext&) { apply(*op, static_cast<int64_t>(k), v, true); },
                  Device::cpu(),
                  std::span<const VarHandle>(reads.data(), static_cast<size_t>(op->num_reads)),
                  {vars_[static_cast<size_t>(op->write)]});
    }
    engine.wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
    delete_vars(engine, vars_);
    verify("weft");
    return ns;
  }

  double run_tbb() override {
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
      for (int p : predecessors_[k]) tbb::flow::make_edge(*nodes[static_cast<size_t>(p)], *nodes.back());
    }
    for (size_t k = 0; k < ops_.size(); ++k) {
      if (predecessors_[k].empty()) nodes[k]->try_put(continue_msg());
    }
    graph->wait_for_all();
    double ns = elapsed_ns(start, Clock::now());
    nodes.clear();
    graph.reset();
    verify("tbb");
    return ns;
  }

  /// The same bodies, in push order, on the calling thread.
  double run_serial() {
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
    int spin_us = 0;
    std::array<int, kMaxReads> reads{};
  };
  /// One variable's value on its own cache line, so that neighbouring writers do not interfere.
  struct alignas(64) Value {
    uint64_t v;
  };

  /// Operation k's body: spins, then hashes what it reads into the variable it writes.
  static void apply(const Op& op, int64_t k, Value* values, bool spin) {
    if (spin) spin_iterations(static_cast<uint64_t>(op.spin_us) * g_spin_per_us);
    uint64_t h = values[op.write].v;
    for (int r = 0; r < op.num_reads; ++r) h = h * kMulA + values[op.reads[static_cast<size_t>(r)]].v;
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

  int num_vars_;
  std::vector<Op> ops_;
  std::vector<std::vector<int>> predecessors_;
  int64_t num_edges_ = 0;
  std::vector<Value> expected_;
  std::vector<Value> values_;
  std::vector<VarHandle> vars_;
};

// ---- the driver ---------------------------------------------------------------------------------

const std::vector<std::string> kWorkloadNames = {"chain",     "tree",          "embarrassing_empty",
                                                  "embarrassing_1us", "wavefront", "mxnet_workload"};

struct Sizes {
  int64_t chain;
  int64_t tree;
  int64_t embarrassing;
  int32_t wavefront_side;
  int mxnet_ops;
  int mxnet_vars;
};
constexpr Sizes kFullSizes{int64_t{1} << 20, (int64_t{1} << 20) - 1, int64_t{1} << 20, 2048,
                           10000, 100};
constexpr Sizes kQuickSizes{int64_t{1} << 16, (int64_t{1} << 16) - 1, int64_t{1} << 16, 256,
                            10000, 100};

struct Options {
  bool quick = false;
  std::string workload;  // empty: all
  int threads = 0;       // 0: 1 and 2
  int reps = 0;          // 0: the mode's default
};

std::unique_ptr<Workload> make_workload(const std::string& name, const Sizes& sizes) {
  if (name == "chain") return std::make_unique<ChainWorkload>(sizes.chain);
  if (name == "tree") return std::make_unique<TreeWorkload>(sizes.tree);
  if (name == "embarrassing_empty") return std::make_unique<EmbarrassingWorkload>(sizes.embarrassing, false);
  if (name == "embarrassing_1us") return std::make_unique<EmbarrassingWorkload>(sizes.embarrassing, true);
  if (name == "wavefront") return std::make_unique<WavefrontWorkload>(sizes.wavefront_side);
  return std::make_unique<MxnetWorkload>(sizes.mxnet_ops, sizes.mxnet_vars);
}

/// Median, minimum and maximum of a run's repetitions, in ns per task.
struct Summary {
  double median;
  double min;
  double max;
};
Summary summarize(std::vector<double> ns, int64_t tasks) {
  std::sort(ns.begin(), ns.end());
  size_t n = ns.size();
  double median = n % 2 == 1 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2;
  double per = static_cast<double>(tasks);
  return {median / per, ns.front() / per, ns.back() / per};
}

std::string describe(const Summary& s) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "median=%.1f min=%.1f max=%.1f", s.median, s.min, s.max);
  return buf;
}

Summary measure_weft(Workload& w, int threads, int reps) {
  // EngineConfig{.kind = kThreaded, .cpu_workers = threads}, the other fields at their defaults
  // (assigned one by one: a designated initializer trips -Wmissing-field-initializers in GCC 12).
  EngineConfig config;
  config.kind = EngineKind::kThreaded;
  config.cpu_workers = threads;
  auto engine = Engine::create(config);
  if (engine->num_workers(Device::cpu()) != threads) {
    std::printf("# warning: weft engine reports %d cpu workers, asked for %d\n",
                engine->num_workers(Device::cpu()), threads);
  }
  std::vector<double> ns;
  for (int r = 0; r < reps; ++r) ns.push_back(w.run_weft(*engine));
  return summarize(std::move(ns), w.tasks());
}

Summary measure_tbb(Workload& w, int threads, int reps) {
  // Counts the calling thread: threads-1 TBB workers plus main (Note [Thread counts]).
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism,
                                  static_cast<size_t>(threads));
  std::vector<double> ns;
  for (int r = 0; r < reps; ++r) ns.push_back(w.run_tbb());
  return summarize(std::move(ns), w.tasks());
}

/// Lets the other side's idle threads (TBB workers spin a little before sleeping) go quiet.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

double read_mem_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kib;
      break;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return kib / (1024.0 * 1024.0);
}

void print_header(const Options& opt, const Sizes& sizes, int reps, double spin_check_ns) {
  char date[64];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  utsname uts{};
  uname(&uts);
  std::printf("# weft engine benchmark: weft threaded engine vs oneTBB flow graph\n");
  std::printf("# date: %s\n", date);
  std::printf("# machine: nproc=%u cpu=\"%s\" mem=%.1fGiB kernel=%s %s\n",
              std::thread::hardware_concurrency(), read_cpu_model().c_str(), read_mem_gib(),
              uts.sysname, uts.release);
  std::printf("# versions: weft %s, oneTBB %s (TBB_VERSION %d.%d, runtime %s), %s %s\n",
              WEFT_VERSION_STRING, TBB_VERSION_STRING, TBB_VERSION_MAJOR, TBB_VERSION_MINOR,
              TBB_runtime_version(),
#if defined(__clang__)
              "clang",
#else
              "gcc",
#endif
              __VERSION__);
  std::printf("# mode: %s, reps=%d (median reported, ns per task), threads=%s\n",
              opt.quick ? "quick" : "full", reps,
              opt.threads > 0 ? std::to_string(opt.threads).c_str() : "1,2");
  std::printf("# sizes: chain=%lld tree=%lld embarrassing=%lld wavefront=%dx%d "
              "mxnet_workload=%d ops over %d vars\n",
              static_cast<long long>(sizes.chain), static_cast<long long>(sizes.tree),
              static_cast<long long>(sizes.embarrassing), sizes.wavefront_side,
              sizes.wavefront_side, sizes.mxnet_ops, sizes.mxnet_vars);
  std::printf("# spin: %llu iterations per us; a 1 us body measures %.0f ns\n",
              static_cast<unsigned long long>(g_spin_per_us), spin_check_ns);
  std::printf("# timed: weft = new_var + push all + wait_for_all; tbb = graph + nodes + edges + "
              "try_put + wait_for_all\n");
  std::printf("# threads=t: weft = t workers (+ the pushing main thread); tbb = "
              "max_allowed_parallelism t, counting the main thread\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"weft engine benchmark: weft's threaded engine vs oneTBB's flow graph"};
  app.add_flag("--quick", opt.quick, "reduced sizes: the whole suite in under a minute");
  app.add_option("--workload", opt.workload, "run only this workload")
      ->check(CLI::IsMember(kWorkloadNames));
  app.add_option("--threads", opt.threads, "run only this thread count (default: 1 and 2)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--reps", opt.reps, "repetitions per measurement, median reported (default 3)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  const Sizes& sizes = opt.quick ? kQuickSizes : kFullSizes;
  const int reps = opt.reps > 0 ? opt.reps : 3;
  std::vector<int> thread_counts = opt.threads > 0 ? std::vector<int>{opt.threads}
                                                   : std::vector<int>{1, 2};
  std::vector<std::string> names =
      opt.workload.empty() ? kWorkloadNames : std::vector<std::string>{opt.workload};

  double spin_check_ns = calibrate_spin();
  print_header(opt, sizes, reps, spin_check_ns);

  try {
    for (const std::string& name : names) {
      std::unique_ptr<Workload> w = make_workload(name, sizes);
      auto* mxnet = dynamic_cast<MxnetWorkload*>(w.get());
      Summary serial{};
      if (mxnet != nullptr) {
        std::printf("# mxnet_workload: %lld edges in the TBB graph, %lld us of nominal spin\n",
                    static_cast<long long>(mxnet->edges()),
                    static_cast<long long>(mxnet->total_spin_us()));
        std::vector<double> ns;
        for (int r = 0; r < reps; ++r) ns.push_back(mxnet->run_serial());
        serial = summarize(std::move(ns), w->tasks());
        std::printf("# %s serial %s\n", name.c_str(), describe(serial).c_str());
      }
      for (int t : thread_counts) {
        Summary weft_ns = measure_weft(*w, t, reps);
        settle();
        Summary tbb_ns = measure_tbb(*w, t, reps);
        settle();
        std::printf("# %s threads=%d weft %s | tbb %s\n", name.c_str(), t,
                    describe(weft_ns).c_str(), describe(tbb_ns).c_str());
        std::printf("compare %s threads=%d weft=%.1fns tbb=%.1fns ratio=%.3f\n", name.c_str(), t,
                    weft_ns.median, tbb_ns.median, weft_ns.median / tbb_ns.median);
        if (mxnet != nullptr) {
          std::printf("compare mxnet_workload_vs_serial threads=%d weft=%.1fns serial=%.1fns "
                      "ratio=%.3f\n",
                      t, weft_ns.median, serial.median, weft_ns.median / serial.median);
        }
        std::fflush(stdout);
      }
    }
  } catch (const weft::EngineError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "engine_bench: engine reported %lld failed operations: %s\n",
                 static_cast<long long>(e.failed_count()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "engine_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
