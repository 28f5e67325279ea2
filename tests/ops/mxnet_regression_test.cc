// Regression tests for differences from MXNet 1.9.1 found by tests/mxnet/ops_check.py; the expected
// values were produced by MXNet 1.9.1 (pip mxnet==1.9.1, CPU) on the inputs written here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft {
namespace {

using testing::all_close;
using testing::HostTensor;
using testing::op_gradient;

// SoftmaxOutput with multi_output: MXNet divides the gradient by the number of positions per
// sample (here 3) for normalization null and batch, but not for valid (softmax_output-inl.h,
// `grad_scale / (normalization == valid ? 1 : s3[2]) / valid_cnt`). weft used to skip that
// division. Data (2, 2, 3), labels (2, 3) with two labels ignored, grad_scale 2.
TEST(MxnetRegression, SoftmaxOutputMultiOutputGradientDividesByPositions) {
  const HostTensor x = HostTensor::of(Shape{2, 2, 3}, {0.5, -1.0, 2.0, 1.5, 0.25, -0.5,  //
                                                       0.0, 1.0, -2.0, -1.0, 0.75, 0.5});
  const HostTensor label = HostTensor::of(Shape{2, 3}, {0, 1, 1, 1, 0, 1});
  const AttrMap base = {
      {"multi_output", "True"}, {"grad_scale", "2"}, {"use_ignore", "True"}, {"ignore_label", "0"}};
  struct Expected {
    std::string normalization;
    std::vector<double> grad;
  };
  const std::vector<Expected> cases = {
      {"null",
       {0, 0.148466766, 0.616094589, 0, -0.148466751, -0.616094589, 0.487372398, 0, 0.0505721197,
        -0.487372398, 0, -0.0505721197}},
      {"batch",
       {0, 0.0742333829, 0.308047295, 0, -0.0742333755, -0.308047295, 0.243686199, 0, 0.0252860598,
        -0.243686199, 0, -0.0252860598}},
      {"valid",
       {0, 0.111350074, 0.462070912, 0, -0.11135006, -0.462070912, 0.365529299, 0, 0.0379290879,
        -0.365529299, 0, -0.0379290879}},
  };
  for (const auto& c : cases) {
    AttrMap attrs = base;
    attrs["normalization"] = c.normalization;
    const auto grads = op_gradient("SoftmaxOutput", attrs, {x, label}, {});
    EXPECT_TRUE(all_close(grads[0], HostTensor::of(Shape{2, 2, 3}, c.grad), 1e-5, 1e-6))
        << "normalization " << c.normalization;
  }
}

}  // namespace
}  // namespace weft
