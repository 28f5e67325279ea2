// Whether a group of ranks can run GPU collectives, for the NCCL tests (nccl_test.cc) and the
// failure checks (failure_check.cc): every rank needs NCCL in its build and a GPU of its own, and
// every rank must come to the same answer, so the answer is agreed with one CPU allreduce.
#pragma once

#include <exception>
#include <string>

#include "devices/device_api.h"
#include "dist/dist.h"
#include "dist/gpu_collectives.h"
#include "ndarray/ndarray.h"

namespace weft::dist::test_support {

/// Why this group cannot run GPU collectives ("" when it can); the same on every rank.
/// Collective: every rank must call it at the same point. `name` names the allreduce.
inline std::string gpu_group_skip_reason(const char* name) {
  int gpus = 0;
  if (DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA)) {
    try {
      gpus = api->device_count();
    } catch (const std::exception&) {
      gpus = 0;
    }
  }
  std::string why;
  if (!detail::have_nccl()) {
    why = "this build has no NCCL (WEFT_USE_NCCL)";
  } else if (gpus == 0) {
    why = "no GPU";
  } else if (gpus < local_size()) {
    why = std::to_string(local_size()) + " processes on this host share " + std::to_string(gpus) +
          " GPU(s); NCCL needs one per process";
  }
  NDArray ready = NDArray::full(Shape{1}, why.empty() ? 1.0 : 0.0, DType::kInt32);
  allreduce(ready, ready, ReduceOp::kMin, CollectiveOptions{name, 0});
  if (why.empty() && ready.item() == 0) why = "another rank cannot run GPU collectives";
  return why;
}

}  // namespace weft::dist::test_support
