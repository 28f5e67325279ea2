// Helpers shared by the graph subcommands: deterministic initialisation, output comparison
// (input specs: tools/cli_util.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ndarray/ndarray.h"

namespace weft::tools {

/// Fills a variable deterministically (from the runtime's seed): inputs uniform in [-1, 1);
/// weights He-uniform over their fan-in; BatchNorm gamma near 1, beta and biases near 0, moving
/// variances in [0.5, 1.5) (positive), moving means near 0.
void init_variable(const std::string& name, bool is_input, NDArray& dst);

struct CompareResult {
  bool ok = true;
  std::string message;
};
/// Compares outputs with DIR/k.npy: |a - b| <= atol + rtol * |b| elementwise. The message names
/// the worst element (head, index, both values) of a failing head, or summarises a match.
CompareResult compare_outputs(const std::vector<NDArray>& outputs, const std::string& dir,
                              double rtol, double atol);

}  // namespace weft::tools
