// Autograd: recording, grad_req write/add, head gradients, retain_graph, BlockGrad, modes, and
// agreement with finite differences on a composite function.
#include "ndarray/autograd.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ndarray/ndarray.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"

namespace weft {
namespace {

std::vector<double> values(const NDArray& a) { return a.to_doubles(); }

TEST(Autograd, PolynomialGradientMatchesTheDerivative) {
  auto x = NDArray::from_vector<float>(Shape{3}, {1, -2, 0.5});
  x.attach_grad();
  NDArray y;
  {
    autograd::RecordScope record;
    y = x * x + x * 3.0;  // dy/dx = 2x + 3
  }
  y.backward();
  auto g = values(x.grad());
  EXPECT_NEAR(g[0], 5, 1e-6);
  EXPECT_NEAR(g[1], -1, 1e-6);
  EXPECT_NEAR(g[2], 4, 1e-6);
}

TEST(Autograd, GradReqAddAccumulatesAndWriteOverwrites) {
  auto x = NDArray::from_vector<float>(Shape{2}, {1, 2});
  x.attach_grad(GradReq::kAdd);
  for (int i = 0; i < 3; ++i) {
    NDArray y;
    {
      autograd::RecordScope record;
      y = x * 2.0;
    }
    y.backward();
  }
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{6, 6}));
  auto z = NDArray::from_vector<float>(Shape{2}, {1, 2});
  z.attach_grad(GradReq::kWrite);
  for (int i = 0; i < 3; ++i) {
    NDArray y;
    {
      autograd::RecordScope record;
      y = z * 2.0;
    }
    y.backward();
  }
  EXPECT_EQ(z.grad().to_vector<float>(), (std::vector<float>{2, 2}));
}

TEST(Autograd, HeadGradientScalesTheResult) {
  auto x = NDArray::from_vector<float>(Shape{2}, {1, 2});
  x.attach_grad();
  NDArray y;
  {
    autograd::RecordScope record;
    y = x * x;
  }
  y.backward(NDArray::from_vector<float>(Shape{2}, {10, 100}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{20, 400}));
}

TEST(Autograd, SecondBackwardNeedsRetainGraph) {
  auto x = NDArray::from_vector<float>(Shape{1}, {3});
  x.attach_grad(GradReq::kAdd);
  NDArray y;
  {
    autograd::RecordScope record;
    y = x * x;
  }
  y.backward(NDArray(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{12}));
  EXPECT_THROW(y.backward(), ValueError);
}

TEST(Autograd, BlockGradStopsTheGradient) {
  auto x = NDArray::from_vector<float>(Shape{2}, {1, 2});
  x.attach_grad();
  NDArray y;
  {
    autograd::RecordScope record;
    y = x * op::stop_gradient(x);  // d/dx = stop(x) only
  }
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(Autograd, NothingIsRecordedOutsideAScopeOrWithoutGradInputs) {
  auto x = NDArray::from_vector<float>(Shape{2}, {1, 2});
  x.attach_grad();
  NDArray y = x * 2.0;
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.backward(), ValueError);
  auto c = NDArray::from_vector<float>(Shape{2}, {1, 2});
  NDArray z;
  {
    autograd::RecordScope record;
    z = c * 2.0;
  }
  EXPECT_FALSE(z.requires_grad());
}

TEST(Autograd, RecordScopeSetsTrainingModeAndPredictModeDisablesDropout) {
  EXPECT_FALSE(autograd::is_training());
  auto x = NDArray::ones(Shape{1000});
  {
    autograd::RecordScope record;  // train mode
    EXPECT_TRUE(autograd::is_recording());
    EXPECT_TRUE(autograd::is_training());
    auto v = values(op::dropout(x, 0.5));
    int zeros = 0;
    for (double d : v) {
      zeros += d == 0.0;
      EXPECT_TRUE(d == 0.0 || std::abs(d - 2.0) < 1e-6);
    }
    EXPECT_GT(zeros, 350);
    EXPECT_LT(zeros, 650);
  }
  {
    autograd::RecordScope record(/*train_mode=*/false);
    auto v = values(op::dropout(x, 0.5));
    for (double d : v) EXPECT_EQ(d, 1.0);
  }
  EXPECT_FALSE(autograd::is_recording());
}

TEST(Autograd, GradFunctionReturnsGradientsOfIntermediates) {
  auto x = NDArray::from_vector<float>(Shape{2}, {1, 2});
  x.attach_grad();
  NDArray h, y;
  {
    autograd::RecordScope record;
    h = x * 3.0;
    y = h * h;
  }
  auto g = autograd::grad({y}, {h, x});
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{6, 12}));   // 2h
  EXPECT_EQ(g[1].to_vector<float>(), (std::vector<float>{18, 36}));  // 2h*3
}

// A small network's gradient against central differences computed through the same forward.
TEST(Autograd, MlpGradientMatchesFiniteDifferences) {
  random_seed(3);
  auto x = NDArray::uniform(Shape{4, 5}, -1, 1, DType::kFloat64);
  auto w1 = NDArray::uniform(Shape{6, 5}, -1, 1, DType::kFloat64);
  auto b1 = NDArray::uniform(Shape{6}, -1, 1, DType::kFloat64);
  auto w2 = NDArray::uniform(Shape{3, 6}, -1, 1, DType::kFloat64);
  auto forward = [&](const NDArray& w) {
    NDArray h = op::tanh(op::fully_connected(x, w, b1, 6));
    NDArray o = op::fully_connected(h, w2, NDArray(), 3);
    return op::sum(op::log_softmax(o) * o);
  };
  w1.attach_grad();
  NDArray loss;
  {
    autograd::RecordScope record;
    loss = forward(w1);
  }
  loss.backward();
  auto analytic = values(w1.grad());
  auto base = values(w1);
  const double eps = 1e-6;
  for (size_t i = 0; i < base.size(); i += 3) {
    auto plus = base, minus = base;
    plus[i] += eps;
    minus[i] -= eps;
    double lp = forward(NDArray::from_vector<double>(w1.shape(), plus)).item();
    double lm = forward(NDArray::from_vector<double>(w1.shape(), minus)).item();
    EXPECT_NEAR(analytic[i], (lp - lm) / (2 * eps), 1e-5) << "element " << i;
  }
}

TEST(Autograd, BatchNormUpdatesMovingStatisticsInTrainingOnly) {
  random_seed(5);
  auto x = NDArray::normal(Shape{8, 3, 2, 2}, 2.0, 1.0);
  auto gamma = NDArray::ones(Shape{3});
  auto beta = NDArray::zeros(Shape{3});
  auto mean = NDArray::zeros(Shape{3});
  auto var = NDArray::ones(Shape{3});
  op::batch_norm(x, gamma, beta, mean, var);  // inference: stats untouched
  EXPECT_EQ(mean.to_vector<float>(), (std::vector<float>{0, 0, 0}));
  {
    autograd::TrainModeScope train;
    op::batch_norm(x, gamma, beta, mean, var, 1e-3, 0.9);
  }
  for (double m : values(mean)) EXPECT_NEAR(m, 0.2, 0.08);  // 0.1 * batch mean (≈2)
}

// A recorded function: y = x * w computed with recording paused (as a bound executor would),
// its backward given by hand. It composes with recorded ops on both sides.
TEST(Autograd, RecordedFunctionJoinsTheTape) {
  auto x = NDArray::from_vector<float>(Shape{3}, {1, -2, 0.5});
  auto w = NDArray::from_vector<float>(Shape{3}, {3, 4, -1});
  x.attach_grad();
  w.attach_grad();
  NDArray loss;
  int calls = 0;
  {
    autograd::RecordScope record;
    NDArray x2 = x * 2.0;  // recorded op before the function
    std::vector<NDArray> outs;
    {
      autograd::PauseScope pause(true);
      outs.push_back(x2 * w);
    }
    auto backward = [x2 = x2.detach(), w = w.detach(), &calls](const std::vector<NDArray>& g) {
      ++calls;
      return std::vector<NDArray>{g[0] * w, g[0] * x2};
    };
    ASSERT_TRUE(autograd::record_function("mul", {x2, w}, outs, backward));
    loss = op::sum(outs[0] * outs[0]);  // recorded op after it
  }
  loss.backward();
  // loss = sum((2 x w)^2): d/dx = 8 x w^2, d/dw = 8 x^2 w.
  auto gx = values(x.grad()), gw = values(w.grad());
  const double xs[] = {1, -2, 0.5}, ws[] = {3, 4, -1};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(gx[i], 8 * xs[i] * ws[i] * ws[i], 1e-4) << i;
    EXPECT_NEAR(gw[i], 8 * xs[i] * xs[i] * ws[i], 1e-4) << i;
  }
  EXPECT_EQ(calls, 1);
  // The graph was freed: a second backward is refused rather than running the function again.
  EXPECT_THROW(loss.backward(), Error);
  EXPECT_EQ(calls, 1);
}

TEST(Autograd, RecordedFunctionRecordsOnlyWhenNeededAndChecksItsGradients) {
  auto x = NDArray::from_vector<float>(Shape{2}, {1, 2});
  std::vector<NDArray> outs{x * 1.0};
  auto identity = [](const std::vector<NDArray>& g) { return std::vector<NDArray>{g[0]}; };
  EXPECT_FALSE(autograd::record_function("id", {x}, outs, identity));  // not recording
  {
    autograd::RecordScope record;
    EXPECT_FALSE(autograd::record_function("id", {x}, outs, identity));  // x needs no grad
  }
  x.attach_grad();
  auto wrong = [](const std::vector<NDArray>&) {
    return std::vector<NDArray>{NDArray::zeros(Shape{5}, DType::kFloat32)};
  };
  {
    autograd::RecordScope record;
    EXPECT_TRUE(autograd::record_function("wrong_shape", {x}, outs, wrong));
  }
  try {
    outs[0].backward();
    FAIL() << "a gradient of the wrong shape was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("wrong_shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
