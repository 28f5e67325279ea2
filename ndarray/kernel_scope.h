// The intra-op thread share of one kernel call, held for the call's duration.
#pragma once

#include "ndarray/runtime.h"

namespace weft {

/// Runtime::kernel_started() when made, Runtime::kernel_finished() when destroyed (also when the
/// kernel throws): the threads the kernel may use come from threads(). Make it on the thread that
/// calls the kernel, around the call.
class KernelScope {
 public:
  explicit KernelScope(Runtime& rt) : rt_(rt), threads_(rt.kernel_started()) {}
  ~KernelScope() { rt_.kernel_finished(); }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

  int threads() const { return threads_; }

 private:
  Runtime& rt_;
  int threads_;
};

}  // namespace weft
