// The transport under the coordinator: small control messages between rank 0 and the others, and
// the blocking collectives that move the data. MPI in mpi_transport.cc; a group of one otherwise.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "base/dtype.h"
#include "dist/dist.h"

namespace weft::dist::detail {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual std::string name() const = 0;

  /// Control messages (the coordinator's negotiation): send is asynchronous and ordered per
  /// destination; try_recv returns false at once when no message from `src` is waiting.
  virtual void send(int dst, std::string message) = 0;
  virtual bool try_recv(int src, std::string* message) = 0;

  /// The data path: blocking collectives every rank enters in the same order (the coordinator
  /// guarantees it). `op` is never kMean here (the coordinator divides). Throw DistError.
  virtual void allreduce(void* buffer, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void broadcast(void* buffer, size_t bytes, int root) = 0;
  virtual void allgather(const void* in, void* out, size_t bytes_per_rank) = 0;
  virtual void reduce_scatter(const void* in, void* out, size_t count_per_rank, DType dtype,
                              ReduceOp op) = 0;
  virtual void barrier() = 0;
  /// broadcast(), given up at `deadline` instead of waiting for ever: true once this rank's part
  /// is done, false when the deadline came first (the root, or a rank the broadcast passes
  /// through, never entered it: dead, hung, or elsewhere in the schedule). For the NCCL
  /// bootstrap, which must not hang the coordinator. After false the data path is out of step
  /// with the peers and no other collective may follow: the caller fails the group.
  virtual bool broadcast_until(void* buffer, size_t bytes, int root,
                               std::chrono::steady_clock::time_point deadline) = 0;
  /// Leaves the group (MPI_Finalize). Nothing is called after it.
  virtual void finalize() = 0;
};

/// The MPI world (initialises MPI with MPI_THREAD_MULTIPLE when nobody has). Throws
/// NotImplemented in a build without MPI.
std::unique_ptr<Transport> make_mpi_transport();
/// Whether this build has MPI.
bool have_mpi();
/// A group of one process: every collective is a copy.
std::unique_ptr<Transport> make_single_transport();

}  // namespace weft::dist::detail
