// The pooled allocator's blocks and shards: taking a block of a size class from a shard
// (splitting best-fit blocks), new segments from upstream, merging freed neighbours, giving the
// cache back, and the orphaned shards that outlive their pool.
#include "memory/pool_shard.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "base/error.h"

namespace weft {

using detail::pool::bin_index;
using detail::pool::FreeBins;
using detail::pool::kLargeBuffer;
using detail::pool::kMinBlock;
using detail::pool::kMinLargeAlloc;
using detail::pool::kRoundLarge;
using detail::pool::kSegmentAlignment;
using detail::pool::kSmallBuffer;
using detail::pool::kSmallSize;
using detail::pool::mergeable;
using detail::pool::usable_on;

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

// Merges a free block (not in a bin) with its free neighbours where allowed; returns the
// result. Requires the shard's lock.
PooledAllocator::Block* PooledAllocator::merge_neighbours(Shard& shard, void* bins_ptr,
                                                          Block* block) {
  FreeBins& bins = *static_cast<FreeBins*>(bins_ptr);
  auto absorb_event = [](Block* into, Block* from) {
    // Keep the event that covers the most work: a pending one, the newer on the same stream.
    if (from->event_pending &&
        (!into->event_pending || from->stream.handle == into->stream.handle)) {
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

// Note [Orphaned shards]
// A pool may be destroyed while blocks it handed out are still alive: arrays and executors that
// outlive weft::shutdown(), a program's own pool destroyed before its buffers (docs/LIFETIMES.md).
// The destructor first empties the cache (waiting for pending free-time events), which gives
// back every segment with nothing allocated in it. A shard with nothing out is then destroyed; a
// shard with blocks out is *orphaned*: its `pool` becomes null, it takes a reference to the
// upstream allocator (the segments' deleters may need it) and the device API, and the pool lets
// go of it. From then on a block's deleter sees the null pool and frees into the shard alone
// (free_orphaned): no caching, no merging, no statistics beyond the bytes still out. When every
// piece of a segment is free, the segment goes back upstream (after waiting for work queued on
// the freed block's stream, on devices with streams); when the shard's last block is freed, the
// shard itself is deleted, and with it the reference to the upstream allocator.
//
// Destroying a pool while another thread frees one of its blocks is a race, as destroying any
// object while it is in use: the destructor must happen before or after each free. (The runtime
// destroys its pools only after joining the engine's workers, which run the deferred frees.)

void PooledAllocator::orphan_shards() noexcept {
  for (auto& shard : arenas_) {
    bool out = false;
    {
      std::lock_guard<detail::SpinLock> lock(shard->lock);
      out = shard->in_use != 0;
      if (out) {
        shard->pool = nullptr;
        shard->orphan_upstream = upstream_;
        shard->orphan_device_api = device_api_;
      }
    }
    // The blocks own an orphaned shard now; free_orphaned deletes it with its last block.
    if (out) static_cast<void>(shard.release());
  }
}

void PooledAllocator::free_orphaned(Block* block) noexcept {
  Shard* shard = block->shard;
  if (shard->orphan_device_api != nullptr && !block->direct) {
    // Work queued on the block's stream may still use it; its segment may go upstream below.
    try {
      shard->orphan_device_api->synchronize(block->stream);
    } catch (...) {
    }
  }
  Block* release = nullptr;
  bool last = false;
  {
    std::lock_guard<detail::SpinLock> lock(shard->lock);
    ++shard->frees;
    shard->requested -= block->requested;
    shard->in_use -= block->size;
    block->allocated = false;
    block->requested = 0;
    Block* head = block;
    while (head->prev != nullptr) head = head->prev;
    bool whole_segment_free = true;
    for (Block* piece = head; piece != nullptr; piece = piece->next) {
      if (piece->allocated) {
        whole_segment_free = false;
        break;
      }
    }
    if (whole_segment_free) release = head;
    last = shard->in_use == 0;
  }
  // Every piece of `release`'s segment is free and no other thread can reach them any more.
  for (Block* piece = release != nullptr ? release->next : nullptr; piece != nullptr;) {
    Block* next = piece->next;
    delete piece;
    piece = next;
  }
  delete release;          // its DataPtr returns the segment upstream
  if (last) delete shard;  // no block refers to it any more; drops the upstream reference
}

}  // namespace weft
