// The image operators (_image_to_tensor, _image_normalize, flips, _image_crop, _image_resize)
// against plain loops and formulas computed here in double: odd sizes, 1 and 3 channels, batches,
// uint8 / float32 / float64, gradients by finite differences, and errors naming the op.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/op.h"
#include "tests/ops/op_harness.h"

namespace weft {
namespace {

using testing::all_close;
using testing::check_gradient;
using testing::HostTensor;
using testing::infer_shapes;
using testing::infer_types;
using testing::run_op;
using testing::RunOptions;

// An image of random whole values in [0, 255].
HostTensor pixels(Shape shape, uint64_t seed, DType dtype = DType::kUInt8) {
  std::mt19937_64 gen(seed);
  std::vector<double> v(static_cast<size_t>(shape.size()));
  for (auto& x : v) x = static_cast<double>(gen() % 256);
  return HostTensor::of(std::move(shape), std::move(v), dtype);
}

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

// (N, H, W, C) of a 3-d or 4-d image shape.
struct Dims {
  int64_t n, h, w, c;
};
Dims dims(const Shape& s) {
  const bool b = s.ndim() == 4;
  return {b ? s[0] : 1, s[s.ndim() - 3], s[s.ndim() - 2], s[s.ndim() - 1]};
}
double& px(HostTensor& t, const Dims& d, int64_t n, int64_t h, int64_t w, int64_t c) {
  return t.data[static_cast<size_t>(((n * d.h + h) * d.w + w) * d.c + c)];
}
double px(const HostTensor& t, const Dims& d, int64_t n, int64_t h, int64_t w, int64_t c) {
  return t.data[static_cast<size_t>(((n * d.h + h) * d.w + w) * d.c + c)];
}

// ---- to_tensor ---------------------------------------------------------------------------------

TEST(ImageToTensor, TransposesToChannelsFirstAndDividesBy255) {
  for (const Shape& shape : {Shape{5, 7, 3}, Shape{4, 3, 1}, Shape{2, 3, 5, 3}, Shape{1, 1, 1}}) {
    for (DType dt : {DType::kUInt8, DType::kFloat32, DType::kFloat64}) {
      SCOPED_TRACE(shape.to_string() + " " + dtype_name(dt));
      const HostTensor x = pixels(shape, 3, dt);
      const auto y = run_op("_image_to_tensor", {}, {x})[0];
      const Dims d = dims(shape);
      const Shape want = shape.ndim() == 3 ? Shape{d.c, d.h, d.w} : Shape{d.n, d.c, d.h, d.w};
      ASSERT_EQ(y.shape, want);
      EXPECT_EQ(y.dtype, DType::kFloat32);
      HostTensor ref = HostTensor::filled(want, 0.0);
      for (int64_t n = 0; n < d.n; ++n)
        for (int64_t c = 0; c < d.c; ++c)
          for (int64_t h = 0; h < d.h; ++h)
            for (int64_t w = 0; w < d.w; ++w)
              ref.data[((n * d.c + c) * d.h + h) * d.w + w] = px(x, d, n, h, w, c) / 255.0;
      EXPECT_TRUE(all_close(y, ref, 2e-7, 0));
    }
  }
}

TEST(ImageToTensor, InfersShapesBothWaysAndRejectsOtherRanks) {
  auto [in, out] = infer_shapes("_image_to_tensor", {}, {Shape()}, {Shape{3, 4, 5}});
  EXPECT_EQ(in[0], (Shape{4, 5, 3}));
  auto types = infer_types("_image_to_tensor", {}, {DType::kUInt8});
  EXPECT_EQ(types.second[0], DType::kFloat32);
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_to_tensor", {}, {Shape{4, 5}});
      },
      {"_image_to_tensor", "(4, 5)"});
  EXPECT_FALSE(get_op("_image_to_tensor").attr<FGradient>());
  EXPECT_EQ(&get_op("_npx__image_to_tensor"), &get_op("_image_to_tensor"));
}

// ---- normalize ---------------------------------------------------------------------------------

HostTensor normalize_reference(const HostTensor& x, const std::vector<double>& mean,
                               const std::vector<double>& sd) {
  const Shape& s = x.shape;
  const int64_t n = s.ndim() == 4 ? s[0] : 1, c = s[s.ndim() - 3];
  const int64_t plane = s[s.ndim() - 2] * s[s.ndim() - 1];
  HostTensor y = x;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const double m = mean.size() == 1 ? mean[0] : mean[ch];
      const double v = sd.size() == 1 ? sd[0] : sd[ch];
      for (int64_t k = 0; k < plane; ++k) {
        double& e = y.data[(i * c + ch) * plane + k];
        e = (e - static_cast<float>(m)) / static_cast<float>(v);
      }
    }
  }
  return y;
}

TEST(ImageNormalize, SubtractsMeanAndDividesByStdPerChannel) {
  const HostTensor x = HostTensor::random(Shape{3, 5, 7}, 1, 0.0, 1.0);
  auto y =
      run_op("_image_normalize", {{"mean", "(0.1, 0.2, 0.3)"}, {"std", "(0.5, 0.25, 2)"}}, {x})[0];
  EXPECT_TRUE(all_close(y, normalize_reference(x, {0.1, 0.2, 0.3}, {0.5, 0.25, 2}), 1e-6, 1e-7));
  // A batch, float64.
  const HostTensor xb = HostTensor::random(Shape{2, 3, 3, 5}, 2, 0.0, 1.0, DType::kFloat64);
  y = run_op("_image_normalize",
             {{"mean", "(0.485, 0.456, 0.406)"}, {"std", "(0.229, 0.224, 0.225)"}}, {xb})[0];
  EXPECT_EQ(y.dtype, DType::kFloat64);
  EXPECT_TRUE(all_close(y, normalize_reference(xb, {0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}),
                        1e-12, 1e-12));
}

TEST(ImageNormalize, OneValueAppliesToEveryChannelAndDefaultsAreIdentity) {
  const HostTensor x = HostTensor::random(Shape{3, 4, 5}, 3);
  auto y = run_op("_image_normalize", {{"mean", "0.5"}, {"std", "(2,)"}}, {x})[0];
  EXPECT_TRUE(all_close(y, normalize_reference(x, {0.5}, {2}), 1e-6, 1e-7));
  const HostTensor grey = HostTensor::random(Shape{2, 1, 3, 3}, 4);
  y = run_op("_image_normalize", {{"mean", "(0.25,)"}, {"std", "(4,)"}}, {grey})[0];
  EXPECT_TRUE(all_close(y, normalize_reference(grey, {0.25}, {4}), 1e-6, 1e-7));
  y = run_op("_image_normalize", {}, {x})[0];
  EXPECT_TRUE(all_close(y, x, 0, 0));
  EXPECT_TRUE(get_op("_image_normalize").attr<FInplaceOption>());
}

TEST(ImageNormalize, GradientIsOutputGradientOverStd) {
  const HostTensor x = HostTensor::random(Shape{2, 3, 2, 3}, 5, -1, 1, DType::kFloat64);
  EXPECT_TRUE(check_gradient("_image_normalize",
                             {{"mean", "(0.1, 0.2, 0.3)"}, {"std", "(0.5, 0.25, 2)"}}, {x}));
}

TEST(ImageNormalize, RejectsMismatchedTuplesBadRanksAndIntegerData) {
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_normalize", {{"mean", "(0.1, 0.2)"}}, {Shape{3, 4, 4}});
      },
      {"_image_normalize", "mean has 2 values", "3 channels"});
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_normalize", {{"std", "(1, 2, 3)"}}, {Shape{2, 4, 4, 4}});
      },
      {"_image_normalize", "std has 3 values"});
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_normalize", {}, {Shape{4, 4}});
      },
      {"_image_normalize", "(C, H, W)"});
  expect_error<ValueError>(
      [] {
        infer_shapes("_image_normalize", {{"mean", "()"}}, {Shape{3, 4, 4}});
      },
      {"_image_normalize", "at least one value"});
  expect_error<NotImplemented>([] { infer_types("_image_normalize", {}, {DType::kUInt8}); },
                               {"_image_normalize", "uint8"});
}

// ---- flips -------------------------------------------------------------------------------------

HostTensor flip_reference(const HostTensor& x, bool left_right) {
  const Dims d = dims(x.shape);
  HostTensor y = x;
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t h = 0; h < d.h; ++h)
      for (int64_t w = 0; w < d.w; ++w)
        for (int64_t c = 0; c < d.c; ++c)
          px(y, d, n, h, w, c) =
              left_right ? px(x, d, n, h, d.w - 1 - w, c) : px(x, d, n, d.h - 1 - h, w, c);
  return y;
}

TEST(ImageFlip, MirrorsOddSizesEveryDtypeAndBatches) {
  for (const Shape& shape : {Shape{3, 5, 3}, Shape{5, 4, 1}, Shape{2, 3, 5, 3}, Shape{1, 1, 1}}) {
    for (DType dt : {DType::kUInt8, DType::kFloat32, DType::kInt32}) {
      SCOPED_TRACE(shape.to_string() + " " + dtype_name(dt));
      const HostTensor x = pixels(shape, 6, dt);
      for (bool lr : {true, false}) {
        const auto y = run_op(lr ? "_image_flip_left_right" : "_image_flip_top_bottom", {}, {x});
        EXPECT_EQ(y[0].dtype, dt);
        EXPECT_TRUE(all_close(y[0], flip_reference(x, lr), 0, 0));
      }
    }
  }
}

TEST(ImageFlip, GradientIsTheMirroredOutputGradient) {
  const HostTensor x = HostTensor::random(Shape{3, 5, 2}, 7, -1, 1, DType::kFloat64);
  EXPECT_TRUE(check_gradient("_image_flip_left_right", {}, {x}));
  EXPECT_TRUE(check_gradient("_image_flip_top_bottom", {}, {x}));
}

TEST(ImageFlip, RejectsNonImages) {
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_flip_left_right", {}, {Shape{5, 4}});
      },
      {"_image_flip_left_right", "(5, 4)"});
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_random_flip_top_bottom", {}, {Shape{1, 2, 3, 4, 5}});
      },
      {"_image_random_flip_top_bottom"});
}

TEST(ImageRandomFlip, FlipsWithProbabilityPFromTheSeededState) {
  const HostTensor x = pixels(Shape{4, 5, 3}, 8);
  for (bool lr : {true, false}) {
    const std::string op = lr ? "_image_random_flip_left_right" : "_image_random_flip_top_bottom";
    const HostTensor flipped = flip_reference(x, lr);
    int flips = 0;
    constexpr int kDraws = 400;
    for (int seed = 0; seed < kDraws; ++seed) {
      RunOptions o;
      o.seed = static_cast<uint64_t>(seed);
      const auto y = run_op(op, {}, {x}, o)[0];
      const bool is_flip = y.data == flipped.data;
      EXPECT_TRUE(is_flip || y.data == x.data) << op << " seed " << seed;
      flips += is_flip;
      // The same seed draws the same outcome.
      EXPECT_EQ(run_op(op, {}, {x}, o)[0].data, y.data);
      EXPECT_EQ(run_op(op, {{"p", "0"}}, {x}, o)[0].data, x.data);
      EXPECT_EQ(run_op(op, {{"p", "1"}}, {x}, o)[0].data, flipped.data);
    }
    // Binomial(400, 0.5): 5 standard deviations are 50.
    EXPECT_NEAR(flips, kDraws / 2, 50) << op;
    expect_error<ValueError>([&] { run_op(op, {{"p", "1.5"}}, {x}); }, {op, "p"});
    EXPECT_FALSE(get_op(op).attr<FGradient>());
  }
}

// ---- crop --------------------------------------------------------------------------------------

TEST(ImageCrop, CopiesTheWindowOfImagesAndBatches) {
  for (const Shape& shape : {Shape{6, 7, 3}, Shape{5, 9, 1}, Shape{2, 6, 7, 3}}) {
    for (DType dt : {DType::kUInt8, DType::kFloat32}) {
      SCOPED_TRACE(shape.to_string() + " " + dtype_name(dt));
      const HostTensor x = pixels(shape, 9, dt);
      const Dims d = dims(shape);
      const int64_t cx = 2, cy = 1, cw = 4, ch = 3;
      const auto y =
          run_op("_image_crop", {{"x", "2"}, {"y", "1"}, {"width", "4"}, {"height", "3"}}, {x})[0];
      const Shape want = shape.ndim() == 3 ? Shape{ch, cw, d.c} : Shape{d.n, ch, cw, d.c};
      ASSERT_EQ(y.shape, want);
      const Dims o = dims(want);
      for (int64_t n = 0; n < d.n; ++n)
        for (int64_t h = 0; h < ch; ++h)
          for (int64_t w = 0; w < cw; ++w)
            for (int64_t c = 0; c < d.c; ++c)
              ASSERT_EQ(px(y, o, n, h, w, c), px(x, d, n, cy + h, cx + w, c));
    }
  }
  // The whole image.
  const HostTensor x = pixels(Shape{3, 4, 3}, 10);
  EXPECT_EQ(
      run_op("_image_crop", {{"x", "0"}, {"y", "0"}, {"width", "4"}, {"height", "3"}}, {x})[0].data,
      x.data);
}

TEST(ImageCrop, GradientPlacesTheOutputGradientInTheWindow) {
  const HostTensor x = HostTensor::random(Shape{2, 4, 5, 2}, 11, -1, 1, DType::kFloat64);
  EXPECT_TRUE(check_gradient("_image_crop",
                             {{"x", "1"}, {"y", "2"}, {"width", "3"}, {"height", "2"}}, {x}));
}

TEST(ImageCrop, RejectsWindowsOutsideTheImageAndBadParams) {
  const AttrMap ok{{"x", "2"}, {"y", "1"}, {"width", "4"}, {"height", "3"}};
  expect_error<ShapeError>(
      [&] {
        infer_shapes("_image_crop", ok, {Shape{3, 5, 3}});
      },
      {"_image_crop", "does not fit", "(3, 5, 3)"});
  expect_error<ShapeError>(
      [&] {
        infer_shapes("_image_crop", ok, {Shape{4, 6}});
      },
      {"_image_crop", "(4, 6)"});
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"width", "0"}, {"x", "-1"}}) {
    AttrMap bad = ok;
    bad[key] = value;
    expect_error<ValueError>(
        [&] {
          infer_shapes("_image_crop", bad, {Shape{9, 9, 3}});
        },
        {"_image_crop", key});
  }
  AttrMap missing = ok;
  missing.erase("y");
  expect_error<ValueError>(
      [&] {
        infer_shapes("_image_crop", missing, {Shape{9, 9, 3}});
      },
      {"_image_crop", "y"});
}

// ---- resize ------------------------------------------------------------------------------------

// Bilinear resampling with half-pixel centres and clamp-to-edge coordinates, in double.
HostTensor resize_reference(const HostTensor& x, int64_t oh, int64_t ow) {
  const Dims d = dims(x.shape);
  const Shape s = x.shape.ndim() == 3 ? Shape{oh, ow, d.c} : Shape{d.n, oh, ow, d.c};
  HostTensor y = HostTensor::filled(s, 0.0, x.dtype);
  const Dims o = dims(s);
  const auto coord = [](int64_t i, int64_t in, int64_t out, int64_t& i0, int64_t& i1, double& f) {
    double u = (static_cast<double>(i) + 0.5) * static_cast<double>(in) / out - 0.5;
    u = std::min(std::max(u, 0.0), static_cast<double>(in - 1));
    i0 = static_cast<int64_t>(std::floor(u));
    i1 = std::min(i0 + 1, in - 1);
    f = u - static_cast<double>(i0);
  };
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t h = 0; h < oh; ++h) {
      int64_t y0, y1;
      double fy;
      coord(h, d.h, oh, y0, y1, fy);
      for (int64_t w = 0; w < ow; ++w) {
        int64_t x0, x1;
        double fx;
        coord(w, d.w, ow, x0, x1, fx);
        for (int64_t c = 0; c < d.c; ++c) {
          const double top = px(x, d, n, y0, x0, c) * (1 - fx) + px(x, d, n, y0, x1, c) * fx;
          const double bottom = px(x, d, n, y1, x0, c) * (1 - fx) + px(x, d, n, y1, x1, c) * fx;
          px(y, o, n, h, w, c) = top * (1 - fy) + bottom * fy;
        }
      }
    }
  }
  return y;
}

std::string size_attr(int64_t oh, int64_t ow) {
  return "(" + std::to_string(ow) + ", " + std::to_string(oh) + ")";
}

struct ResizeCase {
  Shape in;
  int64_t oh, ow;
};
std::vector<ResizeCase> resize_cases() {
  return {
      {Shape{5, 7, 3}, 9, 13},     // up, odd sizes
      {Shape{13, 11, 1}, 4, 6},    // down, non-integer ratios
      {Shape{6, 8, 3}, 3, 4},      // exactly half (OpenCV's area path)
      {Shape{7, 5, 3}, 7, 5},      // same size
      {Shape{1, 1, 3}, 3, 4},      // one pixel
      {Shape{4, 9, 3}, 11, 3},     // up in H, down in W
      {Shape{2, 5, 6, 3}, 4, 9},   // a batch
      {Shape{31, 17, 3}, 224, 5},  // large factors
  };
}

TEST(ImageResize, BilinearFloatMatchesTheFormula) {
  for (const auto& rc : resize_cases()) {
    for (DType dt : {DType::kFloat32, DType::kFloat64}) {
      SCOPED_TRACE(rc.in.to_string() + " -> " + size_attr(rc.oh, rc.ow) + " " + dtype_name(dt));
      const HostTensor x = HostTensor::random(rc.in, 12, 0.0, 1.0, dt);
      const auto y = run_op("_image_resize", {{"size", size_attr(rc.oh, rc.ow)}}, {x})[0];
      EXPECT_EQ(y.dtype, dt);
      EXPECT_TRUE(all_close(y, resize_reference(x, rc.oh, rc.ow), 1e-5, 1e-6));
    }
  }
}

TEST(ImageResize, BilinearUint8IsWithinOneOfTheRoundedFormula) {
  for (const auto& rc : resize_cases()) {
    SCOPED_TRACE(rc.in.to_string() + " -> " + size_attr(rc.oh, rc.ow));
    const HostTensor x = pixels(rc.in, 13);
    const auto y = run_op("_image_resize", {{"size", size_attr(rc.oh, rc.ow)}}, {x})[0];
    EXPECT_EQ(y.dtype, DType::kUInt8);
    const HostTensor ref = resize_reference(x, rc.oh, rc.ow);
    ASSERT_EQ(y.shape, ref.shape);
    int64_t exact = 0;
    for (size_t k = 0; k < ref.data.size(); ++k) {
      ASSERT_LE(std::fabs(y.data[k] - std::nearbyint(ref.data[k])), 1.0) << "element " << k;
      exact += y.data[k] == std::nearbyint(ref.data[k]);
    }
    // Off by one only where the 11-bit weights tip a value near .5 over.
    EXPECT_GE(exact * 5, static_cast<int64_t>(ref.data.size()) * 4);
  }
}

TEST(ImageResize, ThreadsSplitRowsWithoutChangingResults) {
  RunOptions threads;
  threads.num_threads = 3;
  for (DType dt : {DType::kUInt8, DType::kFloat32}) {
    const HostTensor x = pixels(Shape{3, 37, 29, 3}, 15, dt);
    for (const char* interp : {"0", "1"}) {
      const AttrMap attrs{{"size", "(61, 45)"}, {"interp", interp}};
      EXPECT_EQ(run_op("_image_resize", attrs, {x}, threads)[0].data,
                run_op("_image_resize", attrs, {x})[0].data);
    }
    EXPECT_EQ(run_op("_image_to_tensor", {}, {x}, threads)[0].data,
              run_op("_image_to_tensor", {}, {x})[0].data);
  }
  const HostTensor t = HostTensor::random(Shape{2, 3, 70, 90}, 16);
  const AttrMap norm{{"mean", "(0.1, 0.2, 0.3)"}, {"std", "(0.5, 0.25, 2)"}};
  EXPECT_EQ(run_op("_image_normalize", norm, {t}, threads)[0].data,
            run_op("_image_normalize", norm, {t})[0].data);
}

TEST(ImageResize, NearestTakesTheFlooredSourcePixel) {
  // Scales with exact binary ratios, so floor(d * in / out) is unambiguous.
  for (const auto& rc : std::vector<ResizeCase>{
           {Shape{6, 8, 3}, 3, 4}, {Shape{4, 5, 1}, 8, 10}, {Shape{2, 6, 9, 3}, 4, 6}}) {
    const HostTensor x = pixels(rc.in, 14);
    const auto y =
        run_op("_image_resize", {{"size", size_attr(rc.oh, rc.ow)}, {"interp", "0"}}, {x})[0];
    const Dims d = dims(x.shape), o = dims(y.shape);
    ASSERT_EQ(o.h, rc.oh);
    ASSERT_EQ(o.w, rc.ow);
    for (int64_t n = 0; n < d.n; ++n)
      for (int64_t h = 0; h < rc.oh; ++h)
        for (int64_t w = 0; w < rc.ow; ++w)
          for (int64_t c = 0; c < d.c; ++c)
            ASSERT_EQ(px(y, o, n, h, w, c), px(x, d, n, h * d.h / rc.oh, w * d.w / rc.ow, c));
  }
}

TEST(ImageResize, SizeAndKeepRatioGiveMXNetsShapes) {
  const auto out_shape = [](const Shape& in, const AttrMap& attrs) {
    return infer_shapes("_image_resize", attrs, {in}).second[0];
  };
  EXPECT_EQ(out_shape({10, 20, 3}, {{"size", "(6, 4)"}}), (Shape{4, 6, 3}));
  EXPECT_EQ(out_shape({10, 20, 3}, {{"size", "4"}}), (Shape{4, 4, 3}));
  EXPECT_EQ(out_shape({10, 20, 3}, {{"size", "5"}, {"keep_ratio", "True"}}), (Shape{5, 10, 3}));
  EXPECT_EQ(out_shape({20, 10, 3}, {{"size", "5"}, {"keep_ratio", "True"}}), (Shape{10, 5, 3}));
  // 7 * 3 / 5 truncates to 4.
  EXPECT_EQ(out_shape({7, 5, 1}, {{"size", "(3,)"}, {"keep_ratio", "True"}}), (Shape{4, 3, 1}));
  EXPECT_EQ(out_shape({2, 7, 5, 1}, {{"size", "(8, 2)"}, {"keep_ratio", "True"}}),
            (Shape{2, 2, 8, 1}));
}

TEST(ImageResize, RejectsBadSizesInterpolationsDtypesAndShapes) {
  const Shape img{4, 4, 3};
  expect_error<ValueError>([&] { infer_shapes("_image_resize", {}, {img}); },
                           {"_image_resize", "size"});
  expect_error<ValueError>(
      [&] {
        infer_shapes("_image_resize", {{"size", "(1, 2, 3)"}}, {img});
      },
      {"_image_resize", "size"});
  expect_error<ValueError>(
      [&] {
        infer_shapes("_image_resize", {{"size", "(0, 2)"}}, {img});
      },
      {"_image_resize", "positive"});
  expect_error<ValueError>(
      [&] {
        infer_shapes("_image_resize", {{"size", "2"}, {"interp", "9"}}, {img});
      },
      {"_image_resize", "interp"});
  expect_error<NotImplemented>(
      [&] {
        infer_shapes("_image_resize", {{"size", "2"}, {"interp", "2"}}, {img});
      },
      {"_image_resize", "interp=2"});
  expect_error<NotImplemented>(
      [] {
        infer_types("_image_resize", {{"size", "2"}}, {DType::kInt32});
      },
      {"_image_resize", "int32"});
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_resize", {{"size", "2"}}, {Shape{4, 4}});
      },
      {"_image_resize", "(4, 4)"});
  expect_error<ShapeError>(
      [] {
        infer_shapes("_image_resize", {{"size", "2"}}, {Shape{0, 4, 3}});
      },
      {"_image_resize", "empty"});
  EXPECT_FALSE(get_op("_image_resize").attr<FGradient>());
}

}  // namespace
}  // namespace weft
