// The best-fit segment-policy model (see segment_model.h). It mirrors PooledAllocator's
// kBestFit paths: allocate_block (best fit with LIFO ties, split), upstream_allocate (segment
// sizes), free_block_impl (merge next, then prev) and release_arena_cache (whole segments).
#include "segment_model.h"

#include "base/error.h"

namespace weft::bench {

namespace {
uint64_t round_up(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
}  // namespace

SegmentModel::SegmentModel(SegmentPolicy policy) : policy_(std::move(policy)) {}

SegmentModel::~SegmentModel() = default;

SegmentModel::Block* SegmentModel::make_block() {
  storage_.push_back(std::make_unique<Block>());
  return storage_.back().get();
}

void SegmentModel::insert_free(Block* block) {
  block->seq = ++seq_;
  pool_of(block->small).free.emplace(block->size, ~block->seq, block);
}

void SegmentModel::erase_free(Block* block) {
  pool_of(block->small).free.erase(Key{block->size, ~block->seq, block});
}

// The smallest free block of at least `rounded` bytes (the newest among equal sizes), split as
// the real pool splits; null on a miss.
SegmentModel::Block* SegmentModel::take(uint64_t rounded, bool small) {
  Pool& pool = pool_of(small);
  auto it = pool.free.lower_bound(Key{rounded, 0, nullptr});
  if (it == pool.free.end()) return nullptr;
  Block* block = std::get<2>(*it);
  pool.free.erase(it);
  const uint64_t remaining = block->size - rounded;
  if ((small && remaining >= policy_.min_block) ||
      (!small && remaining > policy_.large_split_remainder)) {
    Block* rest = make_block();
    rest->size = remaining;
    rest->small = small;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) rest->next->prev = rest;
    block->next = rest;
    block->size = rounded;
    if (pool.tail == block) pool.tail = rest;
    insert_free(rest);
  }
  block->allocated = true;
  return block;
}

uint64_t SegmentModel::segment_size(uint64_t rounded, bool small) const {
  if (small) return policy_.small_segment;
  if (rounded < policy_.min_large_alloc) return policy_.large_segment;
  return round_up(rounded, policy_.round_large);
}

void SegmentModel::new_segment(uint64_t rounded, bool small) {
  const uint64_t size = segment_size(rounded, small);
  Block* block = make_block();
  block->size = size;
  block->small = small;
  block->head = true;
  reserved_ += size;
  ++segments_allocated_;
  segment_bytes_allocated_ += size;
  insert_free(block);
}

void SegmentModel::grow(uint64_t rounded, bool small) {
  Pool& pool = pool_of(small);
  Block* tail = pool.tail;
  const bool tail_free = tail != nullptr && !tail->allocated;
  const uint64_t need = rounded - (tail_free ? tail->size : 0);
  const uint64_t size = round_up(need, policy_.round_large);
  reserved_ += size;
  ++segments_allocated_;
  segment_bytes_allocated_ += size;
  if (tail_free) {
    erase_free(tail);
    tail->size += size;
    insert_free(tail);
    return;
  }
  Block* block = make_block();
  block->size = size;
  block->small = small;
  block->head = tail == nullptr;
  block->prev = tail;
  if (tail != nullptr) tail->next = block;
  pool.tail = block;
  insert_free(block);
}

void SegmentModel::release_free_segments() {
  for (Pool* pool : {&small_, &large_}) {
    for (auto it = pool->free.begin(); it != pool->free.end();) {
      Block* block = std::get<2>(*it);
      if (block->head && block->next == nullptr) {
        reserved_ -= block->size;
        it = pool->free.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void SegmentModel::allocate(uint32_t id, uint64_t bytes) {
  const uint64_t rounded = round_up(bytes == 0 ? 1 : bytes, policy_.min_block);
  const bool small = rounded <= policy_.small_size;
  Block* block = take(rounded, small);
  if (block == nullptr) {
    if (policy_.expandable) {
      grow(rounded, small);
    } else {
      if (policy_.release_on_miss && (!policy_.release_only_over_peak ||
                                      reserved_ + segment_size(rounded, small) > peak_reserved_)) {
        release_free_segments();
      }
      new_segment(rounded, small);
    }
    block = take(rounded, small);
    WEFT_ICHECK(block != nullptr) << "segment model: a new segment did not fit its request";
  }
  if (reserved_ > peak_reserved_) peak_reserved_ = reserved_;
  if (live_.size() <= id) live_.resize(id + 1, nullptr);
  WEFT_ICHECK(live_[id] == nullptr) << "segment model: id " << id << " allocated twice";
  live_[id] = block;
}

void SegmentModel::free(uint32_t id) {
  WEFT_ICHECK(id < live_.size() && live_[id] != nullptr) << "segment model: bad free of " << id;
  Block* block = live_[id];
  live_[id] = nullptr;
  block->allocated = false;
  Pool& pool = pool_of(block->small);
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    erase_free(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    if (pool.tail == next) pool.tail = block;
  }
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    erase_free(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    if (pool.tail == block) pool.tail = prev;
    block = prev;
  }
  insert_free(block);
}

std::vector<SegmentPolicy> segment_policy_variants() {
  std::vector<SegmentPolicy> variants;
  SegmentPolicy current;
  current.description = "PooledAllocator's kBestFit today (checks the model against the pool)";
  variants.push_back(current);

  SegmentPolicy p = current;
  p.name = "exact_large";
  p.description =
      "no 20 MiB segment for 1-10 MiB requests: every large segment is the request "
      "rounded to 2 MiB";
  p.min_large_alloc = 0;
  variants.push_back(p);

  p = current;
  p.name = "release_on_miss";
  p.description = "on a miss, return whole free segments upstream before reserving a new one";
  p.release_on_miss = true;
  variants.push_back(p);

  p.name = "exact_large+release";
  p.description = "exact_large and release_on_miss together";
  p.min_large_alloc = 0;
  variants.push_back(p);

  p.name = "exact_large+release+small1M";
  p.description = "exact_large+release with 1 MiB small segments for requests <= 512 KiB";
  p.small_size = size_t{512} << 10;
  p.small_segment = size_t{1} << 20;
  variants.push_back(p);

  p = current;
  p.name = "exact_large+release_over_peak";
  p.description =
      "exact_large; on a miss that would raise the peak reserved so far, first "
      "return whole free segments upstream";
  p.min_large_alloc = 0;
  p.release_on_miss = true;
  p.release_only_over_peak = true;
  variants.push_back(p);

  p = current;
  p.name = "expandable";
  p.description =
      "one segment per pool growing at its end in 2 MiB steps (virtual memory "
      "mapping, as PyTorch's expandable_segments)";
  p.expandable = true;
  variants.push_back(p);

  p.name = "expandable_1pool";
  p.description = "expandable, with one pool for all sizes (splits down to 512 B)";
  p.small_size = 0;
  p.large_split_remainder = p.min_block - 1;
  variants.push_back(p);
  return variants;
}

}  // namespace weft::bench
