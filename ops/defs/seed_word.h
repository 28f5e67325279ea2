// Seeds of random kernels inside captured CUDA graphs (Note [Random numbers in captured graphs]
// in graph/graph_capture.cc): a pass's seed word, advanced on the device once per pass, and the
// seed one random node of the pass derives from it. Shared by the host and CUDA code so that
// both compute the same numbers.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define WEFT_SEED_FN __host__ __device__ inline
#else
#define WEFT_SEED_FN inline
#endif

namespace weft::seed_word {

/// The increment of the seed word's sequence (a Weyl sequence: 2^64 / golden ratio, odd, so the
/// sequence visits every word before it repeats).
constexpr uint64_t kStep = 0x9E3779B97F4A7C15ull;

/// The word after `word`: what `_random_seed_next` computes.
WEFT_SEED_FN uint64_t next(uint64_t word) { return word + kStep; }

/// SplitMix64's output function: a bijection of 64-bit words whose every output bit depends on
/// every input bit.
WEFT_SEED_FN uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The seed of the random node numbered `offset` in a pass whose word is `word`: distinct nodes
/// of one pass, and one node in successive passes, get unrelated seeds.
WEFT_SEED_FN uint64_t combine(uint64_t word, uint64_t offset) {
  return mix(word ^ mix(offset * kStep + 1));
}

}  // namespace weft::seed_word

#undef WEFT_SEED_FN
