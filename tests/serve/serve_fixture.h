// A model repository for the serve tests: a two-layer perceptron (data (n, 5) → FullyConnected 4
// → relu → FullyConnected 3) whose weights the test writes, so a plain loop in the test computes
// the reference, and a reduction model whose output is not batch-first.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "graph/symbol.h"
#include "ndarray/io.h"
#include "serve/codec.h"

namespace weft::serve::testing {

namespace fs = std::filesystem;

/// A fresh folder under the temp directory, removed with the object.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("weft-serve-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// The perceptron's weights: every value a simple function of `scale` and the index.
struct MlpWeights {
  std::vector<float> w1, b1, w2, b2;  // (4, 5), (4), (3, 4), (3)
  explicit MlpWeights(float scale = 1.0f) {
    for (int i = 0; i < 20; ++i) w1.push_back(scale * std::sin(0.7f * i + 0.1f));
    for (int i = 0; i < 4; ++i) b1.push_back(scale * 0.1f * (i - 1));
    for (int i = 0; i < 12; ++i) w2.push_back(scale * std::cos(0.3f * i));
    for (int i = 0; i < 3; ++i) b2.push_back(0.05f * i);
  }
  /// The reference output rows for input rows `x` (n × 5), in double.
  std::vector<double> forward(const std::vector<float>& x) const {
    const size_t n = x.size() / 5;
    std::vector<double> out;
    for (size_t r = 0; r < n; ++r) {
      double h[4];
      for (int j = 0; j < 4; ++j) {
        double s = b1[j];
        for (int k = 0; k < 5; ++k) s += double(w1[j * 5 + k]) * x[r * 5 + k];
        h[j] = s > 0 ? s : 0;
      }
      for (int j = 0; j < 3; ++j) {
        double s = b2[j];
        for (int k = 0; k < 4; ++k) s += double(w2[j * 4 + k]) * h[k];
        out.push_back(s);
      }
    }
    return out;
  }
};

inline std::string mlp_json() {
  using graph::Symbol;
  Symbol data = Symbol::variable("data");
  Symbol fc1 = Symbol::op("FullyConnected", {data}, {{"num_hidden", "4"}}, "fc1");
  Symbol relu = Symbol::op("Activation", {fc1}, {{"act_type", "relu"}}, "relu1");
  return Symbol::op("FullyConnected", {relu}, {{"num_hidden", "3"}}, "fc2").to_json();
}

/// Writes DIR/NAME/ with the perceptron, `weights` as NAME-0000.params and a config.
inline void write_mlp(const fs::path& repo, const std::string& name, const MlpWeights& weights,
                      const std::string& extra_config = "\"max_batch\": 4, \"max_delay_ms\": 20") {
  const fs::path dir = repo / name;
  fs::create_directories(dir);
  write_text(dir / (name + "-symbol.json"), mlp_json());
  save_arrays((dir / (name + "-0000.params")).string(),
              {{"arg:fc1_weight", NDArray::from_vector(Shape{4, 5}, weights.w1)},
               {"arg:fc1_bias", NDArray::from_vector(Shape{4}, weights.b1)},
               {"arg:fc2_weight", NDArray::from_vector(Shape{3, 4}, weights.w2)},
               {"arg:fc2_bias", NDArray::from_vector(Shape{3}, weights.b2)}});
  write_text(dir / "config.json",
             "{\"inputs\": [{\"name\": \"data\", \"shape\": [0, 5]}], " + extra_config + "}");
}

/// Writes DIR/NAME/: sum over every axis, whose output (1,) does not grow with the batch.
inline void write_sum(const fs::path& repo, const std::string& name) {
  using graph::Symbol;
  const fs::path dir = repo / name;
  fs::create_directories(dir);
  Symbol data = Symbol::variable("data");
  write_text(dir / (name + "-symbol.json"), Symbol::op("sum", {data}, {}, "total").to_json());
  write_text(dir / "config.json",
             "{\"inputs\": [{\"name\": \"data\", \"shape\": [-1, 2]}], \"max_batch\": 4, "
             "\"max_delay_ms\": 50}");
}

/// n rows of 5 inputs, distinct per (seed, row).
inline HostTensor mlp_input(int64_t n, int seed) {
  HostTensor t;
  t.shape = Shape{n, 5};
  for (int64_t i = 0; i < n * 5; ++i) t.data.push_back(std::sin(0.37f * i + 1.3f * seed));
  return t;
}

}  // namespace weft::serve::testing
