// weft_memory_bench: the memory benchmark. The allocator hot path against glibc malloc and
// oneTBB's scalable_malloc, and fragmentation of the pool's strategies on real models' traces.
//
//   weft_memory_bench [--quick] [--hot-path] [--fragmentation TRACE...] [--variants]
//
// With neither --hot-path nor --fragmentation it runs the hot path. Traces come from
// bench/memory/alloc_trace.py; bench/memory/run_memory.sh runs the whole suite.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bench_util.h"
#include "fragmentation.h"
#include "hot_path.h"

int main(int argc, char** argv) {
  CLI::App app{"weft memory benchmark: allocator hot path and fragmentation"};
  bool quick = false;
  bool hot_path = false;
  bool variants = false;
  std::vector<std::string> traces;
  std::vector<std::string> sizes;
  app.add_flag("--quick", quick, "shorter hot-path loops (a smoke run)");
  app.add_flag("--hot-path", hot_path, "run the alloc+free hot path (the default)");
  app.add_option("--fragmentation", traces, "replay these allocation traces")->expected(1, -1);
  app.add_flag("--variants", variants,
               "with --fragmentation: also replay through best-fit segment-policy variants");
  app.add_option("--sizes", sizes, "hot path sizes: 64B 4KiB 1MiB 64MiB mix (default: all)")
      ->expected(1, -1);
  CLI11_PARSE(app, argc, argv);
  if (traces.empty()) hot_path = true;

  try {
    std::printf("# weft memory benchmark  %s  %s  load=%s\n", weft::bench::utc_now().c_str(),
                weft::bench::describe_machine().c_str(), weft::bench::load_average().c_str());
    if (hot_path) {
      weft::bench::HotPathOptions options = weft::bench::default_hot_path_options(quick);
      if (!sizes.empty()) {
        std::vector<size_t> chosen;
        for (size_t bytes : options.sizes) {
          for (const std::string& s : sizes) {
            if (s == weft::bench::size_label(bytes)) chosen.push_back(bytes);
          }
        }
        if (chosen.empty()) {
          std::fprintf(stderr, "--sizes: none of the given sizes is known\n");
          return 2;
        }
        options.sizes = chosen;
      }
      weft::bench::run_hot_path(options);
    }
    if (!traces.empty()) {
      weft::bench::Interference interference;
      weft::bench::run_fragmentation(traces, variants);
      std::printf("# interference during the fragmentation replay: %s\n",
                  interference.describe().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft_memory_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
