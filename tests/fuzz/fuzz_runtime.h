// Shared set-up of the fuzz targets that create NDArrays: one synchronous engine (no worker
// threads, so a finding's stack is the input's), and the byte budget every target stays within
// so that a run never allocates gigabytes (libFuzzer's -malloc_limit_mb would report it).
#pragma once

#include <cstddef>

#include "ndarray/runtime.h"

namespace weft::fuzz {

/// The most bytes of arrays one input may make a target allocate. Inputs that would allocate
/// more (legitimately: within weft's limits and the device's memory) are skipped, not run.
inline constexpr size_t kMaxAllocatedBytes = size_t{64} << 20;

/// Replaces the runtime with a synchronous engine and one thread per kernel. Call once, from
/// LLVMFuzzerInitialize.
inline void use_sync_runtime() {
  RuntimeConfig config;
  config.engine.kind = EngineKind::kSync;
  config.engine.cpu_workers = 1;
  config.engine.profile_path.clear();
  config.intra_op_policy = IntraOpPolicy::kFixed;
  config.intra_op_threads = 1;
  Runtime::reset(config);
}

}  // namespace weft::fuzz
