// Parameter initializers of nn/ and weft.nn: each fills a float buffer of a given shape from a
// seeded generator, so the same seed gives the same parameters on every platform and in both
// languages (Note [One initialiser]).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

 protected:
  std::string rnd_type_, factor_type_;
  double magnitude_;
};

/// He's initialization for (P)ReLU networks: Xavier("gaussian", factor_type, 2 / (1 + slope^2)).
class MSRAPrelu : public Xavier {
 public:
  explicit MSRAPrelu(std::string factor_type = "avg", double slope = 0.25);
  std::string describe() const override;

 private:
  double slope_;
};

// Note [One initialiser]
// ~~~~~~~~~~~~~~~~~~~~~~
// Initial values are defined once, here: parameter `name` under `seed` is `init` filled from
// Rng::for_parameter(seed, name). nn::init calls initial_values(), and so does weft.nn's
// Layer.init through the binding (python/src/py_nn.cc), whose initializer classes are these.
// The same seed therefore gives bit-identical parameters in C++ and Python, and a parameter's
// values depend on its name and shape only, not on the other layers of the model or their order.

/// The values of parameter `name` under `seed` (shape.size() floats, row-major). Thread-safe.
std::vector<float> initial_values(const Initializer& init, const Shape& shape, uint64_t seed,
                                  std::string_view name);

/// The default by parameter name, as MXNet's: names ending in bias, beta, moving_mean or
/// running_mean get Zero; gamma, moving_var or running_var One; anything else Xavier().
InitializerPtr default_initializer(std::string_view name);

}  // namespace weft::nn
