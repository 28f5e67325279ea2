// Allreduce bus bandwidth by message size: weft's engine path (dist::allreduce pushed on the
// engine, negotiated through the coordinator, then waited for) against a plain MPI_Allreduce of
// the same MPI library on the same buffers, alternating in one run. Run under mpirun
// (bench/dist/run.sh); rank 0 prints
//   dist_allreduce bytes=<B> mpi_us=<median> weft_us=<median> mpi_busbw=<GB/s> weft_busbw=<GB/s>
//   overhead=<weft/mpi - 1>
// Bus bandwidth is bytes * 2 (n - 1) / n / time, the traffic of a ring allreduce per link.
// With --nccl it measures GPU arrays instead, against ncclAllReduce (nccl_bench.cc).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/dist/timing.h"
#include "dist/dist.h"
#include "ndarray/runtime.h"

using namespace weft;
using Clock = std::chrono::steady_clock;

namespace weft::bench {
int run_nccl_bench(bool quick);  // nccl_bench.cc
}

using bench::median;
using bench::time_us;

int main(int argc, char** argv) {
  bool quick = false, nccl = false;
  for (int i = 1; i < argc; ++i) {
    quick = quick || std::string(argv[i]) == "--quick";
    nccl = nccl || std::string(argv[i]) == "--nccl";
  }
  dist::init();
  if (nccl) {
    int rc = bench::run_nccl_bench(quick);
    dist::shutdown();
    return rc;
  }
  const int rank = dist::rank();
  const int n = dist::size();
  std::vector<size_t> sizes = {4,       64,      1 << 10,  16 << 10, 256 << 10,
                               1 << 20, 4 << 20, 16 << 20, 64 << 20};
  if (quick) sizes = {4, 1 << 10, 64 << 10, 1 << 20};
  if (rank == 0) {
    std::printf("# dist allreduce, %d processes, %s, float32 sum\n", n, dist::backend().c_str());
  }
  for (size_t bytes : sizes) {
    const int64_t count = static_cast<int64_t>(std::max<size_t>(bytes / 4, 1));
    NDArray a = NDArray::ones(Shape{count});
    a.wait_to_read();
    std::vector<float> raw(static_cast<size_t>(count), 1.0f);
    // Iterations for ~0.2 s of MPI time, found from one timed call.
    auto t0 = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    double one = std::chrono::duration<double>(Clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int iters = std::clamp(static_cast<int>((quick ? 0.05 : 0.2) / std::max(one, 1e-6)), 3, 2000);
    int repeats = quick ? 3 : 5;
    auto mpi_call = [&] {
      MPI_Allreduce(MPI_IN_PLACE, raw.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    };
    auto weft_call = [&] {
      dist::allreduce(a, a, dist::ReduceOp::kSum, dist::CollectiveOptions{"bench", 0});
      a.wait_to_read();
    };
    // Warm up both, then alternate so that drift of the machine hits both alike.
    time_us(3, 1, mpi_call);
    time_us(3, 1, weft_call);
    std::vector<double> mpi_us, weft_us;
    for (int round = 0; round < 3; ++round) {
      mpi_us.push_back(time_us(iters, repeats, mpi_call));
      weft_us.push_back(time_us(iters, repeats, weft_call));
    }
    double m = median(mpi_us), w = median(weft_us);
    double traffic = static_cast<double>(count * 4) * 2.0 * (n - 1) / n;
    if (rank == 0) {
      std::printf(
          "dist_allreduce bytes=%zu mpi_us=%.2f weft_us=%.2f mpi_busbw=%.3f weft_busbw=%.3f "
          "overhead=%.3f\n",
          static_cast<size_t>(count * 4), m, w, traffic / m / 1e3, traffic / w / 1e3, w / m - 1);
      std::fflush(stdout);
    }
  }
  dist::Stats s = dist::stats();
  if (rank == 0) {
    std::printf("# coordinator: %lld collectives, %lld transport calls\n",
                static_cast<long long>(s.collectives), static_cast<long long>(s.transport_calls));
  }
  dist::shutdown();
  return 0;
}
