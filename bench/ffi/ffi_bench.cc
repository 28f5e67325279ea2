// C ABI benchmark: the cost a foreign C operation adds over a native C++ one. Pushes of an empty
// C function through weft_push_sync beside pushes of an empty lambda through Engine::push_sync,
// on the same engine (the Runtime's, which the C ABI uses: this binary links the static C ABI
// layer weft_capi, so there is one runtime), in the same run; and DLPack round trips. Prints
//   compare ffi_<figure>_<pattern> native=<ns/op>ns capi=<ns/op>ns diff=<ns/op>ns ratio=<c/n> ...
//   compare ffi_dlpack_<sequence> capi=<ns>ns
// and '#' header and detail lines. Run it via bench/run.sh ffi [--quick].
//
// Note [What the ffi figures time]
// Every batch pushes N operations, each writing one variable: the same one (chain: each waits for
// the previous) or its own, created beforehand (independent: all ready at once).
// - push_run: the push loop and wait_for_all, with the workers running operations while the loop
//   pushes: what a program pays per operation. Concurrent execution makes it noisy (pusher and
//   workers contend for the same variables and cache lines; docs/PERFORMANCE.md, Engine).
// - push_only: the push loop alone while every worker is held in a sleeping operation
//   (WorkerGate), so nothing runs against it: the price of the push call itself.
// - drain: after that push loop, releasing the workers until wait_for_all returns: the execution
//   of N queued operations alone (the C side adds its trampoline: run-context conversion,
//   current-context scope, the call through a pointer, the user-data destructor).
// The C ABI's goal (issue #12) is diff = capi - native <= 50 ns per push. diff is the median of
// the per-repetition differences; repetitions interleave native and C batches, alternating which
// goes first, so both sample the same machine conditions.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

#include "base/build_config.h"
#include "bench/bench_util.h"
#include "bench/ffi/ffi_breakdown.h"
#include "bench/ffi/ffi_capi_side.h"
#include "engine/engine.h"
#include "ndarray/runtime.h"

namespace weft::bench::ffi {
namespace {

constexpr double kGoalNs = 50;
constexpr double kDisturbedShare = 0.10;

/// Native operations: an empty lambda pushed with Engine::push_sync, writing one variable
/// (Pattern). Owns its variables. Call from one thread.
class NativePusher {
 public:
  NativePusher(Engine& engine, int64_t ops) : engine_(engine) {
    chain_ = engine_.new_var();
    independent_.reserve(static_cast<size_t>(ops));
    for (int64_t i = 0; i < ops; ++i) independent_.push_back(engine_.new_var());
  }
  ~NativePusher() {
    engine_.wait_for_all();
    engine_.delete_var(chain_);
    for (VarHandle v : independent_) engine_.delete_var(v);
  }
  NativePusher(const NativePusher&) = delete;
  NativePusher& operator=(const NativePusher&) = delete;

  void push(Pattern pattern, int64_t i) {
    const VarHandle var = pattern == Pattern::kChain ? chain_ : independent_[i];
    engine_.push_sync([](const RunContext&) {}, Device::cpu(), {}, {var});
  }
  void wait_all() { engine_.wait_for_all(); }

 private:
  Engine& engine_;
  VarHandle chain_;
  std::vector<VarHandle> independent_;
};

enum Figure { kPushRun, kPushOnly, kDrain, kNumFigures };
const char* figure_name(int f) {
  static const char* const kNames[] = {"push_run", "push_only", "drain"};
  return kNames[f];
}

/// Per-repetition ns per operation of one figure and pattern, for both sides.
struct Series {
  std::vector<double> native, capi, diff;
};

void add(Series& s, double native_ns, double capi_ns) {
  s.native.push_back(native_ns);
  s.capi.push_back(capi_ns);
  s.diff.push_back(capi_ns - native_ns);
}

void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

void print_header(const Sizes& sizes, bool quick, int workers) {
  std::printf(
      "# weft ffi benchmark: foreign C operations (weft_push_sync) vs native C++ "
      "(Engine::push_sync) on the same engine; DLPack round trips\n");
  std::printf("# date: %s\n", utc_now().c_str());
  std::printf("# machine: %s\n", describe_machine().c_str());
  std::printf("# versions: %s (static C ABI layer weft_capi), %s %s\n", describe_library().c_str(),
#if defined(__clang__)
              "clang",
#else
              "gcc",
#endif
              __VERSION__);
  std::printf("# mode: %s, reps=%d (median reported), ops per batch=%lld, engine cpu workers=%d\n",
              quick ? "quick" : "full", sizes.reps, static_cast<long long>(sizes.ops), workers);
  std::printf(
      "# ops: native = push_sync of an empty lambda, no name; capi = weft_push_sync of an empty C "
      "function, no user data, name NULL; each writes 1 var (chain: the same; independent: "
      "its own)\n");
  std::printf(
      "# figures (ns per op): push_run = push loop + wait_for_all, workers running; push_only "
      "= push loop with every worker held; drain = running the held batch after release\n");
  std::printf("# goal: the C ABI adds <= %.0f ns per push (diff = median per-rep capi - native)\n",
              kGoalNs);
  std::printf("# load: 1-minute load average %s at start\n", load_average().c_str());
  std::fflush(stdout);
}

void print_figure(int figure, Pattern pattern, const Series& s) {
  const Summary native = summarize(s.native);
  const Summary capi = summarize(s.capi);
  const Summary diff = summarize(s.diff);
  // The difference of the minima: the two sides at their fastest, least touched by other
  // processes (a shared machine's interference only adds time).
  std::printf("# %s %s: native %s | capi %s | per-rep diff %s | diff of minima %.1f\n",
              figure_name(figure), pattern_name(pattern), describe(native).c_str(),
              describe(capi).c_str(), describe(diff).c_str(), capi.min - native.min);
  const bool goal = figure != kDrain;  // the goal is about pushes
  std::printf("compare ffi_%s_%s native=%.1fns capi=%.1fns diff=%.1fns ratio=%.3f%s\n",
              figure_name(figure), pattern_name(pattern), native.median, capi.median, diff.median,
              capi.median / native.median,
              goal ? (diff.median <= kGoalNs ? " goal<=50ns:met" : " goal<=50ns:missed") : "");
}

int run(const Sizes& sizes, bool quick, bool breakdown) {
  Engine& engine = Runtime::get().engine();
  const int workers = engine.num_workers(Device::cpu());
  print_header(sizes, quick, workers);

  NativePusher native(engine, sizes.ops);
  CapiPusher capi(sizes.ops);
  WorkerGate gate(workers);
  const auto per_op = [&](double ns) { return ns / static_cast<double>(sizes.ops); };

  Series series[kNumFigures][2];
  std::vector<double> dl_trip, dl_trip_versioned, dl_export, dl_import;
  Interference interference;
  for (int r = -1; r < sizes.reps; ++r) {  // r = -1: warm-up, not recorded
    for (Pattern pattern : {Pattern::kChain, Pattern::kIndependent}) {
      const int p = static_cast<int>(pattern);
      for (bool held : {false, true}) {
        WorkerGate* g = held ? &gate : nullptr;
        const auto time_native = [&] {
          return time_batch(
              sizes.ops, g, [&](int64_t i) { native.push(pattern, i); },
              [&] { native.wait_all(); });
        };
        const auto time_capi = [&] {
          return time_batch(
              sizes.ops, g, [&](int64_t i) { capi.push(pattern, i); },
              [&] { CapiPusher::wait_all(); });
        };
        BatchTime n, c;
        if (r % 2 == 0) {
          n = time_native();
          settle();
          c = time_capi();
        } else {
          c = time_capi();
          settle();
          n = time_native();
        }
        settle();
        if (r < 0) continue;
        if (held) {
          add(series[kPushOnly][p], per_op(n.push_ns), per_op(c.push_ns));
          add(series[kDrain][p], per_op(n.drain_ns), per_op(c.drain_ns));
        } else {
          add(series[kPushRun][p], per_op(n.total_ns()), per_op(c.total_ns()));
        }
      }
    }
    const DlpackTimes dl = time_dlpack(sizes.dlpack_trips);
    if (r < 0) continue;
    dl_trip.push_back(dl.roundtrip_ns);
    dl_trip_versioned.push_back(dl.roundtrip_versioned_ns);
    dl_export.push_back(dl.export_ns);
    dl_import.push_back(dl.import_ns);
  }

  for (int f = 0; f < kNumFigures; ++f) {
    for (Pattern pattern : {Pattern::kChain, Pattern::kIndependent}) {
      print_figure(f, pattern, series[f][static_cast<int>(pattern)]);
    }
  }
  std::printf(
      "# dlpack (float32[16], %lld trips per rep): roundtrip = to_dlpack + from_dlpack + "
      "array_free; export = to_dlpack + deleter; import = from_dlpack of a foreign tensor + "
      "array_free\n",
      static_cast<long long>(sizes.dlpack_trips));
  const std::pair<const char*, std::vector<double>*> dl_series[] = {
      {"roundtrip", &dl_trip},
      {"roundtrip_versioned", &dl_trip_versioned},
      {"export", &dl_export},
      {"import", &dl_import}};
  for (const auto& [name, values] : dl_series) {
    const Summary s = summarize(*values);
    std::printf("# dlpack_%s %s\n", name, describe(s).c_str());
    std::printf("compare ffi_dlpack_%s capi=%.1fns\n", name, s.median);
  }
  const bool disturbed = interference.lost_share() > kDisturbedShare;
  std::printf("# interference over the run: %s%s\n", interference.describe().c_str(),
              disturbed ? " DISTURBED (rerun on a quiet machine)" : "");
  std::fflush(stdout);
  return breakdown ? run_breakdown(sizes, workers) : 0;
}

}  // namespace
}  // namespace weft::bench::ffi

int main(int argc, char** argv) {
  using namespace weft::bench::ffi;  // NOLINT(google-build-using-namespace): the program's own
  bool quick = false;
  bool breakdown = false;
  int reps = 0;
  CLI::App app{"weft ffi benchmark: C ABI pushes vs native C++ pushes on one engine; DLPack"};
  app.add_flag("--quick", quick, "reduced sizes: the whole suite within seconds");
  app.add_option("--reps", reps, "repetitions per measurement (default: 5 quick, 15 full)")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--breakdown", breakdown,
               "then time weft_push_sync's steps one at a time (ffi_breakdown.cc)");
  CLI11_PARSE(app, argc, argv);
  Sizes sizes = quick ? kQuickSizes : kFullSizes;
  if (reps > 0) sizes.reps = reps;
  try {
    return run(sizes, quick, breakdown);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ffi_bench: %s\n", e.what());
    return 1;
  }
}
