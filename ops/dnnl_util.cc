// oneDNN engine, streams, descriptors, and the primitive and weight caches.
#include "ops/dnnl_util.h"

#if WEFT_USE_ONEDNN
#include <omp.h>

#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>

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
    case DType::kFloat32: return dnnl::memory::data_type::f32;
    case DType::kFloat16: return dnnl::memory::data_type::f16;
    case DType::kBFloat16: return dnnl::memory::data_type::bf16;
    case DType::kInt32: return dnnl::memory::data_type::s32;
    case DType::kInt8: return dnnl::memory::data_type::s8;
    case DType::kUInt8: return dnnl::memory::data_type::u8;
    default: break;
  }
  WEFT_THROW(NotImplemented) << "oneDNN has no data type for " << dtype_name(type);
}

dnnl::memory::dims to_dims(const Shape& s) { return dnnl::memory::dims(s.begin(), s.end()); }
dnnl::memory::dims to_dims(const TensorView& v) { return dnnl::memory::dims(v.shape, v.shape + v.ndim); }

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

dnnl::memory wrap(const TensorView& v) { return dnnl::memory(plain_desc(v), cpu_engine(), v.raw()); }
dnnl::memory wrap(const dnnl::memory::desc& desc, void* ptr) { return dnnl::memory(desc, cpu_engine(), ptr); }

namespace {
struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<void>> entries;
};
Cache& primitive_cache() {
  static Cache* cache = new Cache();
  return *cache;
}

// Weight cache: bounded LRU of reordered weights keyed by (primitive, pointer, version).
struct WeightCache {
  static constexpr size_t kCapacity = 256;
  std::mutex mutex;
  std::list<std::pair<std::string, std::shared_ptr<dnnl::memory>>> lru;
  std::unordered_map<std::string, decltype(lru)::iterator> index;
};
WeightCache& weight_cache() {
  static WeightCache* cache = new WeightCache();
  return *cache;
}
}  // namespace

std::shared_ptr<void> cache_lookup(const std::string& shared_key, const std::function<std::shared_ptr<void>()>& make) {
  // One entry per thread: a primitive whose scratchpad the library manages keeps it inside the
  // primitive, so two threads running the same primitive object at once would share it (a race
  // seen when two kernels of one shape run concurrently). Worker threads are few and long-lived.
  thread_local const std::string suffix =
      "|t" + std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  const std::string key = shared_key + suffix;
  Cache& c = primitive_cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.entries.find(key);
    if (it != c.entries.end()) return it->second;
  }
  auto value = make();  // built outside the lock: primitive creation can take milliseconds
  std::lock_guard<std::mutex> lock(c.mutex);
  auto [it, inserted] = c.entries.emplace(key, std::move(value));
  return it->second;
}

size_t cache_size() {
  Cache& c = primitive_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.entries.size();
}

dnnl::memory reorder_if_needed(const dnnl::memory& src, const dnnl::memory::desc& dst_desc, void* dst_buffer) {
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
  std::string key = prim_key + "|w@" + std::to_string(storage_id) + ":" +
                    std::to_string(reinterpret_cast<uintptr_t>(w.raw())) + "#" + std::to_string(version);
  WeightCache& c = weight_cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.index.find(key);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      return it->second->second;
    }
  }
  auto value = std::make_shared<dnnl::memory>(reorder_if_needed(src, want));
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.index.count(key) == 0) {
    c.lru.emplace_front(key, value);
    c.index[key] = c.lru.begin();
    if (c.lru.size() > WeightCache::kCapacity) {
      c.index.erase(c.lru.back().first);
      c.lru.pop_back();
    }
  }
  return value;
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
