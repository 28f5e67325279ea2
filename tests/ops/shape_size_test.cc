// Checked shape sizes (Note [Checked sizes] in base/shape.h): element and byte counts that
// overflow are ShapeErrors naming the shape, and op shape rules that multiply or add dimensions
// from attributes refuse results beyond the limit instead of wrapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "base/shape.h"
#include "tests/ops/op_harness.h"

namespace weft {
namespace {

using testing::infer_shapes;

constexpr int64_t k2to28 = int64_t{1} << 28;
constexpr int64_t k2to33 = int64_t{1} << 33;
constexpr int64_t k2to62 = int64_t{1} << 62;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ShapeSize, ProductsUpToTheLimitAreExact) {
  EXPECT_EQ((Shape{k2to28, k2to28}.size()), kMaxElements);
  EXPECT_EQ((Shape{3, 0, 5}.size()), 0);
  EXPECT_EQ(Shape::filled(0, 0).size(), 1);
  EXPECT_EQ((Shape{2, 3, 4}.prod(1, 3)), 12);
  EXPECT_EQ((Shape{2, 3, 4}.prod(1, 1)), 1);
}

TEST(ShapeSize, OverflowingProductsAreShapeErrorsNamingTheShape) {
  // (2^62, 2^62) wraps to 0 in 64-bit arithmetic; 2^28 * 2^28 * 2 is just past the limit.
  for (const Shape& s :
       {Shape{k2to62, k2to62}, Shape{k2to28, k2to28, 2}, Shape{int64_t{3} << 61, 4}}) {
    try {
      (void)s.size();
      ADD_FAILURE() << s << " has a size";
    } catch (const ShapeError& e) {
      EXPECT_TRUE(contains(e.what(), s.to_string())) << e.what();
    }
    EXPECT_FALSE(s.within_limits()) << s;
  }
}

TEST(ShapeSize, ZeroSizedShapesWithHugeDimensionsAreRefused) {
  // No elements, but the strides (4611686018427387904 * 16 ...) would overflow.
  EXPECT_THROW((Shape{0, k2to62, 16}.size()), ShapeError);
  EXPECT_THROW((Shape{k2to62, 0}.size()), ShapeError);
  EXPECT_EQ((Shape{0, int64_t{1} << 40}.size()), 0);
}

TEST(ShapeSize, UnknownDimensionsAreSkippedByWithinLimitsAndRefusedByProd) {
  EXPECT_EQ((Shape{-1, 3}.size()), -1);  // not known: no size, no error
  EXPECT_TRUE((Shape{-1, k2to28, k2to28}.within_limits()));
  EXPECT_FALSE((Shape{-1, k2to62, k2to62}.within_limits()));
  EXPECT_THROW((Shape{2, -1}.prod(0, 2)), ShapeError);
  EXPECT_EQ((Shape{2, -1}.prod(0, 1)), 2);
  EXPECT_NO_THROW((Shape{-1, 3}.check_limits("x")));
  try {
    Shape{-1, k2to62, 4}.check_limits("node 'data'");
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "node 'data'")) << e.what();
  }
}

TEST(ShapeSize, ShapeBytesChecksTheByteCountAndNamesTheArray) {
  EXPECT_EQ(shape_bytes(Shape{2, 3}, 4, "a"), 24u);
  EXPECT_EQ(shape_bytes(Shape{k2to28, k2to28}, 8, "a"), size_t{1} << 59);
  try {
    shape_bytes(Shape{k2to62, 2}, 4, "array 'w'");
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "array 'w'")) << e.what();
  }
  EXPECT_THROW(shape_bytes(Shape{-1, 2}, 4, "a"), ShapeError);
  EXPECT_THROW(shape_bytes(Shape(), 4, "a"), ShapeError);
}

TEST(ShapeSize, MulAndAddDimsRefuseResultsBeyondTheLimit) {
  EXPECT_EQ(mul_dims(k2to28, k2to28), kMaxElements);
  EXPECT_EQ(mul_dims(0, k2to62), 0);
  EXPECT_THROW(mul_dims(k2to33, k2to33), ShapeError);
  EXPECT_THROW(mul_dims(-1, 2), ShapeError);
  EXPECT_EQ(add_dims(kMaxElements - 1, 1), kMaxElements);
  EXPECT_THROW(add_dims(kMaxElements, 1), ShapeError);
  EXPECT_THROW(add_dims(INT64_MAX, INT64_MAX), ShapeError);
}

// ---- op shape rules ----------------------------------------------------------------------------

TEST(ShapeRuleLimits, FullyConnectedWithAHugeNumHiddenNamesTheOp) {
  try {
    infer_shapes("FullyConnected", {{"num_hidden", std::to_string(k2to62)}},
                 {Shape{2, 3}, Shape(), Shape()});
    ADD_FAILURE() << "inferred";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "FullyConnected")) << e.what();
    EXPECT_TRUE(contains(e.what(), std::to_string(k2to62))) << e.what();
  }
  // Still fine with the data's trailing dims unknown (a partly inferred graph).
  auto [in, out] =
      infer_shapes("FullyConnected", {{"num_hidden", "5"}}, {Shape{2, -1, 4}, Shape(), Shape()});
  EXPECT_EQ(in[1], (Shape{5, -1}));
  EXPECT_EQ(out[0], (Shape{2, 5}));
}

TEST(ShapeRuleLimits, ReshapeWhoseCodesOverflowIsAShapeError) {
  // 2^33 * 2^33 wraps to 4: the -1 used to be inferred as 2 for an 8-element input.
  EXPECT_THROW(infer_shapes("Reshape", {{"shape", "(8589934592, 8589934592, -1)"}}, {Shape{8}}),
               ShapeError);
  // (2^60 + 1) * 16 wraps to 16: the split used to be accepted.
  EXPECT_THROW(
      infer_shapes("Reshape", {{"shape", "(-4, 1152921504606846977, 16, -2)"}}, {Shape{16, 2}}),
      ShapeError);
  EXPECT_THROW(
      infer_shapes("Reshape", {{"target_shape", "(8589934592, 8589934592, 0)"}}, {Shape{8}}),
      ShapeError);
  // Ordinary reshapes are unchanged.
  EXPECT_EQ(infer_shapes("Reshape", {{"shape", "(4, -1)"}}, {Shape{2, 6}}).second.at(0),
            (Shape{4, 3}));
}

TEST(ShapeRuleLimits, ConcatWhoseAxisSumOverflowsIsAShapeError) {
  const int64_t big = int64_t{1} << 55;
  EXPECT_THROW(infer_shapes("Concat", {{"num_args", "3"}, {"dim", "0"}},
                            {Shape{big}, Shape{big}, Shape{big}}),
               ShapeError);
  EXPECT_EQ(infer_shapes("Concat", {{"num_args", "2"}, {"dim", "0"}}, {Shape{big}, Shape{big}})
                .second.at(0),
            (Shape{2 * big}));
}

TEST(ShapeRuleLimits, SliceChannelBackwardFromAHugeOutputIsAShapeError) {
  // The input's axis is the output's times num_outputs: 3 * 2^55 is past the limit.
  const Shape part{int64_t{1} << 55};
  EXPECT_THROW(infer_shapes("SliceChannel", {{"num_outputs", "3"}, {"axis", "0"}}, {Shape()},
                            {part, part, part}),
               ShapeError);
}

TEST(ShapeRuleLimits, UpSamplingWhoseScaleOverflowsIsRefused) {
  // 2^27 rows scaled by 2^30.
  EXPECT_THROW(
      infer_shapes("UpSampling",
                   {{"scale", "1073741824"}, {"sample_type", "nearest"}, {"num_args", "1"}},
                   {Shape{1, 1, int64_t{1} << 27, 1}}),
      ShapeError);
  // A scale whose kernel (2 * scale) would overflow.
  EXPECT_THROW(
      infer_shapes(
          "UpSampling",
          {{"scale", "4611686018427387904"}, {"sample_type", "nearest"}, {"num_args", "1"}},
          {Shape{1, 1, 2, 2}}),
      Error);
}

TEST(ShapeRuleLimits, CropWithAnOffsetThatOverflowsIsAShapeError) {
  // y + h wrapped negative and passed the fit check.
  EXPECT_THROW(
      infer_shapes("Crop",
                   {{"num_args", "1"}, {"h_w", "(2, 2)"}, {"offset", "(9223372036854775806, 0)"}},
                   {Shape{1, 1, 4, 4}}),
      ShapeError);
}

TEST(ShapeRuleLimits, ArangeWithAHugeRangeIsAShapeError) {
  // 1e30 elements used to be converted to int64 (undefined behaviour).
  EXPECT_THROW(infer_shapes("_arange", {{"start", "0"}, {"stop", "1e30"}}, {}), ShapeError);
  EXPECT_EQ(infer_shapes("_arange", {{"start", "0"}, {"stop", "5"}}, {}).second.at(0), (Shape{5}));
}

TEST(ShapeRuleLimits, CreationOpsWithAHugeShapeAreValueErrors) {
  EXPECT_THROW(
      infer_shapes("_zeros", {{"shape", "(4611686018427387904, 4611686018427387904)"}}, {}),
      ValueError);
  EXPECT_THROW(infer_shapes("_random_uniform", {{"shape", "(4611686018427387904, 4)"}}, {}),
               ValueError);
}

}  // namespace
}  // namespace weft
