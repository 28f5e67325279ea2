// The process's CPU budget and the estimate of how much of it other processes take.
#include "engine/cpu_budget.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace weft {

// Note [Thread budget]
// weft keeps at most `budget` threads busy on CPUs: EngineConfig::num_threads, WEFT_NUM_THREADS,
// or by default the cores the process may run on (process_cpu_cores: its affinity mask, capped by
// a cgroup CPU quota; not the machine's cores, which a container or `taskset` may not give it).
// Everything else derives from it: the engine's CPU workers (one per budgeted core) and each
// kernel's intra-op threads (Runtime::kernel_started: the free cores shared among the kernels
// running at once), so that workers times intra-op threads never exceed the budget.
//
// On a shared machine the budget alone is not enough. OpenMP kernels split their work statically
// among a team and end each parallel region at a barrier: when another process takes one of the
// team's cores, the descheduled thread holds the whole team at the barrier for a scheduler time
// slice (milliseconds), while its partners spin there and take CPU time the straggler needs. A
// 2-thread kernel sharing 2 cores with one busy process then runs slower than the same kernel
// on 1 thread. So kernels size their teams by the cores other processes leave free
// (uncontended_cores, Note [Contention estimate]), and idle threads sleep instead of spinning
// (Note [Spinning and wake-ups] in engine/worker_pool.h).
//
// Note [Contention estimate]
// What other processes take is measured, not guessed: every ~50 ms one caller reads the idle
// time of the process's CPUs from /proc/stat and the process's own CPU time
// (CLOCK_PROCESS_CPUTIME_ID). The CPUs' capacity over the window minus their idle time is their
// busy time; minus the process's own, divided by the wall time, it is the number of cores the
// others used. Idle time is used rather than the busy fields because the kernel accounts idle
// exactly (when a CPU enters and leaves idle) and the busy fields by sampling at clock ticks,
// which over a 50 ms window is off by several tenths of a core. /proc/stat still reports whole
// clock ticks (usually 10 ms), so the estimate is smoothed over windows, and the answer moves
// with hysteresis so that it does not flap.
// The answer leans towards fewer threads: a team loses far more to a straggler than it gains
// from a core it has to share, so a quarter of a core used by others already takes one thread
// off (it comes back once they use less than 0.15 cores). Others are seen using less than they
// want while weft itself competes (the scheduler shares the cores), which is another reason to
// lean down. Steal time (a hypervisor running other guests) counts as used by others.

namespace {

int affinity_cpus(std::vector<int>* cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }
  int count = 0;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (!CPU_ISSET(i, &set)) continue;
    ++count;
    if (cpus != nullptr) cpus->push_back(i);
  }
  return std::max(1, count);
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The tightest CPU quota among the cgroup path's ancestors, in cores (rounded up).
std::optional<int> cgroup_quota_cores() {
  std::optional<int> best;
  auto consider = [&](std::optional<int> cores) {
    if (cores && (!best || *cores < *best)) best = cores;
  };
  std::istringstream lines(read_small_file("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line)) {
    // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1).
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    const bool v2 = controllers.empty();
    bool v1_cpu = false;
    for (std::string_view c : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) v1_cpu |= controllers == c;
    if (!v2 && !v1_cpu) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/" + controllers;
    for (;;) {
      if (v2) {
        consider(detail::parse_cgroup_cpu_max(read_small_file(root + path + "/cpu.max")));
      } else {
        const std::string quota = read_small_file(root + path + "/cpu.cfs_quota_us");
        const std::string period = read_small_file(root + path + "/cpu.cfs_period_us");
        if (!quota.empty() && !period.empty()) {
          consider(detail::parse_cgroup_cpu_max(quota.substr(0, quota.find('\n')) + " " + period));
        }
      }
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.rfind('/'));
    }
  }
  return best;
}

int64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int process_cpu_cores() {
  static const int cores = [] {
    int n = affinity_cpus(nullptr);
    if (auto quota = cgroup_quota_cores()) n = std::min(n, std::max(1, *quota));
    return n;
  }();
  return cores;
}

int resolve_thread_budget(int requested) { return requested > 0 ? requested : process_cpu_cores(); }

int uncontended_cores(int budget) {
  return detail::CpuLoadMonitor::global().uncontended_cores(budget);
}

namespace detail {

std::optional<IdleTicks> parse_proc_stat_idle(std::string_view text, const std::vector<int>& cpus) {
  IdleTicks idle;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() < 4 || line.substr(0, 3) != "cpu") {
      if (idle.cpus > 0) break;  // the cpu lines come first
      continue;
    }
    // "cpu " is the sum over all CPUs; "cpuN " is one.
    size_t i = 3;
    int index = -1;
    if (line[i] != ' ') {
      auto [p, ec] = std::from_chars(line.data() + i, line.data() + line.size(), index);
      if (ec != std::errc()) continue;
      i = static_cast<size_t>(p - line.data());
    }
    const bool wanted =
        index >= 0 && (cpus.empty() || std::binary_search(cpus.begin(), cpus.end(), index));
    if (!wanted) continue;
    // user nice system idle iowait ...
    int64_t fields[5] = {0, 0, 0, 0, 0};
    int n = 0;
    while (n < 5 && i < line.size()) {
      while (i < line.size() && line[i] == ' ') ++i;
      auto [p, ec] = std::from_chars(line.data() + i, line.data() + line.size(), fields[n]);
      if (ec != std::errc()) break;
      i = static_cast<size_t>(p - line.data());
      ++n;
    }
    if (n < 4) continue;
    idle.ticks += fields[3] + fields[4];
    ++idle.cpus;
  }
  if (idle.cpus == 0) return std::nullopt;
  return idle;
}

std::optional<int> parse_cgroup_cpu_max(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  std::string_view q = text.substr(0, space), p = text.substr(space + 1);
  if (q == "max") return std::nullopt;
  int64_t quota = 0, period = 0;
  if (std::from_chars(q.data(), q.data() + q.size(), quota).ec != std::errc() ||
      std::from_chars(p.data(), p.data() + p.size(), period).ec != std::errc() || quota <= 0 ||
      period <= 0) {
    return std::nullopt;  // "-1 100000" (v1: no limit) lands here too
  }
  return static_cast<int>(std::max<int64_t>(1, (quota + period - 1) / period));
}

void ContentionEstimator::add(const CpuSample& sample) {
  if (!last_) {
    last_ = sample;
    return;
  }
  const int64_t wall = sample.wall_ns - last_->wall_ns;
  if (wall < kMinWindowNs) return;
  // Busy time of the CPUs (their capacity minus their idle time) less this process's own.
  const double busy = static_cast<double>(sample.cpus) * static_cast<double>(wall) -
                      static_cast<double>(sample.idle_ns - last_->idle_ns);
  const double others = std::max(0.0, busy - static_cast<double>(sample.self_ns - last_->self_ns)) /
                        static_cast<double>(wall);
  others_ = estimated_ ? kSmoothing * others + (1 - kSmoothing) * others_ : others;
  estimated_ = true;
  last_ = sample;
}

int ContentionEstimator::free_cores(int budget) {
  budget = std::max(1, budget);
  auto cores_with = [&](double lean) {
    return std::clamp(static_cast<int>(std::floor(budget - others_ + lean)), 1, budget);
  };
  // A thread comes off once others use more than a quarter of a core beyond whole cores, and
  // goes back once they use less than 0.15 (Note [Contention estimate]).
  const int down = cores_with(0.25), up = cores_with(0.15);
  if (free_ < 1 || free_ > budget) {
    free_ = down;
  } else if (down < free_) {
    free_ = down;
  } else if (up > free_) {
    free_ = up;
  }
  return free_;
}

CpuLoadMonitor& CpuLoadMonitor::global() {
  static CpuLoadMonitor* monitor = new CpuLoadMonitor();  // leaked: used by exiting threads
  return *monitor;
}

CpuLoadMonitor::CpuLoadMonitor() {
  affinity_cpus(&cpus_);
  std::sort(cpus_.begin(), cpus_.end());
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz > 0) tick_ns_ = 1'000'000'000 / hz;
}

void CpuLoadMonitor::sample(int64_t now_ns) {
  // The cpu lines come first; read until the line after them (or the end).
  int fd = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    usable_ = false;
    return;
  }
  text_.clear();
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n <= 0) break;
    text_.append(chunk, static_cast<size_t>(n));
    if (text_.find("\nintr") != std::string::npos || text_.size() > (size_t{1} << 20)) break;
  }
  ::close(fd);
  auto idle = parse_proc_stat_idle(text_, cpus_);
  if (!idle) {
    usable_ = false;
    return;
  }
  CpuSample s;
  s.wall_ns = now_ns;
  s.idle_ns = idle->ticks * tick_ns_;
  s.cpus = idle->cpus;
  s.self_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  estimator_.add(s);
  others_.store(estimator_.others(), std::memory_order_relaxed);
}

int CpuLoadMonitor::uncontended_cores(int budget) {
  if (budget <= 1) return 1;
  const int64_t now = clock_ns(CLOCK_MONOTONIC_COARSE);
  // relaxed: a stale answer is fine; the lock below orders the estimator's state.
  if (now >= next_sample_ns_.load(std::memory_order_relaxed)) {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (lock.owns_lock() && now >= next_sample_ns_.load(std::memory_order_relaxed)) {
      next_sample_ns_.store(now + kIntervalNs, std::memory_order_relaxed);
      if (usable_) sample(clock_ns(CLOCK_MONOTONIC));
      cached_free_.store(usable_ ? estimator_.free_cores(budget) : budget,
                         std::memory_order_relaxed);
      cached_budget_.store(budget, std::memory_order_relaxed);
    }
  }
  if (cached_budget_.load(std::memory_order_relaxed) != budget) return budget;
  const int free = cached_free_.load(std::memory_order_relaxed);
  return free >= 1 ? std::min(free, budget) : budget;
}

}  // namespace detail
}  // namespace weft
