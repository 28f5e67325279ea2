// The comparison helpers of tests/ndarray/allclose.h: per-element tolerances, the worst element in
// the message, exact comparison and non-finite values.
#include "tests/ndarray/allclose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace weft::testing {
namespace {

bool mentions(const ::testing::AssertionResult& r, const std::string& text) {
  return std::string(r.message()).find(text) != std::string::npos;
}

TEST(AllClose, ASmallElementIsJudgedOnItsOwnMagnitude) {
  // One large element and one small element that is 100% wrong: a tolerance scaled by the
  // largest element (2e-3 * 1000 = 2) would accept it; per element it fails.
  const std::vector<double> expected{1000.0, 0.001};
  const std::vector<double> actual{1000.0, 0.002};
  const auto r = all_close(actual, expected, Tolerance{1e-6, 1e-3});
  EXPECT_FALSE(r);
  EXPECT_TRUE(mentions(r, "1 of 2 elements")) << r.message();
  EXPECT_TRUE(mentions(r, "[1]")) << r.message();
  EXPECT_TRUE(all_close(std::vector<double>{1000.5, 0.001}, expected, Tolerance{1e-6, 1e-3}));
}

TEST(AllClose, ReportsTheWorstElementWithItsCoordinates) {
  const Shape shape{2, 3};
  const std::vector<double> expected{1, 2, 3, 4, 5, 6};
  const std::vector<double> actual{1.1, 2, 3, 4, 5.5, 6};
  const auto r = all_close(actual, expected, Tolerance{0.01, 0}, &shape);
  EXPECT_FALSE(r);
  EXPECT_TRUE(mentions(r, "2 of 6 elements")) << r.message();
  EXPECT_TRUE(mentions(r, "[1, 1] (flat 4)")) << r.message();
  EXPECT_TRUE(mentions(r, "actual 5.5, expected 5")) << r.message();
}

TEST(AllEqual, OneUlpIsADifferenceAndNonFiniteValuesMustMatch) {
  const float one = 1.0f;
  const float next = std::nextafter(one, 2.0f);
  const auto a = NDArray::from_vector<float>(Shape{2}, {one, 2.0f});
  const auto b = NDArray::from_vector<float>(Shape{2}, {next, 2.0f});
  const auto r = all_equal(a, b);
  EXPECT_FALSE(r);
  EXPECT_TRUE(mentions(r, "1 float32 ulp")) << r.message();
  EXPECT_TRUE(all_equal(a, a.copy()));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(all_close(std::vector<double>{nan, inf}, std::vector<double>{nan, inf}, Tolerance{}));
  EXPECT_FALSE(all_close(std::vector<double>{nan}, std::vector<double>{1.0}, Tolerance{1, 1}));
  EXPECT_FALSE(all_close(std::vector<double>{inf}, std::vector<double>{-inf}, Tolerance{1, 1}));
  EXPECT_FALSE(all_equal(a, NDArray::from_vector<double>(Shape{2}, {1.0, 2.0})));  // dtype
}

}  // namespace
}  // namespace weft::testing
