// Tests of the joining/splitting shape ops and the lookup op: Concat, stack, SliceChannel, Crop,
// UpSampling (nearest and bilinear) and Embedding.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF64 = DType::kFloat64;

HostTensor iota(Shape s, DType t = DType::kFloat32, double start = 0) {
  std::vector<double> v(static_cast<size_t>(s.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return HostTensor::of(std::move(s), std::move(v), t);
}

HostTensor rnd(Shape s, uint64_t seed) {
  return HostTensor::random(std::move(s), seed, -1, 1, kF64);
}

// ---- Concat ----------------------------------------------------------------------------------

TEST(ShapeConcat, JoinsAlongDimInInputOrder) {
  HostTensor a = iota({2, 1}), b = iota({2, 2}, DType::kFloat32, 10);
  auto y = run_op("Concat", {{"num_args", "2"}}, {a, b});  // dim defaults to 1
  EXPECT_EQ(y[0].shape, (Shape{2, 3}));
  EXPECT_EQ(y[0].data, (std::vector<double>{0, 10, 11, 1, 12, 13}));
  y = run_op("concat", {{"num_args", "2"}, {"dim", "0"}},
             {iota({1, 2}), iota({2, 2}, DType::kFloat32, 5)});
  EXPECT_EQ(y[0].data, (std::vector<double>{0, 1, 5, 6, 7, 8}));
  y = run_op("_rnn_param_concat", {{"num_args", "3"}, {"dim", "-1"}},
             {iota({2}, DType::kInt64), iota({1}, DType::kInt64, 7), iota({3}, DType::kInt64, 20)});
  EXPECT_EQ(y[0].data, (std::vector<double>{0, 1, 7, 20, 21, 22}));
}

TEST(ShapeConcat, InfersOneUnknownInputFromTheOutput) {
  auto [in, out] = infer_shapes("Concat", {{"num_args", "2"}, {"dim", "1"}},
                                {Shape{2, 3}, Shape{-1, -1}}, {Shape{2, 7}});
  EXPECT_EQ(in[1], (Shape{2, 4}));
  auto [in2, out2] = infer_shapes("Concat", {{"num_args", "2"}}, {Shape{2, 3}, Shape()}, {});
  EXPECT_EQ(in2[1], (Shape{2, -1}));
  EXPECT_EQ(out2[0], (Shape{2, -1}));
}

TEST(ShapeConcat, MismatchesAndBadAttributesAreRejected) {
  EXPECT_THROW(infer_shapes("Concat", {{"num_args", "2"}}, {Shape{2, 3}, Shape{3, 3}}), ShapeError);
  EXPECT_THROW(infer_shapes("Concat", {{"num_args", "2"}}, {Shape{2, 3}, Shape{2, 3, 1}}),
               ShapeError);
  EXPECT_THROW(
      infer_shapes("Concat", {{"num_args", "2"}}, {Shape{2, 3}, Shape{2, 3}}, {Shape{2, 5}}),
      ShapeError);
  EXPECT_THROW(
      infer_shapes("Concat", {{"num_args", "2"}, {"dim", "2"}}, {Shape{2, 3}, Shape{2, 3}}),
      ValueError);
  EXPECT_THROW(infer_shapes("Concat", {{"num_args", "0"}}, {}), ValueError);
  EXPECT_THROW(infer_shapes("Concat", {}, {Shape{2}}), ValueError);
  EXPECT_THROW(run_op("Concat", {{"num_args", "3"}}, {iota({1, 1}), iota({1, 1})}), ValueError);
}

TEST(ShapeConcat, SplitUndoesConcat) {
  std::vector<HostTensor> parts{rnd({2, 2, 3}, 1), rnd({2, 2, 3}, 2), rnd({2, 2, 3}, 3)};
  auto joined = run_op("Concat", {{"num_args", "3"}, {"dim", "1"}}, parts);
  EXPECT_EQ(joined[0].shape, (Shape{2, 6, 3}));
  auto back = run_op("split", {{"num_outputs", "3"}, {"axis", "1"}}, joined);
  ASSERT_EQ(back.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(back[i], parts[i], 0, 0)) << i;
}

TEST(ShapeConcat, GradientSplitsTheOutputGradient) {
  EXPECT_TRUE(check_gradient("Concat", {{"num_args", "3"}, {"dim", "1"}},
                             {rnd({2, 1, 2}, 4), rnd({2, 3, 2}, 5), rnd({2, 2, 2}, 6)}));
  EXPECT_TRUE(check_gradient("Concat", {{"num_args", "2"}, {"dim", "-1"}},
                             {rnd({3, 2}, 7), rnd({3, 1}, 8)}));
}

// ---- stack -----------------------------------------------------------------------------------

TEST(ShapeStack, JoinsAlongANewAxis) {
  HostTensor a = iota({2, 2}), b = iota({2, 2}, DType::kFloat32, 10);
  auto y = run_op("stack", {{"num_args", "2"}}, {a, b});
  EXPECT_EQ(y[0].shape, (Shape{2, 2, 2}));
  EXPECT_EQ(y[0].data, (std::vector<double>{0, 1, 2, 3, 10, 11, 12, 13}));
  y = run_op("stack", {{"num_args", "2"}, {"axis", "-1"}}, {a, b});
  EXPECT_EQ(y[0].shape, (Shape{2, 2, 2}));
  EXPECT_EQ(y[0].data, (std::vector<double>{0, 10, 1, 11, 2, 12, 3, 13}));
  y = run_op("stack", {{"num_args", "2"}, {"axis", "1"}}, {a, b});
  EXPECT_EQ(y[0].data, (std::vector<double>{0, 1, 10, 11, 2, 3, 12, 13}));
  auto [in, out] = infer_shapes("stack", {{"num_args", "3"}, {"axis", "1"}},
                                {Shape(), Shape(), Shape{2, -1}}, {Shape{2, 3, 4}});
  EXPECT_EQ(in[0], (Shape{2, 4}));
  EXPECT_EQ(in[1], (Shape{2, 4}));
  EXPECT_THROW(infer_shapes("stack", {{"num_args", "2"}}, {Shape{2, 3}, Shape{2, 4}}), ShapeError);
  EXPECT_THROW(
      infer_shapes("stack", {{"num_args", "2"}, {"axis", "3"}}, {Shape{2, 3}, Shape{2, 3}}),
      ValueError);
  EXPECT_TRUE(check_gradient("stack", {{"num_args", "3"}, {"axis", "1"}},
                             {rnd({2, 3}, 9), rnd({2, 3}, 10), rnd({2, 3}, 11)}));
}

// ---- SliceChannel ----------------------------------------------------------------------------

TEST(ShapeSliceChannel, SplitsIntoEqualParts) {
  HostTensor x = iota({2, 4, 3});
  auto y = run_op("SliceChannel", {{"num_outputs", "2"}}, {x});  // axis defaults to 1
  ASSERT_EQ(y.size(), 2u);
  for (int o = 0; o < 2; ++o) {
    EXPECT_EQ(y[o].shape, (Shape{2, 2, 3}));
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 2; ++c)
        for (int w = 0; w < 3; ++w) EXPECT_EQ(y[o].at({n, c, w}), x.at({n, 2 * o + c, w}));
  }
}

TEST(ShapeSliceChannel, SqueezeAxisDropsTheSplitAxis) {
  HostTensor x = iota({2, 3, 4}, DType::kInt32);
  auto y =
      run_op("SliceChannel", {{"num_outputs", "4"}, {"axis", "2"}, {"squeeze_axis", "1"}}, {x});
  ASSERT_EQ(y.size(), 4u);
  for (int o = 0; o < 4; ++o) {
    EXPECT_EQ(y[o].shape, (Shape{2, 3}));
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 3; ++c) EXPECT_EQ(y[o].at({n, c}), x.at({n, c, o}));
  }
  auto z = run_op("split", {{"num_outputs", "3"}, {"axis", "-2"}, {"squeeze_axis", "True"}}, {x});
  EXPECT_EQ(z[2].shape, (Shape{2, 4}));
  EXPECT_EQ(z[2].at({1, 3}), x.at({1, 2, 3}));
}

TEST(ShapeSliceChannel, InfersTheInputFromTheOutputsAndRejectsUnevenSplits) {
  auto [in, out] =
      infer_shapes("SliceChannel", {{"num_outputs", "2"}}, {Shape()}, {Shape{3, 2, 5}, Shape()});
  EXPECT_EQ(in[0], (Shape{3, 4, 5}));
  EXPECT_EQ(out[1], (Shape{3, 2, 5}));
  auto [in2, out2] =
      infer_shapes("SliceChannel", {{"num_outputs", "3"}, {"axis", "0"}, {"squeeze_axis", "1"}},
                   {Shape()}, {Shape(), Shape{4}, Shape()});
  EXPECT_EQ(in2[0], (Shape{3, 4}));
  EXPECT_THROW(infer_shapes("SliceChannel", {{"num_outputs", "3"}}, {Shape{2, 4}}), ShapeError);
  EXPECT_THROW(
      infer_shapes("SliceChannel", {{"num_outputs", "2"}, {"squeeze_axis", "1"}}, {Shape{2, 4}}),
      ShapeError);
  EXPECT_THROW(
      infer_shapes("SliceChannel", {{"num_outputs", "2"}}, {Shape{2, 4}}, {Shape{2, 3}, Shape()}),
      ShapeError);
  EXPECT_THROW(infer_shapes("SliceChannel", {{"num_outputs", "0"}}, {Shape{2, 4}}), ValueError);
}

TEST(ShapeSliceChannel, GradientConcatenatesTheOutputGradients) {
  EXPECT_TRUE(
      check_gradient("SliceChannel", {{"num_outputs", "3"}, {"axis", "1"}}, {rnd({2, 6, 2}, 12)}));
  EXPECT_TRUE(check_gradient("SliceChannel",
                             {{"num_outputs", "3"}, {"axis", "-1"}, {"squeeze_axis", "1"}},
                             {rnd({2, 2, 3}, 13)}));
  // An unused output contributes zeros.
  GradCheckOptions only_first;
  only_first.outputs = {0};
  EXPECT_TRUE(check_gradient("SliceChannel", {{"num_outputs", "2"}, {"axis", "0"}},
                             {rnd({4, 3}, 14)}, only_first));
}

// ---- Crop ------------------------------------------------------------------------------------

TEST(ShapeCrop, CropsToHwAtOffsetOrCentre) {
  HostTensor x = iota({1, 2, 4, 5});
  auto y = run_op("Crop", {{"num_args", "1"}, {"h_w", "(2, 3)"}, {"offset", "(2, 0)"}}, {x});
  EXPECT_EQ(y[0].shape, (Shape{1, 2, 2, 3}));
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w) EXPECT_EQ(y[0].at({0, c, h, w}), x.at({0, c, h + 2, w}));
  y = run_op("Crop", {{"num_args", "1"}, {"h_w", "(2, 3)"}, {"center_crop", "True"}}, {x});
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w) EXPECT_EQ(y[0].at({0, c, h, w}), x.at({0, c, h + 1, w + 1}));
}

TEST(ShapeCrop, CropsToTheSizeOfCropLike) {
  HostTensor x = iota({2, 1, 4, 5}, DType::kFloat64);
  HostTensor like = HostTensor::filled({7, 9, 3, 3}, 0.0, kF64);
  auto y = run_op("Crop", {{"num_args", "2"}, {"center_crop", "1"}}, {x, like});
  EXPECT_EQ(y[0].shape, (Shape{2, 1, 3, 3}));
  for (int n = 0; n < 2; ++n)
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 3; ++w) EXPECT_EQ(y[0].at({n, 0, h, w}), x.at({n, 0, h, w + 1}));
  EXPECT_EQ(get_op("Crop").input_names(get_op("Crop").make_attrs({{"num_args", "2"}})),
            (std::vector<std::string>{"data", "crop_like"}));
}

TEST(ShapeCrop, RejectsBadShapesAndAttributes) {
  EXPECT_THROW(infer_shapes("Crop", {{"num_args", "1"}, {"h_w", "(5, 1)"}}, {Shape{1, 1, 4, 4}}),
               ShapeError);
  EXPECT_THROW(infer_shapes("Crop", {{"num_args", "1"}, {"h_w", "(2, 2)"}, {"offset", "(3, 0)"}},
                            {Shape{1, 1, 4, 4}}),
               ShapeError);
  EXPECT_THROW(infer_shapes("Crop", {{"num_args", "1"}, {"h_w", "(2, 2)"}}, {Shape{4, 4}}),
               ShapeError);
  EXPECT_THROW(infer_shapes("Crop", {{"num_args", "3"}}, {Shape{1, 1, 4, 4}}), ValueError);
  EXPECT_THROW(
      infer_shapes("Crop", {{"num_args", "1"}, {"offset", "(1, 2, 3)"}}, {Shape{1, 1, 4, 4}}),
      ValueError);
  auto [in, out] = infer_shapes("Crop", {{"num_args", "1"}, {"h_w", "(2, 2)"}},
                                {Shape{-1, -1, 4, 4}}, {Shape{3, 5, 2, 2}});
  EXPECT_EQ(in[0], (Shape{3, 5, 4, 4}));
}

TEST(ShapeCrop, GradientGoesToDataOnly) {
  EXPECT_TRUE(check_gradient("Crop", {{"num_args", "1"}, {"h_w", "(2, 2)"}, {"offset", "(1, 0)"}},
                             {rnd({1, 2, 3, 4}, 15)}));
  GradCheckOptions o;
  o.no_grad_inputs = {1};
  EXPECT_TRUE(check_gradient("Crop", {{"num_args", "2"}, {"center_crop", "1"}},
                             {rnd({2, 1, 5, 4}, 16), rnd({2, 1, 2, 3}, 17)}, o));
}

// ---- UpSampling ------------------------------------------------------------------------------

TEST(ShapeUpSampling, NearestRepeatsEachPixel) {
  HostTensor x = HostTensor::of({1, 1, 2, 2}, {1, 2, 3, 4});
  auto y =
      run_op("UpSampling", {{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "1"}}, {x});
  EXPECT_EQ(y[0].shape, (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y[0].data, (std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
}

TEST(ShapeUpSampling, NearestConcatenatesOrSumsSeveralInputs) {
  HostTensor a = HostTensor::of({1, 1, 2, 2}, {1, 2, 3, 4});
  HostTensor b = HostTensor::of({1, 2, 1, 1}, {10, 20});
  AttrMap attrs{{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "2"}};
  auto y = run_op("UpSampling", attrs, {a, b});
  EXPECT_EQ(y[0].shape, (Shape{1, 3, 4, 4}));
  for (int h = 0; h < 4; ++h) {
    for (int w = 0; w < 4; ++w) {
      EXPECT_EQ(y[0].at({0, 0, h, w}), a.at({0, 0, h / 2, w / 2}));
      EXPECT_EQ(y[0].at({0, 1, h, w}), 10);
      EXPECT_EQ(y[0].at({0, 2, h, w}), 20);
    }
  }
  attrs["multi_input_mode"] = "sum";
  HostTensor c = HostTensor::of({1, 1, 1, 1}, {100});
  y = run_op("UpSampling", attrs, {a, c});
  EXPECT_EQ(y[0].shape, (Shape{1, 1, 4, 4}));
  for (int h = 0; h < 4; ++h)
    for (int w = 0; w < 4; ++w) EXPECT_EQ(y[0].at({0, 0, h, w}), 100 + a.at({0, 0, h / 2, w / 2}));
  EXPECT_THROW(infer_shapes("UpSampling", attrs, {Shape{1, 1, 2, 2}, Shape{1, 2, 1, 1}}),
               ShapeError);
}

TEST(ShapeUpSampling, BilinearWithTheBilinearKernelMatchesHandValues) {
  // MXNet's Bilinear initializer for scale 2 (kernel 4): 1-D factors 0.25, 0.75, 0.75, 0.25.
  const double f[4] = {0.25, 0.75, 0.75, 0.25};
  std::vector<double> w(16);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) w[i * 4 + j] = f[i] * f[j];
  HostTensor weight = HostTensor::of({1, 1, 4, 4}, w);
  HostTensor x = HostTensor::filled({1, 1, 2, 2}, 1.0);
  auto y =
      run_op("UpSampling",
             {{"scale", "2"}, {"sample_type", "bilinear"}, {"num_args", "2"}, {"num_filter", "1"}},
             {x, weight});
  // Each output row/column sums the taps that reach it: 0.75 at the borders, 1 inside.
  const double r[4] = {0.75, 1, 1, 0.75};
  ASSERT_EQ(y[0].shape, (Shape{1, 1, 4, 4}));
  for (int h = 0; h < 4; ++h)
    for (int c = 0; c < 4; ++c)
      EXPECT_NEAR(y[0].at({0, 0, h, c}), r[h] * r[c], 1e-6) << h << "," << c;
}

// Transposed depthwise convolution, written as a gather over inputs.
HostTensor naive_deconv(const HostTensor& x, const HostTensor& w, int64_t s) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3], k = w.shape[2];
  const int64_t p = (s - 1 + 1) / 2;
  HostTensor y = HostTensor::filled({N, C, H * s, W * s}, 0.0, x.dtype);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oy = 0; oy < H * s; ++oy)
        for (int64_t ox = 0; ox < W * s; ++ox) {
          double acc = 0;
          for (int64_t iy = 0; iy < H; ++iy)
            for (int64_t ix = 0; ix < W; ++ix) {
              const int64_t ky = oy + p - iy * s, kx = ox + p - ix * s;
              if (ky >= 0 && ky < k && kx >= 0 && kx < k)
                acc += x.at({n, c, iy, ix}) * w.at({c, 0, ky, kx});
            }
          y.at({n, c, oy, ox}) = acc;
        }
  return y;
}

TEST(ShapeUpSampling, BilinearIsADepthwiseTransposedConvolution) {
  for (int64_t s : {2, 3}) {
    const int64_t k = 2 * s - s % 2;
    HostTensor x = rnd({2, 3, 3, 2}, 20 + s), w = rnd({3, 1, k, k}, 30 + s);
    AttrMap a{{"scale", std::to_string(s)}, {"sample_type", "bilinear"}, {"num_args", "2"}};
    auto y = run_op("UpSampling", a, {x, w});
    EXPECT_TRUE(all_close(y[0], naive_deconv(x, w, s), 1e-10, 1e-12)) << "scale " << s;
  }
}

TEST(ShapeUpSampling, InfersWeightAndDataShapes) {
  AttrMap a{{"scale", "2"}, {"sample_type", "bilinear"}, {"num_args", "2"}, {"num_filter", "3"}};
  auto [in, out] = infer_shapes("UpSampling", a, {Shape{1, 3, 4, 4}, Shape()});
  EXPECT_EQ(in[1], (Shape{3, 1, 4, 4}));
  EXPECT_EQ(out[0], (Shape{1, 3, 8, 8}));
  auto [in2, out2] = infer_shapes("UpSampling", a, {Shape(), Shape()}, {Shape{2, 3, 6, 8}});
  EXPECT_EQ(in2[0], (Shape{2, 3, 3, 4}));
  EXPECT_EQ(in2[1], (Shape{3, 1, 4, 4}));
  auto [in3, out3] =
      infer_shapes("UpSampling", {{"scale", "3"}, {"sample_type", "nearest"}, {"num_args", "1"}},
                   {Shape()}, {Shape{1, 2, 6, 9}});
  EXPECT_EQ(in3[0], (Shape{1, 2, 2, 3}));
  EXPECT_THROW(infer_shapes("UpSampling", a, {Shape{1, 4, 4, 4}, Shape()}), ShapeError);
  EXPECT_THROW(
      infer_shapes("UpSampling", {{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "1"}},
                   {Shape{1, 4, 4}}),
      ShapeError);
  EXPECT_THROW(
      infer_shapes("UpSampling", {{"scale", "2"}, {"sample_type", "bilinear"}, {"num_args", "1"}},
                   {Shape{1, 1, 2, 2}}),
      ValueError);
  EXPECT_THROW(
      infer_shapes("UpSampling", {{"scale", "2"}, {"sample_type", "linear"}, {"num_args", "1"}},
                   {Shape{1, 1, 2, 2}}),
      ValueError);
  EXPECT_THROW(
      infer_shapes("UpSampling", {{"scale", "0"}, {"sample_type", "nearest"}, {"num_args", "1"}},
                   {Shape{1, 1, 2, 2}}),
      ValueError);
}

TEST(ShapeUpSampling, GradientsOfNearestAndBilinear) {
  EXPECT_TRUE(check_gradient("UpSampling",
                             {{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "2"}},
                             {rnd({1, 2, 2, 2}, 40), rnd({1, 1, 1, 1}, 41)}));
  EXPECT_TRUE(check_gradient(
      "UpSampling",
      {{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "2"}, {"multi_input_mode", "sum"}},
      {rnd({1, 2, 2, 2}, 42), rnd({1, 2, 1, 1}, 43)}));
  for (int s : {2, 3}) {
    const int k = 2 * s - s % 2;
    EXPECT_TRUE(check_gradient(
        "UpSampling",
        {{"scale", std::to_string(s)}, {"sample_type", "bilinear"}, {"num_args", "2"}},
        {rnd({2, 2, 2, 3}, 44), rnd({2, 1, k, k}, 45)}))
        << "scale " << s;
  }
}

TEST(ShapeUpSampling, NearestGradientSumsEachBlockWithManyThreads) {
  HostTensor x = HostTensor::random({2, 3, 5, 4}, 46);
  HostTensor head = HostTensor::random({2, 3, 15, 12}, 47);
  RunOptions o;
  o.num_threads = 4;
  auto g =
      op_gradient("UpSampling", {{"scale", "3"}, {"sample_type", "nearest"}, {"num_args", "1"}},
                  {x}, {head}, o);
  ASSERT_EQ(g[0].shape, x.shape);
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 5; ++h)
        for (int w = 0; w < 4; ++w) {
          double s = 0;
          for (int dy = 0; dy < 3; ++dy)
            for (int dx = 0; dx < 3; ++dx) s += head.at({n, c, 3 * h + dy, 3 * w + dx});
          EXPECT_NEAR(g[0].at({n, c, h, w}), s, 1e-4);
        }
}

// ---- Embedding -------------------------------------------------------------------------------

TEST(ShapeEmbedding, LooksUpRowsWithClippedIndices) {
  HostTensor weight = iota({4, 3});
  HostTensor data = HostTensor::of({2, 2}, {0, 2.7, -1, 9});  // rows 0, 2, 0 (clipped), 3 (clipped)
  auto y = run_op("Embedding", {{"input_dim", "4"}, {"output_dim", "3"}}, {data, weight});
  EXPECT_EQ(y[0].shape, (Shape{2, 2, 3}));
  const int rows[4] = {0, 2, 0, 3};
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(y[0].data[i * 3 + c], rows[i] * 3 + c) << i << "," << c;
  // Integer indices and a float64 table.
  HostTensor idx = HostTensor::of({3}, {3, 1, 1}, DType::kInt32);
  auto z = run_op("Embedding", {{"input_dim", "4"}, {"output_dim", "3"}, {"dtype", "float64"}},
                  {idx, iota({4, 3}, kF64)});
  EXPECT_EQ(z[0].dtype, kF64);
  EXPECT_EQ(z[0].data, (std::vector<double>{9, 10, 11, 3, 4, 5, 3, 4, 5}));
}

TEST(ShapeEmbedding, InfersWeightOutputAndDataShapesAndTypes) {
  AttrMap a{{"input_dim", "10"}, {"output_dim", "4"}};
  auto [in, out] = infer_shapes("Embedding", a, {Shape{2, 5}, Shape()});
  EXPECT_EQ(in[1], (Shape{10, 4}));
  EXPECT_EQ(out[0], (Shape{2, 5, 4}));
  auto [in2, out2] = infer_shapes("Embedding", a, {Shape(), Shape()}, {Shape{7, 4}});
  EXPECT_EQ(in2[0], (Shape{7}));
  EXPECT_THROW(infer_shapes("Embedding", a, {Shape{2}, Shape{10, 3}}), ShapeError);
  EXPECT_THROW(infer_shapes("Embedding", a, {Shape{2}, Shape()}, {Shape{2, 5}}), ShapeError);
  auto [ti, to] =
      infer_types("Embedding", {{"input_dim", "10"}, {"output_dim", "4"}, {"dtype", "float64"}},
                  {DType::kFloat32, DType::kUnknown});
  EXPECT_EQ(ti[1], kF64);
  EXPECT_EQ(to[0], kF64);
  EXPECT_EQ(ti[0], DType::kFloat32);
  EXPECT_THROW(
      infer_shapes("Embedding", {{"input_dim", "0"}, {"output_dim", "4"}}, {Shape{2}, Shape()}),
      ValueError);
  EXPECT_THROW(infer_shapes("Embedding", {{"input_dim", "3"}}, {Shape{2}, Shape()}), ValueError);
}

TEST(ShapeEmbedding, GradientGoesToTheWeightOnlyAndSumsRepeatedRows) {
  GradCheckOptions o;
  o.no_grad_inputs = {0};
  HostTensor data = HostTensor::of({2, 3}, {1, 0, 1, 3, 9, -2}, kF64);
  EXPECT_TRUE(check_gradient("Embedding", {{"input_dim", "4"}, {"output_dim", "2"}},
                             {data, rnd({4, 2}, 50)}, o));
  // Hand check: rows 1 and 0 repeated.
  HostTensor head = HostTensor::of({3, 2}, {1, 2, 3, 4, 5, 6});
  auto g = op_gradient("Embedding", {{"input_dim", "3"}, {"output_dim", "2"}},
                       {HostTensor::of({3}, {1, 0, 1}), iota({3, 2})}, {head});
  EXPECT_TRUE(g[0].empty());
  EXPECT_EQ(g[1].data, (std::vector<double>{3, 4, 6, 8, 0, 0}));
}

}  // namespace
}  // namespace weft::testing
