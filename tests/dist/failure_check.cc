// Failure behaviour across processes, one mode per run (tests/dist/failure_check.sh runs them
// under mpirun and reads the lines each rank prints):
//   mismatch  ranks give one named allreduce different shapes: every rank gets a DistError
//             naming the tensor and the shapes, and the group goes on working;
//   hang      the last rank never issues a named allreduce: the others get a DistError naming the
//             tensor and that rank within the timeout;
//   kill      rank 1 is killed: the others' next collective fails, naming rank 1, within the
//             timeout (mpirun must run with --mca orte_abort_on_non_zero_status 0, or it kills
//             the whole job itself).
//   nccl_kill rank 1 issues the group's first GPU collective and is killed while the NCCL
//             communicator is being created: rank 0's collective fails within the timeout
//             instead of waiting in the bootstrap for ever (Note [Abortable bootstrap] in
//             dist/nccl_transport.cc). Every rank reports ok, skipped, without NCCL or a GPU
//             per process.
// Each rank that saw what it should prints "failure_check <mode>: rank <r> ok".
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "devices/device_api.h"
#include "dist/dist.h"
#include "dist/gpu_collectives.h"
#include "ndarray/runtime.h"
#include "tests/dist/gpu_group.h"

using namespace weft;
using Clock = std::chrono::steady_clock;

namespace {

// Runs an allreduce and returns the message of the DistError it ended with ("" when none).
std::string allreduce_error(const NDArray& a, const std::string& name) {
  try {
    dist::allreduce(a, a, dist::ReduceOp::kSum, dist::CollectiveOptions{name, 0});
    a.wait_to_read();
  } catch (const dist::DistError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

int report(const std::string& mode, bool ok, const std::string& detail) {
  std::printf("failure_check %s: rank %d %s: %s\n", mode.c_str(), dist::rank(), ok ? "ok" : "WRONG",
              detail.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// Why this group cannot run GPU collectives ("" when it can); every rank agrees.
std::string gpu_skip_reason() { return dist::test_support::gpu_group_skip_reason("gpu_ready"); }

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  dist::init();
  const int r = dist::rank();
  const int n = dist::size();
  const double timeout = dist::Options::from_environment().timeout_s;
  dist::barrier();
  if (mode == "mismatch") {
    NDArray a = NDArray::ones(Shape{r == 1 ? 5 : 4});
    std::string e = allreduce_error(a, "w");
    bool ok =
        contains(e, "'w'") && contains(e, "shape") && contains(e, "[5]") && contains(e, "[4]");
    NDArray b = NDArray::ones(Shape{3});  // the group still works
    ok = ok && allreduce_error(b, "after").empty() && b.to_doubles()[0] == n;
    int rc = report(mode, ok, e);
    dist::shutdown();
    return rc;
  }
  if (mode == "hang") {
    if (r == n - 1) {
      std::this_thread::sleep_for(std::chrono::duration<double>(3 * timeout));
      std::printf("failure_check hang: rank %d ok: slept\n", r);
      std::fflush(stdout);
      dist::shutdown();
      return 0;
    }
    auto start = Clock::now();
    std::string e = allreduce_error(NDArray::ones(Shape{8}), "late");
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    bool ok = contains(e, "'late'") && contains(e, "rank " + std::to_string(n - 1)) &&
              contains(e, "did not issue") && waited < 2 * timeout + 1;
    int rc = report(mode, ok, e + " (after " + std::to_string(waited) + " s)");
    dist::shutdown();
    return rc;
  }
  if (mode == "kill") {
    if (r == 1) std::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto start = Clock::now();
    std::string e = allreduce_error(NDArray::ones(Shape{8}), "after_kill");
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    bool ok = contains(e, "rank 1 stopped answering") && waited < 3 * timeout + 2;
    // Later collectives fail at once instead of hanging.
    ok = ok && !allreduce_error(NDArray::ones(Shape{8}), "later").empty();
    int rc = report(mode, ok, e + " (after " + std::to_string(waited) + " s)");
    dist::shutdown();
    std::_Exit(rc);  // no MPI_Finalize with a dead peer
  }
  if (mode == "nccl_kill") {
    std::string skip = gpu_skip_reason();
    if (!skip.empty()) {
      int rc = report(mode, true, "skipped: " + skip);
      dist::shutdown();
      return rc;
    }
    NDArray g =
        NDArray::ones(Shape{8}, DType::kFloat32, dist::detail::process_gpu(dist::local_rank()));
    g.wait_to_read();
    dist::barrier();
    if (r == 1) {
      // The key reaches rank 0 at once, rank 0 schedules it and both enter the bootstrap; this
      // rank dies inside it, before the communicator exists.
      dist::allreduce(g, g, dist::ReduceOp::kSum, dist::CollectiveOptions{"first_gpu", 0});
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::raise(SIGKILL);
    }
    auto start = Clock::now();
    std::string e = allreduce_error(g, "first_gpu");
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    // Expected: "creating the NCCL communicator ... failed"; had NCCL finished before the kill,
    // the heartbeat's "rank 1 stopped answering" instead. Either way no hang.
    bool ok = !e.empty() && waited < 3 * timeout + 2;
    int rc = report(mode, ok, e + " (after " + std::to_string(waited) + " s)");
    dist::shutdown();
    std::_Exit(rc);  // no MPI_Finalize with a dead peer
  }
  std::fprintf(stderr, "usage: failure_check mismatch|hang|kill|nccl_kill\n");
  return 2;
}
