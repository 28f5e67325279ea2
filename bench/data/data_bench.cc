// Input-pipeline benchmark (the "infinitely fast model"): weft::data against PyTorch's DataLoader
// (bench/data/torch_loader.py) and, where installed, tf.data, on the same synthetic images as
// JPEG files and as memory-mapped .npy shards. Each side runs in its own process so that its
// peak memory is its own; this driver generates the data, runs the sides one after the other
// and prints the table and the compare lines (ratio = torch / weft samples per second).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/data/child_process.h"
#include "bench/data/synthetic.h"
#include "bench/data/weft_loader.h"

namespace {

namespace bd = weft::bench::data;

struct Options {
  bool quick = false;
  int64_t images = 0;  // 0: 2048, or 512 with --quick
  std::string dir = "/tmp/weft_data_bench";
  std::string workloads = "jpeg,npy";
  std::string python = "/usr/bin/python3";
  std::string tf_python;
  std::string tf_missing = "no interpreter given (--tf-python)";
  std::string script_dir = WEFT_DATA_BENCH_DIR;
  double seconds = 0;  // 0: 5, or 1 with --quick
  int min_epochs = 0;  // 0: 2, or 1 with --quick
  int threads = 0;     // 0: the core count
  uint64_t seed = 42;
  bool breakdown = true;
  bool overlap = true;
  std::string worker;  // internal: run one weft side ("jpeg", "npy", "breakdown") and exit
  double consumer_ms = 0;
};

bd::LoaderConfig loader_config(const Options& o) {
  bd::LoaderConfig c;
  c.dir = o.dir;
  c.images = o.images;
  c.seed = o.seed;
  c.threads = o.threads;
  c.min_seconds = o.seconds;
  c.min_epochs = o.min_epochs;
  c.consumer_ms = o.consumer_ms;
  return c;
}

// The command line of a weft side in a child process.
std::vector<std::string> weft_command(const Options& o, const std::string& worker,
                                      double consumer_ms = 0) {
  std::vector<std::string> c = {bd::self_path(), "--worker", worker};
  c.insert(c.end(), {"--dir", o.dir, "--images", std::to_string(o.images)});
  c.insert(c.end(), {"--seed", std::to_string(o.seed), "--threads", std::to_string(o.threads)});
  c.insert(c.end(), {"--seconds", std::to_string(o.seconds)});
  c.insert(c.end(), {"--min-epochs", std::to_string(o.min_epochs)});
  c.insert(c.end(), {"--consumer-ms", std::to_string(consumer_ms)});
  return c;
}

// The command line of a Python peer (`script` in o.script_dir) over the files of `files`.
std::vector<std::string> python_command(const Options& o, const bd::FileSet& files,
                                        const std::string& python, const std::string& script,
                                        const std::string& workload) {
  std::vector<std::string> c = {python, o.script_dir + "/" + script, "--workload", workload};
  c.insert(c.end(), {"--root", files.root, "--seed", std::to_string(o.seed)});
  c.insert(c.end(), {"--workers", std::to_string(o.threads)});
  c.insert(c.end(), {"--seconds", std::to_string(o.seconds)});
  c.insert(c.end(), {"--min-epochs", std::to_string(o.min_epochs)});
  return c;
}

struct Row {
  std::string workload, side;
  bd::ChildResult run;
  double rate() const {
    const double s = run.number("seconds");
    return s > 0 ? run.number("samples") / s : 0;
  }
  double rss_mib() const { return run.number("rss_kib") / 1024.0; }
};

bd::ChildResult run_side(const std::vector<std::string>& command, const std::string& label,
                         double timeout_s) {
  bd::ChildResult r = bd::run_child(command, timeout_s);
  if (!r.ok()) {
    std::printf("# %s FAILED (exit status %d%s)\n", label.c_str(), r.exit_status,
                r.timed_out ? ", timed out" : "");
  }
  return r;
}

std::string share(double s) {
  if (s < 0) return "?";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.0f%%", 100.0 * s);
  return buf;
}

void print_table(const std::vector<Row>& rows) {
  std::printf("#\n# %-5s %-7s %10s %7s %7s %6s %9s %9s %6s %6s\n", "data", "side", "samples/s",
              "epochs", "timed_s", "cpu%", "peakRSS", "PSS_end", "other", "steal");
  for (const auto& row : rows) {
    if (!row.run.ok()) {
      std::printf("# %-5s %-7s %10s\n", row.workload.c_str(), row.side.c_str(), "failed");
      continue;
    }
    const double cpu = row.run.wall_s > 0 ? 100.0 * row.run.cpu_s / row.run.wall_s : 0;
    std::printf("# %-5s %-7s %10.1f %7.0f %7.2f %6.0f %6.0fMiB %6.0fMiB %6s %6s\n",
                row.workload.c_str(), row.side.c_str(), row.rate(), row.run.number("epochs"),
                row.run.number("seconds"), cpu, row.rss_mib(),
                row.run.number("pss_end_kib") / 1024.0, share(row.run.other_share).c_str(),
                share(row.run.steal_share).c_str());
  }
  std::printf(
      "# cpu%%: the side's CPU time (its workers included) over its process's lifetime, "
      "100%% = one core. peakRSS: the peak resident set (VmHWM) of the process; torch: of the main "
      "process + each worker (pages shared between them, e.g. the mapped .npy, counted in each). "
      "PSS_end: proportional set size summed over the side's processes at the end of the run. "
      "other/steal: the machine's capacity used by other processes / stolen meanwhile.\n#\n");
}

const Row* find_row(const std::vector<Row>& rows, const std::string& workload,
                    const std::string& side) {
  for (const auto& row : rows) {
    if (row.workload == workload && row.side == side && row.run.ok()) return &row;
  }
  return nullptr;
}

void print_breakdown(const bd::ChildResult& weft, const bd::ChildResult& torch) {
  std::printf("# per-stage cost on one thread (us per sample, jpeg pipeline):\n");
  std::printf("# %-10s %9s %9s %7s\n", "stage", "weft", "torch", "w/t");
  double weft_total = 0, torch_total = 0;
  for (const auto& [name, us] : weft.stages) {
    double peer = -1;
    for (const auto& [peer_name, peer_us] : torch.stages) {
      if (peer_name == name || (name == "batch" && peer_name == "collate")) peer = peer_us;
    }
    weft_total += us;
    if (peer >= 0) torch_total += peer;
    std::printf("# %-10s %9.1f %9.1f %7.2f\n", name.c_str(), us, peer, peer > 0 ? us / peer : 0.0);
  }
  std::printf("# %-10s %9.1f %9.1f %7.2f\n", "total", weft_total, torch_total,
              torch_total > 0 ? weft_total / torch_total : 0.0);
}

int run_driver(const Options& o) {
  std::vector<std::string> workloads;
  std::stringstream list(o.workloads);
  for (std::string w; std::getline(list, w, ',');) {
    if (w != "jpeg" && w != "npy") {
      std::fprintf(stderr, "weft_data_bench: unknown workload '%s' (jpeg, npy)\n", w.c_str());
      return 2;
    }
    workloads.push_back(w);
  }
  std::printf("# weft data bench: %s %s load=%s images=%lld threads=%d quick=%d\n",
              weft::bench::utc_now().c_str(), weft::bench::describe_machine().c_str(),
              weft::bench::load_average().c_str(), static_cast<long long>(o.images), o.threads,
              o.quick ? 1 : 0);
  std::printf(
      "# pipeline: shuffle(%lld) -> [decode(3) ->] random_crop %lldx%lld -> resize %lldx%lld -> "
      "flip_lr(0.5) -> to_tensor -> normalize(ImageNet) -> batch %lld (drop_remainder) -> "
      "prefetch %d; the consumer only takes batches; >= %.0f s and >= %d epochs timed per side\n",
      static_cast<long long>(bd::kShuffleBuffer), static_cast<long long>(bd::kCropSide),
      static_cast<long long>(bd::kCropSide), static_cast<long long>(bd::kImageSide),
      static_cast<long long>(bd::kImageSide), static_cast<long long>(bd::kBatch), bd::kPrefetch,
      o.seconds, o.min_epochs);
  std::fflush(stdout);
  const auto gen_start = weft::bench::Clock::now();
  const bd::FileSet files = bd::generate_files(o.dir, o.images, o.seed, o.threads);
  std::printf(
      "# data: %s (%s in %.1f s): %lld JPEGs of %.1f KiB on average (quality 90) in %d "
      "classes, %d .npy shards of %lld x %lld x %lld x 3 uint8 + int32 labels\n",
      files.root.c_str(), files.reused ? "reused" : "generated",
      weft::bench::elapsed_ns(gen_start, weft::bench::Clock::now()) / 1e9,
      static_cast<long long>(o.images), files.mean_jpeg_bytes / 1024.0, bd::kNumClasses,
      bd::kNumShards, static_cast<long long>(o.images / bd::kNumShards),
      static_cast<long long>(bd::kImageSide), static_cast<long long>(bd::kImageSide));
  if (o.tf_python.empty()) std::printf("# tf.data: not available (%s)\n", o.tf_missing.c_str());
  std::fflush(stdout);

  const double timeout = o.quick ? 240 : 600;
  std::vector<Row> rows;
  for (const auto& w : workloads) {
    rows.push_back({w, "weft", run_side(weft_command(o, w), "weft " + w, timeout)});
    rows.push_back({w, "torch",
                    run_side(python_command(o, files, o.python, "torch_loader.py", w), "torch " + w,
                             timeout)});
    if (!o.tf_python.empty()) {
      rows.push_back({w, "tf.data",
                      run_side(python_command(o, files, o.tf_python, "tf_loader.py", w),
                               "tf.data " + w, timeout)});
    }
  }
  // Prefetch overlap: a consumer that sleeps 80% of weft's own batch period (a model running on
  // an accelerator) should barely slow the pipeline, and its waits should shrink accordingly.
  if (o.overlap) {
    if (const Row* found = find_row(rows, "jpeg", "weft")) {
      const Row unconstrained = *found;  // rows grows below
      const double period_ms = 1000.0 * static_cast<double>(bd::kBatch) / unconstrained.rate();
      rows.push_back({"jpeg", "weft+m",
                      run_side(weft_command(o, "jpeg", 0.8 * period_ms),
                               "weft jpeg with a sleeping consumer", timeout)});
      const Row& slow = rows.back();
      if (slow.run.ok()) {
        std::printf(
            "# prefetch overlap: with a consumer sleeping %.1f ms per batch (80%% of the "
            "unconstrained batch period; weft+m in the table) weft kept %.0f%% of its "
            "unconstrained throughput; the consumer waited %.2f ms per batch (unconstrained: "
            "%.2f)\n",
            0.8 * period_ms, 100.0 * slow.rate() / unconstrained.rate(),
            slow.run.number("wait_ms") / std::max(1.0, slow.run.number("batches")),
            unconstrained.run.number("wait_ms") /
                std::max(1.0, unconstrained.run.number("batches")));
      }
    }
  }
  print_table(rows);
  if (o.breakdown) {
    const int samples = o.quick ? 64 : 256;
    auto weft_cmd = weft_command(o, "breakdown");
    weft_cmd.push_back("--breakdown-samples");
    weft_cmd.push_back(std::to_string(samples));
    auto torch_cmd = python_command(o, files, o.python, "torch_loader.py", "breakdown");
    torch_cmd.push_back("--breakdown-samples");
    torch_cmd.push_back(std::to_string(samples));
    const auto weft = run_side(weft_cmd, "weft breakdown", timeout);
    const auto torch = run_side(torch_cmd, "torch breakdown", timeout);
    if (weft.ok() && torch.ok()) print_breakdown(weft, torch);
  }

  int status = 0;
  for (const auto& w : workloads) {
    const Row* weft = find_row(rows, w, "weft");
    const Row* torch = find_row(rows, w, "torch");
    const Row* tf = find_row(rows, w, "tf.data");
    if (weft == nullptr || torch == nullptr) {
      status = 1;
      continue;
    }
    std::printf(
        "# data_%s peak RSS: weft=%.0f MiB torch=%.0f MiB (main %.0f + workers %.0f)%s\n",
        w.c_str(), weft->rss_mib(), torch->rss_mib(), torch->run.number("rss_main_kib") / 1024.0,
        torch->run.number("rss_workers_kib") / 1024.0,
        tf ? (" tf.data=" + std::to_string(static_cast<int>(tf->rss_mib())) + " MiB").c_str() : "");
    std::printf("compare data_%s weft=%.1f torch=%.1f ratio=%.3f  # samples/s, goal ratio <= 0.8\n",
                w.c_str(), weft->rate(), torch->rate(), torch->rate() / weft->rate());
    if (tf != nullptr) {
      std::printf("compare data_%s_vs_tfdata weft=%.1f tfdata=%.1f ratio=%.3f  # samples/s\n",
                  w.c_str(), weft->rate(), tf->rate(), tf->rate() / weft->rate());
    }
  }
  std::fflush(stdout);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int breakdown_samples = 256;
  CLI::App app{"weft input pipelines against PyTorch's DataLoader (and tf.data)"};
  app.add_flag("--quick", o.quick, "512 images, >= 1 s and 1 epoch per side (CI)");
  app.add_option("--images", o.images, "images in the data set (multiple of 4; default 2048)");
  app.add_option("--dir", o.dir, "where the data is written (reused when it matches)");
  app.add_option("--workloads", o.workloads, "comma-separated: jpeg,npy");
  app.add_option("--python", o.python, "interpreter with torch, PIL and numpy");
  app.add_option("--tf-python", o.tf_python, "interpreter with tensorflow (empty: no tf.data)");
  app.add_option("--tf-missing", o.tf_missing, "why there is no tf.data interpreter");
  app.add_option("--script-dir", o.script_dir, "folder of torch_loader.py and tf_loader.py");
  app.add_option("--seconds", o.seconds, "minimum timed seconds per side (default 5; quick 1)");
  app.add_option("--min-epochs", o.min_epochs, "minimum timed epochs per side (default 2)");
  app.add_option("--threads", o.threads, "parallelism of every side (default: the core count)");
  app.add_option("--seed", o.seed, "data, shuffle and augmentation seed");
  app.add_flag("!--no-breakdown", o.breakdown, "skip the per-stage breakdown");
  app.add_flag("!--no-overlap", o.overlap, "skip the run with a sleeping consumer");
  app.add_option("--worker", o.worker)->group("");
  app.add_option("--consumer-ms", o.consumer_ms)->group("");
  app.add_option("--breakdown-samples", breakdown_samples)->group("");
  CLI11_PARSE(app, argc, argv);
  if (o.images == 0) o.images = o.quick ? 512 : 2048;
  if (o.seconds == 0) o.seconds = o.quick ? 1 : 5;
  if (o.min_epochs == 0) o.min_epochs = o.quick ? 1 : 2;
  if (o.threads == 0)
    o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  try {
    if (o.worker == "breakdown") return bd::run_weft_breakdown(loader_config(o), breakdown_samples);
    if (!o.worker.empty()) return bd::run_weft_loader(o.worker, loader_config(o));
    return run_driver(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft_data_bench: %s\n", e.what());
    return 1;
  }
}
