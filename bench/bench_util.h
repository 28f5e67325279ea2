// Helpers shared by weft's benchmarks: timing, a calibrated busy loop, summaries of repeated
// measurements, the machine description, and a monitor of interference from other processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::bench {

using Clock = std::chrono::steady_clock;

/// Nanoseconds from `start` to `stop`.
double elapsed_ns(Clock::time_point start, Clock::time_point stop);

/// Burns `iterations` iterations of a loop the compiler may not remove or vectorise. Defined out
/// of line, so every caller runs the same machine code. Thread-safe.
void spin_iterations(uint64_t iterations);

/// The busy loop's speed on this machine.
struct SpinCalibration {
  uint64_t iterations_per_us;  ///< spin_iterations(n) for n = this takes about 1 us
  double check_ns;             ///< the measured mean duration of one such 1 us spin
};

/// Times the busy loop (best of several ~5 ms probes, so the fastest state of the machine) and
/// checks the result by timing 20,000 one-microsecond spins. Takes about 0.1 s. Call from one
/// thread while the machine is otherwise idle.
SpinCalibration calibrate_spin();

/// Median, minimum and maximum of repeated measurements.
struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
};

/// Summarises `values`, each divided by `divisor` (ns per task: divisor = tasks). `values` must
/// not be empty.
Summary summarize(std::vector<double> values, double divisor = 1);

/// "median=12.3 min=11.0 max=15.2".
std::string describe(const Summary& summary);

/// "nproc=2 cpu=\"...\" mem=23.5GiB kernel=Linux 6.1.0", from the C++ runtime and Linux /proc.
std::string describe_machine();

/// The current UTC time, "2025-01-31 12:00:00 UTC".
std::string utc_now();

/// The 1-minute load average from /proc/loadavg, or "?".
std::string load_average();

/// What else ran on the machine during a measurement: CPU time used by other processes and time
/// stolen by the hypervisor, as shares of the machine's capacity since construction (Linux
/// /proc/stat and getrusage). A benchmark on a shared or virtual machine is only as good as
/// these are small. Call from one thread.
class Interference {
 public:
  Interference();

  /// "other=12% steal=3%" since construction ("other=? steal=?" where /proc/stat is missing).
  std::string describe() const;
  /// Share (0..1) of the machine used by other processes or stolen by the hypervisor since
  /// construction: the capacity the benchmark did not have. 0 if unknown.
  double lost_share() const;

 private:
  struct Sample {
    uint64_t busy_ticks = 0;
    uint64_t steal_ticks = 0;
    double self_cpu_s = 0;
    double wall_s = 0;
  };
  struct Shares {
    bool known = false;
    double other = 0;
    double steal = 0;
  };
  static Sample sample();
  Shares shares() const;

  Sample start_;
};

}  // namespace weft::bench
