// GPU allreduce latency by message size (weft_dist_bench --nccl): weft's engine path on a cuda
// array (dist::allreduce pushed on the engine, negotiated through the coordinator, launched over
// NCCL on the operation's stream, then waited for) against ncclAllReduce called directly on a
// communicator of its own, on the same GPU and sizes, alternating in one run. Rank 0 prints
//   dist_nccl_allreduce bytes=<B> nccl_us=<median> weft_us=<median> nccl_busbw=<GB/s>
//   weft_busbw=<GB/s> overhead=<weft/nccl - 1>
// or one "# nccl: skipped (...)" line, on every rank alike, without NCCL or a GPU per process.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/dist/timing.h"
#include "dist/dist.h"
#include "dist/gpu_collectives.h"
#include "ndarray/runtime.h"

#if defined(WEFT_DIST_BENCH_NCCL)
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace weft::bench {

namespace {

// Whether every rank can run the GPU half; `why` says why not.
bool gpu_group_ready(std::string* why) {
  int ok = 1;
#if defined(WEFT_DIST_BENCH_NCCL)
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  if (gpus == 0) {
    ok = 0;
    *why = "no GPU";
  } else if (gpus < dist::local_size()) {
    ok = 0;
    *why = "fewer GPUs than processes on a host";
  }
#else
  ok = 0;
  *why = "weft_dist_bench was built without NCCL";
#endif
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all == 0 && why->empty()) *why = "another rank has no GPU of its own";
  return all == 1;
}

}  // namespace

int run_nccl_bench(bool quick) {
  std::string why;
  if (!gpu_group_ready(&why)) {
    if (dist::rank() == 0) std::printf("# nccl: skipped (%s)\n", why.c_str());
    return 0;
  }
#if defined(WEFT_DIST_BENCH_NCCL)
  using Clock = std::chrono::steady_clock;
  const int rank = dist::rank(), n = dist::size();
  const Device gpu = dist::detail::process_gpu(dist::local_rank());
  cudaSetDevice(gpu.id);
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "nccl bench: ncclCommInitRank failed on rank %d\n", rank);
    return 1;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (rank == 0) {
    std::printf(
        "# dist allreduce on %s, %d processes, float32 sum: weft (engine + NCCL) vs "
        "ncclAllReduce\n",
        to_string(gpu).c_str(), n);
  }
  std::vector<size_t> sizes = {4,       64,      1 << 10,  16 << 10, 256 << 10,
                               1 << 20, 4 << 20, 16 << 20, 64 << 20};
  if (quick) sizes = {4, 1 << 10, 64 << 10, 1 << 20};
  for (size_t bytes : sizes) {
    const int64_t count = static_cast<int64_t>(std::max<size_t>(bytes / 4, 1));
    NDArray a = NDArray::ones(Shape{count}, DType::kFloat32, gpu);
    a.wait_to_read();
    void* raw = nullptr;
    cudaMalloc(&raw, static_cast<size_t>(count) * 4);
    cudaMemset(raw, 0, static_cast<size_t>(count) * 4);
    auto nccl_call = [&] {
      ncclAllReduce(raw, raw, static_cast<size_t>(count), ncclFloat32, ncclSum, comm, stream);
      cudaStreamSynchronize(stream);
    };
    auto weft_call = [&] {
      dist::allreduce(a, a, dist::ReduceOp::kSum, dist::CollectiveOptions{"nccl_bench", 0});
      a.wait_to_read();
    };
    auto t0 = Clock::now();
    nccl_call();
    double one = std::chrono::duration<double>(Clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const int iters =
        std::clamp(static_cast<int>((quick ? 0.05 : 0.2) / std::max(one, 1e-6)), 3, 2000);
    const int repeats = quick ? 3 : 5;
    time_us(3, 1, nccl_call);
    time_us(3, 1, weft_call);
    std::vector<double> nccl_us, weft_us;
    for (int round = 0; round < 3; ++round) {
      nccl_us.push_back(time_us(iters, repeats, nccl_call));
      weft_us.push_back(time_us(iters, repeats, weft_call));
    }
    const double m = median(nccl_us), w = median(weft_us);
    const double traffic = static_cast<double>(count * 4) * 2.0 * (n - 1) / n;
    if (rank == 0) {
      std::printf(
          "dist_nccl_allreduce bytes=%zu nccl_us=%.2f weft_us=%.2f nccl_busbw=%.3f "
          "weft_busbw=%.3f overhead=%.3f\n",
          static_cast<size_t>(count * 4), m, w, traffic / m / 1e3, traffic / w / 1e3, w / m - 1);
      std::fflush(stdout);
    }
    cudaFree(raw);
  }
  cudaStreamDestroy(stream);
  ncclCommDestroy(comm);
#endif
  return 0;
}

}  // namespace weft::bench
