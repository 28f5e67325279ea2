// PooledAllocator: a caching allocator over any Allocator, with three strategies (exact sizes,
// MXNet's power-of-two/linear rounding, PyTorch-style best fit with splitting), per-stream reuse
// rules, a memory limit, out-of-memory recovery and statistics.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/profiler.h"
#include "devices/device_api.h"
#include "memory/allocator.h"

namespace weft {

/// How a PooledAllocator sizes and reuses blocks. See docs/MEMORY.md for the measurements that
/// chose the default.
enum class PoolStrategy {
  /// MXNet's "Naive" pool: sizes rounded to `exact_granularity`; a freed block is reused only for
  /// a request of the same rounded size.
  kExact,
  /// MXNet's "Round" pool: sizes below `round_cutoff` rounded up to a power of two, sizes above
  /// to a multiple of the cutoff; reuse within the same rounded size.
  kRound,
  /// PyTorch's caching allocator: sizes rounded to 512 B; small requests (<= 1 MiB) carved from
  /// 2 MiB segments, large ones from segments of at least 20 MiB (or the request rounded to
  /// 2 MiB); a request takes the smallest free block that fits, the rest is split off, and freed
  /// neighbours merge again.
  kBestFit,
};

const char* pool_strategy_name(PoolStrategy strategy);
/// Parses "exact", "round", "best_fit"; throws ValueError naming the text.
PoolStrategy parse_pool_strategy(const std::string& text);

/// Configuration of a PooledAllocator.
struct PoolConfig {
  PoolStrategy strategy = PoolStrategy::kBestFit;
  /// kRound: the cutoff between power-of-two and linear rounding (MXNet's default: 2^24 bytes).
  size_t round_cutoff = size_t{1} << 24;
  /// kExact: the rounding granularity.
  size_t exact_granularity = 512;
  /// kBestFit: give requests between 1 MiB and 10 MiB a 20 MiB segment, as PyTorch does (fewer
  /// upstream allocations, more memory held). Off: a large segment is the request rounded up to
  /// 2 MiB, which measured better on every model trace (docs/MEMORY.md).
  bool large_buffer_segments = false;
  /// kBestFit: before taking a new segment from upstream, give whole free segments back (the
  /// out-of-memory release, done early). Reserved memory then stays within a few percent of the
  /// peak in use, at the price of upstream allocations in steady state (docs/MEMORY.md).
  bool release_on_miss = false;
  /// Upper bound on bytes reserved from the upstream allocator; 0 = none.
  size_t limit_bytes = 0;
  /// Upper bound as a fraction of the device's memory (DeviceAttribute::kTotalMemory); 0 = none.
  /// When both limits are set the smaller applies.
  double limit_fraction = 0.0;
  /// Independent sub-pools, each with its own lock; a thread uses one chosen by its index, so
  /// threads do not contend on one lock. 0 = one per hardware thread, at most 8. Rounded up to
  /// a power of two.
  int arenas = 0;
  /// Events for cross-stream reuse; null = DeviceAPI::try_get(device type).
  DeviceAPI* device_api = nullptr;
  /// Report bytes in use and reserved as profiler counter tracks.
  bool trace_counters = true;
};

/// Byte and event counts of a pool. A snapshot.
struct PoolStats {
  size_t in_use_bytes = 0;     ///< bytes of blocks handed out (block sizes, after rounding)
  size_t requested_bytes = 0;  ///< bytes the live allocations asked for
  size_t cached_bytes = 0;     ///< reserved from upstream but free in the pool
  size_t reserved_bytes = 0;   ///< held from the upstream allocator (in use + cached)
  /// Maximum of in_use_bytes: exact while one thread (one arena) allocates; with several arenas
  /// the sum of their peaks, an upper bound.
  size_t peak_in_use_bytes = 0;
  size_t peak_reserved_bytes = 0;
  uint64_t allocations = 0;  ///< successful allocate calls
  uint64_t frees = 0;
  uint64_t hits = 0;    ///< served from cached memory
  uint64_t misses = 0;  ///< needed a new upstream allocation
  uint64_t upstream_allocations = 0;
  uint64_t upstream_frees = 0;
  uint64_t oom_recoveries = 0;  ///< times the cache was released to satisfy a request
};

/// A caching allocator over `upstream`. Allocations freed on a stream are reused on the same
/// stream at once and on another stream only after an event recorded at free time completes
/// (the CPU stream is trivially ordered). On upstream failure or when over the limit it releases
/// the cache and retries once, then throws OutOfMemory naming the size and the pool's state.
///
/// Thread-safe. Allocation and free take one arena's lock (a spin lock; arenas are per thread
/// group), never one global lock. A DataPtr may be freed on any thread, and may outlive the pool:
/// a pool destroyed with blocks still out gives back its cache and orphans the shards that hold
/// them, which free each block when it comes back and return every byte upstream (Note
/// [Orphaned shards] in memory/pool_shard.cc; docs/LIFETIMES.md). The destructor must not run
/// concurrently with a free of one of its blocks.
class PooledAllocator final : public Allocator {
 public:
  PooledAllocator(std::shared_ptr<Allocator> upstream, PoolConfig config = {});
  /// Empties the cache; blocks still out stay valid (see above).
  ~PooledAllocator() override;

  DataPtr allocate(size_t bytes, size_t alignment = kDefaultAlignment) override;
  DataPtr allocate_on(size_t bytes, const Stream& stream,
                      size_t alignment = kDefaultAlignment) override;
  Device device() const override;
  std::string name() const override;
  /// Marks a block of this pool (`ptr`, still allocated) as used on `stream` besides the stream
  /// it was allocated for, as PyTorch's record_stream does: when it is freed, the stream it is
  /// freed on waits (on the device) for the work queued on `stream` by then, so the block serves
  /// no later request before that work. Call from the block's owner; throws ValueError for a
  /// pointer from another allocator.
  void record_stream(const DataPtr& ptr, const Stream& stream);

  /// Returns every cached block that is whole (not split) to the upstream allocator, waiting for
  /// pending cross-stream events first. Thread-safe.
  void empty_cache();

  PoolStats stats() const;
  /// Starts a new peak measurement: peaks become the current values. Thread-safe.
  void reset_peak();
  /// The block size a request of `bytes` is served with under this pool's strategy.
  size_t rounded_size(size_t bytes) const;
  /// A one-line description of the pool's state (used in OutOfMemory messages).
  std::string describe() const;
  const PoolConfig& config() const { return config_; }
  /// The effective reserve limit in bytes (0 = none).
  size_t limit() const { return limit_; }

 public:
  struct Block;  // internal; public only so that helpers in the .cc file can name it

 private:
  struct Shard;
  friend struct Shard;

  Shard& arena_for_thread();
  DataPtr allocate_impl(size_t bytes, const Stream& stream, size_t alignment);
  Block* allocate_block(Shard& arena, size_t rounded, size_t requested, const Stream& stream);
  Block* upstream_allocate(Shard& arena, size_t rounded, const Stream& stream);
  bool reserve(size_t bytes);
  void unreserve(size_t bytes);
  void release_arena_cache(Shard& arena);
  Block* merge_neighbours(Shard& shard, void* bins, Block* block);
  void consolidate(Shard& shard);
  static void free_block(void* context, void* ptr, size_t size) noexcept;
  static void free_orphaned(Block* block) noexcept;
  void orphan_shards() noexcept;
  void trace_counters() const;
  void free_block_impl(Block* block) noexcept;

  std::shared_ptr<Allocator> upstream_;
  Device device_;  // cached: the upstream's virtual call would touch a line shared with shards
  PoolConfig config_;
  DeviceAPI* device_api_;
  size_t limit_ = 0;
  std::vector<std::unique_ptr<Shard>> arenas_;
  uint32_t shard_mask_ = 0;
  alignas(64) std::atomic<size_t> reserved_{0};
  std::atomic<size_t> peak_reserved_{0};
  std::atomic<uint64_t> oom_recoveries_{0};
  Profiler* profiler_ = nullptr;
  bool trace_ = false;
  std::string track_in_use_;
  std::string track_reserved_;
};

}  // namespace weft
