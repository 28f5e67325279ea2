// The allocator hot path (see hot_path.h): timed loops of alloc+free pairs per allocator.
#include "hot_path.h"

#include <sys/wait.h>
#include <tbb/scalable_allocator.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <thread>

#include "base/error.h"
#include "bench_util.h"
#include "memory/allocator.h"
#include "memory/pooled_allocator.h"

namespace weft::bench {

namespace {

constexpr size_t kMixWindow = 16;   // live blocks of the mix; the oldest is freed
constexpr size_t kMixSizes = 4096;  // pre-drawn sizes, cycled (a power of two)
constexpr size_t kMixMin = 64;
constexpr size_t kMixMax = size_t{4} << 20;
constexpr uint64_t kMixSeed = 0x9e3779b97f4a7c15ULL;

// Keeps the compiler from eliding an allocation: the pointer escapes into an opaque asm, and one
// byte is written through it (which also maps the page, as real use would).
inline void touch(void* p) {
  *static_cast<volatile char*>(p) = 1;
  asm volatile("" : : "r"(p) : "memory");
}

// splitmix64: a fixed, portable generator, so every run and every machine draws the same sizes.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Sizes drawn log-uniformly from [kMixMin, kMixMax].
std::vector<size_t> mix_sizes(uint64_t seed) {
  std::vector<size_t> sizes(kMixSizes);
  uint64_t state = seed;
  const double lo = std::log(static_cast<double>(kMixMin));
  const double hi = std::log(static_cast<double>(kMixMax));
  for (size_t& size : sizes) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
    size = static_cast<size_t>(std::exp(lo + u * (hi - lo)));
    size = std::clamp(size, kMixMin, kMixMax);
  }
  return sizes;
}

struct MallocPeer {
  using Handle = void*;
  Handle allocate(size_t bytes) {
    void* p = std::malloc(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  static void* get(Handle h) { return h; }
  static void release(Handle& h) {
    std::free(h);
    h = nullptr;
  }
};

struct TbbPeer {
  using Handle = void*;
  Handle allocate(size_t bytes) {
    void* p = scalable_malloc(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  static void* get(Handle h) { return h; }
  static void release(Handle& h) {
    scalable_free(h);
    h = nullptr;
  }
};

struct PoolPeer {
  using Handle = DataPtr;
  PooledAllocator* pool;
  Handle allocate(size_t bytes) { return pool->allocate(bytes); }
  static void* get(const Handle& h) { return h.get(); }
  static void release(Handle& h) { h.reset(); }
};

// One thread's loop state: the peer, and for the mix its window of live blocks.
template <typename Peer>
class Loop {
 public:
  Loop(Peer peer, size_t bytes, uint64_t seed)
      : peer_(peer), bytes_(bytes), sizes_(bytes == 0 ? mix_sizes(seed) : std::vector<size_t>{}) {}
  ~Loop() { drain(); }

  // `iterations` alloc+free pairs.
  void run(uint64_t iterations) {
    if (bytes_ != 0) {
      for (uint64_t i = 0; i < iterations; ++i) {
        typename Peer::Handle h = peer_.allocate(bytes_);
        touch(Peer::get(h));
        Peer::release(h);
      }
      return;
    }
    for (uint64_t i = 0; i < iterations; ++i) {
      typename Peer::Handle& slot = window_[next_];
      Peer::release(slot);  // the oldest live block (empty while the window first fills)
      slot = peer_.allocate(sizes_[pos_]);
      touch(Peer::get(slot));
      next_ = (next_ + 1) % kMixWindow;
      pos_ = (pos_ + 1) & (kMixSizes - 1);
    }
  }

  void drain() {
    for (auto& slot : window_) Peer::release(slot);
  }

 private:
  Peer peer_;
  size_t bytes_;
  std::vector<size_t> sizes_;
  std::array<typename Peer::Handle, kMixWindow> window_{};
  size_t next_ = 0;
  size_t pos_ = 0;
};

// Runs `threads` threads, each with its own loop over `peer`, and returns the median over
// repetitions of the per-thread ns per pair (averaged over the threads).
template <typename Peer>
Summary measure(Peer peer, size_t bytes, int threads, const HotPathOptions& options) {
  const auto target_ns = options.target_ms_per_rep * 1e6;
  std::atomic<uint64_t> iterations{0};
  std::vector<std::vector<double>> ns_per_pair(options.reps, std::vector<double>(threads));
  std::barrier sync(threads);
  auto body = [&](int t) {
    Loop<Peer> loop(peer, bytes, kMixSeed + static_cast<uint64_t>(t));
    // Warm up: fill the window and the pools' caches (the mix cycles through all its sizes
    // twice, so that every size has been seen), then estimate the pair rate.
    loop.run(bytes == 0 ? 2 * kMixSizes + kMixWindow : 64);
    uint64_t warm = 0;
    const auto start = Clock::now();
    double spent = 0;
    for (uint64_t chunk = 16; spent < target_ns / 4 && warm < (uint64_t{1} << 26); chunk *= 2) {
      loop.run(chunk);
      warm += chunk;
      spent = elapsed_ns(start, Clock::now());
    }
    if (t == 0) {
      const double per_pair = std::max(spent / static_cast<double>(warm), 0.1);
      // relaxed: published to the other threads by the barrier below.
      iterations.store(std::max<uint64_t>(64, static_cast<uint64_t>(target_ns / per_pair)),
                       std::memory_order_relaxed);
    }
    sync.arrive_and_wait();
    const uint64_t n = iterations.load(std::memory_order_relaxed);
    for (int rep = 0; rep < options.reps; ++rep) {
      sync.arrive_and_wait();
      const auto t0 = Clock::now();
      loop.run(n);
      ns_per_pair[rep][t] = elapsed_ns(t0, Clock::now()) / static_cast<double>(n);
    }
    sync.arrive_and_wait();
    loop.drain();
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t) workers.emplace_back(body, t);
  body(0);
  for (auto& w : workers) w.join();
  std::vector<double> per_rep;
  for (const auto& rep : ns_per_pair) {
    double sum = 0;
    for (double v : rep) sum += v;
    per_rep.push_back(sum / threads);
  }
  return summarize(per_rep);
}

// One measurement and what else ran on the machine meanwhile.
struct Measurement {
  Summary summary;
  char interference[64] = {};  // Interference::describe() over the measurement
};

template <typename F>
Measurement watched(F& measure_fn) {
  Measurement m;
  Interference interference;
  m.summary = measure_fn();
  std::snprintf(m.interference, sizeof(m.interference), "%s", interference.describe().c_str());
  return m;
}

// Runs `measure_fn` in a forked child, so that every measurement starts from a fresh process:
// glibc's malloc adapts its mmap and trim thresholds to the sizes freed before (and the pools
// leave such frees behind), which would make each result depend on the ones run before it.
// Falls back to measuring in this process where fork fails.
template <typename F>
Measurement isolated(F&& measure_fn) {
  int fds[2];
  if (pipe(fds) != 0) return watched(measure_fn);
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return watched(measure_fn);
  }
  if (child == 0) {
    close(fds[0]);
    int status = 0;
    try {
      Measurement m = watched(measure_fn);
      status = write(fds[1], &m, sizeof(m)) == static_cast<ssize_t>(sizeof(m)) ? 0 : 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "weft_memory_bench: %s\n", e.what());
      status = 1;
    }
    _exit(status);
  }
  close(fds[1]);
  Measurement m;
  const bool ok = read(fds[0], &m, sizeof(m)) == static_cast<ssize_t>(sizeof(m));
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  WEFT_CHECK(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "hot path: a measurement's child process failed";
  m.interference[sizeof(m.interference) - 1] = '\0';
  return m;
}

constexpr PoolStrategy kStrategies[] = {PoolStrategy::kExact, PoolStrategy::kRound,
                                        PoolStrategy::kBestFit};

}  // namespace

std::string size_label(size_t bytes) {
  if (bytes == 0) return "mix";
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) {
    return std::to_string(bytes >> 20) + "MiB";
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

HotPathOptions default_hot_path_options(bool quick) {
  HotPathOptions options;
  options.sizes = {64, 4096, size_t{1} << 20, size_t{64} << 20, 0};
  if (quick) {
    options.target_ms_per_rep = 4;
    options.reps = 3;
  }
  return options;
}

void run_hot_path(const HotPathOptions& options) {
  const PoolStrategy default_strategy = PoolConfig{}.strategy;
  std::printf(
      "# hot path: alloc+free pairs, ns per pair per thread (median of %d reps of ~%.0f ms;"
      " min..max in info lines)\n",
      options.reps, options.target_ms_per_rep);
  std::printf(
      "# weft = PooledAllocator(cpu_allocator(), PoolConfig{}) = strategy %s; one pool "
      "shared by the threads; mix = log-uniform %zu B..%zu B, free the oldest of %zu\n",
      pool_strategy_name(default_strategy), kMixMin, kMixMax, kMixWindow);
  std::fflush(stdout);
  for (size_t bytes : options.sizes) {
    const std::string label = "alloc_" + size_label(bytes);
    for (int threads : options.threads) {
      Summary weft{};
      for (PoolStrategy strategy : kStrategies) {
        Measurement m = isolated([&] {
          PoolConfig config;  // the default configuration, strategy aside
          config.strategy = strategy;
          PooledAllocator pool(cpu_allocator(), config);
          return measure(PoolPeer{&pool}, bytes, threads, options);
        });
        if (strategy == default_strategy) weft = m.summary;
        std::printf("info %s threads=%d strategy=%s ns=%.1f min=%.1f max=%.1f %s%s\n",
                    label.c_str(), threads, pool_strategy_name(strategy), m.summary.median,
                    m.summary.min, m.summary.max, m.interference,
                    strategy == default_strategy ? " default" : "");
        std::fflush(stdout);
      }
      Measurement libc = isolated([&] { return measure(MallocPeer{}, bytes, threads, options); });
      std::printf("info %s threads=%d peer=malloc ns=%.1f min=%.1f max=%.1f %s\n", label.c_str(),
                  threads, libc.summary.median, libc.summary.min, libc.summary.max,
                  libc.interference);
      Measurement tbb = isolated([&] { return measure(TbbPeer{}, bytes, threads, options); });
      std::printf("info %s threads=%d peer=tbbmalloc ns=%.1f min=%.1f max=%.1f %s\n", label.c_str(),
                  threads, tbb.summary.median, tbb.summary.min, tbb.summary.max, tbb.interference);
      std::printf("compare %s threads=%d weft=%.1fns malloc=%.1fns ratio=%.3g\n", label.c_str(),
                  threads, weft.median, libc.summary.median, weft.median / libc.summary.median);
      std::printf("compare %s threads=%d weft=%.1fns tbbmalloc=%.1fns ratio=%.3g\n", label.c_str(),
                  threads, weft.median, tbb.summary.median, weft.median / tbb.summary.median);
      std::fflush(stdout);
    }
  }
}

}  // namespace weft::bench
