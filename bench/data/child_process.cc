// Child processes of the input-pipeline benchmark (see child_process.h).
#include "bench/data/child_process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace weft::bench::data {
namespace {

using Clock = std::chrono::steady_clock;

struct CpuTicks {
  bool known = false;
  double busy_s = 0;   // all CPUs, everything but idle, iowait and steal
  double steal_s = 0;  // all CPUs
};

// The first line of /proc/stat ("cpu user nice system idle iowait irq softirq steal ...").
CpuTicks read_cpu_ticks() {
  CpuTicks t;
  std::ifstream in("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return t;
  for (auto& x : v) {
    if (!(in >> x)) return t;
  }
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  t.known = true;
  t.busy_s = static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6]) / hz;
  t.steal_s = static_cast<double>(v[7]) / hz;
  return t;
}

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
}

// Splits "result a=1 b=x" into {a: 1, b: x}.
std::map<std::string, std::string> parse_pairs(const std::string& line) {
  std::map<std::string, std::string> pairs;
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    auto eq = word.find('=');
    if (eq != std::string::npos) pairs[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return pairs;
}

void take_line(const std::string& line, ChildResult& r) {
  if (line.rfind('#', 0) == 0) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  } else if (line.rfind("result ", 0) == 0) {
    r.result = parse_pairs(line);
  } else if (line.rfind("stage ", 0) == 0) {
    auto pairs = parse_pairs(line);
    if (pairs.count("name") && pairs.count("us")) {
      r.stages.emplace_back(pairs["name"], std::stod(pairs["us"]));
    }
  } else if (!line.empty()) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace

double ChildResult::number(const std::string& key, double fallback) const {
  auto it = result.find(key);
  if (it == result.end()) return fallback;
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    return fallback;
  }
}

ChildResult run_child(const std::vector<std::string>& argv, double timeout_s) {
  ChildResult r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group, so a timeout can end its workers too
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  std::fflush(stdout);
  const CpuTicks before = read_cpu_ticks();
  const auto start = Clock::now();
  pid_t pid = -1;
  const int spawn_error = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (spawn_error != 0) {
    std::fprintf(stderr, "cannot start %s: %s\n", args[0], std::strerror(spawn_error));
    close(fds[0]);
    return r;
  }

  std::string pending;
  char buf[4096];
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);  // the group this function created for the child
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      take_line(pending.substr(0, nl), r);
      pending.erase(0, nl + 1);
    }
  }
  close(fds[0]);
  if (!pending.empty()) take_line(pending, r);

  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  const CpuTicks after = read_cpu_ticks();
  r.cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  if (WIFEXITED(status)) r.exit_status = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.exit_status = 128 + WTERMSIG(status);
  const double capacity = r.wall_s * static_cast<double>(std::thread::hardware_concurrency());
  if (before.known && after.known && capacity > 0) {
    r.other_share = std::max(0.0, (after.busy_s - before.busy_s - r.cpu_s) / capacity);
    r.steal_share = (after.steal_s - before.steal_s) / capacity;
  }
  return r;
}

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

long pss_kib() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Pss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

}  // namespace weft::bench::data
