// nn/: parameter creation from shapes, names, determinism, layer outputs against plain loops in
// double precision, rebinding per batch size, gradients against finite differences, an SGD
// training loop and the errors.
#include "nn/nn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace weft::nn {
namespace {

using Vec = std::vector<double>;

template <typename L, typename... A>
LayerPtr make(A&&... args) {
  return std::make_shared<L>(std::forward<A>(args)...);
}

std::vector<float> random_values(int64_t n, uint64_t seed, double low = -1, double high = 1) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.uniform(low, high));
  return v;
}

NDArray random_array(const Shape& shape, uint64_t seed, double low = -1, double high = 1) {
  return NDArray::from_vector<float>(shape, random_values(shape.size(), seed, low, high));
}

void expect_close(const Vec& got, const Vec& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > tol * (1 + std::abs(want[i])) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
    }
  }
}

// ---- reference loops (NCHW, double) ------------------------------------------------------------

struct Tensor {
  Vec v;
  int64_t n = 0, c = 0, h = 1, w = 1;
  double& at(int64_t i, int64_t ch, int64_t y, int64_t x) {
    return v[((i * c + ch) * h + y) * w + x];
  }
  double at(int64_t i, int64_t ch, int64_t y, int64_t x) const {
    return v[((i * c + ch) * h + y) * w + x];
  }
};

Tensor tensor(const NDArray& a) {
  Tensor t;
  t.v = a.to_doubles();
  t.n = a.shape()[0];
  t.c = a.shape()[1];
  if (a.ndim() == 4) {
    t.h = a.shape()[2];
    t.w = a.shape()[3];
  }
  return t;
}

Tensor conv_ref(const Tensor& x, const NDArray& weight, const NDArray* bias, int64_t stride,
                int64_t pad, int64_t groups) {
  const Vec w = weight.to_doubles();
  const Vec b = bias ? bias->to_doubles() : Vec();
  const int64_t o = weight.shape()[0], cg = weight.shape()[1], kh = weight.shape()[2],
                kw = weight.shape()[3];
  Tensor y;
  y.n = x.n;
  y.c = o;
  y.h = (x.h + 2 * pad - kh) / stride + 1;
  y.w = (x.w + 2 * pad - kw) / stride + 1;
  y.v.assign(static_cast<size_t>(y.n * y.c * y.h * y.w), 0);
  const int64_t og = o / groups;
  for (int64_t i = 0; i < x.n; ++i)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t oy = 0; oy < y.h; ++oy)
        for (int64_t ox = 0; ox < y.w; ++ox) {
          double s = bias ? b[oc] : 0;
          const int64_t g = oc / og;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= x.h || ix < 0 || ix >= x.w) continue;
                s += w[((oc * cg + ic) * kh + ky) * kw + kx] * x.at(i, g * cg + ic, iy, ix);
              }
          y.at(i, oc, oy, ox) = s;
        }
  return y;
}

// y[n, u] = sum_d x[n, d] w[u, d] + b[u], x flattened per sample.
Tensor dense_ref(const Tensor& x, const NDArray& weight, const NDArray& bias) {
  const Vec w = weight.to_doubles(), b = bias.to_doubles();
  const int64_t units = weight.shape()[0], d = weight.shape()[1];
  Tensor y;
  y.n = x.n;
  y.c = units;
  y.v.assign(static_cast<size_t>(x.n * units), 0);
  for (int64_t i = 0; i < x.n; ++i)
    for (int64_t u = 0; u < units; ++u) {
      double s = b[u];
      for (int64_t k = 0; k < d; ++k) s += x.v[i * d + k] * w[u * d + k];
      y.v[i * units + u] = s;
    }
  return y;
}

Tensor relu(Tensor t) {
  for (double& v : t.v) v = std::max(v, 0.0);
  return t;
}

Tensor add(Tensor a, const Tensor& b) {
  for (size_t i = 0; i < a.v.size(); ++i) a.v[i] += b.v[i];
  return a;
}

Tensor pool2_ref(const Tensor& x, bool max) {
  Tensor y{Vec(), x.n, x.c, x.h / 2, x.w / 2};
  y.v.assign(static_cast<size_t>(y.n * y.c * y.h * y.w), 0);
  for (int64_t i = 0; i < x.n; ++i)
    for (int64_t c = 0; c < x.c; ++c)
      for (int64_t oy = 0; oy < y.h; ++oy)
        for (int64_t ox = 0; ox < y.w; ++ox) {
          double m = max ? -1e300 : 0;
          for (int64_t k = 0; k < 4; ++k) {
            const double v = x.at(i, c, 2 * oy + k / 2, 2 * ox + k % 2);
            m = max ? std::max(m, v) : m + v / 4;
          }
          y.at(i, c, oy, ox) = m;
        }
  return y;
}

Tensor global_avg_flat(const Tensor& x) {
  Tensor y{Vec(static_cast<size_t>(x.n * x.c), 0), x.n, x.c};
  for (int64_t i = 0; i < x.n; ++i)
    for (int64_t c = 0; c < x.c; ++c) {
      for (int64_t p = 0; p < x.h * x.w; ++p)
        y.v[i * x.c + c] += x.v[(i * x.c + c) * x.h * x.w + p];
      y.v[i * x.c + c] /= static_cast<double>(x.h * x.w);
    }
  return y;
}

Tensor concat_channels(const Tensor& a, const Tensor& b) {
  Tensor y{Vec(), a.n, a.c + b.c, a.h, a.w};
  y.v.assign(static_cast<size_t>(y.n * y.c * y.h * y.w), 0);
  for (int64_t i = 0; i < a.n; ++i)
    for (int64_t c = 0; c < y.c; ++c)
      for (int64_t p = 0; p < a.h * a.w; ++p)
        y.v[(i * y.c + c) * a.h * a.w + p] =
            c < a.c ? a.v[(i * a.c + c) * a.h * a.w + p] : b.v[(i * b.c + c - a.c) * a.h * a.w + p];
  return y;
}

// ---- init, names, determinism ------------------------------------------------------------------

std::shared_ptr<Sequential> small_cnn() {
  return std::make_shared<Sequential>(std::vector<LayerPtr>{
      make<Conv2D>(8, 3, Conv2DOptions{.padding = 1}), make<BatchNorm>(), make<Activation>("relu"),
      make<GlobalAvgPool2D>(), make<Flatten>(), make<Dense>(10)});
}

TEST(NnInit, ShapesFromInferenceWithDeferredBatch) {
  auto net = small_cnn();
  Parameters p = init(*net, {Shape{0, 3, 32, 32}}, 0);
  EXPECT_EQ(net->name(), "sequential0");
  const std::vector<std::string> want{
      "conv0_weight",  "conv0_bias",  "batchnorm0_gamma",       "batchnorm0_beta",
      "dense0_weight", "dense0_bias", "batchnorm0_moving_mean", "batchnorm0_moving_var"};
  EXPECT_EQ(p.names(), want);
  EXPECT_EQ(p.aux_names(),
            (std::vector<std::string>{"batchnorm0_moving_mean", "batchnorm0_moving_var"}));
  EXPECT_EQ(p.at("conv0_weight").shape(), (Shape{8, 3, 3, 3}));
  EXPECT_EQ(p.at("dense0_weight").shape(), (Shape{10, 8}));  // in_units inferred
  EXPECT_EQ(p.at("batchnorm0_moving_var").shape(), (Shape{8}));
  EXPECT_EQ(p.count(), 8 * 27 + 8 + 8 + 8 + 80 + 10);
  EXPECT_EQ(p.trainable().size(), 6u);

  // Defaults by suffix: zeros, ones, Xavier uniform with MXNet's fans (27 in, 72 out).
  for (double v : p.at("conv0_bias").to_doubles()) EXPECT_EQ(v, 0);
  for (double v : p.at("batchnorm0_gamma").to_doubles()) EXPECT_EQ(v, 1);
  for (double v : p.at("batchnorm0_moving_var").to_doubles()) EXPECT_EQ(v, 1);
  const double bound = std::sqrt(3.0 / ((27 + 72) / 2.0));
  double largest = 0;
  for (double v : p.at("conv0_weight").to_doubles()) largest = std::max(largest, std::abs(v));
  EXPECT_LE(largest, bound);
  EXPECT_GT(largest, 0.8 * bound);  // 216 draws fill the range
}

TEST(NnInit, NamesPerModelInTreeOrderAndUserNamesKept) {
  auto a = std::make_shared<Sequential>(
      std::vector<LayerPtr>{make<Dense>(4, DenseOptions{}, "dense0"), make<Dense>(3),
                            make<Dense>(2, DenseOptions{}, "head")});
  Parameters p = init(*a, {Shape{0, 5}}, 0);
  // The unnamed Dense skips the name the user took.
  EXPECT_TRUE(p.contains("dense0_weight"));
  EXPECT_TRUE(p.contains("dense1_weight"));
  EXPECT_TRUE(p.contains("head_bias"));
  EXPECT_EQ(p.at("dense1_weight").shape(), (Shape{3, 4}));
  // A second model counts from 0 again.
  auto b = std::make_shared<Sequential>(std::vector<LayerPtr>{make<Dense>(3)});
  EXPECT_TRUE(init(*b, {Shape{0, 5}}, 0).contains("dense0_weight"));
  EXPECT_EQ(b->name(), "sequential0");
}

TEST(NnInit, DeterministicPerSeed) {
  Parameters p1 = init(*small_cnn(), {Shape{0, 3, 8, 8}}, 7);
  Parameters p2 = init(*small_cnn(), {Shape{2, 3, 8, 8}}, 7);  // a fresh model, another batch
  Parameters p3 = init(*small_cnn(), {Shape{0, 3, 8, 8}}, 8);
  for (const std::string& n : p1.names()) {
    EXPECT_EQ(p1.at(n).to_doubles(), p2.at(n).to_doubles()) << n;
  }
  EXPECT_NE(p1.at("conv0_weight").to_doubles(), p3.at("conv0_weight").to_doubles());
  EXPECT_NE(p1.at("dense0_weight").to_doubles(), p3.at("dense0_weight").to_doubles());
}

TEST(NnInit, InitializersByLayerOption) {
  auto d = std::make_shared<Dense>(3, DenseOptions{.weight_init = std::make_shared<Constant>(0.25),
                                                   .bias_init = std::make_shared<Uniform>(0.5)});
  Parameters p = init(*d, {Shape{0, 4}}, 1);
  for (double v : p.at("dense0_weight").to_doubles()) EXPECT_EQ(v, 0.25);
  for (double v : p.at("dense0_bias").to_doubles()) EXPECT_LE(std::abs(v), 0.5);
  EXPECT_NEAR(Xavier("uniform", "in", 2).scale(Shape{16, 4, 3, 3}), std::sqrt(2.0 / 36), 1e-12);
  EXPECT_THROW(Xavier("flat"), ValueError);
}

// ---- outputs against reference loops -----------------------------------------------------------

TEST(NnApply, DenseMatchesLoops) {
  auto d = make<Dense>(5, DenseOptions{.activation = "relu"});
  Parameters p = init(*d, {Shape{0, 2, 3}}, 3);  // flattened to 6 features
  Model m(d);
  NDArray x = random_array(Shape{4, 2, 3}, 11);
  NDArray y = m.apply(p, {x})[0];
  EXPECT_EQ(y.shape(), (Shape{4, 5}));
  Tensor want =
      relu(dense_ref(tensor(x.reshape(Shape{4, 6})), p.at("dense0_weight"), p.at("dense0_bias")));
  expect_close(y.to_doubles(), want.v, 1e-5, "dense");
}

TEST(NnApply, Conv2DStridePaddingGroupsMatchLoops) {
  auto c = make<Conv2D>(6, 3, Conv2DOptions{.strides = 2, .padding = 1, .groups = 2});
  Parameters p = init(*c, {Shape{0, 4, 7, 6}}, 5);
  EXPECT_EQ(p.at("conv0_weight").shape(), (Shape{6, 2, 3, 3}));
  // A non-zero bias, so that it is checked too.
  NDArray bias = p.at("conv0_bias");
  random_array(Shape{6}, 9).copy_to(bias);
  Model m(c);
  NDArray x = random_array(Shape{2, 4, 7, 6}, 12);
  NDArray y = m.apply(p, {x})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 6, 4, 3}));
  Tensor want = conv_ref(tensor(x), p.at("conv0_weight"), &bias, 2, 1, 2);
  expect_close(y.to_doubles(), want.v, 1e-5, "conv");
}

TEST(NnApply, BatchNormInferenceAndTrainingStatistics) {
  auto bn = make<BatchNorm>();
  Parameters p = init(*bn, {Shape{0, 3, 4, 5}}, 0);
  const char* names[] = {"batchnorm0_gamma", "batchnorm0_beta", "batchnorm0_moving_mean",
                         "batchnorm0_moving_var"};
  for (int i = 0; i < 4; ++i) {
    NDArray a = p.at(names[i]);
    random_array(Shape{3}, 20 + i, i == 3 ? 0.5 : -1, i == 3 ? 2 : 1).copy_to(a);
  }
  const Vec g = p.at(names[0]).to_doubles(), b = p.at(names[1]).to_doubles(),
            mean = p.at(names[2]).to_doubles(), var = p.at(names[3]).to_doubles();
  Model m(bn);
  NDArray x = random_array(Shape{2, 3, 4, 5}, 30);
  Tensor t = tensor(x);
  Vec want(t.v.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const size_t c = (i / 20) % 3;
    want[i] = g[c] * (t.v[i] - mean[c]) / std::sqrt(var[c] + 1e-5) + b[c];
  }
  expect_close(m.apply(p, {x})[0].to_doubles(), want, 1e-5, "batchnorm");

  // Training mode uses the batch statistics and moves the moving mean towards them.
  m.apply(p, {x}, /*train=*/true)[0].wait_to_read();
  const Vec moved = p.at(names[2]).to_doubles();
  for (int c = 0; c < 3; ++c) {
    double batch_mean = 0;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t q = 0; q < 20; ++q) batch_mean += t.v[(i * 3 + c) * 20 + q] / 40;
    EXPECT_NEAR(moved[c], 0.9 * mean[c] + 0.1 * batch_mean, 1e-5) << c;
  }
}

TEST(NnApply, ResidualConcatSequentialMatchComposedLoops) {
  auto net = std::make_shared<Sequential>(std::vector<LayerPtr>{
      make<Conv2D>(4, 3, Conv2DOptions{.padding = 1}),
      make<Residual>(std::make_shared<Sequential>(std::vector<LayerPtr>{
                         make<Conv2D>(4, 3, Conv2DOptions{.padding = 1, .activation = "relu"}),
                         make<Conv2D>(4, 3, Conv2DOptions{.padding = 1})}),
                     nullptr, "relu"),
      make<Residual>(make<Conv2D>(6, 1, Conv2DOptions{.strides = 2}),
                     make<Conv2D>(6, 1, Conv2DOptions{.strides = 2, .use_bias = false})),
      make<Concat>(std::vector<LayerPtr>{make<MaxPool2D>(), make<AvgPool2D>()}),
      make<GlobalAvgPool2D>(), make<Flatten>(), make<Dense>(3)});
  Parameters p = init(*net, {Shape{0, 2, 8, 8}}, 4);
  EXPECT_FALSE(p.contains("conv4_bias"));
  for (const std::string& n : p.names()) {  // non-zero biases everywhere
    if (n.ends_with("_bias")) {
      NDArray a = p.at(n);
      random_array(a.shape(), n.size(), -0.5, 0.5).copy_to(a);
    }
  }
  Model m(net);
  NDArray x = random_array(Shape{3, 2, 8, 8}, 40);
  NDArray y = m.apply(p, {x})[0];
  ASSERT_EQ(y.shape(), (Shape{3, 3}));

  auto w = [&](const char* n) { return p.at(std::string(n) + "_weight"); };
  auto b = [&](const char* n) { return p.at(std::string(n) + "_bias"); };
  NDArray b0 = b("conv0"), b1 = b("conv1"), b2 = b("conv2"), b3 = b("conv3");
  Tensor h = conv_ref(tensor(x), w("conv0"), &b0, 1, 1, 1);
  Tensor r = relu(conv_ref(h, w("conv1"), &b1, 1, 1, 1));
  h = relu(add(conv_ref(r, w("conv2"), &b2, 1, 1, 1), h));
  h = add(conv_ref(h, w("conv3"), &b3, 2, 0, 1), conv_ref(h, w("conv4"), nullptr, 2, 0, 1));
  h = concat_channels(pool2_ref(h, true), pool2_ref(h, false));
  Tensor want = dense_ref(global_avg_flat(h), w("dense0"), b("dense0"));
  expect_close(y.to_doubles(), want.v, 1e-4, "model");
}

TEST(NnApply, LayerUsedTwiceSharesItsParameters) {
  auto d = make<Dense>(3);
  auto net = std::make_shared<Sequential>(std::vector<LayerPtr>{d, d});
  Parameters p = init(*net, {Shape{0, 3}}, 8);
  EXPECT_EQ(p.names(), (std::vector<std::string>{"dense0_weight", "dense0_bias"}));
  NDArray bias = p.at("dense0_bias");
  random_array(Shape{3}, 81).copy_to(bias);
  Model m(net);
  NDArray x = random_array(Shape{2, 3}, 82);
  Tensor once = dense_ref(tensor(x), p.at("dense0_weight"), bias);
  Tensor want = dense_ref(once, p.at("dense0_weight"), bias);
  expect_close(m.apply(p, {x})[0].to_doubles(), want.v, 1e-5, "shared");
}

TEST(NnApply, RebindsPerBatchSizeAndMode) {
  auto d = make<Dense>(3);
  Parameters p = init(*d, {Shape{0, 4}}, 2);
  Model m(d);
  for (int64_t batch : {2, 5, 2}) {
    NDArray x = random_array(Shape{batch, 4}, 50 + batch);
    NDArray y = m.apply(p, {x})[0];
    EXPECT_EQ(y.shape(), (Shape{batch, 3}));
    Tensor want = dense_ref(tensor(x), p.at("dense0_weight"), p.at("dense0_bias"));
    expect_close(y.to_doubles(), want.v, 1e-5, "batch " + std::to_string(batch));
  }
  EXPECT_EQ(m.num_bound(), 2u);
  m.apply(p, {random_array(Shape{2, 4}, 1)}, /*train=*/true);
  EXPECT_EQ(m.num_bound(), 3u);
  // Another Parameters object binds its own arrays.
  m.apply(p.copy(), {random_array(Shape{2, 4}, 1)});
  EXPECT_EQ(m.num_bound(), 4u);
}

TEST(NnApply, OutputsAreCopiesAndUpdatesAreSeen) {
  auto d = make<Dense>(2);
  Parameters p = init(*d, {Shape{0, 3}}, 0);
  Model m(d);
  NDArray x = random_array(Shape{1, 3}, 60);
  NDArray y1 = m.apply(p, {x})[0];
  const Vec first = y1.to_doubles();
  NDArray bias = p.at("dense0_bias");
  NDArray::full(Shape{2}, 10).copy_to(bias);  // bound without a copy: the next run sees it
  NDArray y2 = m.apply(p, {x})[0];
  EXPECT_EQ(y1.to_doubles(), first);
  expect_close(y2.to_doubles(), {first[0] + 10, first[1] + 10}, 1e-6, "updated");
}

TEST(NnApply, FusedInferenceFollowsParameterUpdates) {
  // Conv + BatchNorm + ReLU is fused for inference; the fused kernel must read the bound
  // statistics as they are now, not as they were at bind.
  auto net = small_cnn();
  Parameters p = init(*net, {Shape{0, 3, 6, 6}}, 1);
  Model fused(net), plain(net, ModelOptions{.fuse = false});
  NDArray x = random_array(Shape{2, 3, 6, 6}, 80);
  for (int round = 0; round < 2; ++round) {
    for (const char* n : {"batchnorm0_moving_mean", "batchnorm0_beta", "batchnorm0_gamma"}) {
      NDArray a = p.at(n);
      random_array(a.shape(), 90 + round, -0.5, 0.5).copy_to(a);
    }
    NDArray var = p.at("batchnorm0_moving_var");
    random_array(var.shape(), 95 + round, 0.5, 1.5).copy_to(var);
    expect_close(fused.apply(p, {x})[0].to_doubles(), plain.apply(p, {x})[0].to_doubles(), 1e-4,
                 "round " + std::to_string(round));
  }
}

TEST(NnApply, DropoutTrainingOnly) {
  auto d = make<Dropout>(0.5);
  Model m(d);
  Parameters none = init(*d, {Shape{0, 1000}}, 0);
  EXPECT_EQ(none.size(), 0u);
  NDArray x = NDArray::ones(Shape{2, 1000});
  for (double v : m.apply(none, {x})[0].to_doubles()) EXPECT_EQ(v, 1);
  int zeros = 0;
  for (double v : m.apply(none, {x}, true)[0].to_doubles()) {
    EXPECT_TRUE(v == 0 || v == 2) << v;
    zeros += v == 0;
  }
  EXPECT_GT(zeros, 800);
  EXPECT_LT(zeros, 1200);
}

// ---- gradients and training --------------------------------------------------------------------

TEST(NnGrad, DenseModelMatchesCentralDifferences) {
  auto net = std::make_shared<Sequential>(
      std::vector<LayerPtr>{make<Dense>(4, DenseOptions{.activation = "tanh"}), make<Dense>(2)});
  Parameters p = init(*net, {Shape{0, 5}}, 6);
  Model m(net);
  NDArray x = random_array(Shape{3, 5}, 70);
  NDArray h = random_array(Shape{3, 2}, 71);
  const Vec hv = h.to_doubles();
  // f(params) = sum(h * y): its gradient is the backward pass with head gradient h.
  auto f = [&] {
    const Vec y = m.apply(p, {x})[0].to_doubles();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += hv[i] * y[i];
    return s;
  };
  ValueAndGrad r = m.value_and_grad(p, {x}, {h}, /*train=*/false);
  ASSERT_EQ(r.grads.size(), 4u);
  const double eps = 1e-2;
  for (const auto& [name, grad] : r.grads) {
    const Vec g = grad.copy().to_doubles();
    NDArray w = p.at(name);
    std::vector<float> base = w.to_vector<float>();
    Vec numeric(base.size());
    for (size_t i = 0; i < base.size(); ++i) {
      std::vector<float> v = base;
      v[i] = base[i] + static_cast<float>(eps);
      NDArray::from_vector<float>(w.shape(), v).copy_to(w);
      const double up = f();
      v[i] = base[i] - static_cast<float>(eps);
      NDArray::from_vector<float>(w.shape(), v).copy_to(w);
      numeric[i] = (up - f()) / (2 * eps);
    }
    NDArray::from_vector<float>(w.shape(), base).copy_to(w);
    expect_close(g, numeric, 2e-3, name);
  }

  // No head gradients after explicit ones: ones again, the gradient of sum(y).
  ValueAndGrad ones = m.value_and_grad(p, {x}, {}, false);
  ValueAndGrad explicit_ones = m.value_and_grad(p, {x}, {NDArray::ones(Shape{3, 2})}, false);
  EXPECT_EQ(ones.grads.at("dense1_bias").copy().to_doubles(), (Vec{3, 3}));
  EXPECT_EQ(explicit_ones.grads.at("dense1_bias").to_doubles(), (Vec{3, 3}));
}

TEST(NnTrain, SgdReachesLowLossOnSeparableProblem) {
  // Two classes split by the line x0 + x1 = 0, with a margin.
  constexpr int64_t kN = 64;
  Rng rng(123);
  std::vector<float> xs, labels;
  while (static_cast<int64_t>(labels.size()) < kN) {
    const double a = rng.uniform(-1, 1), b = rng.uniform(-1, 1);
    if (std::abs(a + b) < 0.2) continue;
    xs.push_back(static_cast<float>(a));
    xs.push_back(static_cast<float>(b));
    labels.push_back(a + b > 0 ? 1.0f : 0.0f);
  }
  NDArray x = NDArray::from_vector<float>(Shape{kN, 2}, xs);
  NDArray y = NDArray::from_vector<float>(Shape{kN}, labels);

  auto net = std::make_shared<Sequential>(
      std::vector<LayerPtr>{make<Dense>(8, DenseOptions{.activation = "tanh"}), make<Dense>(2)});
  Parameters p = init(*net, {Shape{0, 2}}, 0);
  Model train(std::make_shared<WithLoss>(net, std::make_shared<SoftmaxCrossEntropyLoss>()));
  SGD sgd({.lr = 0.5, .momentum = 0.9, .rescale_grad = 1.0 / kN});
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    ValueAndGrad r = train.value_and_grad(p, {x, y});
    if (step == 0 || step == 149) {
      double mean = 0;
      for (double v : r.outputs[0].to_doubles()) mean += v / kN;
      (step == 0 ? first : last) = mean;
    }
    sgd.update(p, r.grads);
  }
  EXPECT_GT(first, 0.4);
  EXPECT_LT(last, 0.05);
  EXPECT_EQ(sgd.num_update(), 150);
  // The trained parameters serve the network alone: every sample classified right.
  Model infer(net);
  const Vec logits = infer.apply(p, {x})[0].to_doubles();
  for (int64_t i = 0; i < kN; ++i) {
    EXPECT_EQ(logits[2 * i + 1] > logits[2 * i] ? 1.0f : 0.0f, labels[i]) << i;
  }
}

TEST(NnTrain, SgdStepMatchesFormula) {
  Parameters p;
  p.set("w", NDArray::from_vector<float>(Shape{3}, {1, -2, 3}));
  NDArray g = NDArray::from_vector<float>(Shape{3}, {0.5, 1, -1});
  SGD plain({.lr = 0.1, .wd = 0.01, .rescale_grad = 2});
  plain.update(p, {{"w", g}});
  // w -= lr * (rescale * g + wd * w)
  expect_close(p.at("w").to_doubles(),
               {1 - 0.1 * (1 + 0.01), -2 - 0.1 * (2 - 0.02), 3 - 0.1 * (-2 + 0.03)}, 1e-6, "sgd");
  SGD mom({.lr = 0.1, .momentum = 0.5});
  p.set("v", NDArray::zeros(Shape{3}));
  for (int i = 0; i < 2; ++i) mom.update(p, {{"v", g}});
  // mom1 = -lr g, mom2 = 0.5 mom1 - lr g: v = -0.25 g after two steps.
  expect_close(p.at("v").to_doubles(), {-0.125, -0.25, 0.25}, 1e-6, "momentum");
}

// ---- errors
// --------------------------------------------------------------------------------------

TEST(NnErrors, MissingParameterIsNamed) {
  auto net = std::make_shared<Sequential>(std::vector<LayerPtr>{make<Dense>(4), make<Dense>(2)});
  Parameters full = init(*net, {Shape{0, 3}}, 0), partial;
  for (const std::string& n : full.names()) {
    if (n != "dense1_bias") partial.set(n, full.at(n));
  }
  Model m(net);
  try {
    m.apply(partial, {NDArray::ones(Shape{1, 3})});
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("'dense1_bias' is missing"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(partial.at("dense1_bias"), ValueError);
}

TEST(NnErrors, WrongInputChannelsNameTheOp) {
  auto c = make<Conv2D>(4, 3);
  Parameters p = init(*c, {Shape{0, 3, 8, 8}}, 0);
  Model m(c);
  try {
    m.apply(p, {NDArray::ones(Shape{1, 5, 8, 8})});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find("conv0") != std::string::npos ||
                msg.find("Convolution") != std::string::npos)
        << msg;
  }
  // A layer given the wrong number of inputs names itself.
  try {
    init(*make<Dense>(2), {Shape{0, 3}, Shape{0, 3}}, 0);
    FAIL() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Dense 'dense0'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Conv2D(6, 3, Conv2DOptions{.groups = 4}), ValueError);
  EXPECT_THROW(Sequential({nullptr}), ValueError);
}

}  // namespace
}  // namespace weft::nn
