// Helpers shared by the graph subcommands: output comparison
// (input specs: tools/cli_util.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ndarray/ndarray.h"

namespace weft::tools {

struct CompareResult {
  bool ok = true;
  std::string message;
};
/// Compares outputs with DIR/k.npy: |a - b| <= atol + rtol * |b| elementwise. The message names
/// the worst element (head, index, both values) of a failing head, or summarises a match.
CompareResult compare_outputs(const std::vector<NDArray>& outputs, const std::string& dir,
                              double rtol, double atol);

}  // namespace weft::tools
