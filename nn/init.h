// Parameter initializers for nn/: each fills a float buffer of a given shape from a seeded
// generator, so nn::init gives the same parameters for the same seed on every platform.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>

#include "base/shape.h"

namespace weft::nn {

/// A deterministic generator. std::mt19937_64's sequence is fixed by the standard, but the
/// standard distributions are not (libstdc++ and libc++ draw differently), so the conversions to
/// uniform and normal values are written here.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  /// The generator of parameter `name` under `seed`: each parameter has its own stream, so adding
  /// a layer does not change the values of the others.
  static Rng for_parameter(uint64_t seed, std::string_view name);

  /// Uniform on [0, 1), 53 random bits.
  double uniform();
  /// Uniform on [low, high).
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  /// Standard normal (Box-Muller).
  double normal();

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

/// Fills a parameter. Implementations are immutable and may be shared between layers.
class Initializer {
 public:
  virtual ~Initializer() = default;
  /// Writes shape.size() values into `out`.
  virtual void fill(std::span<float> out, const Shape& shape, Rng& rng) const = 0;
  /// "Xavier(uniform, avg, 3)", for messages.
  virtual std::string describe() const = 0;
};

using InitializerPtr = std::shared_ptr<const Initializer>;

/// Every element `value`.
class Constant : public Initializer {
 public:
  explicit Constant(double value) : value_(value) {}
  void fill(std::span<float> out, const Shape& shape, Rng& rng) const override;
  std::string describe() const override;

 private:
  double value_;
};

class Zero : public Constant {
 public:
  Zero() : Constant(0) {}
  std::string describe() const override { return "Zero"; }
};

class One : public Constant {
 public:
  One() : Constant(1) {}
  std::string describe() const override { return "One"; }
};

/// Uniform on [-scale, scale].
class Uniform : public Initializer {
 public:
  explicit Uniform(double scale = 0.07) : scale_(scale) {}
  void fill(std::span<float> out, const Shape& shape, Rng& rng) const override;
  std::string describe() const override;

 private:
  double scale_;
};

/// Normal with mean 0 and deviation `sigma`.
class Normal : public Initializer {
 public:
  explicit Normal(double sigma = 0.01) : sigma_(sigma) {}
  void fill(std::span<float> out, const Shape& shape, Rng& rng) const override;
  std::string describe() const override;

 private:
  double sigma_;
};

/// MXNet's Xavier: scale = sqrt(magnitude / fan), fan_in = shape[1] * receptive field, fan_out =
/// shape[0] * receptive field (receptive field = product of shape[2:]; a 1-d shape has both fans
/// equal to its length), fan by `factor_type`: "avg" (their mean), "in" or "out". Uniform on
/// [-scale, scale], or ("gaussian") normal with deviation scale. The defaults are Glorot's.
class Xavier : public Initializer {
 public:
  /// Throws ValueError for an unknown rnd_type or factor_type.
  explicit Xavier(std::string rnd_type = "uniform", std::string factor_type = "avg",
                  double magnitude = 3);
  void fill(std::span<float> out, const Shape& shape, Rng& rng) const override;
  std::string describe() const override;
  /// The scale for `shape`.
  double scale(const Shape& shape) const;

 private:
  std::string rnd_type_, factor_type_;
  double magnitude_;
};

/// The default by parameter name, as MXNet's: names ending in bias, beta, moving_mean or
/// running_mean get Zero; gamma, moving_var or running_var One; anything else Xavier().
InitializerPtr default_initializer(std::string_view name);

}  // namespace weft::nn
