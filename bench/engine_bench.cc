// Engine benchmark: weft's threaded engine beside oneTBB's flow graph on the same dependency
// shapes (engine_workloads.h), in one run; prints one `compare` line per workload and thread
// count:
//   compare <workload> threads=<t> weft=<ns/task>ns tbb=<ns/task>ns ratio=<weft/tbb>
// and, for the MXNet workload, weft against the same bodies run serially:
//   compare mxnet_workload_vs_serial threads=<t> weft=<ns>ns serial=<ns>ns ratio=<weft/serial>
// Lines starting with '#' are the header and per-measurement details. Run it via bench/run.sh.
//
// Note [Thread counts]
// threads=t means, for weft, EngineConfig{.kind = kThreaded, .cpu_workers = t}: t worker threads
// run the operations while the main thread pushes them (so up to t+1 threads are busy during the
// push phase; afterwards the main thread blocks in wait_for_all). For TBB it means
// tbb::global_control(max_allowed_parallelism, t), which COUNTS THE CALLING THREAD: t-1 TBB worker
// threads plus the main thread, which builds the graph and then executes tasks inside
// wait_for_all. With t=1 TBB runs everything on the main thread, after the build.
// Each weft repetition gets a fresh engine (created and destroyed outside the timer), so idle
// weft workers never compete with TBB; after every run the process sleeps 20 ms so that the
// other side's threads are idle (TBB workers spin a little before they sleep).
//
// Note [Interleaved repetitions]
// Repetitions alternate weft, TBB (and, for mxnet_workload, serial) rather than running all of
// one side first: on shared virtual machines the speed of the same loop drifts by up to ~2x over
// seconds, and interleaving makes both sides sample the same conditions. The detail line gives
// the median of the per-repetition weft/TBB ratios too (the figure least affected by drift), and
// how much of the machine other processes used meanwhile (bench_util.h, Interference).

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/version.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/build_config.h"
#include "bench_util.h"
#include "engine/engine.h"
#include "engine_workloads.h"

namespace weft::bench {
namespace {

/// Share of the machine taken by other processes or the hypervisor above which a measurement is
/// flagged as disturbed.
constexpr double kDisturbedShare = 0.10;

struct Options {
  bool quick = false;
  std::string workload;  ///< empty: all
  int threads = 0;       ///< 0: 1 and 2
  int reps = 5;
};

/// One weft run of `w` on a fresh engine with `threads` CPU workers.
RunTime run_weft_once(Workload& w, int threads) {
  // EngineConfig{.kind = kThreaded, .cpu_workers = threads}, the other fields at their defaults
  // (assigned one by one: a designated initializer trips -Wmissing-field-initializers in GCC 12).
  EngineConfig config;
  config.kind = EngineKind::kThreaded;
  config.cpu_workers = threads;
  std::unique_ptr<Engine> engine = Engine::create(config);  // outside the timer, like its end
  static bool warned = false;
  if (engine->num_workers(Device::cpu()) != threads && !warned) {
    warned = true;
    std::printf("# warning: the weft engine reports %d cpu workers, asked for %d\n",
                engine->num_workers(Device::cpu()), threads);
  }
  return w.run_weft(*engine);
}

/// One TBB run of `w` limited to `threads` threads, the calling thread included.
RunTime run_tbb_once(Workload& w, int threads) {
  // Note [Thread counts]: threads-1 TBB workers plus the main thread.
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism,
                                  static_cast<size_t>(threads));
  return w.run_tbb();
}

/// Lets the side that just ran go idle (Note [Thread counts]).
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

void print_header(const Options& opt, const WorkloadSizes& sizes, const SpinCalibration& spin) {
  std::printf("# weft engine benchmark: weft threaded engine vs oneTBB flow graph\n");
  std::printf("# date: %s\n", utc_now().c_str());
  std::printf("# machine: %s\n", describe_machine().c_str());
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
              opt.quick ? "quick" : "full", opt.reps,
              opt.threads > 0 ? std::to_string(opt.threads).c_str() : "1,2");
  std::printf(
      "# sizes: chain=%lld tree=%lld embarrassing=%lld wavefront=%dx%d "
      "mxnet_workload=%d ops over %d vars\n",
      static_cast<long long>(sizes.chain), static_cast<long long>(sizes.tree),
      static_cast<long long>(sizes.embarrassing), sizes.wavefront_side, sizes.wavefront_side,
      sizes.mxnet_ops, sizes.mxnet_vars);
  std::printf("# spin: %llu iterations per us; a 1 us body measured %.0f ns\n",
              static_cast<unsigned long long>(spin.iterations_per_us), spin.check_ns);
  std::printf(
      "# timed: weft = new_var + push all + wait_for_all; tbb = graph + nodes + edges + "
      "try_put + wait_for_all\n");
  std::printf(
      "# threads=t: weft = t workers (+ the pushing main thread); tbb = "
      "max_allowed_parallelism t, counting the main thread\n");
  std::printf(
      "# details: median/min/max ns per task; build = median ns per task until the last "
      "push (weft) / the first try_put (tbb); the median per-rep ratio; other/steal = "
      "share of the machine used by other processes / stolen by the hypervisor\n");
  std::printf("# load: 1-minute load average %s at start\n", load_average().c_str());
  std::fflush(stdout);
}

/// Measures `w` at `threads` and prints its detail and compare lines. Returns whether other
/// processes disturbed the measurement.
bool measure(Workload& w, int threads, int reps) {
  std::vector<double> weft_ns, weft_build_ns, tbb_ns, tbb_build_ns, serial_ns, paired_ratio;
  Interference interference;
  for (int r = 0; r < reps; ++r) {  // Note [Interleaved repetitions]
    RunTime weft_time = run_weft_once(w, threads);
    settle();
    RunTime tbb_time = run_tbb_once(w, threads);
    settle();
    weft_ns.push_back(weft_time.total_ns);
    weft_build_ns.push_back(weft_time.build_ns);
    tbb_ns.push_back(tbb_time.total_ns);
    tbb_build_ns.push_back(tbb_time.build_ns);
    paired_ratio.push_back(weft_time.total_ns / tbb_time.total_ns);
    if (w.has_serial()) serial_ns.push_back(w.run_serial());
  }
  const double tasks = static_cast<double>(w.tasks());
  Summary weft_sum = summarize(weft_ns, tasks);
  Summary tbb_sum = summarize(tbb_ns, tasks);
  const bool disturbed = interference.lost_share() > kDisturbedShare;
  std::printf(
      "# %s threads=%d weft %s build=%.1f | tbb %s build=%.1f | per-rep ratio=%.3f | "
      "%s%s\n",
      w.name(), threads, describe(weft_sum).c_str(), summarize(weft_build_ns, tasks).median,
      describe(tbb_sum).c_str(), summarize(tbb_build_ns, tasks).median,
      summarize(paired_ratio).median, interference.describe().c_str(),
      disturbed ? " DISTURBED" : "");
  std::printf("compare %s threads=%d weft=%.1fns tbb=%.1fns ratio=%.3f\n", w.name(), threads,
              weft_sum.median, tbb_sum.median, weft_sum.median / tbb_sum.median);
  if (w.has_serial()) {
    Summary serial = summarize(serial_ns, tasks);
    std::printf("# %s serial %s\n", w.name(), describe(serial).c_str());
    std::printf("compare %s_vs_serial threads=%d weft=%.1fns serial=%.1fns ratio=%.3f\n", w.name(),
                threads, weft_sum.median, serial.median, weft_sum.median / serial.median);
  }
  std::fflush(stdout);
  return disturbed;
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) {
  using namespace weft::bench;  // NOLINT(google-build-using-namespace): the program's own namespace
  Options opt;
  CLI::App app{"weft engine benchmark: weft's threaded engine vs oneTBB's flow graph"};
  app.add_flag("--quick", opt.quick, "reduced sizes: the whole suite within a minute");
  app.add_option("--workload", opt.workload, "run only this workload")
      ->check(CLI::IsMember(workload_names()));
  app.add_option("--threads", opt.threads, "run only this thread count (default: 1 and 2)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--reps", opt.reps, "repetitions per measurement; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const WorkloadSizes& sizes = opt.quick ? kQuickSizes : kFullSizes;
  std::vector<int> thread_counts =
      opt.threads > 0 ? std::vector<int>{opt.threads} : std::vector<int>{1, 2};
  std::vector<std::string> names =
      opt.workload.empty() ? workload_names() : std::vector<std::string>{opt.workload};

  SpinCalibration spin = calibrate_spin();
  print_header(opt, sizes, spin);

  int disturbed = 0;
  try {
    for (const std::string& name : names) {
      std::unique_ptr<Workload> w = make_workload(name, sizes, spin.iterations_per_us);
      if (std::string facts = w->facts(); !facts.empty()) {
        std::printf("# %s: %s\n", w->name(), facts.c_str());
      }
      for (int t : thread_counts) disturbed += measure(*w, t, opt.reps) ? 1 : 0;
    }
  } catch (const weft::EngineError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "engine_bench: the engine reported %lld failed operations: %s\n",
                 static_cast<long long>(e.failed_count()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "engine_bench: %s\n", e.what());
    return 1;
  }
  if (disturbed > 0) {
    std::printf(
        "# warning: other processes or the hypervisor took more than %.0f%% of the "
        "machine during %d measurement(s) marked DISTURBED; rerun those on a quiet "
        "machine\n",
        100 * kDisturbedShare, disturbed);
  }
  return 0;
}
