// The engine benchmark's workloads: dependency shapes that run on weft's engine and on oneTBB's
// flow graph with the same bodies, each timed as build + run and verified afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace weft::bench {

/// The timed region of one run (Note [What is timed] in engine_workloads.cc), and the part of it
/// spent building: weft's new_var and push calls (workers run operations meanwhile), TBB's graph,
/// node and edge construction (nothing runs before the first try_put).
struct RunTime {
  double total_ns = 0;
  double build_ns = 0;
};

/// One dependency shape, runnable on weft and on TBB. Every run checks its result after the
/// timer and exits the process with status 1 on a mismatch (Note [Verification]). Not
/// thread-safe: call from one thread.
class Workload {
 public:
  virtual ~Workload() = default;
  /// The name in `compare` lines.
  virtual const char* name() const = 0;
  /// Operations (weft) = continue_nodes (TBB) per run; the divisor of ns per task.
  virtual int64_t tasks() const = 0;
  /// A line of facts about the generated workload worth printing, or empty.
  virtual std::string facts() const { return {}; }
  /// One run on `engine`, which must be idle and have no variables of this workload.
  virtual RunTime run_weft(Engine& engine) = 0;
  /// One run on a fresh TBB flow graph, under the caller's tbb::global_control.
  virtual RunTime run_tbb() = 0;
  /// Whether run_serial() is meaningful (a serial reference timing is part of the workload).
  virtual bool has_serial() const { return false; }
  /// The same bodies, in push order, on the calling thread; returns the ns.
  virtual double run_serial() { return 0; }
};

/// Problem sizes of one benchmark mode.
struct WorkloadSizes {
  int64_t chain;           ///< operations in the chain
  int64_t tree;            ///< operations in the binary tree (2^k - 1)
  int64_t embarrassing;    ///< independent operations
  int32_t wavefront_side;  ///< blocks per side of the wavefront grid
  int mxnet_ops;           ///< operations of the MXNet-style random workload
  int mxnet_vars;          ///< variables they use
};

/// The full sizes, and the reduced ones for --quick (the whole suite within a minute).
extern const WorkloadSizes kFullSizes;
extern const WorkloadSizes kQuickSizes;

/// Every workload name, in the order the benchmark runs them.
const std::vector<std::string>& workload_names();

/// Creates the workload called `name` (one of workload_names()); busy bodies spin
/// `spin_per_us` iterations per microsecond (calibrate_spin()). Throws std::invalid_argument
/// for an unknown name.
std::unique_ptr<Workload> make_workload(const std::string& name, const WorkloadSizes& sizes,
                                        uint64_t spin_per_us);

}  // namespace weft::bench
