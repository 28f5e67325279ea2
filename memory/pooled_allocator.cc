// The pooled (caching) allocator.
#include "memory/pooled_allocator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "base/profiler.h"
#include "base/spin_lock.h"

namespace weft {

namespace {
// Best-fit sizing, as in PyTorch's CUDA caching allocator.
constexpr size_t kMinBlock = 512;                  // every best-fit size is a multiple of this
constexpr size_t kSmallSize = size_t{1} << 20;     // requests up to this use the small pool
constexpr size_t kSmallBuffer = size_t{2} << 20;   // segment size of the small pool
constexpr size_t kMinLargeAlloc = size_t{10} << 20;
constexpr size_t kLargeBuffer = size_t{20} << 20;  // segment size for mid-sized requests
constexpr size_t kRoundLarge = size_t{2} << 20;    // larger segments round to this
constexpr size_t kSegmentAlignment = 512;          // upstream alignment of every segment

// Best-fit free blocks are kept in size bins: 8 bins of 512 B below 4 KiB, then 8 sub-bins per
// power of two (as in TLSF). Every block in a higher bin is larger than every block in a lower
// one, so scanning the request's bin for the smallest fit and otherwise taking the smallest
// block of the next non-empty bin is an exact best fit.
constexpr int kNumBins = 8 + (64 - 12) * 8;
int bin_index(size_t size) {
  if (size < 4096) return static_cast<int>(size / kMinBlock);
  int fl = std::bit_width(size) - 1;  // >= 12
  int sl = static_cast<int>((size >> (fl - 3)) & 7);
  return 8 + (fl - 12) * 8 + sl;
}

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
    case PoolStrategy::kExact: return "exact";
    case PoolStrategy::kRound: return "round";
    case PoolStrategy::kBestFit: return "best_fit";
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

struct PooledAllocator::Block {
  char* ptr = nullptr;
  size_t size = 0;       // bytes of this block
  size_t requested = 0;  // bytes asked for while allocated
  Shard* shard = nullptr;
  Block* prev = nullptr;  // best fit: neighbours within the segment, by address
  Block* next = nullptr;
  Block* free_prev = nullptr;  // best fit: links in a free bin
  Block* free_next = nullptr;
  DataPtr segment;  // set on a segment's first block: owns the upstream memory
  Stream stream;    // where it was last used
  // Recorded at free time on a device with streams; shared by the pieces of a split block.
  std::shared_ptr<Event> event;
  bool event_pending = false;
  bool allocated = false;
  bool free_listed = false;  // best fit: in a free bin
  bool small_pool = false;
  bool direct = false;  // over-aligned: bypasses the cache

  bool is_segment_head() const { return static_cast<bool>(segment); }
};

namespace {
using Block = PooledAllocator::Block;

// A block may serve `stream` at once if it was last used there; otherwise only once the event
// recorded when it was freed has completed.
bool quiescent(const Block* block) { return !block->event_pending || block->event->query(); }

bool usable_on(const Block* block, const Stream& stream) {
  return block->stream.handle == stream.handle || quiescent(block);
}

// Two free neighbours can become one block when they were last used on the same stream (the
// newer free-time event covers both), or when all work before both frees has completed.
bool mergeable(const Block* block, const Block* other) {
  if (other == nullptr || !other->free_listed) return false;  // allocated, or in a fast bin
  if (other->stream.handle == block->stream.handle) return true;
  return quiescent(block) && quiescent(other);
}

// Best-fit free blocks of one pool (small or large) in size bins with a non-empty bitmap.
struct FreeBins {
  std::array<Block*, kNumBins> heads{};
  std::array<uint64_t, (kNumBins + 63) / 64> nonempty{};

  void insert(Block* block) {
    int bin = bin_index(block->size);
    block->free_prev = nullptr;
    block->free_next = heads[bin];
    if (heads[bin] != nullptr) heads[bin]->free_prev = block;
    heads[bin] = block;
    nonempty[bin / 64] |= uint64_t{1} << (bin % 64);
    block->free_listed = true;
  }
  void erase(Block* block) {
    int bin = bin_index(block->size);
    if (block->free_prev != nullptr) {
      block->free_prev->free_next = block->free_next;
    } else {
      heads[bin] = block->free_next;
    }
    if (block->free_next != nullptr) block->free_next->free_prev = block->free_prev;
    block->free_prev = block->free_next = nullptr;
    block->free_listed = false;
    if (heads[bin] == nullptr) nonempty[bin / 64] &= ~(uint64_t{1} << (bin % 64));
  }
  int next_nonempty(int from) const {
    for (int word = from / 64; word < static_cast<int>(nonempty.size()); ++word) {
      uint64_t bits = nonempty[word];
      if (word == from / 64) bits &= ~uint64_t{0} << (from % 64);
      if (bits != 0) return word * 64 + std::countr_zero(bits);
    }
    return -1;
  }
  // The smallest usable block of at least `size` bytes, or null.
  Block* best_fit(size_t size, const Stream& stream, bool check_streams) const {
    for (int bin = next_nonempty(bin_index(size)); bin >= 0; bin = next_nonempty(bin + 1)) {
      Block* best = nullptr;
      for (Block* block = heads[bin]; block != nullptr; block = block->free_next) {
        if (block->size < size || (best != nullptr && block->size >= best->size)) continue;
        if (check_streams && !usable_on(block, stream)) continue;
        best = block;
        if (block->size == size) break;
      }
      if (best != nullptr) return best;
    }
    return nullptr;
  }
  template <typename F>
  void for_each(F&& f) const {
    for (Block* head : heads) {
      for (Block* block = head; block != nullptr;) {
        Block* next = block->free_next;
        f(block);
        block = next;
      }
    }
  }
};
}  // namespace

// Aligned to a cache line: shards are written on every allocation by different threads.
struct alignas(64) PooledAllocator::Shard {
  PooledAllocator* pool = nullptr;
  detail::SpinLock lock;
  // kExact / kRound: cached whole blocks by rounded size (powers of two in a direct table).
  std::vector<Block*> pow2_free[64];
  std::unordered_map<size_t, std::vector<Block*>> sized_free;
  // kBestFit
  FreeBins small_free;
  FreeBins large_free;
  // Note [Fast bins]: on a pool without stream events (the CPU), a freed best-fit block
  // first goes to a fast bin by size, unmerged, and a request of the same size takes it back at
  // once: no split, no merge (dlmalloc's fastbins). Any other request first merges every fast
  // block into the bins ("consolidates"), and so does releasing the cache, so placement is the
  // same exact best fit as without fast bins and the pool never grows because of them.
  std::array<Block*, kNumBins> fast{};
  size_t fast_blocks = 0;
  bool multi_stream = false;
  bool seen_stream = false;
  void* first_stream = nullptr;
  // Statistics, guarded by `lock`.
  size_t in_use = 0;
  size_t peak_in_use = 0;
  size_t requested = 0;
  size_t cached = 0;
  uint64_t allocations = 0, frees = 0, hits = 0, misses = 0, upstream_allocations = 0,
           upstream_frees = 0;

  std::vector<Block*>& sized_list(size_t rounded) {
    if ((rounded & (rounded - 1)) == 0) return pow2_free[std::countr_zero(rounded)];
    return sized_free[rounded];
  }

  void note_stream(const Stream& stream) {
    if (stream.handle == first_stream && seen_stream) return;
    if (!seen_stream) {
      seen_stream = true;
      first_stream = stream.handle;
    } else {
      multi_stream = true;
    }
  }

  // Block records recycled within the shard: splitting and merging happen on every best-fit
  // allocation and free, and must not cost a heap allocation each.
  Block* spare_blocks = nullptr;
  Block* new_block() {
    if (spare_blocks == nullptr) return new Block();
    Block* block = spare_blocks;
    spare_blocks = block->free_next;
    block->free_next = nullptr;
    return block;
  }
  void recycle(Block* block) {
    block->event.reset();
    block->event_pending = false;
    block->free_next = spare_blocks;
    spare_blocks = block;
  }
  ~Shard() {
    while (spare_blocks != nullptr) {
      Block* next = spare_blocks->free_next;
      delete spare_blocks;
      spare_blocks = next;
    }
  }

  void account_allocation(Block* block, size_t bytes) {
    ++allocations;
    requested += bytes;
    in_use += block->size;
    if (in_use > peak_in_use) peak_in_use = in_use;
  }
};

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
    int64_t total = api != nullptr ? api->attribute(memory_device, DeviceAttribute::kTotalMemory) : 0;
    WEFT_CHECK(total > 0) << "PooledAllocator: limit_fraction set but the memory size of "
                          << to_string(dev) << " is unknown";
    auto by_fraction = static_cast<size_t>(static_cast<double>(total) * config_.limit_fraction);
    limit_ = limit_ == 0 ? by_fraction : std::min(limit_, by_fraction);
  }
  // A power of two, so a thread finds its shard with a mask rather than a division.
  int shards = static_cast<int>(std::bit_ceil(static_cast<unsigned>(
      config_.arenas > 0 ? config_.arenas : std::min(cpu_core_count(), 8))));
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
  PoolStats s = stats();
  if (s.in_use_bytes != 0) {
    // Blocks still out would return into freed shards; keep the shards (and memory) alive.
    std::fprintf(stderr, "weft: %s destroyed with %zu bytes still allocated; leaking its cache\n",
                 name().c_str(), s.in_use_bytes);
    for (auto& shard : arenas_) static_cast<void>(shard.release());
    return;
  }
  empty_cache();
}

Device PooledAllocator::device() const { return device_; }

std::string PooledAllocator::name() const {
  return std::string("pooled(") + upstream_->name() + ", " + pool_strategy_name(config_.strategy) +
         ")";
}

size_t PooledAllocator::rounded_size(size_t bytes) const {
  const size_t n = bytes == 0 ? 1 : bytes;
  switch (config_.strategy) {
    case PoolStrategy::kExact: return detail::round_up(n, config_.exact_granularity);
    case PoolStrategy::kRound:
      if (n < config_.round_cutoff) return std::max(kMinBlock, std::bit_ceil(n));
      return detail::round_up(n, config_.round_cutoff);
    case PoolStrategy::kBestFit: return detail::round_up(n, kMinBlock);
  }
  return n;
}

PooledAllocator::Shard& PooledAllocator::arena_for_thread() {
  return *arenas_[thread_index() & shard_mask_];
}

DataPtr PooledAllocator::allocate(size_t bytes, size_t alignment) {
  return allocate_impl(bytes, Stream{device(), nullptr}, alignment);
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

// Takes a cached block for `rounded` bytes on `stream`, splitting best-fit blocks. Requires the
// shard's lock. Returns null on a miss.
PooledAllocator::Block* PooledAllocator::allocate_block(Shard& shard, size_t rounded,
                                                        size_t requested, const Stream& stream) {
  Block* block = nullptr;
  if (config_.strategy != PoolStrategy::kBestFit) {
    std::vector<Block*>& list = shard.sized_list(rounded);
    for (size_t i = list.size(); i-- > 0;) {
      if (!shard.multi_stream || usable_on(list[i], stream)) {
        block = list[i];
        list[i] = list.back();
        list.pop_back();
        break;
      }
    }
    if (block == nullptr) return nullptr;
    shard.cached -= block->size;
  } else {
    const bool small = rounded <= kSmallSize;
    if (shard.fast_blocks != 0) {
      Block** link = &shard.fast[bin_index(rounded)];
      for (Block* candidate = *link; candidate != nullptr; candidate = *link) {
        if (candidate->size == rounded && candidate->stream.handle == stream.handle) {
          *link = candidate->free_next;
          candidate->free_next = nullptr;
          --shard.fast_blocks;
          shard.cached -= candidate->size;
          candidate->allocated = true;
          candidate->requested = requested;
          return candidate;
        }
        link = &candidate->free_next;
      }
    }
    // No block of exactly this size in a fast bin: merge them all first, so the search below is
    // the same exact best fit as without fast bins.
    if (shard.fast_blocks != 0) consolidate(shard);
    FreeBins& bins = small ? shard.small_free : shard.large_free;
    block = bins.best_fit(rounded, stream, shard.multi_stream);
    if (block == nullptr) return nullptr;
    bins.erase(block);
    shard.cached -= block->size;
    const size_t remaining = block->size - rounded;
    if ((small && remaining >= kMinBlock) || (!small && remaining > kSmallSize)) {
      // Split: the tail stays free in the pool, last used where the block was.
      Block* rest = shard.new_block();
      rest->ptr = block->ptr + rounded;
      rest->size = remaining;
      rest->shard = &shard;
      rest->small_pool = block->small_pool;
      rest->stream = block->stream;
      rest->event = block->event;  // the tail's memory was freed under the same event
      rest->event_pending = block->event_pending;
      rest->prev = block;
      rest->next = block->next;
      if (rest->next != nullptr) rest->next->prev = rest;
      block->next = rest;
      block->size = rounded;
      bins.insert(rest);
      shard.cached += rest->size;
    }
  }
  block->event.reset();
  block->event_pending = false;
  block->stream = stream;
  block->allocated = true;
  block->requested = requested;
  return block;
}

PooledAllocator::Block* PooledAllocator::upstream_allocate(Shard& shard, size_t rounded,
                                                           const Stream& stream) {
  size_t segment_size = rounded;
  bool small = false;
  if (config_.strategy == PoolStrategy::kBestFit) {
    small = rounded <= kSmallSize;
    if (small) {
      segment_size = kSmallBuffer;
    } else if (config_.large_buffer_segments && rounded < kMinLargeAlloc) {
      segment_size = kLargeBuffer;
    } else {
      segment_size = detail::round_up(rounded, kRoundLarge);
    }
  }
  if (!reserve(segment_size)) return nullptr;
  DataPtr memory;
  try {
    memory = upstream_->allocate(segment_size, kSegmentAlignment);
  } catch (const OutOfMemory&) {
    unreserve(segment_size);
    return nullptr;
  } catch (...) {
    unreserve(segment_size);
    throw;
  }
  Block* block = new Block();
  block->ptr = static_cast<char*>(memory.get());
  block->size = segment_size;
  block->shard = &shard;
  block->small_pool = small;
  block->stream = stream;
  block->segment = std::move(memory);
  return block;
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

// Merges a free block (not in a bin) with its free neighbours where allowed; returns the
// result. Requires the shard's lock.
PooledAllocator::Block* PooledAllocator::merge_neighbours(Shard& shard, void* bins_ptr, Block* block) {
  FreeBins& bins = *static_cast<FreeBins*>(bins_ptr);
  auto absorb_event = [](Block* into, Block* from) {
    // Keep the event that covers the most work: a pending one, the newer on the same stream.
    if (from->event_pending && (!into->event_pending || from->stream.handle == into->stream.handle)) {
      into->event = std::move(from->event);
      into->event_pending = true;
    }
  };
  if (mergeable(block, block->next)) {
    Block* next = block->next;
    bins.erase(next);
    shard.cached -= next->size;
    if (!block->event_pending) absorb_event(block, next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    shard.recycle(next);
  }
  if (mergeable(block, block->prev)) {
    Block* prev = block->prev;
    bins.erase(prev);
    shard.cached -= prev->size;
    absorb_event(prev, block);
    if (block->stream.handle != prev->stream.handle) prev->stream = block->stream;
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    shard.recycle(block);
    block = prev;
  }
  return block;
}

// Moves every fast-bin block into the bins, merging it with free neighbours (Note [Fast bins]).
// Requires the shard's lock.
void PooledAllocator::consolidate(Shard& shard) {
  for (Block*& head : shard.fast) {
    while (head != nullptr) {
      Block* block = head;
      head = block->free_next;
      block->free_next = nullptr;
      shard.cached -= block->size;
      FreeBins& bins = block->small_pool ? shard.small_free : shard.large_free;
      block = merge_neighbours(shard, &bins, block);
      bins.insert(block);
      shard.cached += block->size;
    }
  }
  shard.fast_blocks = 0;
}

void PooledAllocator::free_block(void* context, void*, size_t) noexcept {
  auto* block = static_cast<Block*>(context);
  block->shard->pool->free_block_impl(block);
}

void PooledAllocator::free_block_impl(Block* block) noexcept {
  Shard& shard = *block->shard;
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

void PooledAllocator::release_arena_cache(Shard& shard) {
  // Wait for the work behind every pending free-time event first, so that free neighbours last
  // used on different streams can merge back into whole segments.
  std::vector<std::shared_ptr<Event>> pending;
  {
    std::lock_guard<detail::SpinLock> lock(shard.lock);
    auto collect = [&](Block* block) {
      if (block->event_pending) pending.push_back(block->event);
    };
    if (config_.strategy != PoolStrategy::kBestFit) {
      for (auto& list : shard.pow2_free)
        for (Block* block : list) collect(block);
      for (auto& entry : shard.sized_free)
        for (Block* block : entry.second) collect(block);
    } else {
      shard.small_free.for_each(collect);
      shard.large_free.for_each(collect);
    }
  }
  for (auto& event : pending) {
    try {
      event->synchronize();
    } catch (...) {
    }
  }
  std::vector<Block*> released;
  {
    std::lock_guard<detail::SpinLock> lock(shard.lock);
    if (config_.strategy != PoolStrategy::kBestFit) {
      auto take = [&](std::vector<Block*>& list) {
        released.insert(released.end(), list.begin(), list.end());
        list.clear();
      };
      for (auto& list : shard.pow2_free) take(list);
      for (auto& entry : shard.sized_free) take(entry.second);
      shard.sized_free.clear();
    } else {
      consolidate(shard);
      for (FreeBins* bins : {&shard.small_free, &shard.large_free}) {
        std::vector<Block*> blocks;
        bins->for_each([&](Block* block) {
          if (block->event_pending && block->event->query()) {
            block->event.reset();  // the work behind it is done
            block->event_pending = false;
          }
          blocks.push_back(block);
        });
        for (Block* block : blocks) {
          if (!block->free_listed) continue;  // merged into a neighbour already
          bins->erase(block);
          shard.cached -= block->size;
          block = merge_neighbours(shard, bins, block);
          bins->insert(block);
          shard.cached += block->size;
        }
        // Only whole segments (a free head with no neighbour) can go back upstream.
        bins->for_each([&](Block* block) {
          if (block->is_segment_head() && block->next == nullptr) {
            bins->erase(block);
            released.push_back(block);
          }
        });
      }
    }
    for (Block* block : released) {
      shard.cached -= block->size;
      ++shard.upstream_frees;
    }
  }
  for (Block* block : released) {
    if (block->event_pending && !block->event->query()) {
      try {
        block->event->synchronize();
      } catch (...) {
      }
    }
    unreserve(block->size);
    delete block;  // the segment's DataPtr returns the memory upstream
  }
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
