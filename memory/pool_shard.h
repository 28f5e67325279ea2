// Internals of the pooled allocator shared by its two source files: the block record, the
// best-fit size bins and the per-thread shard. Not part of the API (installed with the other
// headers only because every header of a layer is).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/spin_lock.h"
#include "memory/pooled_allocator.h"

namespace weft {
namespace detail::pool {
// Best-fit sizing, as in PyTorch's CUDA caching allocator.
constexpr size_t kMinBlock = 512;                 // every best-fit size is a multiple of this
constexpr size_t kSmallSize = size_t{1} << 20;    // requests up to this use the small pool
constexpr size_t kSmallBuffer = size_t{2} << 20;  // segment size of the small pool
constexpr size_t kMinLargeAlloc = size_t{10} << 20;
constexpr size_t kLargeBuffer = size_t{20} << 20;  // segment size for mid-sized requests
constexpr size_t kRoundLarge = size_t{2} << 20;    // larger segments round to this
constexpr size_t kSegmentAlignment = 512;          // upstream alignment of every segment

// Best-fit free blocks are kept in size bins: 8 bins of 512 B below 4 KiB, then 8 sub-bins per
// power of two (as in TLSF). Every block in a higher bin is larger than every block in a lower
// one, so scanning the request's bin for the smallest fit and otherwise taking the smallest
// block of the next non-empty bin is an exact best fit.
constexpr int kNumBins = 8 + (64 - 12) * 8;
inline int bin_index(size_t size) {
  if (size < 4096) return static_cast<int>(size / kMinBlock);
  int fl = std::bit_width(size) - 1;  // >= 12
  int sl = static_cast<int>((size >> (fl - 3)) & 7);
  return 8 + (fl - 12) * 8 + sl;
}
}  // namespace detail::pool

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
  // Other streams it was used on while allocated (PooledAllocator::record_stream).
  std::vector<Stream> other_streams;
  // Recorded at free time on a device with streams; shared by the pieces of a split block.
  std::shared_ptr<Event> event;
  bool event_pending = false;
  bool allocated = false;
  bool free_listed = false;  // best fit: in a free bin
  bool small_pool = false;
  bool direct = false;  // over-aligned: bypasses the cache

  bool is_segment_head() const { return static_cast<bool>(segment); }
};

namespace detail::pool {
using Block = PooledAllocator::Block;

// A block may serve `stream` at once if it was last used there; otherwise only once the event
// recorded when it was freed has completed.
inline bool quiescent(const Block* block) { return !block->event_pending || block->event->query(); }

inline bool usable_on(const Block* block, const Stream& stream) {
  return block->stream.handle == stream.handle || quiescent(block);
}

// Two free neighbours can become one block when they were last used on the same stream (the
// newer free-time event covers both), or when all work before both frees has completed.
inline bool mergeable(const Block* block, const Block* other) {
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
}  // namespace detail::pool

// Aligned to a cache line: shards are written on every allocation by different threads.
struct alignas(64) PooledAllocator::Shard {
  // The pool; null once the pool is destroyed with blocks of this shard still out (Note
  // [Orphaned shards]). Written only by the pool's destructor.
  PooledAllocator* pool = nullptr;
  detail::SpinLock lock;
  // kExact / kRound: cached whole blocks by rounded size (powers of two in a direct table).
  std::vector<Block*> pow2_free[64];
  std::unordered_map<size_t, std::vector<Block*>> sized_free;
  // kBestFit
  detail::pool::FreeBins small_free;
  detail::pool::FreeBins large_free;
  // Note [Fast bins]: on a pool without stream events (the CPU), a freed best-fit block
  // first goes to a fast bin by size, unmerged, and a request of the same size takes it back at
  // once: no split, no merge (dlmalloc's fastbins). Any other request first merges every fast
  // block into the bins ("consolidates"), and so does releasing the cache, so placement is the
  // same exact best fit as without fast bins and the pool never grows because of them.
  std::array<Block*, detail::pool::kNumBins> fast{};
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
  // Set when orphaned (Note [Orphaned shards]): what the shard needs to give memory back alone.
  std::shared_ptr<Allocator> orphan_upstream;
  DeviceAPI* orphan_device_api = nullptr;

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

}  // namespace weft
