// The augmentation map functions and run_host_op: determinism for equal generators, crop windows
// inside the image and covering every position, flip probability, resize / to_tensor / normalize
// against values computed here, compose order, and errors naming the transform and the array.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "data/image.h"

namespace weft::data {
namespace {

// An (h, w, c) uint8 image whose pixel (y, x, ch) holds (y * w + x) * c + ch modulo 256.
NDArray ramp(int64_t h, int64_t w, int64_t c) {
  std::vector<uint8_t> v(static_cast<size_t>(h * w * c));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i % 256);
  return NDArray::from_vector(Shape{h, w, c}, v);
}

std::vector<uint8_t> bytes(const NDArray& a) { return a.to_vector<uint8_t>(); }

// Runs `f` and expects an error of type E whose message contains every string of `parts`.
template <typename E, typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
  }
}

NDArray apply(const MapFn& fn, NDArray a, Rng& rng) { return fn({std::move(a)}, rng).at(0); }

TEST(ImageTransforms, RandomCropIsDeterministicForEqualGenerators) {
  const NDArray img = ramp(20, 30, 3);
  const MapFn fn = random_crop(7, 9);
  std::set<std::vector<uint8_t>> distinct;
  for (uint64_t stream = 0; stream < 16; ++stream) {
    Rng a(11, stream), b(11, stream);
    const auto va = bytes(apply(fn, img, a));
    EXPECT_EQ(va, bytes(apply(fn, img, b)));
    distinct.insert(va);
  }
  EXPECT_GT(distinct.size(), 8u);  // streams draw different windows
}

TEST(ImageTransforms, RandomCropWindowsStayInsideAndCoverEveryPosition) {
  const int64_t h = 6, w = 8, ch = 3, wh = 3, ww = 4;
  const NDArray img = ramp(h, w, 1);
  // One channel holding y * w + x, repeated over three channels (each < 256).
  std::vector<uint8_t> v;
  for (int64_t i = 0; i < h * w; ++i) v.insert(v.end(), ch, static_cast<uint8_t>(i));
  const NDArray rgb = NDArray::from_vector(Shape{h, w, ch}, v);
  const MapFn fn = random_crop(wh, ww);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (uint64_t k = 0; k < 2000; ++k) {
    Rng rng(5, k);
    const NDArray out = apply(fn, rgb, rng);
    ASSERT_EQ(out.shape(), (Shape{wh, ww, ch}));
    const auto o = bytes(out);
    const int64_t y0 = o[0] / w, x0 = o[0] % w;
    ASSERT_LE(y0 + wh, h);
    ASSERT_LE(x0 + ww, w);
    for (int64_t y = 0; y < wh; ++y)
      for (int64_t x = 0; x < ww; ++x)
        for (int64_t c = 0; c < ch; ++c) ASSERT_EQ(o[(y * ww + x) * ch + c], (y0 + y) * w + x0 + x);
    seen.insert({y0, x0});
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>((h - wh + 1) * (w - ww + 1)));
  // A window the size of the image is the image.
  Rng rng(1, 1);
  EXPECT_EQ(bytes(apply(random_crop(h, w), img, rng)), bytes(img));
}

TEST(ImageTransforms, CenterCropTakesTheMiddleWindow) {
  const NDArray img = ramp(7, 9, 2);
  Rng rng(0, 0);
  const NDArray out = apply(center_crop(3, 4), img, rng);
  ASSERT_EQ(out.shape(), (Shape{3, 4, 2}));
  const auto src = bytes(img), o = bytes(out);
  // y0 = (7 - 3) / 2 = 2, x0 = (9 - 4) / 2 = 2.
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 4; ++x)
      for (int64_t c = 0; c < 2; ++c)
        EXPECT_EQ(o[(y * 4 + x) * 2 + c], src[((2 + y) * 9 + 2 + x) * 2 + c]);
}

TEST(ImageTransforms, CropsNameTheTransformAndTheArrayInErrors) {
  Rng rng(0, 0);
  expect_error<ShapeError>([&] { apply(random_crop(4, 4), ramp(2, 3, 1), rng); },
                           {"random_crop(height=4, width=4)", "(2, 3, 1) uint8", "smaller"});
  expect_error<ShapeError>(
      [&] {
        apply(center_crop(2, 2), NDArray::zeros(Shape{5, 5}), rng);
      },
      {"center_crop(height=2, width=2)", "(5, 5) float32", "(H, W, C)"});
  expect_error<ValueError>([] { random_crop(0, 3); }, {"random_crop", "positive"});
  const MapFn second = center_crop(1, 1, 1);
  expect_error<ValueError>([&] { second({ramp(2, 2, 1)}, rng); },
                           {"center_crop", "no component 1"});
}

TEST(ImageTransforms, RandomFlipFollowsItsProbability) {
  const NDArray img = ramp(3, 5, 3);
  const auto src = bytes(img);
  std::vector<uint8_t> mirrored(src.size());
  for (int64_t y = 0; y < 3; ++y)
    for (int64_t x = 0; x < 5; ++x)
      for (int64_t c = 0; c < 3; ++c)
        mirrored[(y * 5 + x) * 3 + c] = src[(y * 5 + (4 - x)) * 3 + c];
  for (double p : {0.0, 0.3, 1.0}) {
    const MapFn fn = random_flip_left_right(p);
    int flips = 0;
    const int n = 4000;
    for (int k = 0; k < n; ++k) {
      Rng rng(9, static_cast<uint64_t>(k)), again(9, static_cast<uint64_t>(k));
      const auto o = bytes(apply(fn, img, rng));
      ASSERT_TRUE(o == src || o == mirrored);
      flips += o == mirrored;
      EXPECT_EQ(o, bytes(apply(fn, img, again)));
    }
    // Binomial(4000, 0.3): 5 standard deviations are 0.036.
    EXPECT_NEAR(flips / static_cast<double>(n), p, 0.036) << "p = " << p;
  }
  expect_error<ValueError>([] { random_flip_left_right(1.5); }, {"random_flip_left_right", "p"});
}

TEST(ImageTransforms, ResizeToTensorAndNormalizeRunTheOperators) {
  const NDArray img = ramp(5, 7, 3);
  Rng rng(0, 0);
  const NDArray small = apply(resize(3, 4), img, rng);
  ASSERT_EQ(small.shape(), (Shape{3, 4, 3}));
  EXPECT_EQ(bytes(small), bytes(run_host_op("_image_resize", {img}, {{"size", "(4, 3)"}})[0]));
  // Equal sizes are returned as they are.
  EXPECT_TRUE(apply(resize(5, 7), img, rng).shares_storage_with(img));

  const std::vector<float> mean{0.485f, 0.456f, 0.406f}, sd{0.229f, 0.224f, 0.225f};
  const NDArray t = apply(compose({to_tensor(), normalize(mean, sd)}), img, rng);
  ASSERT_EQ(t.shape(), (Shape{3, 5, 7}));
  ASSERT_EQ(t.dtype(), DType::kFloat32);
  const auto src = bytes(img);
  const auto out = t.to_vector<float>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 5; ++y)
      for (int64_t x = 0; x < 7; ++x) {
        const double want = (src[(y * 7 + x) * 3 + c] / 255.0 - mean[c]) / sd[c];
        EXPECT_NEAR(out[(c * 5 + y) * 7 + x], want, 1e-5 * (1 + std::fabs(want)));
      }
  // One value for every channel.
  const NDArray one = apply(compose({to_tensor(), normalize({0.5f}, {0.25f})}), img, rng);
  EXPECT_NEAR(one.to_vector<float>()[1], (src[3] / 255.0 - 0.5) / 0.25, 1e-5);
}

TEST(ImageTransforms, NormalizeAndToTensorErrorsNameTheTransform) {
  Rng rng(0, 0);
  expect_error<ShapeError>(
      [&] {
        apply(normalize({0.1f, 0.2f}, {1.f}), NDArray::zeros(Shape{3, 4, 4}), rng);
      },
      {"normalize(mean=(0.100000001, 0.200000003), std=(1,))", "(3, 4, 4) float32",
       "_image_normalize", "mean has 2 values"});
  expect_error<NotImplemented>([&] { apply(normalize({0.5f}, {1.f}), ramp(4, 4, 3), rng); },
                               {"normalize", "(4, 4, 3) uint8", "_image_normalize"});
  expect_error<ValueError>([] { normalize({0.f}, {0.f, 1.f}); }, {"normalize", "std[0] is 0"});
  expect_error<ValueError>([] { normalize({}, {1.f}); }, {"normalize", "at least one value"});
  expect_error<ShapeError>([&] { apply(to_tensor(), NDArray::zeros(Shape{4}), rng); },
                           {"to_tensor", "(4,) float32", "_image_to_tensor"});
}

TEST(ImageTransforms, ComposeAppliesFunctionsInOrderWithOneGenerator) {
  auto order = std::make_shared<std::vector<int>>();
  const auto step = [order](int id) -> MapFn {
    return [order, id](std::vector<NDArray> arrays, Rng& rng) {
      order->push_back(id);
      arrays.push_back(NDArray::full(Shape{1}, static_cast<double>(rng.next_u32() % 1000)));
      return arrays;
    };
  };
  Rng a(3, 4), b(3, 4);
  const auto out = compose({step(1), step(2), step(3)})({ramp(2, 2, 1)}, a);
  EXPECT_EQ(*order, (std::vector<int>{1, 2, 3}));
  ASSERT_EQ(out.size(), 4u);
  // The functions share the element's generator, in order.
  for (int i = 1; i <= 3; ++i) EXPECT_EQ(out[i].item(), static_cast<double>(b.next_u32() % 1000));
  // Crop after resize differs from resize after crop.
  Rng rng(0, 0);
  const NDArray img = ramp(8, 8, 1);
  EXPECT_EQ(apply(compose({resize(4, 4), center_crop(2, 2)}), img, rng).shape(), (Shape{2, 2, 1}));
  EXPECT_EQ(apply(compose({center_crop(2, 2), resize(4, 4)}), img, rng).shape(), (Shape{4, 4, 1}));
  EXPECT_EQ(compose({})({img}, rng).at(0).storage(), img.storage());
  expect_error<ValueError>([] { compose({MapFn()}); }, {"compose", "function 0 is empty"});
}

TEST(ImageTransforms, WorkOnReadOnlyHostMemory) {
  auto buffer = std::make_shared<std::vector<uint8_t>>(4 * 6 * 3);
  for (size_t i = 0; i < buffer->size(); ++i) (*buffer)[i] = static_cast<uint8_t>(i);
  const NDArray view = wrap_host_memory(buffer, buffer->data(), Shape{4, 6, 3}, DType::kUInt8,
                                        /*read_only=*/true);
  Rng rng(2, 2);
  const MapFn fn = compose({random_crop(3, 3), random_flip_left_right(1.0), resize(5, 5),
                            to_tensor(), normalize({0.5f}, {0.5f})});
  const NDArray out = apply(fn, view, rng);
  EXPECT_EQ(out.shape(), (Shape{3, 5, 5}));
  for (size_t i = 0; i < buffer->size(); ++i) ASSERT_EQ((*buffer)[i], static_cast<uint8_t>(i));
}

TEST(RunHostOp, RunsKernelsWithWorkspacesAndRefusesRandomOps) {
  const NDArray x = NDArray::from_vector(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  auto out = run_host_op("elemwise_add", {x, x});
  EXPECT_EQ(out.at(0).to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  out = run_host_op("sum", {x}, {{"axis", "1"}});
  EXPECT_EQ(out.at(0).to_vector<float>(), (std::vector<float>{6, 15}));
  // Only visible outputs come back.
  EXPECT_EQ(run_host_op("_image_flip_top_bottom", {NDArray::zeros(Shape{2, 2, 1})}).size(), 1u);
  expect_error<NotImplemented>(
      [&] {
        run_host_op("_image_random_flip_left_right", {NDArray::zeros(Shape{2, 2, 3})});
      },
      {"_image_random_flip_left_right", "random state"});
  expect_error<ValueError>([&] { run_host_op("elemwise_add", {x}); },
                           {"elemwise_add", "expects 2 inputs"});
  expect_error<ValueError>(
      [&] {
        run_host_op("_image_flip_left_right", {x}, {{"bogus", "1"}});
      },
      {"_image_flip_left_right", "bogus"});
}

}  // namespace
}  // namespace weft::data
