// Which kernel libraries this binary uses (oneDNN for CPU kernels, the CUDA runtime), with the
// versions it was built against and the versions it runs with.
#pragma once

#include <string>

namespace weft {

/// The kernel libraries of this build and of the running process. A plain value.
struct KernelLibraries {
  bool onednn = false;             ///< built with oneDNN (else the CPU kernels are reference loops)
  std::string onednn_built;        ///< oneDNN version at configure time, e.g. "2.6.3"
  std::string onednn_version;      ///< version of the loaded library (dnnl_version()), "2.6.3"
  std::string onednn_cpu_runtime;  ///< oneDNN's CPU threading: "OpenMP", "TBB", "sequential", ...
  bool cuda = false;               ///< built with the CUDA device support
  std::string cuda_built;          ///< CUDA toolkit version at configure time, e.g. "13.0.48"
  std::string cuda_runtime;        ///< the loaded CUDA runtime's version, e.g. "13.0"
  std::string cuda_driver;         ///< the driver's CUDA version; "" when no driver is installed
};

/// Queries the libraries this process runs with. Cheap; loads nothing and touches no device
/// beyond asking the CUDA runtime and driver for their versions. Thread-safe.
KernelLibraries kernel_libraries();

/// One line for tools to print: "oneDNN 2.6.3 (cpu, OpenMP), CUDA off", or "reference CPU
/// kernels (built without oneDNN), CUDA 13.0 (runtime 13.0, driver 12.8)". Thread-safe.
std::string describe_kernel_libraries(const KernelLibraries& libraries = kernel_libraries());

}  // namespace weft
