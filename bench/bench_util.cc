// Helpers shared by weft's benchmarks (see bench_util.h).
#include "bench_util.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <thread>

namespace weft::bench {

double elapsed_ns(Clock::time_point start, Clock::time_point stop) {
  return std::chrono::duration<double, std::nano>(stop - start).count();
}

void spin_iterations(uint64_t iterations) {
  // The empty volatile asm is a side effect the compiler must repeat once per iteration.
  for (uint64_t i = 0; i < iterations; ++i) asm volatile("");
}

SpinCalibration calibrate_spin() {
  constexpr uint64_t kProbe = uint64_t{1} << 23;
  spin_iterations(kProbe);  // wake the core up
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < 7; ++r) {
    auto start = Clock::now();
    spin_iterations(kProbe);
    best = std::min(best, elapsed_ns(start, Clock::now()));
  }
  SpinCalibration result;
  result.iterations_per_us =
      std::max<uint64_t>(1, std::llround(static_cast<double>(kProbe) * 1000.0 / best));
  constexpr int kCheck = 20000;
  auto start = Clock::now();
  for (int i = 0; i < kCheck; ++i) spin_iterations(result.iterations_per_us);
  result.check_ns = elapsed_ns(start, Clock::now()) / kCheck;
  return result;
}

Summary summarize(std::vector<double> values, double divisor) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median / divisor, values.front() / divisor, values.back() / divisor};
}

std::string describe(const Summary& summary) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "median=%.1f min=%.1f max=%.1f", summary.median, summary.min,
                summary.max);
  return buf;
}

namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    size_t start = colon == std::string::npos ? colon : line.find_first_not_of(' ', colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return "unknown";
}

double read_mem_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kib;
      break;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return kib / (1024.0 * 1024.0);
}

}  // namespace

std::string describe_machine() {
  utsname uts{};
  uname(&uts);
  char buf[512];
  std::snprintf(buf, sizeof(buf), "nproc=%u cpu=\"%s\" mem=%.1fGiB kernel=%s %s",
                std::thread::hardware_concurrency(), read_cpu_model().c_str(), read_mem_gib(),
                uts.sysname, uts.release);
  return buf;
}

std::string utc_now() {
  char date[64];
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return date;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string load = "?";
  in >> load;
  return load;
}

Interference::Interference() : start_(sample()) {}

Interference::Sample Interference::sample() {
  Sample s;
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) {
    s.busy_ticks = user + nice + system + irq + softirq;  // guest time is inside user
    s.steal_ticks = steal;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  s.self_cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                 static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  s.wall_s = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  return s;
}

Interference::Shares Interference::shares() const {
  Sample now = sample();
  double capacity = (now.wall_s - start_.wall_s) *
                    static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  Shares result;
  if (capacity <= 0 || now.busy_ticks == 0) return result;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double busy = static_cast<double>(now.busy_ticks - start_.busy_ticks) / tick;
  double steal = static_cast<double>(now.steal_ticks - start_.steal_ticks) / tick;
  double other = std::max(0.0, busy - (now.self_cpu_s - start_.self_cpu_s));
  result.known = true;
  result.other = other / capacity;
  result.steal = steal / capacity;
  return result;
}

std::string Interference::describe() const {
  Shares s = shares();
  if (!s.known) return "other=? steal=?";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "other=%.0f%% steal=%.0f%%", 100 * s.other, 100 * s.steal);
  return buf;
}

double Interference::lost_share() const {
  Shares s = shares();
  return s.other + s.steal;
}

}  // namespace weft::bench
