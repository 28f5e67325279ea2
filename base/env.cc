// Reads the WEFT_* environment variables: the only file of weft that calls getenv.
#include "base/env.h"

#include <cstdlib>

#include "base/error.h"

namespace weft {

namespace {
std::optional<std::string> get(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
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
  env.profile_path = get("WEFT_PROFILE");
  return env;
}

}  // namespace weft
