// Fragmentation replay (see fragmentation.h): traces through PooledAllocator per strategy, and
// through the segment-policy model for experiments.
#include "fragmentation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "memory/allocator.h"
#include "memory/pooled_allocator.h"
#include "segment_model.h"

namespace weft::bench {

namespace {

constexpr double kGoal = 1.10;  // reserved / peak live, to report against
// Traces whose peak is many segments large: there the ratio measures the policy, not the
// granularity of one 2 MiB (small) or 20 MiB (large) segment.
constexpr uint64_t kLargePeak = uint64_t{64} << 20;
constexpr PoolStrategy kStrategies[] = {PoolStrategy::kExact, PoolStrategy::kRound,
                                        PoolStrategy::kBestFit};

std::string file_stem(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (auto dot = name.rfind(".trace"); dot != std::string::npos) name.resize(dot);
  return name;
}

// Per-policy ratios, for the summary lines.
struct Ratios {
  std::vector<double> values;
  std::vector<std::string> names;
  std::vector<uint64_t> peaks;
  void add(double ratio, std::string name, uint64_t peak) {
    values.push_back(ratio);
    names.push_back(std::move(name));
    peaks.push_back(peak);
  }
  // One line over the traces whose peak is at least `min_peak` bytes.
  void print(const std::string& label, uint64_t min_peak) const {
    double log_sum = 0;
    size_t count = 0;
    size_t worst = values.size();
    int within = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (peaks[i] < min_peak) continue;
      ++count;
      log_sum += std::log(values[i]);
      if (worst == values.size() || values[i] > values[worst]) worst = i;
      if (values[i] <= kGoal) ++within;
    }
    if (count == 0) return;
    std::printf(
        "summary frag %s subset=%s traces=%zu geomean=%.3f max=%.3f (%s) "
        "within_%.2f=%d/%zu\n",
        label.c_str(), min_peak == 0 ? "all" : "peak_live>=64MiB", count,
        std::exp(log_sum / static_cast<double>(count)), values[worst], names[worst].c_str(), kGoal,
        within, count);
  }
  void print(const std::string& label) const {
    print(label, 0);
    print(label, kLargePeak);
  }
};

// Replays one pass of `trace`, keeping the pool's handles by id.
void replay_pass(PooledAllocator& pool, const Trace& trace, std::vector<DataPtr>& live) {
  for (const TraceEvent& event : trace.events) {
    if (event.allocate) {
      live[event.id] = pool.allocate(event.bytes);
    } else {
      live[event.id].reset();
    }
  }
}

}  // namespace

Trace load_trace(const std::string& path) {
  std::ifstream in(path);
  WEFT_CHECK(in.good()) << "fragmentation: cannot open trace '" << path << "'";
  Trace trace;
  trace.path = path;
  std::vector<uint8_t> state;  // 0 never seen, 1 live, 2 freed
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line.substr(1));
      std::string word;
      while (words >> word) {
        if (word.rfind("model=", 0) == 0) trace.model = word.substr(6);
        if (word.rfind("batch=", 0) == 0) trace.batch = std::atoi(word.c_str() + 6);
      }
      continue;
    }
    std::istringstream fields(line);
    char kind = 0;
    long long id = -1;
    long long bytes = -1;
    fields >> kind >> id;
    WEFT_CHECK(fields && id >= 0 && id < (1LL << 31) && (kind == 'a' || kind == 'f'))
        << "fragmentation: " << path << ":" << line_no << ": expected 'a <id> <bytes>' or "
        << "'f <id>', got '" << line << "'";
    TraceEvent event;
    event.id = static_cast<uint32_t>(id);
    event.allocate = kind == 'a';
    if (event.allocate) {
      fields >> bytes;
      WEFT_CHECK(fields && bytes >= 0) << "fragmentation: " << path << ":" << line_no
                                       << ": allocation without a size: '" << line << "'";
      event.bytes = static_cast<uint64_t>(bytes);
    }
    if (state.size() <= event.id) state.resize(event.id + 1, 0);
    uint8_t& s = state[event.id];
    WEFT_CHECK(event.allocate ? s != 1 : s == 1)
        << "fragmentation: " << path << ":" << line_no << ": id " << id
        << (event.allocate ? " allocated while live" : " freed while not live");
    s = event.allocate ? 1 : 2;
    trace.max_id = std::max(trace.max_id, event.id);
    trace.events.push_back(event);
  }
  for (size_t id = 0; id < state.size(); ++id) {
    WEFT_CHECK(state[id] != 1) << "fragmentation: " << path << ": id " << id << " is never freed";
  }
  if (trace.model.empty()) trace.model = file_stem(path);
  return trace;
}

uint64_t peak_live_bytes(const Trace& trace) {
  std::vector<uint64_t> size(static_cast<size_t>(trace.max_id) + 1, 0);
  uint64_t live = 0;
  uint64_t peak = 0;
  for (const TraceEvent& event : trace.events) {
    if (event.allocate) {
      size[event.id] = event.bytes;
      live += event.bytes;
      peak = std::max(peak, live);
    } else {
      live -= size[event.id];
    }
  }
  return peak;
}

void run_fragmentation(const std::vector<std::string>& paths, bool variants) {
  const PoolStrategy default_strategy = PoolConfig{}.strategy;
  std::printf(
      "# fragmentation: peak reserved bytes of a fresh pool (one arena) over one forward "
      "pass / peak live requested bytes; goal <= %.2f with the default strategy (%s)\n",
      kGoal, pool_strategy_name(default_strategy));
  std::map<PoolStrategy, Ratios> by_strategy;
  std::vector<SegmentPolicy> policies =
      variants ? segment_policy_variants() : std::vector<SegmentPolicy>{};
  std::vector<Ratios> by_policy(policies.size());
  for (const SegmentPolicy& policy : policies) {
    std::printf("# variant policy=%s: %s\n", policy.name.c_str(), policy.description.c_str());
  }
  for (const std::string& path : paths) {
    const Trace trace = load_trace(path);
    const uint64_t peak = peak_live_bytes(trace);
    if (peak == 0) {
      std::printf("# skip %s: no live bytes\n", path.c_str());
      continue;
    }
    const std::string name = trace.model + " b" + std::to_string(trace.batch);
    uint64_t real_best_fit = 0;
    for (PoolStrategy strategy : kStrategies) {
      PoolConfig config;
      config.strategy = strategy;
      config.arenas = 1;
      config.trace_counters = false;
      PooledAllocator pool(cpu_allocator(), config);
      std::vector<DataPtr> live(static_cast<size_t>(trace.max_id) + 1);
      replay_pass(pool, trace, live);
      const PoolStats first = pool.stats();
      WEFT_ICHECK(first.in_use_bytes == 0) << "trace " << path << " left blocks in use";
      replay_pass(pool, trace, live);  // a second forward pass: does the reserve still grow?
      const PoolStats second = pool.stats();
      const uint64_t reserved = first.peak_reserved_bytes;
      if (strategy == PoolStrategy::kBestFit) real_best_fit = reserved;
      const double ratio = static_cast<double>(reserved) / static_cast<double>(peak);
      by_strategy[strategy].add(ratio, name, peak);
      std::printf("frag %s b%d strategy=%s peak_live=%llu reserved=%llu ratio=%.3f\n",
                  trace.model.c_str(), trace.batch, pool_strategy_name(strategy),
                  static_cast<unsigned long long>(peak), static_cast<unsigned long long>(reserved),
                  ratio);
      std::printf(
          "info frag %s b%d strategy=%s excess=%lld segments=%llu pass2_reserved=%llu "
          "pass2_misses=%llu\n",
          trace.model.c_str(), trace.batch, pool_strategy_name(strategy),
          static_cast<long long>(reserved) - static_cast<long long>(peak),
          static_cast<unsigned long long>(first.upstream_allocations),
          static_cast<unsigned long long>(second.peak_reserved_bytes),
          static_cast<unsigned long long>(second.misses - first.misses));
    }
    for (size_t p = 0; p < policies.size(); ++p) {
      SegmentModel model(policies[p]);
      auto pass = [&] {
        for (const TraceEvent& event : trace.events) {
          if (event.allocate) {
            model.allocate(event.id, event.bytes);
          } else {
            model.free(event.id);
          }
        }
      };
      pass();
      const uint64_t reserved = model.peak_reserved();
      const uint64_t segments = model.segments_allocated();
      const uint64_t segment_bytes = model.segment_bytes_allocated();
      pass();
      const double ratio = static_cast<double>(reserved) / static_cast<double>(peak);
      by_policy[p].add(ratio, name, peak);
      std::printf(
          "variant %s b%d policy=%s peak_live=%llu reserved=%llu ratio=%.3f "
          "pass2_reserved=%llu pass2_misses=%llu pass2_upstream_bytes=%llu%s\n",
          trace.model.c_str(), trace.batch, policies[p].name.c_str(),
          static_cast<unsigned long long>(peak), static_cast<unsigned long long>(reserved), ratio,
          static_cast<unsigned long long>(model.peak_reserved()),
          static_cast<unsigned long long>(model.segments_allocated() - segments),
          static_cast<unsigned long long>(model.segment_bytes_allocated() - segment_bytes),
          p == 0 && reserved != real_best_fit ? " MODEL_MISMATCH" : "");
    }
    std::fflush(stdout);
  }
  for (PoolStrategy strategy : kStrategies) {
    by_strategy[strategy].print(std::string("strategy=") + pool_strategy_name(strategy) +
                                (strategy == default_strategy ? "(default)" : ""));
  }
  for (size_t p = 0; p < policies.size(); ++p) by_policy[p].print("policy=" + policies[p].name);
}

}  // namespace weft::bench
