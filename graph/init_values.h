// Deterministic values for a bound graph's variables that no file gave: what `weft replay` and
// `weft serve` draw when a model comes without weights, so both (and a later run with the same
// seed) see the same numbers.
#pragma once

#include <cstdint>
#include <string>

#include "ndarray/ndarray.h"

namespace weft::graph {

/// Fills a variable from the runtime's current seed: inputs uniform in [-1, 1); weights
/// He-uniform over their fan-in; BatchNorm gamma near 1, beta and biases near 0, moving variances
/// in [0.5, 1.5) (positive), moving means near 0. Integer arrays are zeros.
void init_variable(const std::string& name, bool is_input, NDArray& dst);

/// Seeds the runtime for variable `name` under run seed `seed` and fills it (init_variable): each
/// variable's values depend only on the seed and its name, not on the order variables are visited.
void init_variable_seeded(uint64_t seed, const std::string& name, bool is_input, NDArray& dst);

}  // namespace weft::graph
