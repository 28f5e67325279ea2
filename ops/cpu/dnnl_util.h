// oneDNN plumbing shared by the CPU kernels: the engine, per-thread streams, memory descriptors
// for weft views, a primitive cache keyed by op and shapes, and intra-op thread control.
#pragma once

#include "base/build_config.h"

#if WEFT_USE_ONEDNN
#include <cstdint>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "ops/op.h"

namespace weft::dnnl_util {

/// The process's oneDNN CPU engine. Thread-safe.
dnnl::engine& cpu_engine();
/// A stream for the calling thread (oneDNN streams are not shared between threads).
dnnl::stream& thread_stream();

/// oneDNN data type of a weft dtype; throws NotImplemented for unsupported ones.
dnnl::memory::data_type to_dnnl(DType type);
/// Dims of a shape.
dnnl::memory::dims to_dims(const Shape& s);
dnnl::memory::dims to_dims(const TensorView& v);
/// A plain row-major descriptor (a, ab, abc, abcd, abcde ...).
dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, DType type);
dnnl::memory::desc plain_desc(const TensorView& v);
/// Wraps a view's memory (no copy).
dnnl::memory wrap(const TensorView& v);
dnnl::memory wrap(const dnnl::memory::desc& desc, void* ptr);

/// Cache of primitives (and anything else) keyed by a string built from the op, its params and
/// shapes. Each thread has its own cache: primitives with a library-managed scratchpad must not
/// run on two threads at once. Each thread's cache is an LRU bounded in entries
/// (primitive_cache_limit(), default kDefaultPrimitiveCacheEntries, WEFT_DNNL_PRIMITIVE_CACHE);
/// a thread's cache is freed when the thread exits. Note [oneDNN cache bounds].
/// Entries are made for, and keyed by, the thread count planning_threads() gives (Note
/// [Primitive thread count]). Returns the cached value, building it with `make` on a miss.
/// Thread-safe.
std::shared_ptr<void> cache_lookup(const std::string& key,
                                   const std::function<std::shared_ptr<void>()>& make);
/// cache_lookup for `threads` OpenMP threads instead of planning_threads().
std::shared_ptr<void> cache_lookup_for(const std::string& key, int threads,
                                       const std::function<std::shared_ptr<void>()>& make);

/// The OpenMP thread count primitives looked up on this thread are made for: the running
/// kernel's (begin_kernel), else max_kernel_threads(). Note [Primitive thread count].
int planning_threads();
int max_kernel_threads();

/// The cached value for `key` on this thread. The reference stays valid for at least the calling
/// thread's next kPinnedLookups lookups, even if the bound evicts the entry meanwhile (a kernel
/// uses it within its own call).
///
/// A plan type with a `workspace_bytes()` member (the workspace the op asks for when it is
/// pushed, computed from the plan for max_kernel_threads()) never needs more workspace than that:
/// when the plan for the kernel's fewer threads would, the plan for the most threads is returned
/// instead (Note [Primitive thread count]).
template <typename T>
T& cached(const std::string& key, const std::function<T()>& make) {
  const std::function<std::shared_ptr<void>()> build = [&] {
    return std::static_pointer_cast<void>(std::make_shared<T>(make()));
  };
  auto p = cache_lookup(key, build);
  T& plan = *static_cast<T*>(p.get());
  if constexpr (requires(const T& t) { static_cast<size_t>(t.workspace_bytes()); }) {
    const int widest = max_kernel_threads();
    if (planning_threads() < widest) {
      auto w = cache_lookup_for(key, widest, build);
      T& sized = *static_cast<T*>(w.get());
      if (plan.workspace_bytes() > sized.workspace_bytes()) return sized;
    }
  }
  return plan;
}

/// Default bound of each thread's primitive cache, in entries.
inline constexpr int64_t kDefaultPrimitiveCacheEntries = 512;
/// Entries a thread keeps alive after returning them (see cached()).
inline constexpr int kPinnedLookups = 16;
/// Default budget of the reordered-weight cache, in bytes (512 MiB).
inline constexpr int64_t kDefaultWeightCacheBytes = int64_t{512} << 20;

/// Sets the bound of every thread's primitive cache (>= 1 entries). A thread applies it at its
/// next lookup. Thread-safe.
void set_primitive_cache_limit(int64_t entries_per_thread);
int64_t primitive_cache_limit();
/// Sets the reordered-weight cache's budget in bytes (0 disables the cache); evicts at once.
/// Thread-safe.
void set_weight_cache_limit(int64_t bytes);
int64_t weight_cache_limit();

/// What the caches hold. A snapshot.
struct CacheStats {
  size_t primitive_entries = 0;              ///< all threads together
  size_t primitive_entries_this_thread = 0;  ///< the calling thread's cache
  uint64_t primitive_evictions = 0;          ///< since start, threads that exited included
  size_t weight_entries = 0;
  int64_t weight_bytes = 0;  ///< bytes of the cached reordered weights
  uint64_t weight_evictions = 0;
};
CacheStats cache_stats();

/// Number of entries in the primitive cache over all threads (for tests and stats).
size_t cache_size();

/// Reorders `src` (memory) into `dst_desc` when they differ; returns src itself when they match.
/// Runs on the thread's stream and waits.
dnnl::memory reorder_if_needed(const dnnl::memory& src, const dnnl::memory::desc& dst_desc,
                               void* dst_buffer = nullptr);

/// A weight in a kernel's preferred layout, reordered once per (storage id, version) and cached
/// (see OpContext::input_storage_ids). `storage_id` == 0 disables the cache (reorders every call).
/// The cache is shared by all threads and bounded in bytes (weight_cache_limit(), default
/// kDefaultWeightCacheBytes, WEFT_DNNL_WEIGHT_CACHE_MB), least recently used first out; it keeps
/// one version per weight (a new version replaces the old), and a weight larger than the whole
/// budget is reordered without being cached. The returned memory stays valid while held.
std::shared_ptr<dnnl::memory> cached_weight(const std::string& prim_key, const TensorView& w,
                                            const dnnl::memory::desc& want, uint64_t storage_id,
                                            uint64_t version);
/// The (storage id, version) of input i from the context, or (0, 0) when unknown.
inline std::pair<uint64_t, uint64_t> input_identity(const OpContext& ctx, int i) {
  if (!ctx.input_storage_ids || !ctx.input_versions) return {0, 0};
  return {ctx.input_storage_ids[i], ctx.input_versions[i]};
}

/// The most intra-op threads any kernel may be given (the runtime sets it from its thread
/// budget; default: the machine's cores). Primitives built outside a kernel (the workspace a
/// pushed op asks for) are made for this many OpenMP threads (Note [Primitive thread count]).
/// Thread-safe.
void set_max_kernel_threads(int n);

/// Marks the calling thread as running a kernel with `n` intra-op threads (the runtime calls it
/// when a kernel starts): sets the thread's OpenMP thread count, and primitives the kernel looks
/// up are made for `n` threads (Note [Primitive thread count]). end_kernel() restores the state
/// before the matching begin_kernel (kernels nest when one runs a tiny kernel inline). Both act
/// on the calling thread only.
void begin_kernel(int n);
void end_kernel();

/// Makes primitives looked up on this thread for max_kernel_threads() during the scope, as
/// outside kernels: for computing the workspace an op asks for when it is pushed from inside a
/// kernel (Note [Primitive thread count]).
class WidestPlans {
 public:
  WidestPlans() { begin_kernel(max_kernel_threads()); }
  ~WidestPlans() { end_kernel(); }
  WidestPlans(const WidestPlans&) = delete;
  WidestPlans& operator=(const WidestPlans&) = delete;
};

/// Sets the OpenMP thread count for oneDNN and OpenMP loops on this thread for the scope.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n);
  ~ScopedThreads();

 private:
  int previous_;
};

/// Executes `prim` on the thread's stream and waits.
void execute(const dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args);

// ---- layouts (ops/cpu/dnnl_layout.cc; Note [Layout propagation] in graph/layout.cc)
// ----------------

/// A oneDNN memory descriptor as a tensor layout (MemoryLayout). Immutable; thread-safe.
class DnnlLayout final : public MemoryLayout {
 public:
  explicit DnnlLayout(const dnnl::memory::desc& desc);
  const dnnl::memory::desc& desc() const { return desc_; }
  size_t bytes() const override { return desc_.get_size(); }
  std::string name() const override;
  const std::string& key() const override { return key_; }

 private:
  dnnl::memory::desc desc_;
  std::string key_;
};

/// The layout `desc` describes: null (plain) when it puts every element at the byte where
/// compact row-major puts it (acdb of a 1x1 image, say), else a DnnlLayout.
LayoutRef make_layout(const dnnl::memory::desc& desc);
/// The descriptor of a layout made by make_layout; null for plain (null) layouts.
const dnnl::memory::desc* desc_of(const MemoryLayout* layout);
/// The descriptor of a kernel's input / output i: its layout's (OpContext), or plain for `v`.
dnnl::memory::desc input_desc(const OpContext& ctx, size_t i, const TensorView& v);
dnnl::memory::desc output_desc(const OpContext& ctx, size_t i, const TensorView& v);
/// Whether two descriptors put every element of the same logical tensor at the same byte (they
/// may differ in the strides of dims of size 1). Equal descriptors are the same placement.
bool same_placement(const dnnl::memory::desc& a, const dnnl::memory::desc& b);
/// A string equal for equal descriptors (cache keys).
std::string desc_key(const dnnl::memory::desc& d);
/// oneDNN's name of a descriptor's format ("abcd", "acdb", "aBcd16b"); "opaque" for formats
/// that are not blocked ones.
std::string format_name(const dnnl::memory::desc& d);
/// Copies the tensor at `src` laid out as `src_desc` into `dst` laid out as `dst_desc` (same
/// logical dims and type) with a cached reorder primitive, on `threads` threads; waits.
void reorder_data(const dnnl::memory::desc& src_desc, const void* src,
                  const dnnl::memory::desc& dst_desc, void* dst, int threads);

}  // namespace weft::dnnl_util
#endif
