// The allocator hot path: alloc+free pairs of weft's PooledAllocator beside glibc malloc and
// oneTBB's scalable_malloc, at fixed sizes and a random mix, on 1 and 2 threads.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace weft::bench {

/// What run_hot_path measures and how long.
struct HotPathOptions {
  /// Sizes in bytes; 0 stands for the random mix (log-uniform 64 B - 4 MiB, 16 live blocks).
  std::vector<size_t> sizes;
  std::vector<int> threads = {1, 2};
  double target_ms_per_rep = 30;  ///< each repetition's loop runs about this long
  int reps = 7;                   ///< repetitions; the median is reported
};

/// The default options: 64 B, 4 KiB, 1 MiB, 64 MiB and the mix; `quick` shortens every loop.
HotPathOptions default_hot_path_options(bool quick);

/// Runs every size x thread count x allocator, each measurement in a fresh forked process,
/// printing per size and thread count `compare alloc_<size> threads=<t> weft=<ns>ns
/// malloc=<ns>ns ratio=<r>`, the same against tbbmalloc, and `info alloc_<size> threads=<t>
/// strategy=<s> ns=<ns> min=.. max=.. other=..% steal=..%` for every pool strategy and peer (other
/// and steal: the machine's share taken by other processes meanwhile). Call from one thread.
void run_hot_path(const HotPathOptions& options);

/// "64B", "4KiB", "1MiB", "64MiB"; "mix" for 0.
std::string size_label(size_t bytes);

}  // namespace weft::bench
