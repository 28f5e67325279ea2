// The one place weft reads environment variables; everything else takes explicit config structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace weft {

/// Values of the WEFT_* environment variables, read once per call of read_environment().
/// Absent variables are empty optionals. Thread-safe (reads the process environment only).
struct Environment {
  std::optional<std::string> engine;  ///< WEFT_ENGINE: "threaded" or "sync"
  std::optional<int> cpu_workers;     ///< WEFT_CPU_WORKERS: CPU worker threads (>= 1)
  std::optional<int> gpu_streams;     ///< WEFT_GPU_STREAMS: compute streams per GPU (1..64)
  /// WEFT_NUM_THREADS: the thread budget, the most threads weft keeps busy (>= 1)
  std::optional<int> num_threads;
  std::optional<std::string> profile_path;  ///< WEFT_PROFILE: write a Chrome trace here at exit
  /// WEFT_PROFILE_MAX_EVENTS: the most trace events the profiler keeps (>= 1)
  std::optional<int64_t> profile_max_events;
  /// WEFT_DNNL_PRIMITIVE_CACHE: oneDNN primitives cached per thread (>= 1)
  std::optional<int64_t> dnnl_primitive_cache_entries;
  /// WEFT_DNNL_WEIGHT_CACHE_MB: budget of the oneDNN reordered-weight cache in MiB (>= 0)
  std::optional<int64_t> dnnl_weight_cache_mb;
  /// WEFT_CUDNN_ALGO: how cuDNN convolution algorithms are chosen, "heuristic" or "measure"
  std::optional<std::string> cudnn_algo;
  /// WEFT_DIST_TIMEOUT: seconds before a silent rank or an unmatched collective fails (> 0)
  std::optional<double> dist_timeout_s;
  /// WEFT_DIST_FUSION_BYTES: the tensor fusion buffer's size in bytes (>= 0; 0 turns fusion off)
  std::optional<int64_t> dist_fusion_bytes;
  /// WEFT_DIST_CYCLE_MS: the longest small allreduces wait to be fused, in milliseconds (> 0)
  std::optional<double> dist_cycle_ms;
  /// WEFT_RANK / WEFT_WORLD_SIZE: the rank and group size a launcher promises (checked by
  /// dist::init against the transport's)
  std::optional<int> rank;
  std::optional<int> world_size;
  /// The name of the first launcher variable MPI reads that is set (OMPI_COMM_WORLD_SIZE from
  /// Open MPI's mpirun, PMIX_RANK, PMI_RANK), when the process was started by such a launcher.
  std::optional<std::string> mpi_launcher;
};

/// Reads and validates the WEFT_* variables. Throws ValueError naming the variable and its value
/// when one is malformed (e.g. WEFT_CPU_WORKERS=abc).
Environment read_environment();

}  // namespace weft
