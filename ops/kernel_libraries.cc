// The kernel libraries of this build and process (see kernel_libraries.h).
#include "ops/kernel_libraries.h"

#include "base/build_config.h"
#include "base/kernel_versions.h"

#if WEFT_USE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif
#if WEFT_USE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace weft {
namespace {

#if WEFT_USE_CUDA
// CUDA encodes versions as 1000 * major + 10 * minor.
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
#endif

}  // namespace

KernelLibraries kernel_libraries() {
  KernelLibraries k;
#if WEFT_USE_ONEDNN
  k.onednn = true;
  k.onednn_built = WEFT_ONEDNN_VERSION_STRING;
  const dnnl_version_t* v = dnnl_version();
  k.onednn_version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  switch (v->cpu_runtime) {
    case DNNL_RUNTIME_SEQ:
      k.onednn_cpu_runtime = "sequential";
      break;
    case DNNL_RUNTIME_OMP:
      k.onednn_cpu_runtime = "OpenMP";
      break;
    case DNNL_RUNTIME_TBB:
      k.onednn_cpu_runtime = "TBB";
      break;
    case DNNL_RUNTIME_THREADPOOL:
      k.onednn_cpu_runtime = "threadpool";
      break;
    default:
      k.onednn_cpu_runtime = "runtime " + std::to_string(v->cpu_runtime);
      break;
  }
#endif
#if WEFT_USE_CUDA
  // Version queries only: they initialise no device and work on a machine without a GPU or a
  // driver (the driver's version is then 0).
  k.cuda = true;
  k.cuda_built = WEFT_CUDA_VERSION_STRING;
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess && runtime > 0) {
    k.cuda_runtime = cuda_version_text(runtime);
  }
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    k.cuda_driver = cuda_version_text(driver);
  }
  cudaGetLastError();  // leave no sticky error behind
#endif
  return k;
}

std::string describe_kernel_libraries(const KernelLibraries& k) {
  std::string s;
  if (k.onednn) {
    s = "oneDNN " + k.onednn_version + " (cpu, " + k.onednn_cpu_runtime + ")";
    if (!k.onednn_built.empty() && k.onednn_built != k.onednn_version) {
      s += " [built against " + k.onednn_built + "]";
    }
  } else {
    s = "reference CPU kernels (built without oneDNN: several times slower)";
  }
  if (!k.cuda) return s + ", CUDA off";
  s += ", CUDA " + (k.cuda_built.empty() ? std::string("on") : k.cuda_built) + " (runtime " +
       (k.cuda_runtime.empty() ? std::string("unknown") : k.cuda_runtime) + ", driver " +
       (k.cuda_driver.empty() ? std::string("none") : k.cuda_driver) + "), cuDNN not used";
  return s;
}

}  // namespace weft
