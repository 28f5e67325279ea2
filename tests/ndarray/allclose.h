// Element-wise comparison of arrays for tests: |actual - expected| <= atol + rtol * |expected| on
// every element (or exact equality), reporting the worst element with its index and both values;
// and a fixed intra-op thread count for tests that compare two runs of the same kernels exactly.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"

namespace weft::testing {

/// Per-element tolerance: element i passes when |a[i] - b[i]| <= atol + rtol * |b[i]| (b is the
/// reference). {0, 0} asks for equal values; non-finite values must match exactly (NaN matches
/// NaN).
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

namespace detail {

/// "[i, j, k]" for flat index `flat` of `shape` (row-major), or "[flat]" when no shape is given.
inline std::string index_string(size_t flat, const Shape* shape) {
  if (shape == nullptr || shape->ndim() == 0) return "[" + std::to_string(flat) + "]";
  std::vector<int64_t> idx(shape->ndim());
  size_t rest = flat;
  for (int d = shape->ndim() - 1; d >= 0; --d) {
    const auto extent = static_cast<size_t>(std::max<int64_t>((*shape)[d], 1));
    idx[d] = static_cast<int64_t>(rest % extent);
    rest /= extent;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "] (flat " + std::to_string(flat) + ")";
}

/// Distance in units in the last place between two floats of the same sign convention (the count
/// of representable float32 values between them); meaningful for values that came from float32.
inline uint64_t float_ulps(double a, double b) {
  auto key = [](float f) {
    const auto u = std::bit_cast<uint32_t>(f);
    // Maps the sign-magnitude encoding onto a monotonic integer line (-0 and +0 are adjacent).
    return (u & 0x80000000u)
               ? static_cast<int64_t>(0x80000000u) - static_cast<int64_t>(u & 0x7fffffffu)
               : static_cast<int64_t>(0x80000000u) + static_cast<int64_t>(u);
  };
  const int64_t d = key(static_cast<float>(a)) - key(static_cast<float>(b));
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

}  // namespace detail

/// Compares `actual` with the reference `expected` element by element: element i passes when
/// |actual[i] - expected[i]| <= allowed(i, expected[i]). On failure the message gives the number of
/// elements outside, the worst one (largest excess over its allowance; where the allowance is 0,
/// the largest difference) with its index, both values, the difference, the allowance and the
/// float32 ulp distance; `what` describes the allowance. `shape` (optional) turns flat indices
/// into coordinates.
template <typename Allowed>
::testing::AssertionResult all_within(std::span<const double> actual,
                                      std::span<const double> expected, Allowed&& allowed,
                                      const std::string& what, const Shape* shape = nullptr) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "sizes differ: actual has " << actual.size()
                                         << " elements, expected " << expected.size();
  }
  size_t bad = 0, worst = 0;
  double worst_score = -1, worst_allowed = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], b = expected[i];
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    const double diff = std::abs(a - b);
    const double allow = allowed(i, b);
    if (std::isfinite(a) && std::isfinite(b) && diff <= allow) continue;
    ++bad;
    double score = allow > 0 ? diff / allow : diff;
    if (!std::isfinite(score)) score = std::numeric_limits<double>::max();
    if (score > worst_score) {
      worst_score = score;
      worst = i;
      worst_allowed = allow;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  const double a = actual[worst], b = expected[worst];
  std::ostringstream os;
  os.precision(9);
  os << bad << " of " << actual.size() << " elements differ beyond " << what << "; worst at "
     << detail::index_string(worst, shape) << ": actual " << a << ", expected " << b << ", |diff| "
     << std::abs(a - b) << " (allowed " << worst_allowed << ", " << detail::float_ulps(a, b)
     << " float32 ulp)";
  return ::testing::AssertionFailure() << os.str();
}

/// all_within with the allowance atol + rtol * |expected[i]|.
inline ::testing::AssertionResult all_close(std::span<const double> actual,
                                            std::span<const double> expected, Tolerance tol,
                                            const Shape* shape = nullptr) {
  std::ostringstream what;
  what << "atol " << tol.atol << " + rtol " << tol.rtol << " * |expected|";
  return all_within(
      actual, expected, [&](size_t, double b) { return tol.atol + tol.rtol * std::abs(b); },
      what.str(), shape);
}

/// all_close on two arrays (shapes must match; values compared as doubles, which is exact for
/// every dtype weft stores, integers up to 2^53).
inline ::testing::AssertionResult all_close(const NDArray& actual, const NDArray& expected,
                                            Tolerance tol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shapes differ: actual " << actual.shape() << ", expected " << expected.shape();
  }
  const std::vector<double> a = actual.to_doubles();
  const std::vector<double> b = expected.to_doubles();
  return all_close(a, b, tol, &expected.shape());
}

/// The two arrays have the same shape and dtype and equal values: 0 ulp apart (NaN matches NaN,
/// and -0 matches +0, which no kernel is expected to tell apart).
inline ::testing::AssertionResult all_equal(const NDArray& actual, const NDArray& expected) {
  if (actual.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "dtypes differ: actual " << dtype_name(actual.dtype())
                                         << ", expected " << dtype_name(expected.dtype());
  }
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shapes differ: actual " << actual.shape() << ", expected " << expected.shape();
  }
  const std::vector<double> a = actual.to_doubles();
  const std::vector<double> b = expected.to_doubles();
  return all_within(
      a, b, [](size_t, double) { return 0.0; }, "exact equality", &expected.shape());
}

/// For its scope, every kernel gets the same number of threads (one per core) instead of the
/// adaptive share, so two runs of the same kernels on the same inputs agree exactly: some kernels'
/// arithmetic depends on their thread count (oneDNN's GEMM splits small-M reductions across
/// threads). Replaces the runtime on entry and on exit (Runtime::reset): no NDArray may live across
/// either. Call from the test's thread.
class FixedIntraOpThreads {
 public:
  FixedIntraOpThreads() {
    RuntimeConfig config;
    config.intra_op_policy = IntraOpPolicy::kFixed;
    Runtime::reset(config);
  }
  ~FixedIntraOpThreads() { Runtime::reset(RuntimeConfig{}); }
  FixedIntraOpThreads(const FixedIntraOpThreads&) = delete;
  FixedIntraOpThreads& operator=(const FixedIntraOpThreads&) = delete;
};

}  // namespace weft::testing
