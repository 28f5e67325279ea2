// pick and one_hot: values against plain loops in the test (every axis, keepdims, clip and wrap,
// out-of-range, negative and fractional indices), shape and type inference and their errors,
// pick's gradient through the op's FGradient, finite differences and imperative autograd.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"
#include "ops/op.h"
#include "tests/ops/op_harness.h"

namespace weft {
namespace {

using testing::all_close;
using testing::check_gradient;
using testing::GradCheckOptions;
using testing::HostTensor;
using testing::infer_shapes;
using testing::infer_types;
using testing::op_gradient;
using testing::run_op;

// The position picked for index value v along an axis of size n.
int64_t picked(double v, int64_t n, bool wrap) {
  int64_t j = static_cast<int64_t>(std::trunc(v));
  if (!wrap) return j < 0 ? 0 : j >= n ? n - 1 : j;
  j %= n;
  return j < 0 ? j + n : j;
}

// Data viewed as (outer, n, inner) around `axis`.
struct Split {
  int64_t outer = 1, n = 1, inner = 1;
};
Split split(const Shape& s, int axis) {
  Split r;
  for (int d = 0; d < axis; ++d) r.outer *= s[d];
  r.n = s[axis];
  for (int d = axis + 1; d < s.ndim(); ++d) r.inner *= s[d];
  return r;
}

Shape picked_shape(const Shape& data, int axis, bool keepdims) {
  std::vector<int64_t> o;
  for (int d = 0; d < data.ndim(); ++d) {
    if (d != axis) o.push_back(data[d]);
    if (d == axis && keepdims) o.push_back(1);
  }
  return Shape(o);
}

// Index values in [-2n, 2n), with fractions, so that both modes see out-of-range values.
HostTensor index_values(const Shape& shape, int64_t n, uint64_t seed) {
  return HostTensor::random(shape, seed, -2.0 * static_cast<double>(n), 2.0 * n);
}

HostTensor pick_reference(const HostTensor& data, const HostTensor& index, int axis, bool wrap,
                          const Shape& out_shape) {
  const Split s = split(data.shape, axis);
  HostTensor out = HostTensor::filled(out_shape, 0.0, data.dtype);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t k = o * s.inner + i;
      out.data[k] = data.data[(o * s.n + picked(index.data[k], s.n, wrap)) * s.inner + i];
    }
  }
  return out;
}

TEST(Pick, EveryAxisKeepdimsAndModeMatchTheReference) {
  const Shape shape{3, 4, 5};
  const HostTensor data = HostTensor::random(shape, 1);
  for (int axis_param : {0, 1, 2, -1, -2, -3}) {
    const int axis = axis_param < 0 ? axis_param + 3 : axis_param;
    for (bool keepdims : {false, true}) {
      for (const char* mode : {"clip", "wrap"}) {
        SCOPED_TRACE("axis " + std::to_string(axis_param) + " keepdims " +
                     std::to_string(keepdims) + " " + mode);
        const Shape out_shape = picked_shape(shape, axis, keepdims);
        const HostTensor index = index_values(out_shape, shape[axis], 7 + axis);
        const AttrMap attrs{{"axis", std::to_string(axis_param)},
                            {"keepdims", keepdims ? "True" : "False"},
                            {"mode", mode}};
        const auto out = run_op("pick", attrs, {data, index});
        ASSERT_EQ(out[0].shape, out_shape);
        EXPECT_TRUE(all_close(
            out[0], pick_reference(data, index, axis, std::string(mode) == "wrap", out_shape), 0,
            0));
      }
    }
  }
}

TEST(Pick, DefaultsAreLastAxisAndClip) {
  const HostTensor data = HostTensor::of(Shape{2, 3}, {0, 1, 2, 3, 4, 5});
  // -1 clips to 0, 7 clips to 2; 1.9 truncates to 1 and -0.5 to 0.
  auto out = run_op("pick", {}, {data, HostTensor::of(Shape{2}, {-1, 7})});
  EXPECT_EQ(out[0].data, (std::vector<double>{0, 5}));
  out = run_op("pick", {}, {data, HostTensor::of(Shape{2}, {1.9, -0.5})});
  EXPECT_EQ(out[0].data, (std::vector<double>{1, 3}));
  out = run_op("pick", {{"mode", "wrap"}}, {data, HostTensor::of(Shape{2}, {-1, 7})});
  EXPECT_EQ(out[0].data, (std::vector<double>{2, 4}));
  // Integer indices.
  out =
      run_op("pick", {{"mode", "wrap"}}, {data, HostTensor::of(Shape{2}, {-4, 5}, DType::kInt32)});
  EXPECT_EQ(out[0].data, (std::vector<double>{2, 5}));
  EXPECT_EQ(out[0].dtype, DType::kFloat32);
}

TEST(Pick, AxisNoneAndOneDimensionalData) {
  const HostTensor data = HostTensor::random(Shape{3, 4}, 2);
  auto out = run_op("pick", {{"axis", "None"}}, {data, HostTensor::of(Shape{1}, {7})});
  ASSERT_EQ(out[0].shape, (Shape{1}));
  EXPECT_EQ(out[0].data[0], data.data[7]);
  out = run_op("pick", {{"axis", "None"}, {"mode", "wrap"}, {"keepdims", "True"}},
               {data, HostTensor::of(Shape{1, 1}, {13})});
  ASSERT_EQ(out[0].shape, (Shape{1, 1}));
  EXPECT_EQ(out[0].data[0], data.data[1]);
  const HostTensor vec = HostTensor::of(Shape{4}, {5, 6, 7, 8});
  out = run_op("pick", {{"axis", "0"}}, {vec, HostTensor::of(Shape{1}, {2})});
  ASSERT_EQ(out[0].shape, (Shape{1}));
  EXPECT_EQ(out[0].data[0], 7);
}

TEST(Pick, ShapeAndTypeInference) {
  auto [in, out] = infer_shapes("pick", {{"axis", "1"}}, {Shape{2, 5, 3}, Shape()});
  EXPECT_EQ(in[1], (Shape{2, 3}));
  EXPECT_EQ(out[0], (Shape{2, 3}));
  std::tie(in, out) =
      infer_shapes("pick", {{"axis", "-2"}, {"keepdims", "True"}}, {Shape{2, 5, 3}, Shape()});
  EXPECT_EQ(in[1], (Shape{2, 1, 3}));
  EXPECT_EQ(out[0], (Shape{2, 1, 3}));
  // With keepdims, the data's other dims follow from the index.
  std::tie(in, out) =
      infer_shapes("pick", {{"axis", "0"}, {"keepdims", "True"}}, {Shape(), Shape{1, 4}});
  EXPECT_EQ(in[0], (Shape{-1, 4}));
  const auto [tin, tout] = infer_types("pick", {}, {DType::kFloat64, DType::kInt64});
  EXPECT_EQ(tin[1], DType::kInt64);
  EXPECT_EQ(tout[0], DType::kFloat64);
}

TEST(Pick, ErrorsNameTheProblem) {
  try {
    infer_shapes("pick", {{"axis", "1"}}, {Shape{2, 5, 3}, Shape{2, 5}});
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("pick"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index"), std::string::npos) << msg;
    EXPECT_NE(msg.find(Shape{2, 5}.to_string()), std::string::npos) << msg;
    EXPECT_NE(msg.find(Shape{2, 3}.to_string()), std::string::npos) << msg;
  }
  EXPECT_THROW(infer_shapes("pick", {{"axis", "3"}}, {Shape{2, 5, 3}, Shape()}), ValueError);
  EXPECT_THROW(infer_shapes("pick", {{"axis", "-4"}}, {Shape{2, 5, 3}, Shape()}), ValueError);
  EXPECT_THROW(infer_shapes("pick", {{"axis", "0"}}, {Shape{0, 3}, Shape()}), ShapeError);
  EXPECT_THROW(get_op("pick").make_attrs({{"mode", "raise"}}), ValueError);
}

// The gradient of pick scattered by hand: zeros of the data's shape, out_grad at each pick.
HostTensor scatter_reference(const Shape& data_shape, const HostTensor& index,
                             const HostTensor& head, int axis, bool wrap) {
  const Split s = split(data_shape, axis);
  HostTensor g = HostTensor::filled(data_shape, 0.0);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t k = o * s.inner + i;
      g.data[(o * s.n + picked(index.data[k], s.n, wrap)) * s.inner + i] += head.data[k];
    }
  }
  return g;
}

TEST(Pick, GradientScattersIntoZerosAndSkipsTheIndex) {
  const Shape shape{3, 4, 2};
  const HostTensor data = HostTensor::random(shape, 3);
  for (bool wrap : {false, true}) {
    const AttrMap attrs{{"axis", "1"}, {"keepdims", "True"}, {"mode", wrap ? "wrap" : "clip"}};
    const HostTensor index = index_values(Shape{3, 1, 2}, 4, 9);
    const HostTensor head = HostTensor::random(Shape{3, 1, 2}, 10);
    const auto grads = op_gradient("pick", attrs, {data, index}, {head});
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_TRUE(all_close(grads[0], scatter_reference(shape, index, head, 1, wrap), 0, 0));
    EXPECT_TRUE(grads[1].empty());
    GradCheckOptions opt;
    opt.check_inputs = {0};
    opt.no_grad_inputs = {1};
    EXPECT_TRUE(check_gradient("pick", attrs, {data, index}, opt));
  }
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

TEST(Pick, AutogradGradientMatchesTheHandScatter) {
  const Shape shape{4, 6};
  const HostTensor x_host = HostTensor::random(shape, 4);
  const HostTensor index = index_values(Shape{4}, 6, 5);
  const HostTensor head = HostTensor::random(Shape{4}, 6);
  NDArray x = NDArray::from_vector<float>(shape, to_float(x_host.data));
  x.attach_grad();
  NDArray idx = NDArray::from_vector<float>(Shape{4}, to_float(index.data));
  NDArray y;
  {
    autograd::RecordScope record;
    y = invoke1("pick", {x, idx}, {{"axis", "-1"}, {"mode", "wrap"}});
  }
  autograd::backward({y}, {NDArray::from_vector<float>(Shape{4}, to_float(head.data))});
  EXPECT_TRUE(all_close(HostTensor::of(shape, x.grad().to_doubles()),
                        scatter_reference(shape, index, head, 1, true), 0, 0));
}

TEST(Pick, CrossEntropyGradientThroughLogSoftmax) {
  // d/dx sum_i log_softmax(x)[i, label_i] = onehot(label) - softmax(x).
  const Shape shape{3, 5};
  const HostTensor x_host = HostTensor::random(shape, 8, -2, 2);
  const std::vector<double> label{4, 0, 2};
  NDArray x = NDArray::from_vector<float>(shape, to_float(x_host.data));
  x.attach_grad();
  NDArray loss;
  {
    autograd::RecordScope record;
    NDArray logp = invoke1("log_softmax", {x}, {{"axis", "-1"}});
    loss = invoke1("pick", {logp, NDArray::from_vector<float>(Shape{3}, to_float(label))});
  }
  autograd::backward({loss});
  std::vector<double> want(15);
  for (int r = 0; r < 3; ++r) {
    double z = 0;
    for (int c = 0; c < 5; ++c) z += std::exp(x_host.data[r * 5 + c]);
    for (int c = 0; c < 5; ++c)
      want[r * 5 + c] = (c == label[r] ? 1.0 : 0.0) - std::exp(x_host.data[r * 5 + c]) / z;
  }
  EXPECT_TRUE(all_close(HostTensor::of(shape, x.grad().to_doubles()), HostTensor::of(shape, want),
                        1e-5, 1e-6));
}

// ---- one_hot -----------------------------------------------------------------------------------

TEST(OneHot, OutOfRangeAndNegativeIndicesGiveOffRows) {
  // 2.7 truncates to 2 and -0.5 to 0 (toward zero); -1, 4 and 9 are out of range.
  const HostTensor idx = HostTensor::of(Shape{2, 3}, {0, -1, 3, 4, 2.7, -0.5});
  const auto out =
      run_op("one_hot", {{"depth", "4"}, {"on_value", "2.5"}, {"off_value", "-1"}}, {idx});
  ASSERT_EQ(out[0].shape, (Shape{2, 3, 4}));
  EXPECT_EQ(out[0].dtype, DType::kFloat32);
  std::vector<double> want(24, -1.0);
  const int hot[6] = {0, -1, 3, -1, 2, 0};
  for (int i = 0; i < 6; ++i)
    if (hot[i] >= 0) want[i * 4 + hot[i]] = 2.5;
  EXPECT_EQ(out[0].data, want);
}

TEST(OneHot, IntegerIndicesAndOutputTypes) {
  const HostTensor idx = HostTensor::of(Shape{4}, {1, -3, 0, 9}, DType::kInt64);
  auto out = run_op("one_hot", {{"depth", "3"}, {"dtype", "int32"}}, {idx});
  EXPECT_EQ(out[0].dtype, DType::kInt32);
  EXPECT_EQ(out[0].data, (std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}));
  out = run_op("one_hot", {{"depth", "2"}, {"dtype", "float64"}, {"on_value", "0.25"}},
               {HostTensor::of(Shape{2}, {1, 0})});
  EXPECT_EQ(out[0].dtype, DType::kFloat64);
  EXPECT_EQ(out[0].data, (std::vector<double>{0, 0.25, 0.25, 0}));
}

TEST(OneHot, InferenceParamsAndNoGradient) {
  auto [in, out] = infer_shapes("one_hot", {{"depth", "7"}}, {Shape{2, 3}});
  EXPECT_EQ(out[0], (Shape{2, 3, 7}));
  std::tie(in, out) = infer_shapes("one_hot", {{"depth", "7"}}, {Shape()}, {Shape{5, 7}});
  EXPECT_EQ(in[0], (Shape{5}));
  EXPECT_THROW(infer_shapes("one_hot", {{"depth", "7"}}, {Shape{2}}, {Shape{2, 6}}), ShapeError);
  const auto [tin, tout] = infer_types("one_hot", {{"depth", "3"}}, {DType::kInt32});
  EXPECT_EQ(tin[0], DType::kInt32);
  EXPECT_EQ(tout[0], DType::kFloat32);
  EXPECT_THROW(get_op("one_hot").make_attrs({}), ValueError);
  EXPECT_THROW(get_op("one_hot").make_attrs({{"depth", "-1"}}), ValueError);
  const auto grads = op_gradient("one_hot", {{"depth", "3"}}, {HostTensor::of(Shape{2}, {0, 2})},
                                 {HostTensor::random(Shape{2, 3}, 1)});
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_TRUE(grads[0].empty());
}

}  // namespace
}  // namespace weft
