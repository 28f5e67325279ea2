// Deterministic variable values (see init_values.h).
#include "graph/init_values.h"

#include <algorithm>
#include <cmath>

#include "ndarray/runtime.h"

namespace weft::graph {

void init_variable(const std::string& name, bool is_input, NDArray& dst) {
  const Shape& s = dst.shape();
  double low = -0.1, high = 0.1;
  if (is_input) {
    low = -1, high = 1;
  } else if (name.ends_with("moving_var") || name.ends_with("running_var")) {
    low = 0.5, high = 1.5;
  } else if (name.ends_with("moving_mean") || name.ends_with("running_mean")) {
    low = -0.1, high = 0.1;
  } else if (name.ends_with("gamma")) {
    low = 0.8, high = 1.2;
  } else if (s.ndim() >= 2) {
    int64_t fan_in = 1;
    for (int i = 1; i < s.ndim(); ++i) fan_in *= s[i];
    const double a = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
    low = -a, high = a;
  }
  // Drawn on the CPU whatever the destination: a GPU's generator draws other values for the
  // same seed, and a replay on cuda:N is compared with one on the CPU.
  if (dst.dtype() == DType::kFloat32 || dst.dtype() == DType::kFloat64 ||
      dst.dtype() == DType::kFloat16) {
    NDArray::uniform(s, low, high, dst.dtype(), Device::cpu()).copy_to(dst);
  } else {
    NDArray::zeros(s, dst.dtype(), dst.device()).copy_to(dst);
  }
}

void init_variable_seeded(uint64_t seed, const std::string& name, bool is_input, NDArray& dst) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  Runtime::get().seed(seed * 0x9E3779B97F4A7C15ull ^ h);
  init_variable(name, is_input, dst);
}

}  // namespace weft::graph
