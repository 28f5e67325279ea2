// Helpers shared by the graph subcommands (see replay_util.h).
#include "tools/replay_util.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "base/error.h"
#include "ndarray/io.h"
#include "ops/params.h"

namespace weft::tools {

CompareResult compare_outputs(const std::vector<NDArray>& outputs, const std::string& dir,
                              double rtol, double atol) {
  CompareResult r;
  std::ostringstream summary;
  double worst_all = 0;
  for (size_t h = 0; h < outputs.size(); ++h) {
    const std::string path = (std::filesystem::path(dir) / (std::to_string(h) + ".npy")).string();
    WEFT_CHECK(std::filesystem::exists(path))
        << "--compare: " << path << " is missing (head " << h << ")";
    NDArray ref = load_npy_array(path);
    if (ref.shape() != outputs[h].shape()) {
      r.ok = false;
      r.message = "compare: head " + std::to_string(h) + " has shape " +
                  outputs[h].shape().to_string() + ", " + path + " has " + ref.shape().to_string();
      return r;
    }
    const std::vector<double> a = outputs[h].to_doubles();
    const std::vector<double> b = ref.to_doubles();
    double worst = -INFINITY;
    size_t at = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      const bool nan_mismatch = std::isnan(a[i]) != std::isnan(b[i]);
      const double excess = nan_mismatch ? INFINITY
                            : std::isnan(a[i])
                                ? -INFINITY
                                : std::abs(a[i] - b[i]) - (atol + rtol * std::abs(b[i]));
      if (excess > worst) {
        worst = excess;
        at = i;
      }
    }
    double max_abs = 0;
    for (size_t i = 0; i < a.size(); ++i) max_abs = std::max(max_abs, std::abs(a[i] - b[i]));
    worst_all = std::max(worst_all, max_abs);
    if (worst > 0) {
      // Multi-index of the worst element.
      std::string index;
      size_t rest = at;
      const Shape& s = outputs[h].shape();
      std::vector<int64_t> idx(s.ndim());
      for (int d = s.ndim() - 1; d >= 0; --d) {
        idx[d] = static_cast<int64_t>(rest % s[d]);
        rest /= s[d];
      }
      for (int d = 0; d < s.ndim(); ++d) index += (d ? ", " : "") + std::to_string(idx[d]);
      std::ostringstream m;
      m << "compare: head " << h << " differs from " << path << ": worst element [" << index
        << "] is " << a[at] << ", expected " << b[at] << " (|diff| " << std::abs(a[at] - b[at])
        << " > atol " << atol << " + rtol " << rtol << " * |expected|)";
      r.ok = false;
      r.message = m.str();
      return r;
    }
  }
  summary << "compare: " << outputs.size() << " heads match " << dir << " (max |diff| " << worst_all
          << ", rtol " << rtol << ", atol " << atol << ")";
  r.message = summary.str();
  return r;
}

}  // namespace weft::tools
