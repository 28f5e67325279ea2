// The one place weft reads environment variables; everything else takes explicit config structs.
#pragma once

#include <optional>
#include <string>

namespace weft {

/// Values of the WEFT_* environment variables, read once per call of read_environment().
/// Absent variables are empty optionals. Thread-safe (reads the process environment only).
struct Environment {
  std::optional<std::string> engine;       ///< WEFT_ENGINE: "threaded" or "sync"
  std::optional<int> cpu_workers;          ///< WEFT_CPU_WORKERS: CPU worker threads (>= 1)
  std::optional<std::string> profile_path; ///< WEFT_PROFILE: write a Chrome trace here at exit
};

/// Reads and validates the WEFT_* variables. Throws ValueError naming the variable and its value
/// when one is malformed (e.g. WEFT_CPU_WORKERS=abc).
Environment read_environment();

}  // namespace weft
