// The bounded image decoder behind decode_image_bytes(), with its pixel limit as a parameter
// (the fuzz target decodes with a small one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ndarray/ndarray.h"

namespace weft::data::detail {

/// The most pixels decode_image_bytes() accepts (width * height): a few bytes of header can
/// announce a gigapixel image, so larger ones are refused before anything is allocated.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

/// decode_image_bytes() refusing images of more than `max_pixels` pixels (ValueError naming
/// `what` and the size). Thread-safe.
NDArray decode_image_bytes_bounded(const void* data, size_t size, int channels,
                                   const std::string& what, int64_t max_pixels);

}  // namespace weft::data::detail
