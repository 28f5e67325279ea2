// oneDNN plumbing shared by the CPU kernels: the engine, per-thread streams, memory descriptors
// for weft views, a primitive cache keyed by op and shapes, and intra-op thread control.
#pragma once

#include "base/build_config.h"

#if WEFT_USE_ONEDNN
#include <functional>
#include <memory>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

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
/// shapes, one entry per calling thread: primitives with a library-managed scratchpad must not run
/// on two threads at once.
/// Returns the cached value, building it with `make` on a miss. Thread-safe.
std::shared_ptr<void> cache_lookup(const std::string& key, const std::function<std::shared_ptr<void>()>& make);

template <typename T>
T& cached(const std::string& key, const std::function<T()>& make) {
  auto p = cache_lookup(key, [&] { return std::static_pointer_cast<void>(std::make_shared<T>(make())); });
  return *static_cast<T*>(p.get());
}

/// Number of entries in the primitive cache (for tests and stats).
size_t cache_size();

/// Reorders `src` (memory) into `dst_desc` when they differ; returns src itself when they match.
/// Runs on the thread's stream and waits.
dnnl::memory reorder_if_needed(const dnnl::memory& src, const dnnl::memory::desc& dst_desc,
                               void* dst_buffer = nullptr);

/// A weight in a kernel's preferred layout, reordered once per (storage id, version) and cached
/// (see OpContext::input_storage_ids). `storage_id` == 0 disables the cache (reorders every call).
std::shared_ptr<dnnl::memory> cached_weight(const std::string& prim_key, const TensorView& w,
                                            const dnnl::memory::desc& want, uint64_t storage_id,
                                            uint64_t version);
/// The (storage id, version) of input i from the context, or (0, 0) when unknown.
inline std::pair<uint64_t, uint64_t> input_identity(const OpContext& ctx, int i) {
  if (!ctx.input_storage_ids || !ctx.input_versions) return {0, 0};
  return {ctx.input_storage_ids[i], ctx.input_versions[i]};
}

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

}  // namespace weft::dnnl_util
#endif
