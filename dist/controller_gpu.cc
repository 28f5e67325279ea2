// The coordinator's GPU half: collectives of GPU arrays go to NCCL (gpu_collectives.h), launched
// in the schedule's order and completed from the coordinator's loop (Note [Collectives on GPU
// streams] in nccl_transport.cc).
#include <thread>

#include "dist/controller.h"

namespace weft::dist::detail {

void Controller::run_gpu(std::vector<Request>& group) {
  const size_t count = group.size();
  const bool allreduce = group.front().meta.kind == Kind::kAllreduce;
  size_t payload = 0;
  for (const auto& r : group) payload += r.in_bytes;
  try {
    if (!gpu_) {
      // Every rank reaches its first GPU collective at the same point of the schedule, so the
      // bootstrap (a broadcast over the transport, then the communicator's creation) is
      // collective. It gives up after the timeout when a rank never joins (Note [Abortable
      // bootstrap] in nccl_transport.cc); the catch below then fails the group.
      gpu_ = make_nccl_collectives(*transport_, group.front().stream.device, options_.timeout_s);
      // The ranks were together inside the bootstrap, which may outlast a heartbeat period.
      const auto now = Clock::now();
      std::fill(last_heard_.begin(), last_heard_.end(), now);
      last_from_root_ = now;
    }
    gpu_->launch(group);
  } catch (const std::exception& e) {
    // A failed launch or bootstrap leaves the communicator unusable: the group fails, and the
    // peers waiting inside this collective fail by their timeout.
    std::string why = std::string("dist: rank ") + std::to_string(rank_) + ": " + e.what();
    for (auto& r : group) r.done(std::make_exception_ptr(DistError(describe(r.meta) + ": " + why)));
    fail_everything(why);
    return;
  }
  std::lock_guard lock(mu_);
  stats_.collectives += static_cast<int64_t>(count);  // launched; completed from poll_gpu()
  stats_.transport_calls += 1;
  if (count > 1) stats_.fused_batches += 1;
  if (allreduce) stats_.bytes_reduced += static_cast<int64_t>(payload);
}

bool Controller::poll_gpu() { return gpu_ && gpu_->busy() && gpu_->poll() > 0; }

void Controller::drain_gpu() {
  // Shutdown: rank 0 agreed once every rank's collectives were launched; wait for the GPU ones
  // (poll() turns a batch that never finishes into an error after the timeout).
  while (gpu_ && gpu_->busy()) {
    try {
      gpu_->poll();
    } catch (const std::exception& e) {
      fail_everything(std::string("dist: rank ") + std::to_string(rank_) + ": " + e.what());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void Controller::abort_gpu(const std::string& why) {
  if (gpu_) gpu_->abort(why);
}

}  // namespace weft::dist::detail
