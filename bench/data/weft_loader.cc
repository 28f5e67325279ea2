// The weft side of the input-pipeline benchmark (see weft_loader.h).
#include "bench/data/weft_loader.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bench/data/child_process.h"
#include "bench/data/synthetic.h"
#include "data/dataset.h"
#include "data/image.h"
#include "data/sources.h"

namespace weft::bench::data {
namespace {

namespace wd = weft::data;
using Clock = std::chrono::steady_clock;

const std::vector<float> kMean = {0.485f, 0.456f, 0.406f};
const std::vector<float> kStd = {0.229f, 0.224f, 0.225f};

double since_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The augmentations after decoding, in pipeline order, with the names the breakdown prints.
std::vector<std::pair<std::string, wd::MapFn>> augmentations() {
  return {{"crop", wd::random_crop(kCropSide, kCropSide)},
          {"resize", wd::resize(kImageSide, kImageSide)},
          {"flip", wd::random_flip_left_right(0.5)},
          {"to_tensor", wd::to_tensor()},
          {"normalize", wd::normalize(kMean, kStd)}};
}

wd::Dataset make_pipeline(const std::string& workload, const FileSet& files,
                          const LoaderConfig& config) {
  std::vector<wd::MapFn> stages;
  if (workload == "jpeg") stages.push_back(wd::decode_image(3));
  for (auto& [name, fn] : augmentations()) stages.push_back(std::move(fn));
  wd::MapOptions map_options;
  map_options.num_parallel = config.threads;
  map_options.seed = wd::mix_seed(config.seed, 1);
  map_options.name = workload == "jpeg" ? "decode+augment" : "augment";
  wd::Dataset source =
      workload == "jpeg" ? wd::image_folder(files.jpeg_root) : wd::npy_files(files.npy_shards);
  return source.shuffle(kShuffleBuffer, config.seed)
      .map(wd::compose(std::move(stages)), map_options)
      .batch(kBatch, /*drop_remainder=*/true, config.threads)
      .prefetch(kPrefetch);
}

// Throws std::runtime_error unless `batch` is (float32 [64, 3, 224, 224] normalised,
// int32 [64] labels of several classes).
void check_batch(const wd::Element& batch) {
  auto fail = [](const std::string& what) { throw std::runtime_error("bad batch: " + what); };
  if (batch.arrays.size() != 2) fail(std::to_string(batch.arrays.size()) + " arrays, expected 2");
  const NDArray& x = batch.arrays[0];
  const NDArray& y = batch.arrays[1];
  if (x.dtype() != DType::kFloat32 || x.shape() != Shape{kBatch, 3, kImageSide, kImageSide}) {
    fail("images are " + std::string(dtype_name(x.dtype())) + " " + x.shape().to_string());
  }
  if (y.dtype() != DType::kInt32 || y.shape() != Shape{kBatch}) {
    fail("labels are " + std::string(dtype_name(y.dtype())) + " " + y.shape().to_string());
  }
  const float low = (0.0f - 0.485f) / 0.229f - 1e-3f, high = (1.0f - 0.406f) / 0.225f + 1e-3f;
  double sum = 0;
  for (float v : x.to_vector<float>()) {
    if (!(v >= low && v <= high))
      fail("value " + std::to_string(v) + " outside the normalised range");
    sum += v;
  }
  const double mean = sum / static_cast<double>(x.size());
  if (std::abs(mean) > 1.5) fail("mean " + std::to_string(mean) + " is not normalised");
  std::set<int32_t> classes;
  for (int32_t label : y.to_vector<int32_t>()) {
    if (label < 0 || label >= kNumClasses) fail("label " + std::to_string(label));
    classes.insert(label);
  }
  if (classes.size() < 3) fail("only " + std::to_string(classes.size()) + " classes: not shuffled");
}

struct Pass {
  int64_t samples = 0;
  int64_t batches = 0;
  double first_batch_ms = 0;
  wd::IteratorStats stats;
};

// One iterator over `dataset`: up to `max_batches` batches (-1: to the end).
Pass run_pass(const wd::Dataset& dataset, int64_t max_batches, const LoaderConfig& config,
              bool check_first) {
  Pass pass;
  const auto start = Clock::now();
  auto it = dataset.iterate();
  while (max_batches < 0 || pass.batches < max_batches) {
    auto batch = it->next();
    if (!batch) break;
    for (const auto& array : batch->arrays) array.wait_to_read();
    if (pass.batches == 0) {
      pass.first_batch_ms = since_ms(start);
      if (check_first) check_batch(*batch);
    }
    pass.samples += batch->arrays[0].shape()[0];
    ++pass.batches;
    if (config.consumer_ms > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(config.consumer_ms));
    }
  }
  pass.stats = it->stats();
  return pass;
}

// Note [Peak RSS of a spawned process]: ru_maxrss survives exec (the kernel folds the old
// address space's high-water mark into it), so a process spawned by a large one starts with its
// parent's peak. VmHWM belongs to the address space the process runs in now.
long status_kib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stol(line.substr(key.size() + 1));
  }
  return -1;
}

long peak_rss_kib() {
  if (const long hwm = status_kib("VmHWM"); hwm >= 0) return hwm;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux; an upper bound (see above)
}

}  // namespace

int run_weft_loader(const std::string& workload, const LoaderConfig& config) {
  try {
    const FileSet files = generate_files(config.dir, config.images, config.seed, config.threads);
    const wd::Dataset dataset = make_pipeline(workload, files, config);
    std::printf("# weft %s pipeline: %s; peak RSS before iterating: %.0f MiB\n", workload.c_str(),
                dataset.describe().c_str(), static_cast<double>(peak_rss_kib()) / 1024.0);
    std::fflush(stdout);
    const Pass warmup = run_pass(dataset, config.warmup_batches, config, /*check_first=*/true);

    int64_t samples = 0, epochs = 0, wait_ns = 0, batches = 0;
    double first_batch_ms = 0;
    const auto start = Clock::now();
    double elapsed_ms = 0;
    while (epochs < config.min_epochs || elapsed_ms < config.min_seconds * 1000) {
      const Pass pass = run_pass(dataset, -1, config, /*check_first=*/false);
      if (pass.batches == 0) throw std::runtime_error("an epoch produced no batch");
      samples += pass.samples;
      batches += pass.batches;
      wait_ns += pass.stats.consumer_wait_ns;
      first_batch_ms += pass.first_batch_ms;
      ++epochs;
      elapsed_ms = since_ms(start);
    }
    const double seconds = elapsed_ms / 1000.0;
    const double wait_ms = static_cast<double>(wait_ns) / 1e6;
    std::printf(
        "# weft %s: %lld batches in %.2f s; consumer waited %.1f ms in next() (%.0f%% of the "
        "timed wall, %.2f ms per batch), sleeping %.2f ms per batch; first batch of an epoch "
        "after %.1f ms on average (warm-up's: %.1f ms); at the end RssAnon %.0f MiB, RssFile "
        "%.0f MiB (file pages: libraries, mapped .npy shards)\n",
        workload.c_str(), static_cast<long long>(batches), seconds, wait_ms,
        100.0 * wait_ms / elapsed_ms, wait_ms / static_cast<double>(batches), config.consumer_ms,
        first_batch_ms / static_cast<double>(epochs), warmup.first_batch_ms,
        static_cast<double>(status_kib("RssAnon")) / 1024.0,
        static_cast<double>(status_kib("RssFile")) / 1024.0);
    std::printf(
        "result side=weft workload=%s samples=%lld seconds=%.4f epochs=%lld batches=%lld "
        "rss_kib=%ld pss_end_kib=%ld wait_ms=%.2f consumer_ms=%.3f startup_ms=%.1f\n",
        workload.c_str(), static_cast<long long>(samples), seconds, static_cast<long long>(epochs),
        static_cast<long long>(batches), peak_rss_kib(), pss_kib(), wait_ms, config.consumer_ms,
        warmup.first_batch_ms);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft %s: %s\n", workload.c_str(), e.what());
    return 1;
  }
}

int run_weft_breakdown(const LoaderConfig& config, int samples) {
  try {
    const FileSet files = generate_files(config.dir, config.images, config.seed, config.threads);
    std::vector<std::pair<std::string, wd::MapFn>> stages = {{"decode", wd::decode_image(3)}};
    for (auto& stage : augmentations()) stages.push_back(std::move(stage));
    std::vector<double> stage_ns(stages.size(), 0.0);
    double read_ns = 0;
    std::vector<NDArray> last;
    // Two passes: the first warms caches and pools and is not counted.
    for (int round = 0; round < 2; ++round) {
      auto start = Clock::now();
      auto it = wd::image_folder(files.jpeg_root).take(samples).iterate();
      for (int64_t i = 0;; ++i) {
        auto element = it->next();
        if (!element) break;
        auto now = Clock::now();
        if (round == 1) read_ns += std::chrono::duration<double, std::nano>(now - start).count();
        wd::Rng rng(config.seed, static_cast<uint64_t>(i));
        std::vector<NDArray> arrays = std::move(element->arrays);
        for (size_t s = 0; s < stages.size(); ++s) {
          auto stage_start = Clock::now();
          arrays = stages[s].second(std::move(arrays), rng);
          if (round == 1) {
            stage_ns[s] +=
                std::chrono::duration<double, std::nano>(Clock::now() - stage_start).count();
          }
        }
        last = arrays;
        start = Clock::now();
      }
    }
    auto print = [](const std::string& name, double us) {
      std::printf("stage name=%s us=%.2f\n", name.c_str(), us);
    };
    print("read", read_ns / 1e3 / samples);
    for (size_t s = 0; s < stages.size(); ++s) print(stages[s].first, stage_ns[s] / 1e3 / samples);

    // Batching alone: the same transformed element stacked kBatch at a time on one worker.
    constexpr int64_t kBatches = 16;
    auto make_generator = [last]() -> wd::GeneratorFn {
      auto count = std::make_shared<int64_t>(0);
      return [last, count]() -> std::optional<std::vector<NDArray>> {
        if ((*count)++ >= kBatches * kBatch) return std::nullopt;
        return last;
      };
    };
    const auto batched = wd::from_generator(make_generator, "same element").batch(kBatch, true, 1);
    double batch_ns = 0;
    for (int round = 0; round < 2; ++round) {
      const auto start = Clock::now();
      auto it = batched.iterate();
      while (auto batch = it->next()) {
        for (const auto& array : batch->arrays) array.wait_to_read();
      }
      batch_ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    }
    print("batch", batch_ns / 1e3 / static_cast<double>(kBatches * kBatch));
    std::printf("result side=weft workload=breakdown samples=%d\n", samples);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft breakdown: %s\n", e.what());
    return 1;
  }
}

}  // namespace weft::bench::data
