// The input-pipeline benchmark's data: deterministic synthetic "photos" (smooth gradients, shapes,
// texture, noise) written as an image folder of JPEGs and as memory-mappable uint8 .npy shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::bench::data {

inline constexpr int64_t kImageSide = 224;  ///< images are kImageSide x kImageSide x 3 uint8
inline constexpr int kNumClasses = 10;
inline constexpr int kNumShards = 4;

/// Fills `pixels` (kImageSide * kImageSide * 3 bytes, HWC) with image `index` of the set drawn
/// from `seed`: a four-corner colour gradient with a low-frequency wave, 3 to 7 filled circles,
/// ellipses and rectangles with their own gradients, smooth brightness texture at three scales
/// and pixel noise (standard deviation ~6.5 levels): about 17 KiB at JPEG quality 90, like a
/// photograph of that size. Thread-safe.
void synthesize_image(uint64_t seed, int64_t index, uint8_t* pixels);

/// The label of image `index`: index % kNumClasses.
inline int32_t label_of(int64_t index) { return static_cast<int32_t>(index % kNumClasses); }

/// What generate_files() wrote.
struct FileSet {
  std::string root;       ///< <dir>/images_<count>, the folder the Python peers are given
  std::string jpeg_root;  ///< root/class_<k>/img_<i>.jpg, quality 90
  /// kNumShards pairs {x<s>.npy (uint8 [n, 224, 224, 3]), y<s>.npy (int32 [n])}.
  std::vector<std::vector<std::string>> npy_shards;
  double mean_jpeg_bytes = 0;
  bool reused = false;  ///< the files of an earlier run with the same parameters were kept
};

/// Writes `count` images (a multiple of kNumShards) drawn from `seed` under
/// `dir`/images_<count>, using `threads` threads, unless a marker file there says the same set is
/// already written (so sets of different sizes are kept side by side). Throws
/// std::runtime_error when a file cannot be written. Call from one thread.
FileSet generate_files(const std::string& dir, int64_t count, uint64_t seed, int threads);

}  // namespace weft::bench::data
