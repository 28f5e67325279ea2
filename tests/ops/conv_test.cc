// Tests of Convolution and Deconvolution: forward against naive loops written here, gradients
// against finite differences, shape inference both ways, and parameter errors.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "base/error.h"
#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

/// The trailing nsp entries of a tuple, right-aligned in three slots (missing slots = fill).
std::array<int64_t, 3> three(const std::vector<int64_t>& v, int64_t fill) {
  std::array<int64_t, 3> a{fill, fill, fill};
  for (size_t i = 0; i < v.size(); ++i) a[3 - v.size() + i] = v[i];
  return a;
}
std::array<int64_t, 3> spatial(const Shape& s) {
  std::vector<int64_t> v(s.begin() + 2, s.end());
  return three(v, 1);
}

std::string tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

struct Window {
  std::vector<int64_t> kernel{}, stride{}, pad{}, dilate{};
};

/// Direct convolution: y[n, f, o] = b[f] + Σ_{c in group, k} x[n, c, o*s - p + k*d] · w[f, c, k].
HostTensor naive_conv(const HostTensor& x, const HostTensor& w, const HostTensor* b,
                      const Window& win, int64_t groups, int64_t num_filter) {
  const int nsp = static_cast<int>(win.kernel.size());
  const auto k = three(win.kernel, 1), s = three(win.stride, 1), p = three(win.pad, 0),
             d = three(win.dilate, 1);
  const auto in = spatial(x.shape);
  std::array<int64_t, 3> out{1, 1, 1};
  std::vector<int64_t> oshape{x.shape[0], num_filter};
  for (int i = 3 - nsp; i < 3; ++i) {
    out[i] = (in[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) / s[i] + 1;
    oshape.push_back(out[i]);
  }
  HostTensor y = HostTensor::filled(Shape(oshape), 0.0, x.dtype);
  const int64_t n_ = x.shape[0], c_ = x.shape[1], cg = c_ / groups, fg = num_filter / groups;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t f = 0; f < num_filter; ++f)
      for (int64_t o0 = 0; o0 < out[0]; ++o0)
        for (int64_t o1 = 0; o1 < out[1]; ++o1)
          for (int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = b ? b->data[f] : 0.0;
            const int64_t grp = f / fg;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t i0 = o0 * s[0] - p[0] + k0 * d[0];
                    const int64_t i1 = o1 * s[1] - p[1] + k1 * d[1];
                    const int64_t i2 = o2 * s[2] - p[2] + k2 * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2])
                      continue;
                    const int64_t xc = grp * cg + c;
                    const double xv =
                        x.data[(((n * c_ + xc) * in[0] + i0) * in[1] + i1) * in[2] + i2];
                    const double wv = w.data[(((f * cg + c) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                    acc += xv * wv;
                  }
            y.data[(((n * num_filter + f) * out[0] + o0) * out[1] + o1) * out[2] + o2] = acc;
          }
  return y;
}

/// Direct transposed convolution: every x[n, c, i] scatters x·w[c, f, k] to y[n, g·fg + f, i*s - p
/// + k*d].
HostTensor naive_deconv(const HostTensor& x, const HostTensor& w, const HostTensor* b,
                        const Window& win, int64_t groups, int64_t num_filter,
                        const std::vector<int64_t>& out_spatial) {
  const int nsp = static_cast<int>(win.kernel.size());
  const auto k = three(win.kernel, 1), s = three(win.stride, 1), p = three(win.pad, 0),
             d = three(win.dilate, 1);
  const auto in = spatial(x.shape);
  const auto out = three(out_spatial, 1);
  std::vector<int64_t> oshape{x.shape[0], num_filter};
  for (int i = 3 - nsp; i < 3; ++i) oshape.push_back(out[i]);
  HostTensor y = HostTensor::filled(Shape(oshape), 0.0, x.dtype);
  const int64_t n_ = x.shape[0], c_ = x.shape[1], cg = c_ / groups, fg = num_filter / groups;
  for (int64_t n = 0; n < n_; ++n)
    for (int64_t c = 0; c < c_; ++c)
      for (int64_t i0 = 0; i0 < in[0]; ++i0)
        for (int64_t i1 = 0; i1 < in[1]; ++i1)
          for (int64_t i2 = 0; i2 < in[2]; ++i2) {
            const double xv = x.data[(((n * c_ + c) * in[0] + i0) * in[1] + i1) * in[2] + i2];
            const int64_t grp = c / cg;
            for (int64_t f = 0; f < fg; ++f)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t o0 = i0 * s[0] - p[0] + k0 * d[0];
                    const int64_t o1 = i1 * s[1] - p[1] + k1 * d[1];
                    const int64_t o2 = i2 * s[2] - p[2] + k2 * d[2];
                    if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] || o2 < 0 || o2 >= out[2])
                      continue;
                    const double wv = w.data[(((c * fg + f) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                    const int64_t yf = grp * fg + f;
                    y.data[(((n * num_filter + yf) * out[0] + o0) * out[1] + o1) * out[2] + o2] +=
                        xv * wv;
                  }
          }
  if (b) {
    const int64_t size = out[0] * out[1] * out[2];
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t f = 0; f < num_filter; ++f)
        for (int64_t j = 0; j < size; ++j) y.data[(n * num_filter + f) * size + j] += b->data[f];
  }
  return y;
}

AttrMap conv_attrs(const Window& win, int64_t num_filter, int64_t groups, bool no_bias) {
  AttrMap a{{"kernel", tuple(win.kernel)},
            {"num_filter", std::to_string(num_filter)},
            {"num_group", std::to_string(groups)},
            {"no_bias", no_bias ? "True" : "False"}};
  if (!win.stride.empty()) a["stride"] = tuple(win.stride);
  if (!win.pad.empty()) a["pad"] = tuple(win.pad);
  if (!win.dilate.empty()) a["dilate"] = tuple(win.dilate);
  return a;
}

/// Runs Convolution and compares with the naive loops.
void expect_conv_matches(Shape xshape, const Window& win, int64_t num_filter, int64_t groups,
                         bool no_bias, DType dt, double tol) {
  const int64_t c = xshape[1];
  std::vector<int64_t> wdims{num_filter, c / groups};
  wdims.insert(wdims.end(), win.kernel.begin(), win.kernel.end());
  HostTensor x = HostTensor::random(xshape, 1, -1, 1, dt);
  HostTensor w = HostTensor::random(Shape(wdims), 2, -1, 1, dt);
  HostTensor b = HostTensor::random(Shape{num_filter}, 3, -1, 1, dt);
  std::vector<HostTensor> inputs{x, w};
  if (!no_bias) inputs.push_back(b);
  auto out = run_op("Convolution", conv_attrs(win, num_filter, groups, no_bias), inputs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(all_close(out[0], naive_conv(x, w, no_bias ? nullptr : &b, win, groups, num_filter),
                        tol, tol));
}

// ---- Convolution forward -----------------------------------------------------------------------

TEST(ConvForward, TwoDWithPadStrideDilationMatchesNaiveLoops) {
  expect_conv_matches(Shape{2, 3, 9, 8}, {{3, 3}, {2, 1}, {1, 2}, {1, 2}}, 4, 1, false, kF32, 1e-4);
}

TEST(ConvForward, AsymmetricKernelWithoutBiasMatchesNaiveLoops) {
  expect_conv_matches(Shape{1, 2, 7, 6}, {{3, 2}, {1, 2}, {0, 1}, {}}, 5, 1, true, kF32, 1e-4);
}

TEST(ConvForward, GroupedMatchesNaiveLoops) {
  expect_conv_matches(Shape{2, 4, 6, 6}, {{3, 3}, {1, 1}, {1, 1}, {}}, 6, 2, false, kF32, 1e-4);
}

TEST(ConvForward, DepthwiseMatchesNaiveLoops) {
  expect_conv_matches(Shape{2, 5, 7, 7}, {{3, 3}, {2, 2}, {1, 1}, {}}, 5, 5, false, kF32, 1e-4);
}

TEST(ConvForward, PointwiseMatchesNaiveLoops) {
  expect_conv_matches(Shape{2, 6, 4, 5}, {{1, 1}, {}, {}, {}}, 3, 1, false, kF32, 1e-4);
  expect_conv_matches(Shape{2, 6, 4, 5}, {{1, 1}, {}, {}, {}}, 3, 1, false, kF64, 1e-12);
}

TEST(ConvForward, OneDMatchesNaiveLoops) {
  expect_conv_matches(Shape{2, 3, 11}, {{3}, {2}, {1}, {2}}, 4, 1, false, kF32, 1e-4);
}

TEST(ConvForward, ThreeDMatchesNaiveLoops) {
  expect_conv_matches(Shape{1, 2, 5, 6, 5}, {{3, 2, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2}}, 3, 1,
                      false, kF32, 1e-4);
}

TEST(ConvForward, Float64ReferencePathMatchesNaiveLoops) {
  expect_conv_matches(Shape{2, 4, 7, 6}, {{3, 3}, {2, 1}, {1, 1}, {2, 1}}, 4, 2, false, kF64,
                      1e-12);
  expect_conv_matches(Shape{1, 2, 5, 4, 4}, {{2, 3, 2}, {1, 1, 2}, {0, 1, 1}, {}}, 2, 1, true, kF64,
                      1e-12);
  expect_conv_matches(Shape{2, 3, 9}, {{2}, {3}, {2}, {3}}, 3, 3, false, kF64, 1e-12);
}

TEST(ConvForward, MultithreadedRunMatchesSingleThreaded) {
  HostTensor x = HostTensor::random(Shape{2, 8, 10, 10}, 5);
  HostTensor w = HostTensor::random(Shape{8, 8, 3, 3}, 6);
  HostTensor b = HostTensor::random(Shape{8}, 7);
  const AttrMap a = conv_attrs({{3, 3}, {}, {1, 1}, {}}, 8, 1, false);
  RunOptions four;
  four.num_threads = 4;
  auto one = run_op("Convolution", a, {x, w, b});
  auto many = run_op("Convolution", a, {x, w, b}, four);
  EXPECT_TRUE(all_close(many[0], one[0], 1e-5, 1e-5));
}

TEST(ConvForward, AddRequestAccumulatesIntoOutput) {
  const Window win{{3, 3}, {}, {1, 1}, {}};
  HostTensor x = HostTensor::random(Shape{1, 2, 5, 5}, 1, -1, 1, kF64);
  HostTensor w = HostTensor::random(Shape{3, 2, 3, 3}, 2, -1, 1, kF64);
  HostTensor b = HostTensor::random(Shape{3}, 3, -1, 1, kF64);
  HostTensor expected = naive_conv(x, w, &b, win, 1, 3);
  HostTensor initial = HostTensor::random(expected.shape, 4, -1, 1, kF64);
  for (int64_t i = 0; i < expected.size(); ++i) expected.data[i] += initial.data[i];
  RunOptions opt;
  opt.req = {OpReq::kAdd};
  opt.initial_outputs = {initial};
  auto out = run_op("Convolution", conv_attrs(win, 3, 1, false), {x, w, b}, opt);
  EXPECT_TRUE(all_close(out[0], expected, 1e-12, 1e-12));
  // float32 too (the oneDNN path does not accumulate, so this exercises the fallback).
  HostTensor x32 = HostTensor::random(Shape{1, 2, 5, 5}, 1),
             w32 = HostTensor::random(Shape{3, 2, 3, 3}, 2);
  HostTensor b32 = HostTensor::random(Shape{3}, 3);
  HostTensor e32 = naive_conv(x32, w32, &b32, win, 1, 3);
  HostTensor i32 = HostTensor::filled(e32.shape, 1.0);
  for (auto& v : e32.data) v += 1.0;
  opt.initial_outputs = {i32};
  auto out32 = run_op("Convolution", conv_attrs(win, 3, 1, false), {x32, w32, b32}, opt);
  EXPECT_TRUE(all_close(out32[0], e32, 1e-4, 1e-4));
}

TEST(ConvForward, WeightCacheFollowsStorageVersion) {
  // Calls the kernel directly with storage ids and versions (which the harness does not set): a
  // new version of the same weight storage must be reordered again, never served stale.
  const AttrMap am = conv_attrs({{3, 3}, {}, {1, 1}, {}}, 16, 1, true);
  OpAttrs attrs = get_op("Convolution").make_attrs(am, "cache");
  HostTensor x = HostTensor::random(Shape{1, 16, 6, 6}, 51),
             w = HostTensor::random(Shape{16, 16, 3, 3}, 52);
  std::vector<float> xb(x.data.begin(), x.data.end()), wb(w.data.begin(), w.data.end()),
      yb(16 * 36);
  std::vector<Shape> in_shapes{x.shape, w.shape}, out_shapes{Shape{1, 16, 6, 6}};
  size_t bytes = 0;
  for (const auto& r : attrs.op->resource_request(DeviceType::kCPU)(attrs, in_shapes, out_shapes))
    bytes = std::max(bytes, r.bytes);
  std::vector<double> workspace(bytes / sizeof(double) + 16);
  std::vector<TensorView> in{TensorView(xb.data(), Device::cpu(), kF32, in_shapes[0]),
                             TensorView(wb.data(), Device::cpu(), kF32, in_shapes[1])};
  std::vector<TensorView> out{TensorView(yb.data(), Device::cpu(), kF32, out_shapes[0])};
  std::vector<OpReq> req{OpReq::kWrite};
  uint64_t ids[2] = {0, 0xC0FFEE}, versions[2] = {0, 1};
  auto run = [&] {
    OpContext ctx;
    ctx.workspace = workspace.data();
    ctx.workspace_bytes = bytes;
    ctx.input_storage_ids = ids;
    ctx.input_versions = versions;
    (*attrs.op->compute(DeviceType::kCPU))(attrs, ctx, in, req, out);
    HostTensor y = HostTensor::filled(out_shapes[0], 0.0);
    for (size_t i = 0; i < yb.size(); ++i) y.data[i] = yb[i];
    return y;
  };
  const Window win{{3, 3}, {}, {1, 1}, {}};
  EXPECT_TRUE(all_close(run(), naive_conv(x, w, nullptr, win, 1, 16), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(run(), naive_conv(x, w, nullptr, win, 1, 16), 1e-4, 1e-4));  // cached
  for (auto& v : wb) v = -v;  // the weight is updated in place: its version moves on
  versions[1] = 2;
  HostTensor w2 = w;
  for (auto& v : w2.data) v = -v;
  EXPECT_TRUE(all_close(run(), naive_conv(x, w2, nullptr, win, 1, 16), 1e-4, 1e-4));
}

// ---- Convolution gradients ---------------------------------------------------------------------

TEST(ConvGradient, TwoDStridedDilatedGroupedMatchesFiniteDifferences) {
  const Window win{{3, 2}, {2, 1}, {1, 1}, {1, 2}};
  HostTensor x = HostTensor::random(Shape{2, 4, 6, 5}, 11, -1, 1, kF64);
  HostTensor w = HostTensor::random(Shape{4, 2, 3, 2}, 12, -1, 1, kF64);
  HostTensor b = HostTensor::random(Shape{4}, 13, -1, 1, kF64);
  GradCheckOptions opt;
  opt.eps = 1e-5;
  opt.rtol = 1e-6;
  opt.atol = 1e-7;
  EXPECT_TRUE(check_gradient("Convolution", conv_attrs(win, 4, 2, false), {x, w, b}, opt));
}

TEST(ConvGradient, OneDAndThreeDMatchFiniteDifferences) {
  GradCheckOptions opt;
  opt.eps = 1e-5;
  opt.rtol = 1e-6;
  opt.atol = 1e-7;
  HostTensor x1 = HostTensor::random(Shape{2, 2, 9}, 21, -1, 1, kF64);
  HostTensor w1 = HostTensor::random(Shape{3, 2, 3}, 22, -1, 1, kF64);
  HostTensor b1 = HostTensor::random(Shape{3}, 23, -1, 1, kF64);
  EXPECT_TRUE(check_gradient("Convolution", conv_attrs({{3}, {2}, {1}, {2}}, 3, 1, false),
                             {x1, w1, b1}, opt));
  HostTensor x3 = HostTensor::random(Shape{1, 2, 4, 3, 4}, 24, -1, 1, kF64);
  HostTensor w3 = HostTensor::random(Shape{2, 2, 2, 2, 3}, 25, -1, 1, kF64);
  EXPECT_TRUE(check_gradient(
      "Convolution", conv_attrs({{2, 2, 3}, {1, 1, 2}, {1, 0, 1}, {}}, 2, 1, true), {x3, w3}, opt));
}

TEST(ConvGradient, Float32OneDnnBackwardMatchesFiniteDifferences) {
  const Window win{{3, 3}, {1, 2}, {1, 1}, {}};
  HostTensor x = HostTensor::random(Shape{2, 3, 5, 6}, 31);
  HostTensor w = HostTensor::random(Shape{4, 3, 3, 3}, 32);
  HostTensor b = HostTensor::random(Shape{4}, 33);
  GradCheckOptions opt;
  opt.eps = 1e-2;
  opt.rtol = 2e-2;
  opt.atol = 2e-2;
  EXPECT_TRUE(check_gradient("Convolution", conv_attrs(win, 4, 1, false), {x, w, b}, opt));
  HostTensor xd = HostTensor::random(Shape{1, 4, 5, 5}, 34);
  HostTensor wd = HostTensor::random(Shape{4, 1, 3, 3}, 35);
  EXPECT_TRUE(check_gradient("Convolution", conv_attrs({{3, 3}, {}, {1, 1}, {}}, 4, 4, true),
                             {xd, wd}, opt));
}

TEST(ConvGradient, Float32BackwardAgreesWithFloat64Backward) {
  const Window win{{3, 3}, {2, 2}, {1, 1}, {}};
  const AttrMap a = conv_attrs(win, 6, 2, false);
  HostTensor x = HostTensor::random(Shape{2, 4, 7, 7}, 41),
             w = HostTensor::random(Shape{6, 2, 3, 3}, 42);
  HostTensor b = HostTensor::random(Shape{6}, 43);
  HostTensor dy = HostTensor::random(Shape{2, 6, 4, 4}, 44);
  auto g32 = op_gradient("Convolution", a, {x, w, b}, {dy});
  auto to64 = [](HostTensor t) {
    t.dtype = kF64;
    return t;
  };
  auto g64 = op_gradient("Convolution", a, {to64(x), to64(w), to64(b)}, {to64(dy)});
  ASSERT_EQ(g32.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    HostTensor e = g64[i];
    e.dtype = kF32;
    EXPECT_TRUE(all_close(g32[i], e, 1e-4, 1e-4)) << "input " << i;
  }
}

// ---- Convolution shapes and attributes ---------------------------------------------------------

TEST(ConvShape, InfersWeightBiasAndOutputFromData) {
  auto [in, out] =
      infer_shapes("Convolution", conv_attrs({{3, 3}, {2, 2}, {1, 1}, {}}, 8, 2, false),
                   {Shape{4, 6, 15, 16}, Shape(), Shape()});
  EXPECT_EQ(in[1], (Shape{8, 3, 3, 3}));
  EXPECT_EQ(in[2], (Shape{8}));
  EXPECT_EQ(out[0], (Shape{4, 8, 8, 8}));
}

TEST(ConvShape, InfersDataFromOutputAndWeight) {
  // Stride 1: the spatial size follows from the output; channels from the weight; batch from the
  // output.
  auto [in, out] = infer_shapes("Convolution", conv_attrs({{3, 3}, {}, {1, 0}, {1, 2}}, 4, 2, true),
                                {Shape(), Shape{4, 3, 3, 3}}, {Shape{5, 4, 7, 6}});
  EXPECT_EQ(in[0], (Shape{5, 6, 7, 10}));
}

TEST(ConvShape, UnknownRankReturnsFalseWithoutThrowing) {
  auto a = get_op("Convolution").make_attrs(conv_attrs({{3, 3}, {}, {}, {}}, 4, 1, false));
  std::vector<Shape> in(3), out(1);
  EXPECT_FALSE(a.op->infer_shape(a, in, out));
}

TEST(ConvShape, MismatchedWeightIsShapeError) {
  EXPECT_THROW(infer_shapes("Convolution", conv_attrs({{3, 3}, {}, {}, {}}, 4, 1, false),
                            {Shape{1, 3, 8, 8}, Shape{4, 2, 3, 3}, Shape{4}}),
               ShapeError);
  EXPECT_THROW(infer_shapes("Convolution", conv_attrs({{3, 3}, {}, {}, {}}, 4, 1, false),
                            {Shape{1, 3, 8}, Shape(), Shape()}),
               ShapeError);
  EXPECT_THROW(infer_shapes("Convolution", conv_attrs({{5, 5}, {}, {}, {}}, 4, 1, false),
                            {Shape{1, 3, 3, 8}, Shape(), Shape()}),
               ShapeError);
  EXPECT_THROW(infer_shapes("Convolution", conv_attrs({{3, 3}, {}, {}, {}}, 4, 2, false),
                            {Shape{1, 3, 8, 8}, Shape(), Shape()}),
               ShapeError);
}

TEST(ConvAttrs, InvalidValuesAreValueErrors) {
  const auto& op = get_op("Convolution");
  EXPECT_THROW(op.make_attrs({{"num_filter", "4"}}), ValueError);   // no kernel
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}}), ValueError);  // no num_filter
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "5"}, {"num_group", "2"}}),
               ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"stride", "(0, 1)"}}),
               ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"pad", "(1, 1, 1)"}}),
               ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3, 3, 3)"}, {"num_filter", "4"}}), ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"cudnn_tune", "slow"}}),
               ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"bogus", "1"}}),
               ValueError);
  // Every MXNet parameter is accepted.
  EXPECT_NO_THROW(op.make_attrs({{"kernel", "(3, 3)"},
                                 {"num_filter", "4"},
                                 {"stride", "()"},
                                 {"dilate", "(1, 1)"},
                                 {"pad", "(0, 0)"},
                                 {"num_group", "1"},
                                 {"workspace", "512"},
                                 {"no_bias", "True"},
                                 {"cudnn_tune", "fastest"},
                                 {"cudnn_off", "True"},
                                 {"layout", "NCHW"}}));
}

TEST(ConvAttrs, ChannelLastLayoutIsNotImplementedAndWrongRankLayoutRejected) {
  AttrMap a = conv_attrs({{3, 3}, {}, {}, {}}, 4, 1, false);
  a["layout"] = "NHWC";
  EXPECT_THROW(infer_shapes("Convolution", a, {Shape{1, 8, 8, 3}, Shape(), Shape()}),
               NotImplemented);
  a["layout"] = "NCDHW";
  EXPECT_THROW(infer_shapes("Convolution", a, {Shape{1, 3, 8, 8}, Shape(), Shape()}), ValueError);
}

TEST(ConvAttrs, NoBiasDropsTheBiasInput) {
  const auto& op = get_op("Convolution");
  auto with = op.make_attrs(conv_attrs({{3, 3}, {}, {}, {}}, 4, 1, false));
  auto without = op.make_attrs(conv_attrs({{3, 3}, {}, {}, {}}, 4, 1, true));
  EXPECT_EQ(op.num_inputs(with), 3);
  EXPECT_EQ(op.num_inputs(without), 2);
  EXPECT_EQ(op.input_names(with), (std::vector<std::string>{"data", "weight", "bias"}));
}

// ---- Deconvolution -----------------------------------------------------------------------------

AttrMap deconv_attrs(const Window& win, int64_t num_filter, int64_t groups, bool no_bias) {
  AttrMap a = conv_attrs(win, num_filter, groups, no_bias);
  return a;
}

TEST(DeconvForward, StridePadAdjMatchesNaiveLoops) {
  const Window win{{3, 3}, {2, 2}, {1, 0}, {}};
  AttrMap a = deconv_attrs(win, 3, 1, false);
  a["adj"] = "(1, 0)";
  HostTensor x = HostTensor::random(Shape{2, 2, 4, 3}, 1),
             w = HostTensor::random(Shape{2, 3, 3, 3}, 2);
  HostTensor b = HostTensor::random(Shape{3}, 3);
  auto out = run_op("Deconvolution", a, {x, w, b});
  // (x-1)s - 2p + d(k-1) + 1 + adj: (3·2 - 2 + 3 + 1, 2·2 - 0 + 3 + 0) = (8, 7).
  ASSERT_EQ(out[0].shape, (Shape{2, 3, 8, 7}));
  EXPECT_TRUE(all_close(out[0], naive_deconv(x, w, &b, win, 1, 3, {8, 7}), 1e-4, 1e-4));
}

TEST(DeconvForward, GroupedDilatedMatchesNaiveLoops) {
  const Window win{{2, 3}, {1, 2}, {0, 1}, {2, 1}};
  HostTensor x = HostTensor::random(Shape{1, 4, 3, 4}, 4, -1, 1, kF64),
             w = HostTensor::random(Shape{4, 3, 2, 3}, 5, -1, 1, kF64);
  auto out = run_op("Deconvolution", deconv_attrs(win, 6, 2, true), {x, w});
  ASSERT_EQ(out[0].shape, (Shape{1, 6, 5, 7}));
  EXPECT_TRUE(all_close(out[0], naive_deconv(x, w, nullptr, win, 2, 6, {5, 7}), 1e-12, 1e-12));
  // float32 (oneDNN) with bias.
  HostTensor x32 = HostTensor::random(Shape{2, 4, 3, 4}, 4),
             w32 = HostTensor::random(Shape{4, 3, 2, 3}, 5);
  HostTensor b32 = HostTensor::random(Shape{6}, 6);
  auto out32 = run_op("Deconvolution", deconv_attrs(win, 6, 2, false), {x32, w32, b32});
  EXPECT_TRUE(all_close(out32[0], naive_deconv(x32, w32, &b32, win, 2, 6, {5, 7}), 1e-4, 1e-4));
}

TEST(DeconvForward, OneDAndThreeDMatchNaiveLoops) {
  HostTensor x1 = HostTensor::random(Shape{2, 3, 5}, 6), w1 = HostTensor::random(Shape{3, 2, 4}, 7);
  auto o1 = run_op("Deconvolution", deconv_attrs({{4}, {3}, {1}, {}}, 2, 1, true), {x1, w1});
  ASSERT_EQ(o1[0].shape, (Shape{2, 2, 14}));
  EXPECT_TRUE(
      all_close(o1[0], naive_deconv(x1, w1, nullptr, {{4}, {3}, {1}, {}}, 1, 2, {14}), 1e-4, 1e-4));
  HostTensor x3 = HostTensor::random(Shape{1, 2, 2, 3, 2}, 8),
             w3 = HostTensor::random(Shape{2, 2, 2, 2, 3}, 9);
  const Window w3win{{2, 2, 3}, {2, 1, 1}, {0, 1, 1}, {}};
  auto o3 = run_op("Deconvolution", deconv_attrs(w3win, 2, 1, true), {x3, w3});
  ASSERT_EQ(o3[0].shape, (Shape{1, 2, 4, 2, 2}));
  EXPECT_TRUE(all_close(o3[0], naive_deconv(x3, w3, nullptr, w3win, 1, 2, {4, 2, 2}), 1e-4, 1e-4));
}

TEST(DeconvForward, TargetShapeOverridesPadAndAdj) {
  // Full size s(x-1)+k = 2·4+3 = 11; target 10 → excess 1 → pad 1, adj 1 (pad and adj given are
  // ignored).
  AttrMap a = deconv_attrs({{3, 3}, {2, 2}, {3, 3}, {}}, 2, 1, true);
  a["target_shape"] = "(10, 11)";
  HostTensor x = HostTensor::random(Shape{1, 2, 5, 5}, 10),
             w = HostTensor::random(Shape{2, 2, 3, 3}, 11);
  auto out = run_op("Deconvolution", a, {x, w});
  ASSERT_EQ(out[0].shape, (Shape{1, 2, 10, 11}));
  EXPECT_TRUE(all_close(out[0],
                        naive_deconv(x, w, nullptr, {{3, 3}, {2, 2}, {1, 0}, {}}, 1, 2, {10, 11}),
                        1e-4, 1e-4));
}

TEST(DeconvGradient, MatchesFiniteDifferencesWithBiasAndGroups) {
  GradCheckOptions opt;
  opt.eps = 1e-5;
  opt.rtol = 1e-6;
  opt.atol = 1e-7;
  AttrMap a = deconv_attrs({{3, 2}, {2, 1}, {1, 0}, {1, 2}}, 4, 2, false);
  a["adj"] = "(1, 0)";
  HostTensor x = HostTensor::random(Shape{2, 4, 3, 3}, 12, -1, 1, kF64),
             w = HostTensor::random(Shape{4, 2, 3, 2}, 13, -1, 1, kF64);
  HostTensor b = HostTensor::random(Shape{4}, 14, -1, 1, kF64);
  EXPECT_TRUE(check_gradient("Deconvolution", a, {x, w, b}, opt));
  GradCheckOptions opt32;
  opt32.eps = 1e-2;
  HostTensor x32 = HostTensor::random(Shape{1, 2, 3, 3}, 15),
             w32 = HostTensor::random(Shape{2, 3, 3, 3}, 16);
  EXPECT_TRUE(check_gradient(
      "Deconvolution", deconv_attrs({{3, 3}, {2, 2}, {1, 1}, {}}, 3, 1, true), {x32, w32}, opt32));
  AttrMap a32 = deconv_attrs({{3, 2}, {2, 1}, {1, 0}, {}}, 4, 2, false);
  a32["adj"] = "(1, 0)";
  HostTensor xg = HostTensor::random(Shape{1, 4, 3, 3}, 17),
             wg = HostTensor::random(Shape{4, 2, 3, 2}, 18);
  EXPECT_TRUE(
      check_gradient("Deconvolution", a32, {xg, wg, HostTensor::random(Shape{4}, 19)}, opt32));
}

TEST(DeconvShape, InfersWeightOutputAndDataFromOutput) {
  auto [in, out] =
      infer_shapes("Deconvolution", deconv_attrs({{4, 4}, {2, 2}, {1, 1}, {}}, 6, 3, false),
                   {Shape{2, 9, 5, 7}, Shape(), Shape()});
  EXPECT_EQ(in[1], (Shape{9, 2, 4, 4}));
  EXPECT_EQ(in[2], (Shape{6}));
  EXPECT_EQ(out[0], (Shape{2, 6, 10, 14}));
  auto [in2, out2] =
      infer_shapes("Deconvolution", deconv_attrs({{4, 4}, {2, 2}, {1, 1}, {}}, 6, 3, true),
                   {Shape(), Shape{9, 2, 4, 4}}, {Shape{2, 6, 10, 14}});
  EXPECT_EQ(in2[0], (Shape{2, 9, 5, 7}));
}

TEST(DeconvShape, DefaultHasNoBiasAndMismatchesAreShapeErrors) {
  const auto& op = get_op("Deconvolution");
  EXPECT_EQ(op.num_inputs(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "2"}})), 2);
  EXPECT_THROW(infer_shapes("Deconvolution", {{"kernel", "(3, 3)"}, {"num_filter", "2"}},
                            {Shape{1, 3, 4, 4}, Shape{2, 2, 3, 3}}),
               ShapeError);
  AttrMap big{{"kernel", "(3, 3)"}, {"num_filter", "2"}, {"target_shape", "(20, 20)"}};
  EXPECT_THROW(infer_shapes("Deconvolution", big, {Shape{1, 3, 4, 4}, Shape()}), ShapeError);
}

TEST(DeconvAttrs, InvalidValuesAreValueErrors) {
  const auto& op = get_op("Deconvolution");
  EXPECT_THROW(
      op.make_attrs(
          {{"kernel", "(3, 3)"}, {"num_filter", "2"}, {"adj", "(2, 0)"}, {"stride", "(2, 2)"}}),
      ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "3"}, {"num_group", "2"}}),
               ValueError);
  EXPECT_THROW(op.make_attrs({{"kernel", "(3, 3)"}, {"num_filter", "2"}, {"target_shape", "(4,)"}}),
               ValueError);
  EXPECT_NO_THROW(op.make_attrs({{"kernel", "(3, 3)"},
                                 {"num_filter", "2"},
                                 {"stride", "(2, 2)"},
                                 {"dilate", "(1, 1)"},
                                 {"pad", "(1, 1)"},
                                 {"adj", "(1, 1)"},
                                 {"target_shape", "()"},
                                 {"num_group", "1"},
                                 {"workspace", "256"},
                                 {"no_bias", "False"},
                                 {"cudnn_tune", "off"},
                                 {"cudnn_off", "False"},
                                 {"layout", "NCHW"}}));
}

}  // namespace
}  // namespace weft::testing
