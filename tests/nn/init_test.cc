// nn/init: initial values are a fixed function of (initializer, shape, seed, name), pinned to an
// independent implementation of the generator, and shared with weft.nn (Note [One initialiser]).
#include "nn/init.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/nn.h"

namespace weft::nn {
namespace {

TEST(NnInitValues, PinnedToAnIndependentGenerator) {
  // Computed by python/tests/test_nn_init.py's pure-Python mt19937_64, FNV-1a and splitmix64
  // (not by this code): Xavier's Glorot scale sqrt(3 / 3.5) for a (3, 4) weight, seed 0.
  const std::vector<float> expected = {-0x1.77e22ep-2f, 0x1.d64636p-1f, -0x1.0dbbfp-3f,
                                       -0x1.c98798p-2f};
  const std::vector<float> v = initial_values(Xavier(), Shape{3, 4}, 0, "dense0_weight");
  ASSERT_EQ(v.size(), 12u);
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(v[i], expected[i]) << i;
}

TEST(NnInitValues, NnInitGivesEachParameterItsOwnStream) {
  // dense0_weight has the shape (3, 4) in both models: its values do not depend on the layers
  // before it, nor on the batch size.
  auto alone = std::make_shared<Dense>(3);
  auto after_conv = std::make_shared<Sequential>(
      std::vector<LayerPtr>{std::make_shared<Conv2D>(4, 1), std::make_shared<BatchNorm>(),
                            std::make_shared<GlobalAvgPool2D>(), std::make_shared<Flatten>(),
                            std::make_shared<Dense>(3)});
  const Parameters a = init(*alone, {Shape{0, 4}}, 5);
  const Parameters b = init(*after_conv, {Shape{2, 2, 5, 5}}, 5);
  EXPECT_EQ(a.at("dense0_weight").to_doubles(), b.at("dense0_weight").to_doubles());
  const std::vector<float> direct = initial_values(Xavier(), Shape{3, 4}, 5, "dense0_weight");
  EXPECT_EQ(a.at("dense0_weight").to_doubles(), std::vector<double>(direct.begin(), direct.end()));
  EXPECT_NE(a.at("dense0_weight").to_doubles(),
            init(*alone, {Shape{0, 4}}, 6).at("dense0_weight").to_doubles());
}

TEST(NnInitValues, MsraPreluIsHesGaussian) {
  const MSRAPrelu he("in", 0);
  EXPECT_NEAR(he.scale(Shape{64, 32, 3, 3}), std::sqrt(2.0 / (32 * 9)), 1e-12);
  EXPECT_EQ(he.describe(), "MSRAPrelu(in, 0)");
  const std::vector<float> v = initial_values(he, Shape{64, 32, 3, 3}, 1, "conv0_weight");
  double sum = 0, squares = 0;
  for (float x : v) {
    sum += x;
    squares += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n;
  // 18432 draws: the sample deviation is within 3% of the scale, the mean near 0.
  EXPECT_NEAR(std::sqrt(squares / n - mean * mean), std::sqrt(2.0 / 288),
              0.03 * std::sqrt(2.0 / 288));
  EXPECT_NEAR(mean, 0, 0.01);
  EXPECT_THROW(MSRAPrelu("sideways"), ValueError);
}

}  // namespace
}  // namespace weft::nn
