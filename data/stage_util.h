// Internals shared by the pipeline stages: error wrapping, row copies, engine access.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace weft::data::detail {

/// Rethrows the exception in flight (call inside a catch block) as a DataError naming `stage`
/// and the element; a DataError from an earlier stage passes through unchanged.
[[noreturn]] void rethrow_as_data_error(const std::string& stage, int64_t index,
                                        const std::string& origin);
/// Like rethrow_as_data_error for a stored exception.
[[noreturn]] void rethrow_stored(std::exception_ptr error, const std::string& stage, int64_t index,
                                 const std::string& origin);

/// "element 17 (x.npy row 17)" for messages.
std::string describe_element(int64_t index, const std::string& origin);

/// Checks that every array of an element is a CPU array and waits for its pending writes (a map
/// function may have produced it with imperative operations), so a stage can read its memory.
/// Call outside engine operations.
void check_host_arrays(const Element& element, const std::string& stage);

/// A new CPU array holding a copy of `src` (waits for its pending writes).
NDArray copy_host(const NDArray& src);

/// Seed used when a stage was given none: drawn once from the OS.
uint64_t random_seed_from_os();

}  // namespace weft::data::detail
