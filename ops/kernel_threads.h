// How many threads the CPU kernel library's work is made for (Note [Primitive thread count] in
// ops/cpu/dnnl_util.cc), for the layers above ops/ that start kernels. Without oneDNN these do
// nothing: weft's own loops read OpContext::num_threads.
#pragma once

namespace weft {

/// The most intra-op threads a kernel can get in this process (the runtime's budget).
void set_max_kernel_threads(int n);
/// Marks the calling thread as running a kernel with `n` intra-op threads until the matching
/// end_kernel_threads() (they nest: a kernel may run a tiny kernel inline).
void begin_kernel_threads(int n);
void end_kernel_threads();

/// During the scope, work planned on this thread (a workspace size asked for by a resource
/// request) is planned for the most threads, also inside a kernel that pushes another.
class WidestKernelPlans {
 public:
  WidestKernelPlans() { begin_kernel_threads(max_threads()); }
  ~WidestKernelPlans() { end_kernel_threads(); }
  WidestKernelPlans(const WidestKernelPlans&) = delete;
  WidestKernelPlans& operator=(const WidestKernelPlans&) = delete;

 private:
  static int max_threads();
};

}  // namespace weft
