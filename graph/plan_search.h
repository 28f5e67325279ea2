// The offset search behind plan_buffers (internal to the planner): blocks with sizes and
// lifetimes get offsets such that blocks alive at a common step do not overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::graph::detail {

/// Blocks to place. Steps are dense (0 .. num_steps - 1); lifetimes are inclusive.
struct Blocks {
  std::vector<size_t> size;  ///< aligned; 0 takes no space (offset 0)
  std::vector<uint32_t> lo;  ///< first step
  std::vector<uint32_t> hi;  ///< last step
  uint32_t num_steps = 0;
  size_t count() const { return size.size(); }
};

/// The peak over the steps of the bytes alive: no placement needs less.
size_t peak_live_bytes(const Blocks& blocks);

/// Places the blocks (Note [Offset assignment] in plan_search.cc); returns the arena size and sets
/// one offset per block. Offsets are sums of sizes, so they keep the sizes' alignment.
/// Deterministic.
size_t assign_offsets(const Blocks& blocks, std::vector<size_t>& offsets);

}  // namespace weft::graph::detail
