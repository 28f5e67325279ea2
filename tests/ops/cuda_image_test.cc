// CUDA kernels of _image_crop (and its gradient, _backward_image_crop) and _image_resize against
// the CPU kernels: HWC and NHWC images, odd windows and sizes, both interpolations, keep_ratio,
// uint8 and floating images, and kAdd requests. uint8 resizes must match exactly (the CPU's
// fixed-point arithmetic). Every test skips without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kU8 = DType::kUInt8;

HostTensor image(Shape s, uint64_t seed, DType dt) {
  return dt == kU8 ? HostTensor::random(std::move(s), seed, 0.0, 255.0, dt)
                   : HostTensor::random(std::move(s), seed, -1.0, 1.0, dt);
}

CudaCompare exact_cmp(DType dt, bool gradients = false) {
  CudaCompare c;
  c.rtol = dt == kF32 ? 1e-6 : dt == kF64 ? 1e-14 : 0.0;
  c.atol = dt == kF32 ? 1e-7 : dt == kF64 ? 1e-15 : 0.0;
  c.gradients = gradients;
  return c;
}

CudaCompare add_cmp(DType dt, const HostTensor& initial) {
  CudaCompare c = exact_cmp(dt);
  c.options.req = {OpReq::kAdd};
  c.options.initial_outputs = {initial};
  return c;
}

AttrMap crop_attrs(int x, int y, int w, int h) {
  return {{"x", std::to_string(x)},
          {"y", std::to_string(y)},
          {"width", std::to_string(w)},
          {"height", std::to_string(h)}};
}

// ---- _image_crop --------------------------------------------------------------------------------

TEST(CudaImageCrop, HwcOddOffsetsWithGradient) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("_image_crop", crop_attrs(3, 5, 7, 4), {image(Shape{13, 11, 3}, 1, kF32)},
                          exact_cmp(kF32, true));
}

TEST(CudaImageCrop, NhwcOddOffsetsWithGradientFloat64) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("_image_crop", crop_attrs(1, 7, 9, 5),
                          {image(Shape{3, 13, 11, 5}, 2, kF64)}, exact_cmp(kF64, true));
}

TEST(CudaImageCrop, WholeImageAndSinglePixel) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("_image_crop", crop_attrs(0, 0, 11, 13),
                          {image(Shape{13, 11, 1}, 3, kF32)}, exact_cmp(kF32, true));
  expect_cuda_matches_cpu("_image_crop", crop_attrs(10, 12, 1, 1),
                          {image(Shape{2, 13, 11, 3}, 4, kF32)}, exact_cmp(kF32, true));
}

TEST(CudaImageCrop, Uint8AndInt32) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("_image_crop", crop_attrs(2, 3, 5, 6), {image(Shape{2, 9, 8, 3}, 5, kU8)},
                          exact_cmp(kU8));
  expect_cuda_matches_cpu("_image_crop", crop_attrs(2, 3, 5, 6),
                          {HostTensor::random(Shape{9, 8, 3}, 6, -100.0, 100.0, DType::kInt32)},
                          exact_cmp(kU8));
}

TEST(CudaImageCrop, AddRequest) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("_image_crop", crop_attrs(1, 2, 4, 3),
                          {image(Shape{2, 7, 6, 3}, 7, kF32)},
                          add_cmp(kF32, image(Shape{2, 3, 4, 3}, 8, kF32)));
}

TEST(CudaImageCropBackward, WriteAndAdd) {
  WEFT_REQUIRE_CUDA();
  const AttrMap attrs = crop_attrs(3, 1, 5, 7);
  const std::vector<HostTensor> in = {image(Shape{2, 7, 5, 3}, 9, kF32),
                                      image(Shape{2, 9, 11, 3}, 10, kF32)};
  expect_cuda_matches_cpu("_backward_image_crop", attrs, in, exact_cmp(kF32));
  expect_cuda_matches_cpu("_backward_image_crop", attrs, in,
                          add_cmp(kF32, image(Shape{2, 9, 11, 3}, 11, kF32)));
  expect_cuda_matches_cpu("_backward_image_crop", attrs,
                          {image(Shape{7, 5, 1}, 12, kF64), image(Shape{9, 11, 1}, 13, kF64)},
                          exact_cmp(kF64));
}

// ---- _image_resize ------------------------------------------------------------------------------

struct ResizeCase {
  Shape shape;
  std::string size;
  bool keep_ratio;
};

const std::vector<ResizeCase>& resize_cases() {
  static const std::vector<ResizeCase> cases = {
      {Shape{13, 11, 3}, "(29, 17)", false},    // up, (width, height)
      {Shape{2, 31, 23, 3}, "(7, 9)", false},   // down, batched
      {Shape{17, 19, 1}, "(38, 34)", false},    // exact 2x up, grey
      {Shape{2, 26, 18, 5}, "(9, 13)", false},  // exact 2x down, 5 channels
      {Shape{13, 11, 3}, "(11, 13)", false},    // equal size (a copy)
      {Shape{13, 11, 3}, "(15,)", false},       // one value: square
      {Shape{13, 21, 3}, "(10,)", true},        // keep_ratio, wide: short edge 10
      {Shape{3, 21, 13, 4}, "(27,)", true},     // keep_ratio, tall, up
      {Shape{7, 5, 2}, "(1, 1)", false},        // to one pixel
      {Shape{1, 1, 3}, "(5, 4)", false},        // from one pixel
  };
  return cases;
}

void check_resize(DType dt, int interp) {
  uint64_t seed = 20 + static_cast<uint64_t>(interp);
  for (const ResizeCase& c : resize_cases()) {
    SCOPED_TRACE(c.shape.to_string() + " size=" + c.size);
    const AttrMap attrs = {{"size", c.size},
                           {"keep_ratio", c.keep_ratio ? "true" : "false"},
                           {"interp", std::to_string(interp)}};
    expect_cuda_matches_cpu("_image_resize", attrs, {image(c.shape, seed++, dt)}, exact_cmp(dt));
  }
}

TEST(CudaImageResize, BilinearUint8) {
  WEFT_REQUIRE_CUDA();
  check_resize(kU8, 1);
}
TEST(CudaImageResize, BilinearFloat32) {
  WEFT_REQUIRE_CUDA();
  check_resize(kF32, 1);
}
TEST(CudaImageResize, BilinearFloat64) {
  WEFT_REQUIRE_CUDA();
  check_resize(kF64, 1);
}
TEST(CudaImageResize, NearestUint8) {
  WEFT_REQUIRE_CUDA();
  check_resize(kU8, 0);
}
TEST(CudaImageResize, NearestFloat32) {
  WEFT_REQUIRE_CUDA();
  check_resize(kF32, 0);
}

TEST(CudaImageResize, AddRequests) {
  WEFT_REQUIRE_CUDA();
  for (int interp : {0, 1}) {
    const AttrMap attrs = {{"size", "(9, 6)"}, {"interp", std::to_string(interp)}};
    // uint8: bilinear saturates, nearest wraps, as on the CPU.
    expect_cuda_matches_cpu("_image_resize", attrs, {image(Shape{2, 11, 13, 3}, 40, kU8)},
                            add_cmp(kU8, image(Shape{2, 6, 9, 3}, 41, kU8)));
    expect_cuda_matches_cpu("_image_resize", attrs, {image(Shape{11, 13, 3}, 42, kF32)},
                            add_cmp(kF32, image(Shape{6, 9, 3}, 43, kF32)));
  }
  // Equal sizes with kAdd go through the interpolation, not the copy.
  expect_cuda_matches_cpu("_image_resize", {{"size", "(13, 11)"}},
                          {image(Shape{11, 13, 3}, 44, kU8)},
                          add_cmp(kU8, image(Shape{11, 13, 3}, 45, kU8)));
}

}  // namespace
}  // namespace weft::testing
