// Reads the WEFT_* environment variables: the only file of weft that calls getenv.
#include "base/env.h"

#include <cerrno>
#include <cstdlib>

#include "base/error.h"

namespace weft {

namespace {
std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

// An integer variable in [low, high], or nullopt when unset.
std::optional<int64_t> get_integer(const char* name, int64_t low, int64_t high) {
  auto text = get(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(text->c_str(), &end, 10);
  WEFT_CHECK(end != nullptr && *end == '\0' && errno == 0 && n >= low && n <= high)
      << name << " must be an integer in [" << low << ", " << high << "], got '" << *text << "'";
  return static_cast<int64_t>(n);
}

// A positive real variable, or nullopt when unset.
std::optional<double> get_positive(const char* name) {
  auto text = get(name);
  if (!text) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text->c_str(), &end);
  WEFT_CHECK(end != nullptr && *end == '\0' && errno == 0 && v > 0 && v < 1e9)
      << name << " must be a positive number, got '" << *text << "'";
  return v;
}
}  // namespace

Environment read_environment() {
  Environment env;
  env.engine = get("WEFT_ENGINE");
  if (env.engine) {
    WEFT_CHECK(*env.engine == "threaded" || *env.engine == "sync")
        << "WEFT_ENGINE must be 'threaded' or 'sync', got '" << *env.engine << "'";
  }
  if (auto workers = get("WEFT_CPU_WORKERS")) {
    char* end = nullptr;
    long n = std::strtol(workers->c_str(), &end, 10);
    WEFT_CHECK(end != nullptr && *end == '\0' && n >= 1 && n <= 4096)
        << "WEFT_CPU_WORKERS must be an integer in [1, 4096], got '" << *workers << "'";
    env.cpu_workers = static_cast<int>(n);
  }
  if (auto n = get_integer("WEFT_NUM_THREADS", 1, 4096)) env.num_threads = static_cast<int>(*n);
  if (auto n = get_integer("WEFT_GPU_STREAMS", 1, 64)) env.gpu_streams = static_cast<int>(*n);
  env.profile_path = get("WEFT_PROFILE");
  env.profile_max_events = get_integer("WEFT_PROFILE_MAX_EVENTS", 1, int64_t{1} << 40);
  env.dnnl_primitive_cache_entries = get_integer("WEFT_DNNL_PRIMITIVE_CACHE", 1, int64_t{1} << 20);
  env.dnnl_weight_cache_mb = get_integer("WEFT_DNNL_WEIGHT_CACHE_MB", 0, int64_t{1} << 30);
  env.cudnn_algo = get("WEFT_CUDNN_ALGO");
  if (env.cudnn_algo) {
    WEFT_CHECK(*env.cudnn_algo == "heuristic" || *env.cudnn_algo == "measure")
        << "WEFT_CUDNN_ALGO must be 'heuristic' or 'measure', got '" << *env.cudnn_algo << "'";
  }
  env.dist_timeout_s = get_positive("WEFT_DIST_TIMEOUT");
  env.dist_fusion_bytes = get_integer("WEFT_DIST_FUSION_BYTES", 0, int64_t{1} << 40);
  env.dist_cycle_ms = get_positive("WEFT_DIST_CYCLE_MS");
  if (auto n = get_integer("WEFT_RANK", 0, 1 << 24)) env.rank = static_cast<int>(*n);
  if (auto n = get_integer("WEFT_WORLD_SIZE", 1, 1 << 24)) env.world_size = static_cast<int>(*n);
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (get(v)) {
      env.mpi_launcher = v;
      break;
    }
  }
  return env;
}

}  // namespace weft
