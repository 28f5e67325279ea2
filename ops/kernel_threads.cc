// The kernel-thread bookkeeping, forwarded to oneDNN's primitive cache when it is built in.
#include "ops/kernel_threads.h"

#include "base/build_config.h"

#if WEFT_USE_ONEDNN
#include "ops/cpu/dnnl_util.h"
#endif

namespace weft {

#if WEFT_USE_ONEDNN
void set_max_kernel_threads(int n) { dnnl_util::set_max_kernel_threads(n); }
void begin_kernel_threads(int n) { dnnl_util::begin_kernel(n); }
void end_kernel_threads() { dnnl_util::end_kernel(); }
int WidestKernelPlans::max_threads() { return dnnl_util::max_kernel_threads(); }
#else
void set_max_kernel_threads(int) {}
void begin_kernel_threads(int) {}
void end_kernel_threads() {}
int WidestKernelPlans::max_threads() { return 1; }
#endif

}  // namespace weft
