// Tests of the data-movement shape ops: Reshape (every special code), Flatten, expand_dims,
// squeeze, transpose, slice/crop, slice_axis, broadcast_to and tile.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF64 = DType::kFloat64;

HostTensor iota(Shape s, DType t = DType::kFloat32) {
  std::vector<double> v(static_cast<size_t>(s.size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return HostTensor::of(std::move(s), std::move(v), t);
}

Shape out_shape(const std::string& op, const AttrMap& attrs, const Shape& in) {
  return infer_shapes(op, attrs, {in}).second.at(0);
}

// Row-major multi-index of flat index i.
std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.ndim());
  for (int k = s.ndim() - 1; k >= 0; --k) {
    idx[k] = i % s[k];
    i /= s[k];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (int k = 0; k < s.ndim(); ++k) f = f * s[k] + idx[k];
  return f;
}

// ---- Reshape ---------------------------------------------------------------------------------

struct ReshapeCase {
  Shape in;
  AttrMap attrs;
  Shape expected;
};

TEST(ShapeReshape, SpecialCodesGiveTheDocumentedShapes) {
  const std::vector<ReshapeCase> cases = {
      // MXNet docs.
      {{2, 3, 4}, {{"shape", "(4, 0, 2)"}}, {4, 3, 2}},
      {{2, 3, 4}, {{"shape", "(2, 0, 0)"}}, {2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(6, 1, -1)"}}, {6, 1, 4}},
      {{2, 3, 4}, {{"shape", "(3, -1, 8)"}}, {3, 1, 8}},
      {{2, 3, 4}, {{"shape", "(-1,)"}}, {24}},
      {{2, 3, 4}, {{"shape", "(-2,)"}}, {2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(2, -2)"}}, {2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(-2, 1, 1)"}}, {2, 3, 4, 1, 1}},
      {{2, 3, 4}, {{"shape", "(-3, 4)"}}, {6, 4}},
      {{2, 3, 4, 5}, {{"shape", "(-3, -3)"}}, {6, 20}},
      {{2, 3, 4}, {{"shape", "(0, -3)"}}, {2, 12}},
      {{2, 3, 4}, {{"shape", "(-3, -2)"}}, {6, 4}},
      {{2, 3, 4}, {{"shape", "(-4, 1, 2, -2)"}}, {1, 2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(2, -4, -1, 3, -2)"}}, {2, 1, 3, 4}},
      {{10, 5, 4}, {{"shape", "(-1, 0)"}}, {40, 5}},
      {{10, 5, 4}, {{"shape", "(-1, 0)"}, {"reverse", "True"}}, {50, 4}},
      // The corpus (OPS.md).
      {{2, 4, 3, 5}, {{"shape", "(0, 2, -1, 0)"}}, {2, 2, 6, 5}},
      {{40, 7}, {{"shape", "(-4, 20, -1, 0)"}}, {20, 2, 7}},
      {{2, 256}, {{"shape", "(-1, 256, 1, 1)"}}, {2, 256, 1, 1}},
      {{3, 8}, {{"shape", "(8L, 3L)"}}, {8, 3}},
      // -1 advances the cursor: the 0 after it copies input dim 1, not dim 0.
      {{2, 3, 4}, {{"shape", "(-1, 0)"}}, {8, 3}},
      // A -2 before the -1: the -1 is filled at its output position.
      {{2, 3, 4}, {{"shape", "(-2, -1)"}}, {2, 3, 4, 1}},
      // Deprecated target_shape / keep_highest (only when shape is empty).
      {{2, 3, 4}, {{"target_shape", "(0, 6)"}}, {4, 6}},
      {{2, 3, 4}, {{"target_shape", "(5, 0)"}, {"keep_highest", "True"}}, {2, 12}},
      {{2, 3, 4}, {{"target_shape", "(4, 6)"}}, {4, 6}},
  };
  for (const auto& c : cases) {
    std::string desc = c.in.to_string();
    for (const auto& [k, v] : c.attrs) desc += " " + k + "=" + v;
    EXPECT_EQ(out_shape("Reshape", c.attrs, c.in), c.expected) << desc;
  }
}

TEST(ShapeReshape, CopiesValuesInRowMajorOrderForAnyDtype) {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kUInt8, DType::kInt64}) {
    HostTensor x = iota({2, 3, 4}, t);
    auto y = run_op("reshape", {{"shape", "(4, -1)"}}, {x});
    EXPECT_EQ(y[0].shape, (Shape{4, 6}));
    EXPECT_EQ(y[0].dtype, t);
    EXPECT_EQ(y[0].data, x.data);
  }
}

TEST(ShapeReshape, InfersTheOneUnknownInputDimFromTheOutput) {
  auto [in, out] = infer_shapes("Reshape", {{"shape", "(8, 3)"}}, {Shape{2, -1, 4}}, {Shape{8, 3}});
  EXPECT_EQ(in[0], (Shape{2, 3, 4}));
  auto [in2, out2] = infer_shapes("Reshape", {}, {Shape{-1, 5}}, {Shape{10}});
  EXPECT_EQ(in2[0], (Shape{2, 5}));
  // Unknown input dims propagate as unknown output dims.
  auto [in3, out3] = infer_shapes("Reshape", {{"shape", "(0, -3)"}}, {Shape{-1, 3, 4}});
  EXPECT_EQ(out3[0], (Shape{-1, 12}));
  EXPECT_FALSE(out3[0].known());
}

TEST(ShapeReshape, SizeMismatchIsAShapeError) {
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(5, -1)"}}, {2, 3, 4}), ShapeError);
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(7,)"}}, {2, 3, 4}), ShapeError);
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(0, 0, 0, 0)"}}, {2, 3, 4}), ShapeError);
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(-4, 5, -1, 0)"}}, {2, 3, 4}), ShapeError);
  EXPECT_THROW(infer_shapes("Reshape", {{"shape", "(6, 4)"}}, {Shape{2, 3, 4}}, {Shape{4, 6}}),
               ShapeError);
}

TEST(ShapeReshape, InvalidCodesAreValueErrors) {
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(-1, -1)"}}, {2, 3}), ValueError);
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(-5, 2)"}}, {2, 3}), ValueError);
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(2, -4, 3)"}}, {2, 3}), ValueError);
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(-4, -1, -1)"}}, {2, 3}), ValueError);
  EXPECT_THROW(out_shape("Reshape", {{"target_shape", "(0, 0)"}}, {2, 3}), ValueError);
  EXPECT_THROW(out_shape("Reshape", {{"shape", "(2, 3)"}, {"bogus", "1"}}, {2, 3}), ValueError);
}

TEST(ShapeReshape, DeclaresInPlaceIdentity) {
  for (const char* name : {"Reshape", "Flatten", "expand_dims", "squeeze"}) {
    const Op& op = get_op(name);
    OpAttrs a =
        op.make_attrs(std::string(name) == "expand_dims" ? AttrMap{{"axis", "0"}} : AttrMap{});
    ASSERT_TRUE(static_cast<bool>(op.attr<FInplaceOption>())) << name;
    EXPECT_EQ(op.attr<FInplaceOption>()(a), (std::vector<std::pair<int, int>>{{0, 0}})) << name;
    EXPECT_EQ(op.attr<FInplaceIdentity>()(a), (std::vector<bool>{true})) << name;
  }
}

TEST(ShapeReshape, AccumulatesWithReqAdd) {
  HostTensor x = iota({2, 3});
  RunOptions o;
  o.req = {OpReq::kAdd};
  o.initial_outputs = {HostTensor::filled({3, 2}, 10.0)};
  auto y = run_op("Reshape", {{"shape", "(3, 2)"}}, {x}, o);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[0].data[i], 10.0 + i);
}

TEST(ShapeReshape, GradientIsTheReshapedOutputGradient) {
  EXPECT_TRUE(check_gradient("Reshape", {{"shape", "(-4, 2, -1, -2)"}},
                             {HostTensor::random({4, 3}, 1, -1, 1, kF64)}));
  EXPECT_TRUE(check_gradient("Reshape", {{"shape", "(-1, 0)"}, {"reverse", "1"}},
                             {HostTensor::random({2, 3, 2}, 2, -1, 1, kF64)}));
}

// ---- Flatten, expand_dims, squeeze ------------------------------------------------------------

TEST(ShapeFlatten, CollapsesAllButTheFirstAxis) {
  EXPECT_EQ(out_shape("Flatten", {}, {2, 3, 4}), (Shape{2, 12}));
  EXPECT_EQ(out_shape("flatten", {}, {5}), (Shape{5, 1}));
  HostTensor x = iota({2, 3, 2}, DType::kInt32);
  auto y = run_op("Flatten", {}, {x});
  EXPECT_EQ(y[0].shape, (Shape{2, 6}));
  EXPECT_EQ(y[0].data, x.data);
  EXPECT_THROW(out_shape("Flatten", {}, Shape(std::vector<int64_t>{})), ShapeError);
}

TEST(ShapeFlatten, InfersInputDimsFromTheOutput) {
  // Dim 0 comes from the output's dim 0, then the one remaining unknown from the size.
  auto [in, out] = infer_shapes("Flatten", {}, {Shape{-1, 3, -1}}, {Shape{2, 12}});
  EXPECT_EQ(in[0], (Shape{2, 3, 4}));
  auto [in1, out1] = infer_shapes("Flatten", {}, {Shape{2, -1, -1}}, {Shape{2, 12}});
  EXPECT_EQ(in1[0], (Shape{2, -1, -1}));
  auto [in2, out2] = infer_shapes("Flatten", {}, {Shape{-1, 3, 4}}, {Shape{2, 12}});
  EXPECT_EQ(in2[0], (Shape{2, 3, 4}));
  EXPECT_THROW(infer_shapes("Flatten", {}, {Shape{2, 3, 4}}, {Shape{2, 10}}), ShapeError);
}

TEST(ShapeFlatten, GradientChecks) {
  EXPECT_TRUE(check_gradient("Flatten", {}, {HostTensor::random({2, 2, 3}, 3, -1, 1, kF64)}));
}

TEST(ShapeExpandDims, InsertsAnAxisCountingNegativeFromTheEnd) {
  EXPECT_EQ(out_shape("expand_dims", {{"axis", "1"}}, {2, 3}), (Shape{2, 1, 3}));
  EXPECT_EQ(out_shape("expand_dims", {{"axis", "2"}}, {2, 3}), (Shape{2, 3, 1}));
  EXPECT_EQ(out_shape("expand_dims", {{"axis", "-1"}}, {2, 3}), (Shape{2, 3, 1}));
  EXPECT_EQ(out_shape("expand_dims", {{"axis", "-3"}}, {2, 3}), (Shape{1, 2, 3}));
  EXPECT_THROW(out_shape("expand_dims", {{"axis", "3"}}, {2, 3}), ValueError);
  EXPECT_THROW(out_shape("expand_dims", {}, {2, 3}), ValueError);  // axis is required
  auto [in, out] = infer_shapes("expand_dims", {{"axis", "0"}}, {Shape()}, {Shape{1, 4, 5}});
  EXPECT_EQ(in[0], (Shape{4, 5}));
  EXPECT_THROW(infer_shapes("expand_dims", {{"axis", "0"}}, {Shape{4, 5}}, {Shape{2, 4, 5}}),
               ShapeError);
  HostTensor x = iota({2, 3});
  EXPECT_EQ(run_op("expand_dims", {{"axis", "1"}}, {x})[0].data, x.data);
  EXPECT_TRUE(
      check_gradient("expand_dims", {{"axis", "1"}}, {HostTensor::random({2, 3}, 4, -1, 1, kF64)}));
}

TEST(ShapeSqueeze, RemovesSizeOneAxes) {
  EXPECT_EQ(out_shape("squeeze", {}, {1, 3, 1, 2}), (Shape{3, 2}));
  EXPECT_EQ(out_shape("squeeze", {{"axis", "(0, 2)"}}, {1, 3, 1, 2}), (Shape{3, 2}));
  EXPECT_EQ(out_shape("squeeze", {{"axis", "2"}}, {1, 3, 1, 2}), (Shape{1, 3, 2}));
  EXPECT_EQ(out_shape("squeeze", {{"axis", "-2"}}, {1, 3, 1, 2}), (Shape{1, 3, 2}));
  EXPECT_EQ(out_shape("squeeze", {}, {1, 1}), (Shape{1}));  // never 0-d
  EXPECT_THROW(out_shape("squeeze", {{"axis", "1"}}, {1, 3, 1, 2}), ShapeError);
  EXPECT_THROW(out_shape("squeeze", {{"axis", "(0, 0)"}}, {1, 3}), ValueError);
  EXPECT_THROW(out_shape("squeeze", {{"axis", "5"}}, {1, 3}), ValueError);
  auto [in, out] = infer_shapes("squeeze", {{"axis", "(0, 2)"}}, {Shape()}, {Shape{3, 2}});
  EXPECT_EQ(in[0], (Shape{1, 3, 1, 2}));
  HostTensor x = iota({1, 3, 1, 2});
  EXPECT_EQ(run_op("squeeze", {}, {x})[0].data, x.data);
  EXPECT_TRUE(check_gradient("squeeze", {{"axis", "(0,)"}},
                             {HostTensor::random({1, 3, 2}, 5, -1, 1, kF64)}));
}

// ---- transpose -------------------------------------------------------------------------------

HostTensor naive_transpose(const HostTensor& x, const std::vector<int>& perm) {
  Shape os = x.shape;
  for (int i = 0; i < x.shape.ndim(); ++i) os[i] = x.shape[perm[i]];
  HostTensor y = HostTensor::filled(os, 0.0, x.dtype);
  for (int64_t f = 0; f < y.size(); ++f) {
    auto oi = unravel(f, os);
    std::vector<int64_t> ii(oi.size());
    for (size_t i = 0; i < oi.size(); ++i) ii[perm[i]] = oi[i];
    y.data[f] = x.data[ravel(ii, x.shape)];
  }
  return y;
}

TEST(ShapeTranspose, PermutesAxesAndReversesByDefault) {
  HostTensor x = iota({2, 3, 4}, DType::kFloat64);
  EXPECT_TRUE(all_close(run_op("transpose", {}, {x})[0], naive_transpose(x, {2, 1, 0})));
  EXPECT_TRUE(all_close(run_op("transpose", {{"axes", "(1, 0, 2)"}}, {x})[0],
                        naive_transpose(x, {1, 0, 2})));
  EXPECT_TRUE(all_close(run_op("transpose", {{"axes", "(2, 0, 1)"}}, {x})[0],
                        naive_transpose(x, {2, 0, 1})));
  EXPECT_TRUE(all_close(run_op("transpose", {{"axes", "(-1, 0, 1)"}}, {x})[0],
                        naive_transpose(x, {2, 0, 1})));
  HostTensor xi = iota({3, 5}, DType::kInt32);
  EXPECT_TRUE(all_close(run_op("transpose", {}, {xi})[0], naive_transpose(xi, {1, 0})));
}

TEST(ShapeTranspose, LargeInputMatchesWithManyThreads) {
  HostTensor x = HostTensor::random({33, 65, 17}, 9);
  RunOptions o;
  o.num_threads = 4;
  EXPECT_TRUE(all_close(run_op("transpose", {{"axes", "(1, 2, 0)"}}, {x}, o)[0],
                        naive_transpose(x, {1, 2, 0})));
}

TEST(ShapeTranspose, InfersBothWaysAndRejectsBadAxes) {
  auto [in, out] = infer_shapes("transpose", {{"axes", "(2, 0, 1)"}}, {Shape()}, {Shape{4, 2, 3}});
  EXPECT_EQ(in[0], (Shape{2, 3, 4}));
  EXPECT_THROW(out_shape("transpose", {{"axes", "(1, 0)"}}, {2, 3, 4}), ShapeError);
  EXPECT_THROW(out_shape("transpose", {{"axes", "(1, 1, 0)"}}, {2, 3, 4}), ValueError);
  EXPECT_THROW(infer_shapes("transpose", {}, {Shape{2, 3}}, {Shape{2, 3}}), ShapeError);
}

TEST(ShapeTranspose, GradientIsTheInversePermutation) {
  EXPECT_TRUE(check_gradient("transpose", {{"axes", "(2, 0, 1)"}},
                             {HostTensor::random({2, 3, 4}, 6, -1, 1, kF64)}));
  EXPECT_TRUE(check_gradient("transpose", {}, {HostTensor::random({2, 3}, 7, -1, 1, kF64)}));
}

// ---- slice -----------------------------------------------------------------------------------

// Python's slice(b, e, s).indices(len) walked: the independent reference.
std::vector<int64_t> py_slice(int64_t len, std::optional<int64_t> b, std::optional<int64_t> e,
                              int64_t s) {
  int64_t lo, hi;
  if (s > 0) {
    lo = !b ? 0 : *b < 0 ? std::max<int64_t>(*b + len, 0) : std::min(*b, len);
    hi = !e ? len : *e < 0 ? std::max<int64_t>(*e + len, 0) : std::min(*e, len);
  } else {
    lo = !b ? len - 1 : *b < 0 ? std::max<int64_t>(*b + len, -1) : std::min(*b, len - 1);
    hi = !e ? -1 : *e < 0 ? std::max<int64_t>(*e + len, -1) : std::min(*e, len - 1);
  }
  std::vector<int64_t> idx;
  for (int64_t i = lo; s > 0 ? i < hi : i > hi; i += s) idx.push_back(i);
  return idx;
}

HostTensor naive_slice2(const HostTensor& x, const std::vector<int64_t>& r0,
                        const std::vector<int64_t>& r1) {
  HostTensor y = HostTensor::filled(
      {static_cast<int64_t>(r0.size()), static_cast<int64_t>(r1.size())}, 0.0, x.dtype);
  for (size_t i = 0; i < r0.size(); ++i)
    for (size_t j = 0; j < r1.size(); ++j) y.data[i * r1.size() + j] = x.at({r0[i], r1[j]});
  return y;
}

TEST(ShapeSlice, NoneNegativeAndStepFollowPythonSemantics) {
  HostTensor x = iota({6, 5}, DType::kFloat64);
  using O = std::optional<int64_t>;
  struct Case {
    const char *b, *e, *s;
    O b0, e0;
    int64_t s0;
    O b1, e1;
    int64_t s1;
  };
  const std::vector<Case> cases = {
      {"(1, None)", "(3, None)", "()", 1, 3, 1, {}, {}, 1},
      {"(None, 1)", "(None, -1)", "(2, None)", {}, {}, 2, 1, -1, 1},
      {"(-1, None)", "(None, None)", "(-2, -1)", -1, {}, -2, {}, {}, -1},
      {"(4, 3)", "(0, 0)", "(-1, -2)", 4, 0, -1, 3, 0, -2},
      {"(-100, 2)", "(100, 5)", "(3, 2)", -100, 100, 3, 2, 5, 2},
      {"(5, -2)", "(None, -100)", "(-2, -1)", 5, {}, -2, -2, -100, -1},
  };
  for (const auto& c : cases) {
    AttrMap a{{"begin", c.b}, {"end", c.e}, {"step", c.s}};
    HostTensor expected =
        naive_slice2(x, py_slice(6, c.b0, c.e0, c.s0), py_slice(5, c.b1, c.e1, c.s1));
    EXPECT_TRUE(all_close(run_op("slice", a, {x})[0], expected)) << c.b << " " << c.e << " " << c.s;
  }
}

TEST(ShapeSlice, ShortBeginKeepsTrailingAxesAndCropIsAnAlias) {
  HostTensor x = iota({4, 3, 2}, DType::kInt32);
  auto y = run_op("crop", {{"begin", "(1,)"}, {"end", "(3,)"}}, {x});
  EXPECT_EQ(y[0].shape, (Shape{2, 3, 2}));
  for (int64_t i = 0; i < y[0].size(); ++i) EXPECT_EQ(y[0].data[i], x.data[6 + i]);
  EXPECT_EQ(get_op("crop").name(), "slice");
  EXPECT_NE(get_op("Crop").name(), "slice");
  // Unsliced axes are inferred backwards from the output.
  auto [in, out] = infer_shapes("slice", {{"begin", "(1,)"}, {"end", "(3,)"}}, {Shape{4, -1, -1}},
                                {Shape{2, 3, 2}});
  EXPECT_EQ(in[0], (Shape{4, 3, 2}));
}

TEST(ShapeSlice, InvalidParametersAndShapesAreRejected) {
  EXPECT_THROW(out_shape("slice", {{"begin", "(0, 0)"}, {"end", "(1,)"}}, {3, 3}), ValueError);
  EXPECT_THROW(out_shape("slice", {{"begin", "(0,)"}, {"end", "(1,)"}, {"step", "(0,)"}}, {3, 3}),
               ValueError);
  EXPECT_THROW(out_shape("slice", {{"begin", "(0, x)"}, {"end", "(1, 2)"}}, {3, 3}), ValueError);
  EXPECT_THROW(out_shape("slice", {{"end", "(1,)"}}, {3, 3}), ValueError);
  EXPECT_THROW(out_shape("slice", {{"begin", "(0, 0, 0)"}, {"end", "(1, 1, 1)"}}, {3, 3}),
               ShapeError);
  EXPECT_THROW(
      infer_shapes("slice", {{"begin", "(0,)"}, {"end", "(2,)"}}, {Shape{3, 3}}, {Shape{3, 3}}),
      ShapeError);
}

TEST(ShapeSlice, GradientScattersIntoTheSlice) {
  EXPECT_TRUE(check_gradient("slice",
                             {{"begin", "(None, 3)"}, {"end", "(None, 0)"}, {"step", "(2, -2)"}},
                             {HostTensor::random({5, 4}, 8, -1, 1, kF64)}));
  // kAdd on the backward op adds inside the slice and leaves the rest.
  RunOptions o;
  o.req = {OpReq::kAdd};
  o.initial_outputs = {HostTensor::filled({4}, 1.0)};
  auto g = run_op("_backward_slice", {{"begin", "(1,)"}, {"end", "(3,)"}},
                  {HostTensor::of({2}, {5, 7}), HostTensor::filled({4}, 0.0)}, o);
  EXPECT_EQ(g[0].data, (std::vector<double>{1, 6, 8, 1}));
}

// ---- slice_axis ------------------------------------------------------------------------------

TEST(ShapeSliceAxis, SlicesOneAxisWithNegativeAndNoneEnds) {
  HostTensor x = iota({3, 5}, DType::kFloat64);
  auto y = run_op("slice_axis", {{"axis", "1"}, {"begin", "1"}, {"end", "None"}}, {x});
  EXPECT_TRUE(all_close(y[0], naive_slice2(x, {0, 1, 2}, {1, 2, 3, 4})));
  y = run_op("slice_axis", {{"axis", "-1"}, {"begin", "-3"}, {"end", "-1"}}, {x});
  EXPECT_TRUE(all_close(y[0], naive_slice2(x, {0, 1, 2}, {2, 3})));
  y = run_op("slice_axis", {{"axis", "0"}, {"begin", "2"}, {"end", "3"}}, {x});
  EXPECT_TRUE(all_close(y[0], naive_slice2(x, {2}, {0, 1, 2, 3, 4})));
  EXPECT_THROW(out_shape("slice_axis", {{"axis", "1"}, {"begin", "3"}, {"end", "2"}}, {3, 5}),
               ShapeError);
  EXPECT_THROW(out_shape("slice_axis", {{"axis", "1"}, {"begin", "0"}, {"end", "6"}}, {3, 5}),
               ShapeError);
  EXPECT_THROW(out_shape("slice_axis", {{"axis", "2"}, {"begin", "0"}, {"end", "1"}}, {3, 5}),
               ValueError);
  EXPECT_THROW(out_shape("slice_axis", {{"axis", "1"}, {"begin", "0"}}, {3, 5}),
               ValueError);  // end required
  auto [in, out] = infer_shapes("slice_axis", {{"axis", "1"}, {"begin", "0"}, {"end", "2"}},
                                {Shape{-1, 5}}, {Shape{3, 2}});
  EXPECT_EQ(in[0], (Shape{3, 5}));
  EXPECT_TRUE(check_gradient("slice_axis", {{"axis", "0"}, {"begin", "1"}, {"end", "None"}},
                             {HostTensor::random({3, 4}, 10, -1, 1, kF64)}));
}

// ---- broadcast_to ----------------------------------------------------------------------------

TEST(ShapeBroadcastTo, RepeatsSizeOneAxesAndZeroKeeps) {
  HostTensor x = HostTensor::of({1, 3}, {1, 2, 3});
  auto y = run_op("broadcast_to", {{"shape", "(2, 3)"}}, {x});
  EXPECT_EQ(y[0].data, (std::vector<double>{1, 2, 3, 1, 2, 3}));
  HostTensor c = HostTensor::of({2, 1}, {4, 5}, DType::kInt32);
  y = run_op("broadcast_to", {{"shape", "(0, 3)"}}, {c});
  EXPECT_EQ(y[0].shape, (Shape{2, 3}));
  EXPECT_EQ(y[0].data, (std::vector<double>{4, 4, 4, 5, 5, 5}));
  EXPECT_THROW(out_shape("broadcast_to", {{"shape", "(4, 3)"}}, {2, 3}), ShapeError);
  EXPECT_THROW(out_shape("broadcast_to", {{"shape", "(2, 3)"}}, {3}), ShapeError);
  EXPECT_THROW(out_shape("broadcast_to", {{"shape", "(-2, 3)"}}, {1, 3}), ValueError);
  auto [in, out] =
      infer_shapes("broadcast_to", {{"shape", "(0, 3)"}}, {Shape{-1, 1}}, {Shape{7, 3}});
  EXPECT_EQ(in[0], (Shape{7, 1}));
}

TEST(ShapeBroadcastTo, GradientSumsOverBroadcastAxes) {
  EXPECT_TRUE(check_gradient("broadcast_to", {{"shape", "(3, 0, 4)"}},
                             {HostTensor::random({1, 2, 1}, 11, -1, 1, kF64)}));
  // Many threads summing into few elements stay race-free.
  HostTensor g = HostTensor::random({64, 3, 50}, 12);
  RunOptions o;
  o.num_threads = 4;
  auto r = run_op("_backward_broadcast_to", {{"shape", "(64, 3, 50)"}},
                  {g, HostTensor::filled({1, 3, 1}, 0.0)}, o);
  for (int c = 0; c < 3; ++c) {
    double s = 0;
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 50; ++j) s += g.at({i, c, j});
    EXPECT_NEAR(r[0].data[c], s, 1e-3);
  }
}

// ---- tile ------------------------------------------------------------------------------------

TEST(ShapeTile, RepeatsLikeNumpyTile) {
  HostTensor x = HostTensor::of({2, 2}, {1, 2, 3, 4});
  auto y = run_op("tile", {{"reps", "(2, 2)"}}, {x});
  EXPECT_EQ(y[0].shape, (Shape{4, 4}));
  EXPECT_EQ(y[0].data, (std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}));
  y = run_op("tile", {{"reps", "(2,)"}}, {x});
  EXPECT_EQ(y[0].shape, (Shape{2, 4}));
  EXPECT_EQ(y[0].data, (std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4}));
  y = run_op("tile", {{"reps", "(2, 1, 1)"}}, {x});
  EXPECT_EQ(y[0].shape, (Shape{2, 2, 2}));
  EXPECT_EQ(y[0].data, (std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_THROW(out_shape("tile", {{"reps", "(0, 2)"}}, {2, 2}), ValueError);
  EXPECT_THROW(out_shape("tile", {}, {2, 2}), ValueError);
  auto [in, out] = infer_shapes("tile", {{"reps", "(3,)"}}, {Shape{2, -1}}, {Shape{2, 12}});
  EXPECT_EQ(in[0], (Shape{2, 4}));
  EXPECT_THROW(infer_shapes("tile", {{"reps", "(3,)"}}, {Shape{2, -1}}, {Shape{2, 10}}),
               ShapeError);
  EXPECT_TRUE(check_gradient("tile", {{"reps", "(2, 1, 3)"}},
                             {HostTensor::random({2, 2}, 13, -1, 1, kF64)}));
}

TEST(ShapeTile, GradientSumsTheCopiesWithManyThreads) {
  HostTensor x = HostTensor::random({7, 5}, 14);
  HostTensor head = HostTensor::random({21, 10}, 15);
  RunOptions o;
  o.num_threads = 4;
  auto g = op_gradient("tile", {{"reps", "(3, 2)"}}, {x}, {head}, o);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) {
      double s = 0;
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 2; ++b) s += head.at({7 * a + i, 5 * b + j});
      EXPECT_NEAR(g[0].at({i, j}), s, 1e-4);
    }
}

}  // namespace
}  // namespace weft::testing

namespace weft::testing {
namespace {

TEST(ShapeInference, UnknownRankInputsLeaveShapesUnknownWithoutThrowing) {
  struct Case {
    const char* op;
    AttrMap attrs;
    int inputs;
  };
  const std::vector<Case> cases = {
      {"Reshape", {{"shape", "(0, -1)"}}, 1},
      {"Flatten", {}, 1},
      {"expand_dims", {{"axis", "0"}}, 1},
      {"squeeze", {}, 1},
      {"transpose", {}, 1},
      {"slice", {{"begin", "(0,)"}, {"end", "(1,)"}}, 1},
      {"slice_axis", {{"axis", "0"}, {"begin", "0"}, {"end", "1"}}, 1},
      {"broadcast_to", {{"shape", "(0, 3)"}}, 1},  // (2, 3) would fix the output alone
      {"tile", {{"reps", "(2,)"}}, 1},
      {"Concat", {{"num_args", "2"}}, 2},
      {"stack", {{"num_args", "2"}}, 2},
      {"SliceChannel", {{"num_outputs", "2"}}, 1},
      {"Crop", {{"num_args", "2"}}, 2},
      {"UpSampling", {{"scale", "2"}, {"sample_type", "nearest"}, {"num_args", "2"}}, 2},
      {"UpSampling", {{"scale", "2"}, {"sample_type", "bilinear"}, {"num_args", "2"}}, 2},
      {"Embedding", {{"input_dim", "3"}, {"output_dim", "2"}}, 2},
  };
  for (const auto& c : cases) {
    OpAttrs a = get_op(c.op).make_attrs(c.attrs, "n");
    std::vector<Shape> in(c.inputs), out;
    bool known = true;
    EXPECT_NO_THROW(known = a.op->infer_shape(a, in, out)) << c.op;
    EXPECT_FALSE(known) << c.op;
    EXPECT_FALSE(out.at(0).known()) << c.op;
  }
}

}  // namespace
}  // namespace weft::testing
