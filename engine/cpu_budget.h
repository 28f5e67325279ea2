// The CPU budget of the process: how many cores weft's threads may keep busy, and how many of
// them other processes leave free right now (Note [Thread budget], Note [Contention estimate]).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

/// Cores this process may run on: the CPUs of its affinity mask (sched_getaffinity), capped by a
/// cgroup CPU quota (cgroup v2 cpu.max or v1 cpu.cfs_quota_us, rounded up). At least 1. Read
/// once and cached. Thread-safe.
int process_cpu_cores();

/// The thread budget for `requested` threads: `requested` when positive, else
/// process_cpu_cores(). Thread-safe.
int resolve_thread_budget(int requested);

/// Of `budget` cores, how many other processes leave free now: `budget` minus the cores they
/// were seen using lately, rounded, in [1, budget] (Note [Contention estimate]). Usually one
/// atomic load and a coarse clock read; about every 50 ms one caller reads /proc/stat (about
/// 15 µs). Where /proc/stat cannot be read it returns `budget`. Thread-safe.
int uncontended_cores(int budget);

/// Whether other processes use some of this process's cores now (uncontended_cores(budget) <
/// budget). Thread-safe; same cost.
inline bool cores_contended(int budget) { return uncontended_cores(budget) < budget; }

namespace detail {

/// One reading of the counters the contention estimate needs.
struct CpuSample {
  int64_t wall_ns = 0;  ///< monotonic clock
  int64_t idle_ns = 0;  ///< idle time (idle + iowait) of the process's CPUs, summed
  int64_t self_ns = 0;  ///< CPU time of this process
  int cpus = 1;         ///< how many CPUs idle_ns sums over
};

/// Idle time of some CPUs in /proc/stat, in clock ticks.
struct IdleTicks {
  int64_t ticks = 0;  ///< idle + iowait, summed
  int cpus = 0;       ///< CPUs summed
};

/// Parses /proc/stat's text: the idle time (idle + iowait) summed over the CPUs in `cpus` (all
/// CPUs when empty), and how many of them it found. nullopt when no line matched.
std::optional<IdleTicks> parse_proc_stat_idle(std::string_view text, const std::vector<int>& cpus);

/// Parses a cgroup v2 cpu.max ("max 100000" or "QUOTA PERIOD") into cores, rounded up;
/// nullopt for no limit or text it does not understand.
std::optional<int> parse_cgroup_cpu_max(std::string_view text);

/// Note [Contention estimate]: turns successive CpuSamples into the cores other processes use,
/// smoothed, and the cores left to this process with hysteresis. Not thread-safe (the monitor
/// updates it under a lock).
class ContentionEstimator {
 public:
  /// Folds in a new sample; the first one only sets the baseline. Samples closer than
  /// kMinWindowNs to the previous one are ignored (too few clock ticks to mean anything).
  void add(const CpuSample& sample);
  /// Cores other processes used, smoothed (0 before two samples).
  double others() const { return others_; }
  /// Cores of `budget` left to this process, in [1, budget]: `budget` minus the cores others
  /// use, where a fraction above 0.25 counts as a whole core; the answer rises again only when
  /// that fraction falls below 0.15 (hysteresis).
  int free_cores(int budget);

  static constexpr int64_t kMinWindowNs = 40'000'000;  // 4 clock ticks at 100 Hz
  static constexpr double kSmoothing = 0.5;            // weight of the newest window

 private:
  std::optional<CpuSample> last_;
  double others_ = 0;
  bool estimated_ = false;
  int free_ = -1;  // last answer; -1 before the first
};

/// The process-wide sampler behind uncontended_cores().
class CpuLoadMonitor {
 public:
  static CpuLoadMonitor& global();
  int uncontended_cores(int budget);
  /// The latest smoothed estimate of the cores other processes use (diagnostics).
  double others() const { return others_.load(std::memory_order_relaxed); }

  /// Resample interval (coarse clock).
  static constexpr int64_t kIntervalNs = 50'000'000;

 private:
  CpuLoadMonitor();
  void sample(int64_t now_ns);

  std::vector<int> cpus_;  // the affinity mask's CPUs (empty: all)
  std::string text_;       // /proc/stat's text (sample(), under mutex_)
  int64_t tick_ns_ = 10'000'000;
  bool usable_ = true;  // false once /proc/stat could not be read
  std::atomic<int64_t> next_sample_ns_{0};
  std::atomic<double> others_{0};
  std::mutex mutex_;  // guards estimator_, sample()
  ContentionEstimator estimator_;
  std::atomic<int> cached_budget_{0};
  std::atomic<int> cached_free_{0};
};

}  // namespace detail
}  // namespace weft
