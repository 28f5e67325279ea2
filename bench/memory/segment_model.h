// A model of PooledAllocator's best-fit strategy with a configurable segment policy, for
// experiments on fragmentation: it keeps the same books (blocks, splits, merges, segments) over
// offsets, without memory, so that policies can be compared on the same traces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace weft::bench {

/// How the modelled best-fit pool sizes its segments. The defaults are PooledAllocator's
/// kBestFit constants (memory/pooled_allocator.cc), so the default policy must reserve exactly
/// what the real pool reserves on any single-stream, single-arena trace.
struct SegmentPolicy {
  std::string name = "best_fit";
  std::string description;                         ///< one line, for the report
  size_t min_block = 512;                          ///< request rounding and smallest split
  size_t small_size = size_t{1} << 20;             ///< requests up to this use the small pool
  size_t small_segment = size_t{2} << 20;          ///< segment size of the small pool
  size_t min_large_alloc = size_t{10} << 20;       ///< large requests below this get large_segment
  size_t large_segment = size_t{20} << 20;         ///< segment for mid-sized large requests
  size_t round_large = size_t{2} << 20;            ///< larger segments round to this
  size_t large_split_remainder = size_t{1} << 20;  ///< split a large block if the rest is > this
  /// On a miss, first return every whole free segment to upstream (as the real pool does only
  /// on out-of-memory).
  bool release_on_miss = false;
  /// With release_on_miss: release only when the new segment would raise the peak reserved so
  /// far (a miss under the high-water mark keeps the cache).
  bool release_only_over_peak = false;
  /// One segment per pool that grows at its end on a miss (by what the request lacks beyond a
  /// free tail block, rounded to `round_large`), like PyTorch's expandable segments built on
  /// virtual memory mapping: freed neighbours always merge, nothing is stranded in a segment.
  bool expandable = false;
};

/// The best-fit pool's book-keeping under a SegmentPolicy. Call from one thread.
class SegmentModel {
 public:
  explicit SegmentModel(SegmentPolicy policy);
  ~SegmentModel();
  SegmentModel(const SegmentModel&) = delete;
  SegmentModel& operator=(const SegmentModel&) = delete;

  /// Allocates `bytes` as `id` (ids are dense small integers).
  void allocate(uint32_t id, uint64_t bytes);
  /// Frees `id`, merging with free neighbours in its segment.
  void free(uint32_t id);

  uint64_t reserved() const { return reserved_; }
  uint64_t peak_reserved() const { return peak_reserved_; }
  /// Upstream allocations (segments, or growth steps when expandable) so far, and their bytes.
  uint64_t segments_allocated() const { return segments_allocated_; }
  uint64_t segment_bytes_allocated() const { return segment_bytes_allocated_; }

 private:
  struct Block {
    uint64_t size = 0;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
    uint64_t seq = 0;  // insertion order into the free set (ties go to the newest)
    bool allocated = false;
    bool small = false;
    bool head = false;  // first block of its segment
  };
  using Key = std::tuple<uint64_t, uint64_t, Block*>;  // size, ~seq, block
  struct Pool {
    std::set<Key> free;
    Block* tail = nullptr;  // expandable: the last block of the pool's one segment
  };

  Pool& pool_of(bool small) { return small ? small_ : large_; }
  void insert_free(Block* block);
  void erase_free(Block* block);
  Block* take(uint64_t rounded, bool small);
  uint64_t segment_size(uint64_t rounded, bool small) const;
  void new_segment(uint64_t rounded, bool small);
  void grow(uint64_t rounded, bool small);
  void release_free_segments();
  Block* make_block();

  SegmentPolicy policy_;
  Pool small_;
  Pool large_;
  std::vector<std::unique_ptr<Block>> storage_;
  std::vector<Block*> live_;  // by id
  uint64_t seq_ = 0;
  uint64_t reserved_ = 0;
  uint64_t peak_reserved_ = 0;
  uint64_t segments_allocated_ = 0;
  uint64_t segment_bytes_allocated_ = 0;
};

/// The policies the fragmentation benchmark compares: the current one first, then variants.
std::vector<SegmentPolicy> segment_policy_variants();

}  // namespace weft::bench
