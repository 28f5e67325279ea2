// Image codecs and augmentation transforms for Dataset::map. Decoding uses libjpeg-turbo and
// libpng; the augmentations are registered operators (ops/defs/image.cc: _image_crop,
// _image_flip_*, _image_resize, _image_normalize, _image_to_tensor) run here synchronously on the
// host, so the same operators also run imperatively and on other devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace weft::data {

/// Decodes a JPEG or PNG held in `size` bytes into HWC uint8 with `channels` channels (1 or 3;
/// 0: as stored, grey or RGB; alpha dropped). Throws ValueError naming `what` for a corrupt or
/// unsupported image. Thread-safe.
NDArray decode_image_bytes(const void* data, size_t size, int channels, const std::string& what);
/// Encodes HWC uint8 (1 or 3 channels) as baseline JPEG at `quality` (1..100). Thread-safe.
std::vector<uint8_t> encode_jpeg(const NDArray& image, int quality = 90);
/// Encodes HWC uint8 (1, 3 or 4 channels) as PNG. Thread-safe.
std::vector<uint8_t> encode_png(const NDArray& image);

/// Runs a registered operator's CPU kernel now, on the calling thread, on host arrays without
/// pending work (inside map functions, which must not wait on the engine): infers shapes and
/// types, allocates the outputs and calls the kernel with one intra-op thread. Throws like
/// invoke() for bad inputs or attributes. Thread-safe.
std::vector<NDArray> run_host_op(std::string_view op, const std::vector<NDArray>& inputs,
                                 const AttrMap& attrs = {});

// ---- map functions (each transforms array `component` of an element, default 0) ------------

/// Encoded bytes (uint8 [n]) -> HWC uint8.
MapFn decode_image(int channels = 3, int component = 0);
/// A random `height` x `width` window of an HWC image (the image must be at least that large).
MapFn random_crop(int64_t height, int64_t width, int component = 0);
/// The central `height` x `width` window.
MapFn center_crop(int64_t height, int64_t width, int component = 0);
/// Mirrors HWC images left-right with probability `p`.
MapFn random_flip_left_right(double p = 0.5, int component = 0);
/// Resizes HWC images to `height` x `width` (bilinear, MXNet's _image_resize).
MapFn resize(int64_t height, int64_t width, int component = 0);
/// HWC uint8 -> CHW float32 in [0, 1] (MXNet's to_tensor).
MapFn to_tensor(int component = 0);
/// CHW float32: (x - mean[c]) / std[c] per channel (MXNet's normalize).
MapFn normalize(std::vector<float> mean, std::vector<float> std, int component = 0);
/// Applies `fns` in order.
MapFn compose(std::vector<MapFn> fns);

}  // namespace weft::data
