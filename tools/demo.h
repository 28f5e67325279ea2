// `weft demo`: the engine's end-to-end demonstration.
#pragma once

#include <cstdint>
#include <string>

namespace weft::tools {

struct DemoOptions {
  int size = 512;
  int tiles = 8;
  int workers = 0;  ///< 0: from the environment / all cores
  int repeats = 3;
  uint32_t seed = 1;
  std::string profile_path;
};

/// Runs the demo; returns the process exit code.
int run_demo(const DemoOptions& options);

}  // namespace weft::tools
