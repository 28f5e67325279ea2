#include "nn/init.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "base/error.h"

namespace weft::nn {

namespace {

// splitmix64's finaliser: spreads a 64-bit value over all bits, so nearby seeds and names give
// unrelated streams.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

Rng Rng::for_parameter(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a: a fixed hash, unlike std::hash
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Rng(mix(mix(seed) ^ h));
}

double Rng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - u lies in (0, 1], so the logarithm is finite.
  const double r = std::sqrt(-2.0 * std::log(1.0 - uniform()));
  const double theta = 2.0 * std::numbers::pi * uniform();
  spare_ = r * std::sin(theta);
  has_spare_ = true;
  return r * std::cos(theta);
}

void Constant::fill(std::span<float> out, const Shape&, Rng&) const {
  std::fill(out.begin(), out.end(), static_cast<float>(value_));
}
std::string Constant::describe() const { return "Constant(" + number(value_) + ")"; }

void Uniform::fill(std::span<float> out, const Shape&, Rng& rng) const {
  for (float& v : out) v = static_cast<float>(rng.uniform(-scale_, scale_));
}
std::string Uniform::describe() const { return "Uniform(" + number(scale_) + ")"; }

void Normal::fill(std::span<float> out, const Shape&, Rng& rng) const {
  for (float& v : out) v = static_cast<float>(sigma_ * rng.normal());
}
std::string Normal::describe() const { return "Normal(" + number(sigma_) + ")"; }

Xavier::Xavier(std::string rnd_type, std::string factor_type, double magnitude)
    : rnd_type_(std::move(rnd_type)), factor_type_(std::move(factor_type)), magnitude_(magnitude) {
  WEFT_CHECK(rnd_type_ == "uniform" || rnd_type_ == "gaussian")
      << "Xavier: rnd_type '" << rnd_type_ << "': expected 'uniform' or 'gaussian'";
  WEFT_CHECK(factor_type_ == "avg" || factor_type_ == "in" || factor_type_ == "out")
      << "Xavier: factor_type '" << factor_type_ << "': expected 'avg', 'in' or 'out'";
}

double Xavier::scale(const Shape& shape) const {
  double fan_in = 1, fan_out = 1;
  if (shape.ndim() == 1) {
    fan_in = fan_out = static_cast<double>(shape[0]);
  } else if (shape.ndim() >= 2) {
    double receptive = 1;
    for (int i = 2; i < shape.ndim(); ++i) receptive *= static_cast<double>(shape[i]);
    fan_in = static_cast<double>(shape[1]) * receptive;
    fan_out = static_cast<double>(shape[0]) * receptive;
  }
  const double fan = factor_type_ == "avg"  ? (fan_in + fan_out) / 2
                     : factor_type_ == "in" ? fan_in
                                            : fan_out;
  return std::sqrt(magnitude_ / std::max(fan, 1.0));
}

void Xavier::fill(std::span<float> out, const Shape& shape, Rng& rng) const {
  const double s = scale(shape);
  if (rnd_type_ == "uniform") {
    for (float& v : out) v = static_cast<float>(rng.uniform(-s, s));
  } else {
    for (float& v : out) v = static_cast<float>(s * rng.normal());
  }
}
std::string Xavier::describe() const {
  return "Xavier(" + rnd_type_ + ", " + factor_type_ + ", " + number(magnitude_) + ")";
}

MSRAPrelu::MSRAPrelu(std::string factor_type, double slope)
    : Xavier("gaussian", std::move(factor_type), 2.0 / (1.0 + slope * slope)), slope_(slope) {}
std::string MSRAPrelu::describe() const {
  return "MSRAPrelu(" + factor_type_ + ", " + number(slope_) + ")";
}

std::vector<float> initial_values(const Initializer& init, const Shape& shape, uint64_t seed,
                                  std::string_view name) {
  WEFT_CHECK_AS(ShapeError, shape.known())
      << "initial_values: parameter '" << name << "' has the unknown shape " << shape;
  std::vector<float> values(static_cast<size_t>(shape.size()));
  Rng rng = Rng::for_parameter(seed, name);
  init.fill(values, shape, rng);
  return values;
}

InitializerPtr default_initializer(std::string_view name) {
  for (std::string_view suffix : {"bias", "beta", "moving_mean", "running_mean"}) {
    if (name.ends_with(suffix)) return std::make_shared<Zero>();
  }
  for (std::string_view suffix : {"gamma", "moving_var", "running_var"}) {
    if (name.ends_with(suffix)) return std::make_shared<One>();
  }
  return std::make_shared<Xavier>();
}

}  // namespace weft::nn
