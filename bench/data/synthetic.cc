// Synthetic photographs for the input-pipeline benchmark (see synthetic.h).
#include "bench/data/synthetic.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/image.h"
#include "ndarray/io.h"
#include "ndarray/ndarray.h"

namespace weft::bench::data {
namespace {

namespace fs = std::filesystem;

// Bumped whenever the synthesis or the layout changes, so stale files are regenerated.
constexpr int kFormatVersion = 2;
constexpr int64_t kPixels = kImageSide * kImageSide;
constexpr float kNoise = 16.0f;

// splitmix64: small, fast and good enough for picture content.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }
  float uniform(float low, float high) { return low + (high - low) * uniform(); }

 private:
  uint64_t state_;
};

struct Colour {
  float c[3];
};

Colour random_colour(Random& r, float low, float high) {
  return {{r.uniform(low, high), r.uniform(low, high), r.uniform(low, high)}};
}

// One filled shape with a linear colour gradient across it, alpha-blended onto `img`.
void draw_shape(Random& r, std::vector<float>& img) {
  const int kind = static_cast<int>(r.next() % 3);  // 0 circle, 1 ellipse, 2 rectangle
  const float cx = r.uniform(0, kImageSide), cy = r.uniform(0, kImageSide);
  const float rx = r.uniform(12, 70);
  const float ry = kind == 0 ? rx : r.uniform(12, 70);
  const Colour from = random_colour(r, 0, 255), to = random_colour(r, 0, 255);
  const float alpha = r.uniform(0.55f, 1.0f);
  const float angle = r.uniform(0, 6.2831853f);
  const float dx = std::cos(angle), dy = std::sin(angle);
  const int64_t y0 = std::max<int64_t>(0, static_cast<int64_t>(cy - ry));
  const int64_t y1 = std::min<int64_t>(kImageSide - 1, static_cast<int64_t>(cy + ry));
  const int64_t x0 = std::max<int64_t>(0, static_cast<int64_t>(cx - rx));
  const int64_t x1 = std::min<int64_t>(kImageSide - 1, static_cast<int64_t>(cx + rx));
  for (int64_t y = y0; y <= y1; ++y) {
    for (int64_t x = x0; x <= x1; ++x) {
      const float u = (static_cast<float>(x) - cx) / rx, v = (static_cast<float>(y) - cy) / ry;
      if (kind != 2 && u * u + v * v > 1.0f) continue;
      const float t = std::clamp(0.5f + 0.5f * (u * dx + v * dy), 0.0f, 1.0f);
      float* p = &img[static_cast<size_t>((y * kImageSide + x) * 3)];
      for (int c = 0; c < 3; ++c) {
        const float colour = from.c[c] + (to.c[c] - from.c[c]) * t;
        p[c] = p[c] * (1.0f - alpha) + colour * alpha;
      }
    }
  }
}

// Adds value noise to every channel: random levels in [-amplitude, amplitude] on a grid of
// `cell` pixels, interpolated bilinearly (smooth blotches of that size).
void add_texture(Random& r, int64_t cell, float amplitude, std::vector<float>& img) {
  const int64_t n = kImageSide / cell + 2;
  std::vector<float> grid(static_cast<size_t>(n * n));
  for (auto& g : grid) g = r.uniform(-amplitude, amplitude);
  for (int64_t y = 0; y < kImageSide; ++y) {
    const int64_t gy = y / cell;
    const float fy = static_cast<float>(y % cell) / static_cast<float>(cell);
    for (int64_t x = 0; x < kImageSide; ++x) {
      const int64_t gx = x / cell;
      const float fx = static_cast<float>(x % cell) / static_cast<float>(cell);
      const float top = grid[gy * n + gx] + (grid[gy * n + gx + 1] - grid[gy * n + gx]) * fx;
      const float bottom =
          grid[(gy + 1) * n + gx] + (grid[(gy + 1) * n + gx + 1] - grid[(gy + 1) * n + gx]) * fx;
      const float value = top + (bottom - top) * fy;
      float* p = &img[static_cast<size_t>((y * kImageSide + x) * 3)];
      for (int c = 0; c < 3; ++c) p[c] += value;
    }
  }
}

std::string marker_text(int64_t count, uint64_t seed) {
  std::ostringstream s;
  s << "weft_data_bench files version=" << kFormatVersion << " count=" << count << " seed=" << seed
    << " side=" << kImageSide << " shards=" << kNumShards << "\n";
  return s.str();
}

void write_file(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

fs::path jpeg_path(const fs::path& root, int64_t index) {
  char name[32];
  std::snprintf(name, sizeof(name), "img_%05lld.jpg", static_cast<long long>(index));
  return root / ("class_" + std::to_string(label_of(index))) / name;
}

}  // namespace

void synthesize_image(uint64_t seed, int64_t index, uint8_t* pixels) {
  Random r(seed * 0x2545f4914f6cdd1dULL + static_cast<uint64_t>(index) * 0x9e3779b97f4a7c15ULL);
  r.next();
  std::vector<float> img(static_cast<size_t>(kPixels * 3));
  // Background: bilinear blend of four corner colours plus a slow wave.
  const Colour corner[4] = {random_colour(r, 20, 235), random_colour(r, 20, 235),
                            random_colour(r, 20, 235), random_colour(r, 20, 235)};
  const float wave_amplitude = r.uniform(8, 24);
  const float fx = r.uniform(0.01f, 0.06f), fy = r.uniform(0.01f, 0.06f);
  const float phase = r.uniform(0, 6.2831853f);
  const Colour wave_weight = random_colour(r, 0.3f, 1.0f);
  for (int64_t y = 0; y < kImageSide; ++y) {
    const float v = static_cast<float>(y) / (kImageSide - 1);
    for (int64_t x = 0; x < kImageSide; ++x) {
      const float u = static_cast<float>(x) / (kImageSide - 1);
      const float wave = wave_amplitude *
                         std::sin(fx * static_cast<float>(x) + fy * static_cast<float>(y) + phase);
      float* p = &img[static_cast<size_t>((y * kImageSide + x) * 3)];
      for (int c = 0; c < 3; ++c) {
        const float top = corner[0].c[c] + (corner[1].c[c] - corner[0].c[c]) * u;
        const float bottom = corner[2].c[c] + (corner[3].c[c] - corner[2].c[c]) * u;
        p[c] = top + (bottom - top) * v + wave * wave_weight.c[c];
      }
    }
  }
  const int shapes = 3 + static_cast<int>(r.next() % 5);
  for (int s = 0; s < shapes; ++s) draw_shape(r, img);
  // Texture (three octaves of smooth value noise in brightness), the detail of surfaces.
  add_texture(r, 16, r.uniform(8, 16), img);
  add_texture(r, 4, r.uniform(6, 12), img);
  add_texture(r, 2, r.uniform(8, 16), img);
  // Mild sensor-like noise (triangular, +-kNoise levels), then round into uint8.
  for (int64_t i = 0; i < kPixels * 3; ++i) {
    const float noise = (r.uniform() + r.uniform() - 1.0f) * kNoise;
    pixels[i] = static_cast<uint8_t>(std::clamp(std::lround(img[i] + noise), 0L, 255L));
  }
}

FileSet generate_files(const std::string& dir, int64_t count, uint64_t seed, int threads) {
  if (count <= 0 || count % kNumShards != 0) {
    throw std::runtime_error("the image count must be a positive multiple of " +
                             std::to_string(kNumShards));
  }
  const fs::path root = fs::path(dir) / ("images_" + std::to_string(count));
  FileSet files;
  files.root = root.string();
  files.jpeg_root = (root / "jpeg").string();
  for (int s = 0; s < kNumShards; ++s) {
    files.npy_shards.push_back({(root / "npy" / ("x" + std::to_string(s) + ".npy")).string(),
                                (root / "npy" / ("y" + std::to_string(s) + ".npy")).string()});
  }
  const fs::path marker = root / "weft_data_bench.txt";
  const std::string expected = marker_text(count, seed);
  {
    std::ifstream in(marker);
    std::string first, bytes_line;
    if (in && std::getline(in, first) && first + "\n" == expected && std::getline(in, bytes_line)) {
      files.mean_jpeg_bytes = std::stod(bytes_line.substr(bytes_line.find('=') + 1));
      files.reused = true;
      return files;
    }
  }
  fs::remove_all(root);
  fs::create_directories(root / "npy");
  for (int k = 0; k < kNumClasses; ++k) {
    fs::create_directories(fs::path(files.jpeg_root) / ("class_" + std::to_string(k)));
  }
  const int64_t rows = count / kNumShards;
  const int64_t image_bytes = kPixels * 3;
  std::vector<uint8_t> shard(static_cast<size_t>(rows * image_bytes));
  std::atomic<int64_t> jpeg_bytes{0};
  for (int s = 0; s < kNumShards; ++s) {
    std::atomic<int64_t> next_row{0};
    std::vector<std::string> errors(static_cast<size_t>(threads));
    auto work = [&](int t) {
      try {
        for (int64_t row = next_row++; row < rows; row = next_row++) {
          const int64_t index = s * rows + row;
          uint8_t* pixels = shard.data() + row * image_bytes;
          synthesize_image(seed, index, pixels);
          auto image = NDArray::from_host(pixels, Shape{kImageSide, kImageSide, 3}, DType::kUInt8);
          auto jpeg = weft::data::encode_jpeg(image, 90);
          // Relaxed: a sum read after the threads are joined.
          jpeg_bytes.fetch_add(static_cast<int64_t>(jpeg.size()), std::memory_order_relaxed);
          write_file(jpeg_path(files.jpeg_root, index), jpeg);
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(t)] = e.what();
      }
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& thread : pool) thread.join();
    for (const auto& error : errors) {
      if (!error.empty()) throw std::runtime_error("generating the images: " + error);
    }
    save_npy_array(
        files.npy_shards[s][0],
        NDArray::from_host(shard.data(), Shape{rows, kImageSide, kImageSide, 3}, DType::kUInt8));
    std::vector<int32_t> labels(static_cast<size_t>(rows));
    for (int64_t row = 0; row < rows; ++row) labels[row] = label_of(s * rows + row);
    save_npy_array(files.npy_shards[s][1], NDArray::from_vector(Shape{rows}, labels));
  }
  files.mean_jpeg_bytes = static_cast<double>(jpeg_bytes.load()) / static_cast<double>(count);
  std::ofstream out(marker, std::ios::trunc);
  out << expected << "mean_jpeg_bytes=" << files.mean_jpeg_bytes << "\n";
  if (!out) throw std::runtime_error("cannot write " + marker.string());
  return files;
}

}  // namespace weft::bench::data
