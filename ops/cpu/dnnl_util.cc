// oneDNN engine, streams, descriptors, and the primitive and weight caches.
#include "ops/cpu/dnnl_util.h"

#if WEFT_USE_ONEDNN
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/env.h"

namespace weft::dnnl_util {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

dnnl::memory::data_type to_dnnl(DType type) {
  switch (type) {
    case DType::kFloat32:
      return dnnl::memory::data_type::f32;
    case DType::kFloat16:
      return dnnl::memory::data_type::f16;
    case DType::kBFloat16:
      return dnnl::memory::data_type::bf16;
    case DType::kInt32:
      return dnnl::memory::data_type::s32;
    case DType::kInt8:
      return dnnl::memory::data_type::s8;
    case DType::kUInt8:
      return dnnl::memory::data_type::u8;
    default:
      break;
  }
  WEFT_THROW(NotImplemented) << "oneDNN has no data type for " << dtype_name(type);
}

dnnl::memory::dims to_dims(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }
dnnl::memory::dims to_dims(const TensorView& v) {
  return dnnl::memory::dims(v.shape, v.shape + v.ndim);
}

dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, DType type) {
  dnnl::memory::dims strides(dims.size());
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return dnnl::memory::desc(dims, to_dnnl(type), strides);
}

dnnl::memory::desc plain_desc(const TensorView& v) { return plain_desc(to_dims(v), v.dtype()); }

dnnl::memory wrap(const TensorView& v) {
  return dnnl::memory(plain_desc(v), cpu_engine(), v.raw());
}
dnnl::memory wrap(const dnnl::memory::desc& desc, void* ptr) {
  return dnnl::memory(desc, cpu_engine(), ptr);
}

// Note [oneDNN cache bounds]
// Two caches keep oneDNN objects between kernel calls, and neither may grow without bound over a
// long run that sees many shapes (variable batch or sequence sizes):
// - Primitives: one LRU cache per thread (a primitive with a library-managed scratchpad must not
//   run on two threads at once), bounded in entries; so the whole is bounded by threads x bound,
//   and a thread's cache goes when the thread exits. Only the owning thread evicts from its
//   cache, at its own lookups, and cached<T>() hands out references: the last kPinnedLookups
//   entries a thread returned are kept alive beside the cache so that a kernel's reference
//   survives its own further lookups even when the bound is tiny.
// - Reordered weights: one cache shared by all threads, bounded in bytes, least recently used
//   out first, one version per weight. Entries are shared_ptrs, so evicting one that a running
//   kernel holds only drops the cache's reference.
// The bounds come from WEFT_DNNL_PRIMITIVE_CACHE / WEFT_DNNL_WEIGHT_CACHE_MB (read once, through
// base/env) unless set explicitly.
namespace {

struct Limits {
  std::atomic<int64_t> primitive_entries{kDefaultPrimitiveCacheEntries};
  std::atomic<int64_t> weight_bytes{kDefaultWeightCacheBytes};
};
Limits& limits() {
  static Limits* limits = [] {
    auto* l = new Limits();  // leaked: used by threads that exit during static destruction
    Environment env = read_environment();
    if (env.dnnl_primitive_cache_entries) {
      l->primitive_entries.store(*env.dnnl_primitive_cache_entries, std::memory_order_relaxed);
    }
    if (env.dnnl_weight_cache_mb) {
      l->weight_bytes.store(*env.dnnl_weight_cache_mb << 20, std::memory_order_relaxed);
    }
    return l;
  }();
  return *limits;
}

// One thread's primitive cache. The owning thread looks up and evicts; stats readers only count.
struct ThreadCache {
  std::mutex mutex;  // owner vs. readers of the statistics; never contended on the hot path
  std::list<std::pair<std::string, std::shared_ptr<void>>> lru;  // most recent first
  std::unordered_map<std::string, decltype(lru)::iterator> index;
  uint64_t evictions = 0;
  std::shared_ptr<void> pins[kPinnedLookups];  // recently returned entries (owner only)
  int next_pin = 0;

  void pin(std::shared_ptr<void> value) {
    pins[next_pin] = std::move(value);
    next_pin = (next_pin + 1) % kPinnedLookups;
  }
};

struct CacheRegistry {
  std::mutex mutex;
  std::vector<ThreadCache*> caches;
  uint64_t exited_evictions = 0;  // of caches whose thread exited
};
CacheRegistry& registry() {
  static CacheRegistry* registry = new CacheRegistry();  // leaked, like limits()
  return *registry;
}

ThreadCache& thread_cache() {
  struct Holder {
    ThreadCache* cache = new ThreadCache();
    Holder() {
      CacheRegistry& r = registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      r.caches.push_back(cache);
    }
    ~Holder() {
      CacheRegistry& r = registry();
      {
        std::lock_guard<std::mutex> lock(r.mutex);
        std::erase(r.caches, cache);
        r.exited_evictions += cache->evictions;
      }
      delete cache;
    }
  };
  thread_local Holder holder;
  return *holder.cache;
}

// Reordered weights: an LRU bounded in bytes; the key names the weight (primitive, storage id
// and address), the entry holds one version of it.
struct WeightEntry {
  std::string key;
  uint64_t version = 0;
  std::shared_ptr<dnnl::memory> memory;
  int64_t bytes = 0;
};
struct WeightCache {
  std::mutex mutex;
  std::list<WeightEntry> lru;  // most recent first
  std::unordered_map<std::string, std::list<WeightEntry>::iterator> index;
  int64_t bytes = 0;
  uint64_t evictions = 0;

  void erase(std::list<WeightEntry>::iterator it) {
    bytes -= it->bytes;
    index.erase(it->key);
    lru.erase(it);
  }
  void evict_to(int64_t limit) {
    while (bytes > limit && !lru.empty()) {
      erase(std::prev(lru.end()));
      ++evictions;
    }
  }
};
WeightCache& weight_cache() {
  static WeightCache* cache = new WeightCache();
  return *cache;
}
}  // namespace

std::shared_ptr<void> cache_lookup(const std::string& key,
                                   const std::function<std::shared_ptr<void>()>& make) {
  return cache_lookup_for(key, planning_threads(), make);
}

std::shared_ptr<void> cache_lookup_for(const std::string& plain_key, int threads,
                                       const std::function<std::shared_ptr<void>()>& make) {
  ThreadCache& c = thread_cache();
  threads = std::max(1, threads);
  // Note [Primitive thread count]: one entry per thread count.
  std::string key;
  key.reserve(plain_key.size() + 8);
  key += plain_key;
  key += "|t";
  key += std::to_string(threads);
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      c.pin(it->second->second);
      return it->second->second;
    }
  }
  // Built outside the lock: primitive creation can take milliseconds, and `make` may look up
  // other entries of this thread's cache. Under the thread count it is made for (Note
  // [Primitive thread count]).
  std::shared_ptr<void> value;
  {
    ScopedThreads scoped(threads);
    value = make();
  }
  const auto limit =
      static_cast<size_t>(limits().primitive_entries.load(std::memory_order_relaxed));
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.index.find(key);
  if (it == c.index.end()) {
    c.lru.emplace_front(key, std::move(value));
    it = c.index.emplace(key, c.lru.begin()).first;
  } else {
    c.lru.splice(c.lru.begin(), c.lru, it->second);
  }
  std::shared_ptr<void> result = it->second->second;
  c.pin(result);
  while (c.lru.size() > limit) {
    c.index.erase(c.lru.back().first);
    c.lru.pop_back();
    ++c.evictions;
  }
  return result;
}

void set_primitive_cache_limit(int64_t entries_per_thread) {
  WEFT_CHECK(entries_per_thread >= 1)
      << "the oneDNN primitive cache bound must be at least 1 entry per thread, got "
      << entries_per_thread;
  limits().primitive_entries.store(entries_per_thread, std::memory_order_relaxed);
}

int64_t primitive_cache_limit() {
  return limits().primitive_entries.load(std::memory_order_relaxed);
}

void set_weight_cache_limit(int64_t bytes) {
  WEFT_CHECK(bytes >= 0) << "the oneDNN weight cache budget must not be negative, got " << bytes;
  limits().weight_bytes.store(bytes, std::memory_order_relaxed);
  WeightCache& c = weight_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.evict_to(bytes);
}

int64_t weight_cache_limit() { return limits().weight_bytes.load(std::memory_order_relaxed); }

CacheStats cache_stats() {
  CacheStats stats;
  ThreadCache& mine = thread_cache();
  {
    CacheRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    stats.primitive_evictions = r.exited_evictions;
    for (ThreadCache* cache : r.caches) {
      std::lock_guard<std::mutex> cache_lock(cache->mutex);
      stats.primitive_entries += cache->lru.size();
      stats.primitive_evictions += cache->evictions;
      if (cache == &mine) stats.primitive_entries_this_thread = cache->lru.size();
    }
  }
  WeightCache& w = weight_cache();
  std::lock_guard<std::mutex> lock(w.mutex);
  stats.weight_entries = w.lru.size();
  stats.weight_bytes = w.bytes;
  stats.weight_evictions = w.evictions;
  return stats;
}

size_t cache_size() { return cache_stats().primitive_entries; }

dnnl::memory reorder_if_needed(const dnnl::memory& src, const dnnl::memory::desc& dst_desc,
                               void* dst_buffer) {
  if (src.get_desc() == dst_desc) return src;
  dnnl::memory dst = dst_buffer ? dnnl::memory(dst_desc, cpu_engine(), dst_buffer)
                                : dnnl::memory(dst_desc, cpu_engine());
  dnnl::reorder(src, dst).execute(thread_stream(), const_cast<dnnl::memory&>(src), dst);
  thread_stream().wait();
  return dst;
}

std::shared_ptr<dnnl::memory> cached_weight(const std::string& prim_key, const TensorView& w,
                                            const dnnl::memory::desc& want, uint64_t storage_id,
                                            uint64_t version) {
  dnnl::memory src = wrap(w);
  if (src.get_desc() == want) return std::make_shared<dnnl::memory>(src);
  if (storage_id == 0) return std::make_shared<dnnl::memory>(reorder_if_needed(src, want));
  const std::string key = prim_key + "|w@" + std::to_string(storage_id) + ":" +
                          std::to_string(reinterpret_cast<uintptr_t>(w.raw()));
  WeightCache& c = weight_cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
      // The layout is checked too: primitives of one key made for different thread counts may
      // want different weight layouts (Note [Primitive thread count]).
      if (it->second->version == version && it->second->memory->get_desc() == want) {
        c.lru.splice(c.lru.begin(), c.lru, it->second);
        return it->second->memory;
      }
      c.erase(it->second);  // an older version (or layout) of this weight: replaced below
    }
  }
  auto value = std::make_shared<dnnl::memory>(reorder_if_needed(src, want));
  const auto bytes = static_cast<int64_t>(want.get_size());
  const int64_t limit = limits().weight_bytes.load(std::memory_order_relaxed);
  if (bytes > limit) return value;  // larger than the whole budget: not cached
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.index.find(key);
  if (it != c.index.end()) {
    if (it->second->version == version && it->second->memory->get_desc() == want) {
      return value;  // another thread cached it meanwhile
    }
    c.erase(it->second);
  }
  c.lru.push_front(WeightEntry{key, version, value, bytes});
  c.index.emplace(key, c.lru.begin());
  c.bytes += bytes;
  c.evict_to(limit);
  return value;
}

// Note [Primitive thread count]
// oneDNN sizes a primitive's scratchpad and partitions its work for the OpenMP thread count in
// force when the primitive is created, and many primitives (the JIT convolutions) run with that
// many threads whatever count is in force when they execute. weft's kernels run with a count
// that changes from call to call (the adaptive intra-op policy shares the free cores among the
// kernels running, and fewer cores are free while other processes compete: Note [Thread budget]
// in engine/cpu_budget.h), so one primitive per key would either ignore the count or be made for
// too few threads. Primitives are therefore made per thread count: inside a kernel (begin_kernel)
// under the kernel's count, with the count in the cache key. The workspace an op asks for when
// it is pushed is computed outside any kernel, under the largest count a kernel may get
// (max_kernel_threads; WidestPlans when the push happens inside a kernel). oneDNN's scratchpads
// are mostly per-thread buffers times the thread count, so that plan usually needs the most; where
// the plan for fewer threads would need more (another blocking, a padded format), cached()
// returns the plan for the most threads instead, which runs correctly with fewer threads in force
// (it then takes the threads it was made for).
namespace {
std::atomic<int>& max_threads_setting() {
  static std::atomic<int> n{0};
  return n;
}
// The intra-op threads of the kernel running on this thread; 0 outside kernels.
thread_local int t_kernel_threads = 0;
}  // namespace

int planning_threads() {
  const int max = max_kernel_threads();
  return t_kernel_threads > 0 ? std::min(t_kernel_threads, max) : max;
}

namespace {
// What the kernel running on this thread interrupted (the thread's state before begin_kernel:
// outside any kernel, or in a kernel that ran a tiny one inline), restored by end_kernel: the
// kernel count and the thread's OpenMP count, which code outside kernels may rely on (a
// primitive made directly, outside the cache, is made for it). Deeper nesting than this keeps
// the innermost state.
constexpr int kMaxKernelNesting = 16;
struct OuterState {
  int kernel_threads;
  int omp_threads;
};
thread_local OuterState t_outer[kMaxKernelNesting];
thread_local int t_kernel_depth = 0;
}  // namespace

void begin_kernel(int n) {
  const int omp = omp_get_max_threads();
  if (t_kernel_depth < kMaxKernelNesting) t_outer[t_kernel_depth] = {t_kernel_threads, omp};
  ++t_kernel_depth;
  t_kernel_threads = std::max(1, n);
  if (omp != t_kernel_threads) omp_set_num_threads(t_kernel_threads);
}

void end_kernel() {
  if (t_kernel_depth == 0) return;
  --t_kernel_depth;
  if (t_kernel_depth >= kMaxKernelNesting) return;
  const OuterState outer = t_outer[t_kernel_depth];
  t_kernel_threads = outer.kernel_threads;
  if (omp_get_max_threads() != outer.omp_threads) omp_set_num_threads(outer.omp_threads);
}

void set_max_kernel_threads(int n) {
  max_threads_setting().store(std::max(1, n), std::memory_order_relaxed);
}

int max_kernel_threads() {
  const int n = max_threads_setting().load(std::memory_order_relaxed);
  return n > 0 ? n : std::max(1, omp_get_num_procs());
}

ScopedThreads::ScopedThreads(int n) : previous_(omp_get_max_threads()) {
  if (n >= 1 && n != previous_) omp_set_num_threads(n);
}
ScopedThreads::~ScopedThreads() {
  if (omp_get_max_threads() != previous_) omp_set_num_threads(previous_);
}

void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args) {
  prim.execute(thread_stream(), args);
  thread_stream().wait();
}

}  // namespace weft::dnnl_util
#endif
