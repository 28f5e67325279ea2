// The ffi benchmark's C side measured through the shared library libweft_c.so (the product C
// consumers link), which holds its own copy of weft's runtime: so there is no native side to
// compare with in this process. Prints the same figures as weft_ffi_bench's C side
// (Note [What the ffi figures time] in ffi_bench.cc) as
//   compare ffi_so_<figure>_<pattern> capi_so=<ns/op>ns
//   compare ffi_so_dlpack_<sequence> capi_so=<ns>ns
// Run it via bench/run.sh ffi, which runs it after weft_ffi_bench.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/ffi/ffi_capi_side.h"

namespace weft::bench::ffi {
namespace {

constexpr double kDisturbedShare = 0.10;

void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

int run(const Sizes& sizes, bool quick, int workers) {
  std::printf("# weft ffi benchmark through libweft_c.so: %s\n", describe_library().c_str());
  std::printf("# mode: %s, reps=%d (median reported), ops per batch=%lld, cpu workers held=%d\n",
              quick ? "quick" : "full", sizes.reps, static_cast<long long>(sizes.ops), workers);
  std::fflush(stdout);

  CapiPusher capi(sizes.ops);
  WorkerGate gate(workers);
  const auto per_op = [&](double ns) { return ns / static_cast<double>(sizes.ops); };
  // [pattern][figure]: push_run, push_only, drain.
  std::vector<double> series[2][3];
  std::vector<double> dl[4];
  Interference interference;
  for (int r = -1; r < sizes.reps; ++r) {  // r = -1: warm-up
    for (Pattern pattern : {Pattern::kChain, Pattern::kIndependent}) {
      const int p = static_cast<int>(pattern);
      for (bool held : {false, true}) {
        const BatchTime t = time_batch(
            sizes.ops, held ? &gate : nullptr, [&](int64_t i) { capi.push(pattern, i); },
            [] { CapiPusher::wait_all(); });
        settle();
        if (r < 0) continue;
        if (held) {
          series[p][1].push_back(per_op(t.push_ns));
          series[p][2].push_back(per_op(t.drain_ns));
        } else {
          series[p][0].push_back(per_op(t.total_ns()));
        }
      }
    }
    const DlpackTimes d = time_dlpack(sizes.dlpack_trips);
    if (r < 0) continue;
    dl[0].push_back(d.roundtrip_ns);
    dl[1].push_back(d.roundtrip_versioned_ns);
    dl[2].push_back(d.export_ns);
    dl[3].push_back(d.import_ns);
  }
  static const char* const kFigures[] = {"push_run", "push_only", "drain"};
  for (Pattern pattern : {Pattern::kChain, Pattern::kIndependent}) {
    for (int f = 0; f < 3; ++f) {
      const Summary s = summarize(series[static_cast<int>(pattern)][f]);
      std::printf("# so %s %s: capi_so %s\n", kFigures[f], pattern_name(pattern),
                  describe(s).c_str());
      std::printf("compare ffi_so_%s_%s capi_so=%.1fns\n", kFigures[f], pattern_name(pattern),
                  s.median);
    }
  }
  static const char* const kDlpack[] = {"roundtrip", "roundtrip_versioned", "export", "import"};
  for (int i = 0; i < 4; ++i) {
    const Summary s = summarize(dl[i]);
    std::printf("# so dlpack_%s %s\n", kDlpack[i], describe(s).c_str());
    std::printf("compare ffi_so_dlpack_%s capi_so=%.1fns\n", kDlpack[i], s.median);
  }
  const bool disturbed = interference.lost_share() > kDisturbedShare;
  std::printf("# so interference over the run: %s%s\n", interference.describe().c_str(),
              disturbed ? " DISTURBED (rerun on a quiet machine)" : "");
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace weft::bench::ffi

int main(int argc, char** argv) {
  using namespace weft::bench::ffi;  // NOLINT(google-build-using-namespace): the program's own
  bool quick = false;
  int reps = 0;
  int workers = static_cast<int>(std::thread::hardware_concurrency());
  CLI::App app{"weft ffi benchmark through libweft_c.so"};
  app.add_flag("--quick", quick, "reduced sizes");
  app.add_option("--reps", reps, "repetitions per measurement (default: 5 quick, 15 full)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--workers", workers,
                 "the engine's CPU workers, all held for push_only (default: hardware threads, "
                 "the engine's default)")
      ->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  Sizes sizes = quick ? kQuickSizes : kFullSizes;
  if (reps > 0) sizes.reps = reps;
  try {
    return run(sizes, quick, workers);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ffi_so_bench: %s\n", e.what());
    return 1;
  }
}
