// The weft side of the input-pipeline benchmark: the augmentation pipeline over the image folder
// or the .npy shards, drained by a consumer that only takes batches, and a per-stage breakdown.
#pragma once

#include <cstdint>
#include <string>

namespace weft::bench::data {

inline constexpr int64_t kBatch = 64;
inline constexpr int64_t kShuffleBuffer = 1024;
inline constexpr int64_t kCropSide = 200;
inline constexpr int kPrefetch = 2;

/// How one side runs (the Python peers take the same values on their command lines).
struct LoaderConfig {
  std::string dir;     ///< where generate_files() wrote the data
  int64_t images = 0;  ///< the data set's size
  uint64_t seed = 0;   ///< shuffle and augmentation seeds derive from it
  int threads = 1;     ///< map and batch parallelism (the core count)
  double min_seconds = 5;
  int min_epochs = 2;
  int warmup_batches = 3;
  /// Milliseconds the consumer sleeps per batch (a model on an accelerator: the CPU stays free);
  /// 0: the "infinitely fast model".
  double consumer_ms = 0;
};

/// Runs the pipeline of `workload` ("jpeg" or "npy"): a warm-up of config.warmup_batches batches
/// (the first one checked for shapes, dtypes and value ranges) and then whole epochs, each a new
/// iterator, until min_seconds and min_epochs are both reached. Prints "# ..." lines and one
/// "result side=weft ..." line on stdout; returns the process exit status (1 when a batch is
/// wrong). Call from one thread.
int run_weft_loader(const std::string& workload, const LoaderConfig& config);

/// Times each stage of the jpeg pipeline on the calling thread over `samples` images (read,
/// decode, crop, resize, flip, to_tensor, normalize, then batching): prints one
/// "stage name=<stage> us=<microseconds per sample>" line each. Returns the exit status.
int run_weft_breakdown(const LoaderConfig& config, int samples);

}  // namespace weft::bench::data
