// Collectives across processes as asynchronous engine operations: the process group (init from
// mpirun or another PMIx launcher, rank/size), allreduce, broadcast, allgather, reduce_scatter and
// barrier on NDArrays, negotiated by name through rank 0 and fused into buffers
// (docs/DISTRIBUTED.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "ndarray/ndarray.h"

namespace weft::graph {
class Executor;
}

namespace weft::dist {

/// A collective failed across processes: a rank stopped answering or did not issue a collective
/// within the timeout, ranks disagree on a tensor's shape, type or operation, or the transport
/// reported an error. The message names the collective, its tensor and the ranks involved.
class DistError : public Error {
 public:
  using Error::Error;
};

/// How init() sets up the process group. from_environment() reads the WEFT_DIST_* variables.
struct Options {
  /// Seconds a collective may wait for every rank to issue it, and the coordinator for a rank's
  /// heartbeat, before the collective fails with DistError naming the missing ranks.
  double timeout_s = 60.0;
  /// Tensor fusion: ready allreduces of one type and operation are packed into a buffer of at
  /// most this many bytes and reduced by one call. 0 turns fusion off.
  size_t fusion_bytes = size_t{64} << 20;
  /// The negotiation cycle: how long the coordinator gathers ready collectives before it answers
  /// (milliseconds). Shorter is lower latency; longer fuses more.
  double cycle_ms = 1.0;
  /// Defaults overridden by WEFT_DIST_TIMEOUT (seconds), WEFT_DIST_FUSION_BYTES and
  /// WEFT_DIST_CYCLE_MS. Throws ValueError naming a malformed variable.
  static Options from_environment();
};

/// Joins the process group. Under mpirun (or any launcher MPI understands: PMIx, Slurm) the group
/// is the MPI world; a process started alone is a group of one, where every collective is a copy.
/// When WEFT_RANK / WEFT_WORLD_SIZE are set they must agree with the launcher's (ValueError
/// otherwise). Starts the coordination thread. A second call with the group up is a no-op.
void init(const Options& options = Options::from_environment());
/// Whether init() was called and shutdown() was not.
bool initialized();
/// Waits for this process's collectives, stops the coordination thread and leaves the group
/// (MPI_Finalize). Called at exit if the user did not. After it, init() cannot be called again
/// in the same process (an MPI rule).
void shutdown();

/// This process's rank in the group, the group's size, and the rank and count among the processes
/// on this host. Throw Error before init().
int rank();
int size();
int local_rank();
int local_size();
/// The transport: "mpi (Open MPI 4.1.4)" or "single process".
std::string backend();

enum class ReduceOp { kSum, kMean, kMax, kMin, kProd };
/// "sum", "mean", "max", "min", "prod"; parse_reduce_op throws ValueError for anything else.
const char* reduce_op_name(ReduceOp op);
ReduceOp parse_reduce_op(std::string_view name);

/// Every collective below is pushed on the runtime's engine as an asynchronous operation that
/// reads its input's variable and writes its output's, and returns at once: it runs when the
/// arrays are ready (so an allreduce of a gradient overlaps with the rest of backward), and
/// whatever reads the output afterwards waits for it. Errors reach the output like any operation
/// error (wait_to_read rethrows the DistError).
///
/// Ordering (Note [Negotiation by name]): every rank must issue the same collectives, but not in
/// the same order in time — an engine runs operations as they become ready, which differs between
/// processes. Each collective has a name (given, or "<kind>.<n>" counted per rank in program
/// order); the k-th use of a name on one rank matches the k-th on every other. Rank 0 starts a
/// collective once every rank has issued it, in the order of priority, then of readiness.
///
/// Arrays must be contiguous, of the same shape and type on every rank (except where a collective
/// says otherwise), and all on the CPU or all on the GPU on every rank. CPU arrays go over MPI.
/// GPU arrays (builds with NCCL: WEFT_USE_NCCL) go over NCCL on the engine operation's stream;
/// they must be on this process's GPU, cuda:(local_rank() modulo the visible GPUs), and of a type
/// NCCL has (float32, float64, float16, bfloat16, 8/32/64-bit integers). A GPU array in a build
/// without NCCL is NotImplemented; mixing CPU and GPU arrays, another GPU or another type is a
/// ValueError naming the collective. docs/DISTRIBUTED.md, "GPU arrays over NCCL".
struct CollectiveOptions {
  /// The name ranks match on (empty: "<kind>.<n>").
  std::string name;
  /// Higher runs earlier among collectives ready at once, on the engine and at the coordinator.
  int priority = 0;
};

/// out = op over ranks of `in`. `out` may be `in` (in place). kMean divides the sum by size().
void allreduce(const NDArray& in, const NDArray& out, ReduceOp op = ReduceOp::kSum,
               const CollectiveOptions& options = {});
/// `array` on every rank becomes `root`'s.
void broadcast(const NDArray& array, int root = 0, const CollectiveOptions& options = {});
/// out = the ranks' `in` concatenated along axis 0 in rank order; out's first dimension is
/// size() times in's.
void allgather(const NDArray& in, const NDArray& out, const CollectiveOptions& options = {});
/// Reduces `in` over ranks and gives rank r the r-th of size() equal slices along axis 0 in
/// `out` (in's first dimension is size() times out's).
void reduce_scatter(const NDArray& in, const NDArray& out, ReduceOp op = ReduceOp::kSum,
                    const CollectiveOptions& options = {});
/// Blocks until every rank has reached its matching barrier (and this rank's earlier collectives
/// were started). Throws DistError on a timeout.
void barrier(const CollectiveOptions& options = {});

/// Data-parallel gradients: averages `grads` (name, gradient) over ranks, in the order given —
/// pass them in the order backward produces them (the last layer's first). Each is its own
/// allreduce, so each starts as soon as its gradient is written; the first layers' gradients
/// (needed first by the next step) get the highest priority. Names are prefixed "grad.".
void allreduce_gradients(const std::vector<std::pair<std::string, NDArray>>& grads);
/// Data-parallel backward of a bound training graph: pushes exec.backward(head_grads), then the
/// averaging allreduce of every argument gradient it writes except those named in `skip` (inputs
/// usually have no gradient anyway), last arguments first — the order backward produces them —
/// with allreduce_gradients' priorities, named "grad.<argument>". Returns at once: each allreduce
/// runs as soon as the backward operation writing its gradient has, while the rest of backward
/// runs.
void data_parallel_backward(graph::Executor& exec, const std::vector<NDArray>& head_grads = {},
                            const std::vector<std::string>& skip = {});
/// Makes every rank's `params` equal to rank 0's (start of data-parallel training).
void broadcast_parameters(const std::vector<std::pair<std::string, NDArray>>& params, int root = 0);

/// Counters of this process's coordination.
struct Stats {
  int64_t collectives = 0;      ///< collectives completed
  int64_t fused_batches = 0;    ///< transport calls that carried more than one allreduce
  int64_t transport_calls = 0;  ///< transport calls made (fused or not)
  int64_t bytes_reduced = 0;    ///< bytes of allreduce payload
  int64_t cycles = 0;           ///< schedules received from rank 0 (heartbeats included)
};
Stats stats();

}  // namespace weft::dist
