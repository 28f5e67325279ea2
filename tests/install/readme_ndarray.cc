// The README's first C++ example (imperative arrays with autograd), built against the installed
// package, with its results checked against plain C++ loops. It never calls weft::shutdown() and
// ends with work still queued, as the README's example does: exit must be clean anyway
// (docs/LIFETIMES.md).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ndarray/autograd.h"
#include "ndarray/io.h"
#include "ndarray/ops.h"

namespace {
int failures = 0;
void expect_near(double got, double want, double tol, const char* what, size_t index) {
  if (std::abs(got - want) <= tol) return;
  if (++failures <= 5) {
    std::fprintf(stderr, "readme_ndarray: %s[%zu] = %.9g, expected %.9g (tolerance %g)\n", what,
                 index, got, want, tol);
  }
}
}  // namespace

int main(int argc, char** argv) {
  const std::string params_path = argc > 1 ? argv[1] : "w.params";

  // ---- the README's code ----
  using namespace weft;
  NDArray x = NDArray::uniform(Shape{64, 784});
  NDArray w = NDArray::normal(Shape{10, 784}, 0, 0.01), b = NDArray::zeros(Shape{10});
  NDArray w_before = w.copy();  // (not in the README: kept for the check below)
  w.attach_grad();
  NDArray loss;
  {
    autograd::RecordScope record;  // train mode
    loss = op::sum(op::log_softmax(op::fully_connected(x, w, b, 10)));
  }
  loss.backward();
  w -= w.grad() * 0.1;
  std::vector<float> v = w.to_vector<float>();  // waits for the update
  NDArray y = invoke1("Pooling", {x.reshape(Shape{64, 1, 28, 28})},
                      {{"kernel", "(2, 2)"}, {"pool_type", "max"}, {"stride", "(2, 2)"}});
  save_arrays(params_path, {{"arg:w", w}});  // MXNet .params (ndarray/io.h)

  // ---- checks against plain loops ----
  // loss = sum_n sum_k log_softmax(z_n)_k with z_n = W x_n + b, so dloss/dz_nk = 1 - 10 p_nk and
  // dloss/dW_kd = sum_n (1 - 10 p_nk) x_nd.
  const std::vector<float> xs = x.to_vector<float>();
  const std::vector<float> w0 = w_before.to_vector<float>();
  constexpr int kN = 64, kD = 784, kK = 10;
  std::vector<double> expected(w0.begin(), w0.end());
  for (int n = 0; n < kN; ++n) {
    double z[kK];
    double zmax = -1e300;
    for (int k = 0; k < kK; ++k) {
      z[k] = 0;
      for (int d = 0; d < kD; ++d) z[k] += double{w0[k * kD + d]} * xs[n * kD + d];
      zmax = std::max(zmax, z[k]);
    }
    double total = 0;
    for (double zk : z) total += std::exp(zk - zmax);
    for (int k = 0; k < kK; ++k) {
      const double dz = 1.0 - kK * std::exp(z[k] - zmax) / total;
      for (int d = 0; d < kD; ++d) expected[k * kD + d] -= 0.1 * dz * xs[n * kD + d];
    }
  }
  for (size_t i = 0; i < v.size(); ++i) expect_near(v[i], expected[i], 1e-4, "w", i);

  const std::vector<float> ys = y.to_vector<float>();
  if (y.shape() != Shape{64, 1, 14, 14}) {
    std::fprintf(stderr, "readme_ndarray: pooling output shape is wrong\n");
    ++failures;
  } else {
    for (int n = 0; n < kN; ++n) {
      for (int i = 0; i < 14; ++i) {
        for (int j = 0; j < 14; ++j) {
          const float* img = &xs[static_cast<size_t>(n) * kD];
          const float m =
              std::max(std::max(img[(2 * i) * 28 + 2 * j], img[(2 * i) * 28 + 2 * j + 1]),
                       std::max(img[(2 * i + 1) * 28 + 2 * j], img[(2 * i + 1) * 28 + 2 * j + 1]));
          const size_t at = (static_cast<size_t>(n) * 14 + i) * 14 + j;
          expect_near(ys[at], m, 0, "y", at);
        }
      }
    }
  }
  const std::vector<float> saved = load_arrays(params_path).get("arg:w").to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) expect_near(saved[i], v[i], 0, "saved w", i);
  std::remove(params_path.c_str());

  // The README's example ends with `y` never read: leave work queued at exit here too.
  for (int i = 0; i < 8; ++i) {
    y = invoke1("Pooling", {x.reshape(Shape{64, 1, 28, 28})},
                {{"kernel", "(2, 2)"}, {"pool_type", "max"}, {"stride", "(2, 2)"}});
    w -= w * 0.01;
  }

  if (failures != 0) {
    std::fprintf(stderr, "readme_ndarray: %d mismatches\n", failures);
    return 1;
  }
  std::printf("readme_ndarray: ok\n");
  return 0;
}
