// End-to-end imperative training: a small MLP and a small CNN learn synthetic tasks with SGD
// through autograd, reaching a set accuracy.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"

namespace weft {
namespace {

void sgd(std::vector<NDArray>& params, double lr) {
  for (auto& p : params) p -= p.grad() * lr;
}

double accuracy(const NDArray& logits, const std::vector<float>& labels) {
  auto pred = op::argmax(logits, 1).to_doubles();
  int correct = 0;
  for (size_t i = 0; i < labels.size(); ++i)
    correct += static_cast<int>(pred[i]) == static_cast<int>(labels[i]);
  return static_cast<double>(correct) / labels.size();
}

TEST(Training, MlpLearnsFourGaussianBlobs) {
  random_seed(11);
  std::mt19937 gen(1);
  std::normal_distribution<float> noise(0.0f, 0.35f);
  const int n = 256;
  const float centers[4][2] = {{1, 1}, {-1, 1}, {-1, -1}, {1, -1}};
  std::vector<float> xs, ys;
  for (int i = 0; i < n; ++i) {
    int c = i % 4;
    xs.push_back(centers[c][0] + noise(gen));
    xs.push_back(centers[c][1] + noise(gen));
    ys.push_back(static_cast<float>(c));
  }
  auto x = NDArray::from_vector<float>(Shape{n, 2}, xs);
  auto y = NDArray::from_vector<float>(Shape{n}, ys);
  std::vector<NDArray> params{NDArray::normal(Shape{16, 2}, 0, 0.5), NDArray::zeros(Shape{16}),
                              NDArray::normal(Shape{4, 16}, 0, 0.5), NDArray::zeros(Shape{4})};
  for (auto& p : params) p.attach_grad();
  auto forward = [&] {
    NDArray h = op::relu(op::fully_connected(x, params[0], params[1], 16));
    return op::fully_connected(h, params[2], params[3], 4);
  };
  for (int step = 0; step < 150; ++step) {
    NDArray out;
    {
      autograd::RecordScope record;
      out = op::softmax_output(forward(), y);
    }
    out.backward();
    sgd(params, 0.5 / n * 4);
  }
  EXPECT_GE(accuracy(forward(), ys), 0.95);
}

TEST(Training, CnnLearnsBarOrientation) {
  random_seed(12);
  std::mt19937 gen(2);
  std::uniform_int_distribution<int> pos(1, 6);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  const int n = 64, s = 8;
  std::vector<float> xs(static_cast<size_t>(n) * s * s), ys;
  for (int i = 0; i < n; ++i) {
    const bool vertical = i % 2;
    const int p = pos(gen);
    for (int r = 0; r < s; ++r)
      for (int c = 0; c < s; ++c) {
        float v = noise(gen);
        if ((vertical && c == p) || (!vertical && r == p)) v += 1.0f;
        xs[(static_cast<size_t>(i) * s + r) * s + c] = v;
      }
    ys.push_back(vertical ? 1.0f : 0.0f);
  }
  auto x = NDArray::from_vector<float>(Shape{n, 1, s, s}, xs);
  auto y = NDArray::from_vector<float>(Shape{n}, ys);
  std::vector<NDArray> params{NDArray::normal(Shape{4, 1, 3, 3}, 0, 0.5), NDArray::zeros(Shape{4}),
                              NDArray::normal(Shape{2, 4}, 0, 0.5), NDArray::zeros(Shape{2})};
  for (auto& p : params) p.attach_grad();
  auto forward = [&] {
    NDArray c =
        op::relu(op::convolution(x, params[0], params[1], Shape{3, 3}, 4, Shape{}, Shape{1, 1}));
    NDArray g = op::pooling(c, Shape{1, 1}, "max", Shape{}, Shape{}, /*global_pool=*/true);
    return op::fully_connected(g, params[2], params[3], 2);
  };
  for (int step = 0; step < 120; ++step) {
    NDArray out;
    {
      autograd::RecordScope record;
      out = op::softmax_output(forward(), y);
    }
    out.backward();
    sgd(params, 0.5 / n);
  }
  EXPECT_GE(accuracy(forward(), ys), 0.9);
}

}  // namespace
}  // namespace weft
