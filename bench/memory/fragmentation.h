// Fragmentation: replays allocation traces of real models' forward passes (written by
// alloc_trace.py) through PooledAllocator and compares the memory it reserves with the true peak
// of live bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::bench {

/// One event of a trace: allocate `bytes` as `id`, or free `id`.
struct TraceEvent {
  uint32_t id = 0;
  bool allocate = false;
  uint64_t bytes = 0;  ///< allocations only
};

/// An allocation trace: `a <id> <bytes>` / `f <id>` lines; `#` lines are comments, of which
/// `# model=<name> batch=<n>` names the trace.
struct Trace {
  std::string path;
  std::string model;  ///< from the header, else the file name
  int batch = 0;      ///< from the header, else 0
  std::vector<TraceEvent> events;
  uint32_t max_id = 0;
};

/// Reads and checks a trace (ids allocated once while live, freed only while live, every id
/// freed by the end). Throws weft::ValueError naming the file and line.
Trace load_trace(const std::string& path);

/// The largest sum of live requested bytes over the trace, computed from the events alone.
uint64_t peak_live_bytes(const Trace& trace);

/// Replays every trace through a fresh PooledAllocator per strategy and prints
/// `frag <model> b<N> strategy=<s> peak_live=<bytes> reserved=<bytes> ratio=<r>`, then one
/// `summary` line per strategy (geometric mean and maximum of the ratios). With `variants`, also
/// replays through the best-fit segment-policy variants of segment_model.h. Call from one thread.
void run_fragmentation(const std::vector<std::string>& paths, bool variants);

}  // namespace weft::bench
