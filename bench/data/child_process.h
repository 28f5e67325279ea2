// Running one side of the input-pipeline benchmark as a child process: each side gets a fresh
// process so that its peak memory is its own, and the driver watches the machine meanwhile.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace weft::bench::data {

/// What a child reported and what the driver saw of it.
struct ChildResult {
  int exit_status = -1;  ///< exit code; 128 + signal when killed; -1 when it could not start
  bool timed_out = false;
  /// The key=value pairs of the child's last stdout line that starts with "result ".
  std::map<std::string, std::string> result;
  /// The child's "stage name=<stage> us=<microseconds>" lines, in order.
  std::vector<std::pair<std::string, double>> stages;
  double wall_s = 0;
  double cpu_s = 0;  ///< user + system time of the child and its reaped descendants
  /// Shares (0..1) of the machine's capacity, over the child's lifetime, used by processes other
  /// than the child (and its descendants) and stolen by the hypervisor; negative when unknown.
  double other_share = -1;
  double steal_share = -1;

  bool ok() const { return exit_status == 0 && !timed_out && !result.empty(); }
  /// result[key] as a number, or `fallback` when absent.
  double number(const std::string& key, double fallback = 0) const;
};

/// Runs argv[0] (searched on PATH) with `argv`, in its own process group, echoing the stdout
/// lines that start with '#' as they come (stderr passes through) and collecting the rest.
/// After `timeout_s` seconds the whole group is killed. Call from one thread.
ChildResult run_child(const std::vector<std::string>& argv, double timeout_s);

/// This program's own path (from /proc/self/exe).
std::string self_path();

/// The current process's proportional set size from /proc/self/smaps_rollup, in KiB; -1 when
/// unknown.
long pss_kib();

}  // namespace weft::bench::data
