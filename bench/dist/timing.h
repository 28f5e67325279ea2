// Timing shared by the two halves of weft_dist_bench (dist_bench.cc for CPU arrays over MPI,
// nccl_bench.cc for GPU arrays over NCCL), so that both report times measured the same way.
#pragma once
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace weft::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds per call over `iters` calls of fn, median of `repeats`. Ranks start each repeat
// together (a barrier), and a repeat takes the slowest rank's time: a collective finishes only
// when its last rank does.
template <typename Fn>
double time_us(int iters, int repeats, Fn&& fn) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto start = Clock::now();
    for (int i = 0; i < iters; ++i) fn();
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
    MPI_Allreduce(MPI_IN_PLACE, &us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    samples.push_back(us);
  }
  return median(samples);
}

}  // namespace weft::bench
