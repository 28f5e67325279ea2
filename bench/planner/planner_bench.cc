// Planner benchmark: for every MXNet model file in the model folder, at batch 1 and 32, inference
// and training (forward + backward), the memory weft's static planner needs against the lower
// bound (peak live bytes) and against MXNet-style block sharing (the peer: GraphExecutor's storage
// allocator), with planning times. Prints one detail row and one `compare` line per case, then a
// summary:
//
//   compare planner <model> batch=<b> <mode> weft=<MiB> baseline=<MiB> lower_bound=<MiB>
//           no_reuse=<MiB> ratio=<weft/lower_bound> baseline_ratio=<baseline/lower_bound>
//           weft_vs_baseline=<weft/baseline> weft_ms=<ms> baseline_ms=<ms>
//   compare planner_summary cases=<n> max_ratio=<max weft/lower_bound> ...
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "base/build_config.h"
#include "base/error.h"
#include "bench/bench_util.h"
#include "graph/json.h"
#include "graph/plan.h"
#include "tests/graph/model_inputs.h"

namespace weft::bench {
namespace {

struct Options {
  std::string models_dir;
  bool quick = false;
  int reps = 3;
  std::string model;  ///< only this model (short name)
};

std::filesystem::path find_models_dir(const Options& opt) {
  if (!opt.models_dir.empty()) return opt.models_dir;
  if (const char* env = std::getenv("WEFT_MODELS_DIR"); env && *env) return env;
  if (std::filesystem::is_directory(WEFT_DEFAULT_MODELS_DIR)) return WEFT_DEFAULT_MODELS_DIR;
  return "../shared/models";
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Plans `reps` times; returns the last plan and the median time in milliseconds.
graph::MemoryPlan timed_plan(const testing::InferredGraph& ig, bool baseline, int reps,
                             double* median_ms) {
  graph::GraphPlanOptions options;
  options.baseline = baseline;
  std::vector<double> ms;
  graph::MemoryPlan mp;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    mp = graph::plan_memory(ig.graph, ig.inferred, options);
    ms.push_back(elapsed_ns(t0, Clock::now()) / 1e6);
  }
  *median_ms = summarize(ms).median;
  graph::check_buffer_plan(mp.buffers, mp.plan, options.plan);
  return mp;
}

int run(const Options& opt) {
  const std::filesystem::path dir = find_models_dir(opt);
  if (!std::filesystem::is_directory(dir)) {
    std::fprintf(stderr,
                 "planner_bench: model folder %s not found (pass it as the argument or set "
                 "WEFT_MODELS_DIR)\n",
                 dir.c_str());
    return 1;
  }
  const int reps = opt.quick ? 1 : opt.reps;
  std::printf("# weft planner benchmark: weft's static memory plan vs MXNet-style block sharing\n");
  std::printf("# date: %s\n", utc_now().c_str());
  std::printf("# machine: %s\n", describe_machine().c_str());
  std::printf("# versions: weft %s, %s %s\n", WEFT_VERSION_STRING,
#if defined(__clang__)
              "clang",
#else
              "gcc",
#endif
              __VERSION__);
  std::printf(
      "# models: %s; batch 1 and 32; inference (forward) and training (forward + backward,\n"
      "#   gradients of the learned parameters); alignment 64 bytes, workspaces included\n",
      dir.c_str());
  std::printf(
      "# lower bound = peak over the node order of the live bytes (in-place pairs once); no_reuse "
      "= every\n"
      "#   buffer on its own; baseline = MXNet GraphExecutor's allocator (free blocks matched "
      "within a\n"
      "#   factor 16, grown on reuse, arena = sum of blocks); times: median of %d plan_memory "
      "calls\n",
      reps);
  std::printf("# %-18s %5s %-9s %7s %11s %11s %11s %11s %8s %8s %9s %9s\n", "model", "batch",
              "mode", "buffers", "no_reuse", "lower_bnd", "weft", "baseline", "weft/lb", "base/lb",
              "weft_ms", "base_ms");
  std::fflush(stdout);

  double max_ratio = 0, sum_log_ratio = 0, sum_log_baseline = 0, max_baseline = 0;
  std::string worst;
  int cases = 0;
  for (const testing::ModelInputSpec& spec : testing::mxnet_model_specs()) {
    if (!opt.model.empty() && opt.model != spec.name) continue;
    const graph::Graph forward = graph::load_json_file(dir / spec.file);
    for (int64_t batch : {1, 32}) {
      for (bool train : {false, true}) {
        const graph::InferInputs inputs = testing::model_inputs(spec.file, batch);
        const testing::InferredGraph ig = train ? testing::training_graph(forward, inputs)
                                                : testing::inference_graph(forward, inputs);
        double weft_ms = 0, base_ms = 0;
        const graph::MemoryPlan wp = timed_plan(ig, false, reps, &weft_ms);
        const graph::MemoryPlan bp = timed_plan(ig, true, reps, &base_ms);
        const graph::BufferPlan& w = wp.plan;
        const graph::BufferPlan& b = bp.plan;
        const char* mode = train ? "training" : "inference";
        std::printf("  %-18s %5lld %-9s %7zu %11.3f %11.3f %11.3f %11.3f %8.4f %8.4f %9.2f %9.2f\n",
                    spec.name, static_cast<long long>(batch), mode, wp.buffers.size(),
                    mib(w.no_reuse), mib(w.lower_bound), mib(w.arena_bytes), mib(b.arena_bytes),
                    w.ratio(), b.ratio(), weft_ms, base_ms);
        std::printf(
            "compare planner %s batch=%lld %s weft=%.3fMiB baseline=%.3fMiB lower_bound=%.3fMiB "
            "no_reuse=%.3fMiB "
            "ratio=%.4f baseline_ratio=%.4f weft_vs_baseline=%.4f weft_ms=%.2f baseline_ms=%.2f\n",
            spec.name, static_cast<long long>(batch), mode, mib(w.arena_bytes), mib(b.arena_bytes),
            mib(w.lower_bound), mib(w.no_reuse), w.ratio(), b.ratio(),
            b.arena_bytes ? static_cast<double>(w.arena_bytes) / static_cast<double>(b.arena_bytes)
                          : 1.0,
            weft_ms, base_ms);
        std::fflush(stdout);
        if (w.ratio() > max_ratio) {
          max_ratio = w.ratio();
          worst = std::string(spec.name) + " batch " + std::to_string(batch) + " " + mode;
        }
        max_baseline = std::max(max_baseline, b.ratio());
        sum_log_ratio += std::log(w.ratio());
        sum_log_baseline += std::log(b.ratio());
        ++cases;
      }
    }
  }
  if (cases == 0) {
    std::fprintf(stderr, "planner_bench: no model matched '%s'\n", opt.model.c_str());
    return 1;
  }
  std::printf("# worst weft case: %s\n", worst.c_str());
  std::printf(
      "compare planner_summary cases=%d max_ratio=%.4f geomean_ratio=%.4f max_baseline_ratio=%.4f "
      "geomean_baseline_ratio=%.4f\n",
      cases, max_ratio, std::exp(sum_log_ratio / cases), max_baseline,
      std::exp(sum_log_baseline / cases));
  return 0;
}

}  // namespace
}  // namespace weft::bench

int main(int argc, char** argv) {
  weft::bench::Options opt;
  CLI::App app{"weft planner benchmark: static memory plans vs MXNet-style block sharing"};
  app.add_option("models_dir", opt.models_dir,
                 "folder of the model files (default: $WEFT_MODELS_DIR, ../shared/models)");
  app.add_flag("--quick", opt.quick, "one timing repetition per plan");
  app.add_option("--reps", opt.reps, "timing repetitions per plan; the median is reported")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--model", opt.model, "only this model (short name, e.g. resnet50-v2)");
  CLI11_PARSE(app, argc, argv);
  try {
    return weft::bench::run(opt);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "planner_bench: error: %s\n", e.what());
    return 1;
  }
}
