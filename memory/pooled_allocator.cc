// The pooled (caching) allocator's front end: configuration, allocation and free, statistics.
// Blocks, size classes and shards are in memory/pool_shard.{h,cc}.
#include "memory/pooled_allocator.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <sstream>

#include "base/error.h"
#include "base/profiler.h"
#include "base/spin_lock.h"
#include "memory/pool_shard.h"

namespace weft {

using detail::pool::bin_index;
using detail::pool::FreeBins;
using detail::pool::kMinBlock;
using detail::pool::kSegmentAlignment;

namespace {
std::atomic<uint32_t> g_next_thread_index{0};
thread_local uint32_t t_thread_index = UINT32_MAX;  // constant-initialised: no TLS guard
uint32_t thread_index() {
  if (t_thread_index == UINT32_MAX) {
    t_thread_index = g_next_thread_index.fetch_add(1, std::memory_order_relaxed);
  }
  return t_thread_index;
}
}  // namespace

const char* pool_strategy_name(PoolStrategy strategy) {
  switch (strategy) {
    case PoolStrategy::kExact:
      return "exact";
    case PoolStrategy::kRound:
      return "round";
    case PoolStrategy::kBestFit:
      return "best_fit";
  }
  return "unknown";
}

PoolStrategy parse_pool_strategy(const std::string& text) {
  if (text == "exact" || text == "naive") return PoolStrategy::kExact;
  if (text == "round") return PoolStrategy::kRound;
  if (text == "best_fit" || text == "bestfit") return PoolStrategy::kBestFit;
  WEFT_THROW(ValueError) << "unknown pool strategy '" << text
                         << "' (expected exact, round or best_fit)";
}

PooledAllocator::PooledAllocator(std::shared_ptr<Allocator> upstream, PoolConfig config)
    : upstream_(std::move(upstream)), config_(config) {
  WEFT_CHECK(upstream_ != nullptr) << "PooledAllocator: null upstream allocator";
  WEFT_CHECK(config_.round_cutoff >= kMinBlock && std::has_single_bit(config_.round_cutoff))
      << "PooledAllocator: round_cutoff must be a power of two >= 512, got "
      << config_.round_cutoff;
  WEFT_CHECK(config_.exact_granularity >= 1 && std::has_single_bit(config_.exact_granularity))
      << "PooledAllocator: exact_granularity must be a power of two, got "
      << config_.exact_granularity;
  WEFT_CHECK(config_.limit_fraction >= 0.0 && config_.limit_fraction <= 1.0)
      << "PooledAllocator: limit_fraction must be in [0, 1], got " << config_.limit_fraction;
  WEFT_CHECK(config_.arenas >= 0 && config_.arenas <= 256)
      << "PooledAllocator: arenas must be in [0, 256], got " << config_.arenas;
  const Device dev = upstream_->device();
  device_ = dev;
  device_api_ = config_.device_api;
  if (device_api_ == nullptr && dev.type == DeviceType::kCUDA) {
    device_api_ = DeviceAPI::try_get(dev.type);
  }
  limit_ = config_.limit_bytes;
  if (config_.limit_fraction > 0.0) {
    const Device memory_device = dev.type == DeviceType::kCUDAHost ? Device::cpu() : dev;
    DeviceAPI* api = DeviceAPI::try_get(memory_device.type);
    int64_t total =
        api != nullptr ? api->attribute(memory_device, DeviceAttribute::kTotalMemory) : 0;
    WEFT_CHECK(total > 0) << "PooledAllocator: limit_fraction set but the memory size of "
                          << to_string(dev) << " is unknown";
    auto by_fraction = static_cast<size_t>(static_cast<double>(total) * config_.limit_fraction);
    limit_ = limit_ == 0 ? by_fraction : std::min(limit_, by_fraction);
  }
  // A power of two, so a thread finds its shard with a mask rather than a division.
  int shards = static_cast<int>(std::bit_ceil(
      static_cast<unsigned>(config_.arenas > 0 ? config_.arenas : std::min(cpu_core_count(), 8))));
  shard_mask_ = static_cast<uint32_t>(shards - 1);
  for (int i = 0; i < shards; ++i) {
    arenas_.push_back(std::make_unique<Shard>());
    arenas_.back()->pool = this;
  }
  profiler_ = &Profiler::global();
  trace_ = config_.trace_counters;
  track_in_use_ = "memory " + name() + " in use";
  track_reserved_ = "memory " + name() + " reserved";
}

PooledAllocator::~PooledAllocator() {
  // Gives back every cached segment; a shard with blocks still out is orphaned and frees them
  // when they come back (Note [Orphaned shards] in memory/pool_shard.cc, docs/LIFETIMES.md).
  empty_cache();
  orphan_shards();
}

Device PooledAllocator::device() const { return device_; }

std::string PooledAllocator::name() const {
  return std::string("pooled(") + upstream_->name() + ", " + pool_strategy_name(config_.strategy) +
         ")";
}

size_t PooledAllocator::rounded_size(size_t bytes) const {
  const size_t n = bytes == 0 ? 1 : bytes;
  switch (config_.strategy) {
    case PoolStrategy::kExact:
      return detail::round_up(n, config_.exact_granularity);
    case PoolStrategy::kRound:
      if (n < config_.round_cutoff) return std::max(kMinBlock, std::bit_ceil(n));
      return detail::round_up(n, config_.round_cutoff);
    case PoolStrategy::kBestFit:
      return detail::round_up(n, kMinBlock);
  }
  return n;
}

PooledAllocator::Shard& PooledAllocator::arena_for_thread() {
  return *arenas_[thread_index() & shard_mask_];
}

DataPtr PooledAllocator::allocate(size_t bytes, size_t alignment) {
  // Inside an operation on a GPU stream the block is used there (not on the null stream).
  return allocate_impl(bytes, current_stream(device()), alignment);
}

DataPtr PooledAllocator::allocate_on(size_t bytes, const Stream& stream, size_t alignment) {
  return allocate_impl(bytes, stream, alignment);
}

bool PooledAllocator::reserve(size_t bytes) {
  size_t current = reserved_.load(std::memory_order_relaxed);
  for (;;) {
    if (current + bytes < current) return false;
    if (limit_ != 0 && current + bytes > limit_) return false;
    // relaxed: the counter is a budget; no memory is published through it.
    if (reserved_.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed)) break;
  }
  const size_t now = current + bytes;
  size_t peak = peak_reserved_.load(std::memory_order_relaxed);
  while (now > peak &&
         !peak_reserved_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  return true;
}

void PooledAllocator::unreserve(size_t bytes) {
  reserved_.fetch_sub(bytes, std::memory_order_relaxed);  // relaxed: a budget counter
}

DataPtr PooledAllocator::allocate_impl(size_t bytes, const Stream& stream, size_t alignment) {
  const size_t align = detail::effective_alignment(alignment);
  const size_t rounded = rounded_size(bytes);
  Shard& shard = arena_for_thread();
  Block* block = nullptr;
  if (align > kSegmentAlignment) {
    // Over-aligned requests bypass the cache: one upstream allocation each, with the same
    // release-and-retry on failure as every other miss.
    const size_t size = detail::round_up(rounded, align);
    DataPtr memory;
    for (int attempt = 0; attempt < 2 && !memory; ++attempt) {
      if (reserve(size)) {
        try {
          memory = upstream_->allocate(size, align);
        } catch (const OutOfMemory&) {
          unreserve(size);
        } catch (...) {
          unreserve(size);
          throw;
        }
      }
      if (!memory && attempt == 0) {
        oom_recoveries_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
        for (auto& other : arenas_) release_arena_cache(*other);
      }
    }
    if (!memory) {
      WEFT_THROW(OutOfMemory) << name() << ": out of memory allocating "
                              << detail::format_bytes(bytes) << " (" << bytes
                              << " bytes, alignment " << align << ") after releasing the cache; "
                              << describe();
    }
    block = new Block();
    block->ptr = static_cast<char*>(memory.get());
    block->size = size;
    block->shard = &shard;
    block->direct = true;
    block->stream = stream;
    block->segment = std::move(memory);
    block->allocated = true;
    block->requested = bytes;
    std::lock_guard<detail::SpinLock> lock(shard.lock);
    ++shard.misses;
    ++shard.upstream_allocations;
    shard.account_allocation(block, bytes);
  } else {
    for (int attempt = 0; attempt < 2 && block == nullptr; ++attempt) {
      {
        std::lock_guard<detail::SpinLock> lock(shard.lock);
        shard.note_stream(stream);
        block = allocate_block(shard, rounded, bytes, stream);
        if (block != nullptr) {
          ++shard.hits;
          shard.account_allocation(block, bytes);
          break;
        }
      }
      // Miss: a new segment from upstream, outside the lock (cudaMalloc can take milliseconds).
      if (config_.release_on_miss && config_.strategy == PoolStrategy::kBestFit && attempt == 0) {
        release_arena_cache(shard);
      }
      Block* segment = upstream_allocate(shard, rounded, stream);
      if (segment != nullptr) {
        std::lock_guard<detail::SpinLock> lock(shard.lock);
        ++shard.misses;
        ++shard.upstream_allocations;
        if (config_.strategy == PoolStrategy::kBestFit) {
          FreeBins& bins = segment->small_pool ? shard.small_free : shard.large_free;
          bins.insert(segment);
          shard.cached += segment->size;
          block = allocate_block(shard, rounded, bytes, stream);
          WEFT_ICHECK(block != nullptr) << "a fresh segment did not fit its own request";
        } else {
          segment->allocated = true;
          segment->requested = bytes;
          block = segment;
        }
        shard.account_allocation(block, bytes);
        break;
      }
      if (attempt == 0) {
        // Out of memory (or over the limit): give every shard's cache back and retry once.
        oom_recoveries_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
        for (auto& other : arenas_) release_arena_cache(*other);
      }
    }
    if (block == nullptr) {
      WEFT_THROW(OutOfMemory) << name() << ": out of memory allocating "
                              << detail::format_bytes(bytes) << " (" << bytes << " bytes, block "
                              << detail::format_bytes(rounded) << ") after releasing the cache; "
                              << describe();
    }
  }
  if (trace_ && profiler_->enabled()) trace_counters();
  return DataPtr(block->ptr, block->size, device(), block, &PooledAllocator::free_block);
}

void PooledAllocator::trace_counters() const {
  PoolStats s = stats();
  profiler_->record_counter(track_in_use_, static_cast<double>(s.in_use_bytes));
  profiler_->record_counter(track_reserved_, static_cast<double>(s.reserved_bytes));
}

void PooledAllocator::free_block(void* context, void*, size_t) noexcept {
  auto* block = static_cast<Block*>(context);
  PooledAllocator* pool = block->shard->pool;
  if (pool == nullptr) return free_orphaned(block);  // Note [Orphaned shards]
  pool->free_block_impl(block);
}

void PooledAllocator::record_stream(const DataPtr& ptr, const Stream& stream) {
  WEFT_CHECK_AS(ValueError, ptr && ptr.deleter() == &PooledAllocator::free_block)
      << "record_stream: the pointer was not allocated by pool '" << name() << "'";
  auto* block = static_cast<Block*>(ptr.context());
  WEFT_CHECK_AS(ValueError, block->shard->pool == this)
      << "record_stream: the pointer belongs to another pool than '" << name() << "'";
  if (stream.handle == block->stream.handle) return;
  for (const Stream& s : block->other_streams) {
    if (s.handle == stream.handle) return;
  }
  block->other_streams.push_back(stream);
}

void PooledAllocator::free_block_impl(Block* block) noexcept {
  Shard& shard = *block->shard;
  if (!block->other_streams.empty() && device_api_ != nullptr) {
    // record_stream: join the other streams' work into the block's stream, so that the one
    // free-time event below covers it (no host wait).
    for (const Stream& other : block->other_streams) {
      try {
        Event joined = device_api_->create_event(other.device);
        joined.record(other);
        joined.block(block->stream);
      } catch (...) {
        try {
          device_api_->synchronize(other);  // never a race: wait on the host instead
        } catch (...) {
        }
      }
    }
    block->other_streams.clear();
  }
  if (block->direct) {
    {
      std::lock_guard<detail::SpinLock> lock(shard.lock);
      ++shard.frees;
      ++shard.upstream_frees;
      shard.requested -= block->requested;
      shard.in_use -= block->size;
    }
    unreserve(block->size);
    delete block;  // its DataPtr returns the memory upstream
    if (trace_ && profiler_->enabled()) trace_counters();
    return;
  }
  bool record = false;
  std::shared_ptr<Event> event;
  if (block->stream.device.type == DeviceType::kCUDA) {
    // Freed by work on a stream of the block's device (an engine worker's operation that used
    // it there): the free is ordered on that stream, so that is where the block was last used.
    Stream here = current_stream(block->stream.device);
    if (here.handle != nullptr) block->stream = here;
  }
  if (device_api_ != nullptr) {
    // The block may serve another stream only after the work queued before this free.
    try {
      event = std::make_shared<Event>(device_api_->create_event(block->stream.device));
      event->record(block->stream);
      record = true;
    } catch (...) {
      try {
        device_api_->synchronize(block->stream);  // fall back to a full wait, never to a race
      } catch (...) {
      }
    }
  }
  {
    std::lock_guard<detail::SpinLock> lock(shard.lock);
    ++shard.frees;
    shard.requested -= block->requested;
    shard.in_use -= block->size;
    block->allocated = false;
    block->requested = 0;
    if (record) {
      block->event = std::move(event);
      block->event_pending = true;
    }
    if (config_.strategy != PoolStrategy::kBestFit) {
      shard.sized_list(block->size).push_back(block);
      shard.cached += block->size;
    } else if (!record) {
      // Note [Fast bins]
      Block*& head = shard.fast[bin_index(block->size)];
      block->free_next = head;
      head = block;
      ++shard.fast_blocks;
      shard.cached += block->size;
    } else {
      FreeBins& bins = block->small_pool ? shard.small_free : shard.large_free;
      block = merge_neighbours(shard, &bins, block);
      bins.insert(block);
      shard.cached += block->size;
    }
  }
  if (trace_ && profiler_->enabled()) trace_counters();
}

void PooledAllocator::empty_cache() {
  for (auto& shard : arenas_) release_arena_cache(*shard);
  if (trace_ && profiler_->enabled()) trace_counters();
}

PoolStats PooledAllocator::stats() const {
  PoolStats stats;
  for (const auto& shard : arenas_) {
    std::lock_guard<detail::SpinLock> lock(shard->lock);
    stats.in_use_bytes += shard->in_use;
    stats.peak_in_use_bytes += shard->peak_in_use;
    stats.requested_bytes += shard->requested;
    stats.cached_bytes += shard->cached;
    stats.allocations += shard->allocations;
    stats.frees += shard->frees;
    stats.hits += shard->hits;
    stats.misses += shard->misses;
    stats.upstream_allocations += shard->upstream_allocations;
    stats.upstream_frees += shard->upstream_frees;
  }
  stats.reserved_bytes = reserved_.load(std::memory_order_relaxed);
  stats.peak_reserved_bytes = peak_reserved_.load(std::memory_order_relaxed);
  stats.oom_recoveries = oom_recoveries_.load(std::memory_order_relaxed);
  return stats;
}

void PooledAllocator::reset_peak() {
  for (auto& shard : arenas_) {
    std::lock_guard<detail::SpinLock> lock(shard->lock);
    shard->peak_in_use = shard->in_use;
  }
  peak_reserved_.store(reserved_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

std::string PooledAllocator::describe() const {
  PoolStats s = stats();
  std::ostringstream out;
  out << "pool " << name() << ": reserved " << detail::format_bytes(s.reserved_bytes);
  if (limit_ != 0) out << " of a " << detail::format_bytes(limit_) << " limit";
  out << ", in use " << detail::format_bytes(s.in_use_bytes) << ", cached "
      << detail::format_bytes(s.cached_bytes) << ", peak in use "
      << detail::format_bytes(s.peak_in_use_bytes) << ", " << s.allocations << " allocations ("
      << s.hits << " hits, " << s.misses << " misses)";
  return out.str();
}

}  // namespace weft
