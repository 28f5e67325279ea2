// GPU arrays' data path under the coordinator: NCCL collectives launched on the engine
// operations' streams, completed by events the coordinator polls (Note [Collectives on GPU
// streams] in nccl_transport.cc). Built with WEFT_USE_NCCL; without it GPU arrays are refused.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/device.h"
#include "base/dtype.h"
#include "dist/meta.h"
#include "dist/transport.h"

namespace weft::dist::detail {

/// Whether this build carries collectives of GPU arrays (NCCL). Thread-safe.
bool have_nccl();
/// Whether NCCL moves and reduces arrays of `dtype`: float32, float64, float16, bfloat16 and the
/// 8-, 32- and 64-bit integers (not bool, int16, uint16). False without NCCL. Thread-safe.
bool nccl_supports(DType dtype);
/// The GPU a process's collectives use: cuda:(local_rank modulo the GPUs it sees), so one process
/// per GPU on a host, or one visible GPU per process (CUDA_VISIBLE_DEVICES). Thread-safe.
Device process_gpu(int local_rank);

/// Launches and completes the collectives of GPU arrays. Created, called and destroyed by the
/// coordinator thread only (not thread-safe).
class GpuCollectives {
 public:
  virtual ~GpuCollectives() = default;
  /// Launches one scheduled batch — one collective, or allreduces rank 0 fused (one NCCL group)
  /// — on the stream of its first request, without waiting for it, and takes the requests out
  /// of `group`: each one's `done` runs from poll() once the work finished, or from abort().
  /// Throws DistError (leaving the requests in `group`) when NCCL refuses the launch, or when it
  /// has not enqueued the batch within the timeout (a non-blocking communicator enqueues in the
  /// background while it connects to peers; the communicator is then aborted).
  virtual void launch(std::vector<Request>& group) = 0;
  /// Completes the launched batches whose work has finished and returns how many collectives it
  /// completed. When the oldest batch has run longer than the timeout, or NCCL reports an
  /// asynchronous error, aborts (abort()) and throws DistError saying which.
  virtual int poll() = 0;
  /// Whether collectives are launched and not yet completed.
  virtual bool busy() const = 0;
  /// Aborts the communicator (ncclCommAbort; later launches throw) and fails every collective in
  /// flight with DistError("<collective>: <why>"). A second call only fails new launches.
  virtual void abort(const std::string& why) = 0;
};

/// The group's NCCL communicator on `device`, bootstrapped through `transport`: rank 0's
/// ncclUniqueId is broadcast over it (MPI_Ibcast), then a non-blocking ncclCommInitRankConfig.
/// Collective: every rank calls it at the same point of the schedule (the first GPU collective).
/// `timeout_s` (the group's timeout) bounds the whole bootstrap, each launch and each launched
/// batch (Note [Abortable bootstrap] in nccl_transport.cc). Throws NotImplemented in a build
/// without NCCL; DistError naming the rank, the device and the timeout when NCCL fails or a peer
/// does not join in time (the communicator is then aborted, and the group must fail).
std::unique_ptr<GpuCollectives> make_nccl_collectives(Transport& transport, Device device,
                                                      double timeout_s);

}  // namespace weft::dist::detail
