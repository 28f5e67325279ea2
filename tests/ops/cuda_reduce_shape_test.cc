// CUDA kernels of the reduce, shape and indexing families against the CPU kernels: reductions over
// every axis pattern (inner rows, outer columns, split long rows), argmax/argmin, the softmax
// family (axis, temperature, lengths, dtype), the reshape-likes, transpose (tiled and general),
// slice, Concat, stack, SliceChannel, Crop, tile, broadcast_to, Embedding, pick, one_hot, with
// their gradients; odd sizes, kAdd on a few ops, float16/bfloat16 with loose tolerances. Every
// test skips without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/ops/op_harness.h"

namespace weft::testing {
namespace {

constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;
constexpr DType kF16 = DType::kFloat16;
constexpr DType kBF16 = DType::kBFloat16;

HostTensor rnd(Shape s, uint64_t seed, DType dt = kF32, double lo = -1.0, double hi = 1.0) {
  return HostTensor::random(std::move(s), seed, lo, hi, dt);
}

CudaCompare f32_cmp() { return cuda_tolerance(1e-5, 1e-5); }
CudaCompare f64_cmp() { return cuda_tolerance(1e-11, 1e-12); }
CudaCompare half_cmp(DType dt) { return cuda_half(dt, 5e-3, 3e-2); }
CudaCompare exact_cmp() { return cuda_exact(); }
/// Forward only, outputs accumulated into `initial`.
CudaCompare add_cmp(std::vector<HostTensor> initial) {
  return cuda_add_into(std::move(initial), f32_cmp());
}

// ---- reductions -------------------------------------------------------------------------------

const std::vector<AttrMap> kReduceAttrs = {
    {},
    {{"axis", "1"}},
    {{"axis", "(0, 2)"}},
    {{"axis", "-1"}, {"keepdims", "True"}},
    {{"axis", "0"}},
    {{"axis", "(1,)"}, {"exclude", "True"}},
    {{"axis", "()"}, {"keepdims", "True"}},
};

TEST(CudaReduce, SumMeanMaxMinEveryAxisPattern) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({7, 13, 5}, 1);
  for (const char* op : {"sum", "mean", "max", "min"}) {
    for (const auto& attrs : kReduceAttrs) {
      SCOPED_TRACE(op);
      expect_cuda_matches_cpu(op, attrs, {x}, f32_cmp());
    }
  }
}

TEST(CudaReduce, LongRowsAndColumnsSplitIntoChunks) {
  WEFT_REQUIRE_CUDA();
  // Sums of 10^5 float32 terms in different orders differ by ~1e-3 absolute.
  CudaCompare c = f32_cmp();
  c.rtol = 1e-4;
  c.atol = 2e-2;
  const HostTensor rows = rnd({3, 70001}, 2);
  const HostTensor cols = rnd({70001, 3}, 3);
  for (const char* op : {"sum", "mean", "max"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {{"axis", "1"}}, {rows}, c);
    expect_cuda_matches_cpu(op, {{"axis", "0"}}, {cols}, c);
    expect_cuda_matches_cpu(op, {}, {rows}, c);
  }
  // Many outputs with short rows, and a size-1 reduced axis.
  expect_cuda_matches_cpu("sum", {{"axis", "2"}}, {rnd({257, 129, 3}, 4)}, c);
  expect_cuda_matches_cpu("max", {{"axis", "1"}}, {rnd({9, 1, 11}, 5)}, c);
}

TEST(CudaReduce, OtherDtypes) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x64 = rnd({7, 13, 5}, 6, kF64);
  for (const char* op : {"sum", "mean", "max", "min"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {{"axis", "(0, 2)"}}, {x64}, f64_cmp());
    for (DType dt : {kF16, kBF16}) {
      expect_cuda_matches_cpu(op, {{"axis", "1"}}, {rnd({7, 13, 5}, 7)}, half_cmp(dt));
      expect_cuda_matches_cpu(op, {{"axis", "-1"}}, {rnd({7, 13, 5}, 8)}, half_cmp(dt));
    }
  }
  // Integers: the CPU's integer arithmetic (mean divides with truncation).
  const HostTensor xi = rnd({7, 13, 5}, 9, DType::kInt32, -50, 50);
  for (const char* op : {"sum", "mean", "max", "min"})
    expect_cuda_matches_cpu(op, {{"axis", "1"}}, {xi}, exact_cmp());
}

TEST(CudaReduce, AccumulateAndNull) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({7, 13, 5}, 10);
  expect_cuda_matches_cpu("sum", {{"axis", "1"}}, {x}, add_cmp({rnd({7, 5}, 11)}));
  expect_cuda_matches_cpu("max", {{"axis", "0"}}, {x}, add_cmp({rnd({13, 5}, 12)}));
  expect_cuda_matches_cpu("mean", {}, {x}, add_cmp({rnd({1}, 13)}));
  CudaCompare c = f32_cmp();
  c.gradients = false;
  c.options.req = {OpReq::kNull};
  c.options.initial_outputs = {rnd({7, 5}, 14)};
  expect_cuda_matches_cpu("sum", {{"axis", "1"}}, {x}, c);
}

TEST(CudaReduce, ArgmaxArgmin) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({7, 13, 5}, 15);
  const HostTensor wide = rnd({5, 3001}, 16);
  for (const char* op : {"argmax", "argmin"}) {
    SCOPED_TRACE(op);
    for (const AttrMap& attrs : std::vector<AttrMap>{
             {}, {{"axis", "1"}}, {{"axis", "-1"}}, {{"axis", "0"}, {"keepdims", "True"}}}) {
      expect_cuda_matches_cpu(op, attrs, {x}, exact_cmp());
    }
    expect_cuda_matches_cpu(op, {{"axis", "1"}}, {wide}, exact_cmp());
    expect_cuda_matches_cpu(op, {}, {wide}, exact_cmp());
    // Ties: the first position wins, as on the CPU.
    expect_cuda_matches_cpu(op, {{"axis", "1"}}, {HostTensor::of({2, 4}, {1, 3, 3, 0, 2, 2, 5, 5})},
                            exact_cmp());
    expect_cuda_matches_cpu(op, {{"axis", "1"}}, {rnd({7, 13, 5}, 17, kF64)}, exact_cmp());
  }
}

// ---- softmax ----------------------------------------------------------------------------------

TEST(CudaSoftmax, AxesTemperatureDtype) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({7, 13, 5}, 20, kF32, -3, 3);
  for (const char* op : {"softmax", "log_softmax"}) {
    SCOPED_TRACE(op);
    for (const AttrMap& attrs : std::vector<AttrMap>{{},
                                                     {{"axis", "1"}},
                                                     {{"axis", "0"}},
                                                     {{"axis", "-1"}, {"temperature", "2.5"}},
                                                     {{"axis", "1"}, {"temperature", "0.5"}}}) {
      expect_cuda_matches_cpu(op, attrs, {x}, f32_cmp());
    }
    expect_cuda_matches_cpu(op, {}, {rnd({3, 5000}, 21, kF32, -5, 5)}, f32_cmp());
    expect_cuda_matches_cpu(op, {{"axis", "1"}}, {rnd({7, 13, 5}, 22, kF64)}, f64_cmp());
    expect_cuda_matches_cpu(op, {{"dtype", "float64"}}, {x}, f32_cmp());
    for (DType dt : {kF16, kBF16}) {
      expect_cuda_matches_cpu(op, {}, {x}, half_cmp(dt));
      expect_cuda_matches_cpu(op, {{"axis", "1"}}, {x}, half_cmp(dt));
    }
  }
}

TEST(CudaSoftmax, LengthsAndAccumulate) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({4, 9}, 23, kF32, -2, 2);
  const HostTensor len = HostTensor::of({4}, {9, 3, 0, 12}, DType::kInt32);
  for (const char* op : {"softmax", "log_softmax"}) {
    SCOPED_TRACE(op);
    expect_cuda_matches_cpu(op, {{"use_length", "True"}}, {x, len}, f32_cmp());
    const HostTensor x3 = rnd({3, 6, 4}, 24);
    const HostTensor len3 =
        HostTensor::of({3, 4}, {6, 1, 2, 3, 4, 5, 6, 0, 2, 2, 5, 6}, DType::kInt32);
    expect_cuda_matches_cpu(op, {{"axis", "1"}, {"use_length", "True"}}, {x3, len3}, f32_cmp());
    expect_cuda_matches_cpu(op, {}, {x}, add_cmp({rnd({4, 9}, 25)}));
  }
  expect_cuda_matches_cpu("_backward_softmax", {},
                          {rnd({4, 9}, 26), rnd({4, 9}, 27), rnd({4, 9}, 28, kF32, 0, 1)},
                          add_cmp({rnd({4, 9}, 29)}));
}

TEST(CudaSoftmax, SoftmaxActivation) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({2, 4, 3, 5}, 30, kF32, -2, 2);
  expect_cuda_matches_cpu("SoftmaxActivation", {}, {x}, f32_cmp());
  expect_cuda_matches_cpu("SoftmaxActivation", {{"mode", "channel"}}, {x}, f32_cmp());
  expect_cuda_matches_cpu("SoftmaxActivation", {{"mode", "channel"}}, {x}, half_cmp(kF16));
}

// ---- shape ops --------------------------------------------------------------------------------

TEST(CudaShape, ReshapeLikes) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({7, 13, 5}, 40);
  expect_cuda_matches_cpu("Reshape", {{"shape", "(5, -1)"}}, {x}, exact_cmp());
  expect_cuda_matches_cpu("Reshape", {{"shape", "(5, -1)"}}, {x}, f32_cmp());
  expect_cuda_matches_cpu("Flatten", {}, {x}, f32_cmp());
  expect_cuda_matches_cpu("expand_dims", {{"axis", "1"}}, {x}, f32_cmp());
  expect_cuda_matches_cpu("squeeze", {}, {rnd({7, 1, 5}, 41)}, f32_cmp());
  expect_cuda_matches_cpu("Flatten", {}, {x}, add_cmp({rnd({7, 65}, 42)}));
  expect_cuda_matches_cpu("Reshape", {{"shape", "(-1,)"}}, {rnd({7, 13, 5}, 43, kF16)},
                          half_cmp(kF16));
  expect_cuda_matches_cpu("Reshape", {{"shape", "(-1,)"}}, {rnd({3, 4}, 44, DType::kInt32, -9, 9)},
                          exact_cmp());
}

TEST(CudaShape, Transpose) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("transpose", {}, {rnd({67, 45}, 50)}, f32_cmp());
  expect_cuda_matches_cpu("transpose", {{"axes", "(0, 2, 1)"}}, {rnd({3, 33, 70}, 51)}, f32_cmp());
  expect_cuda_matches_cpu("transpose", {{"axes", "(2, 0, 1)"}}, {rnd({7, 13, 5}, 52)}, f32_cmp());
  expect_cuda_matches_cpu("transpose", {{"axes", "(1, 3, 0, 2)"}}, {rnd({2, 3, 4, 5}, 53)},
                          f32_cmp());
  expect_cuda_matches_cpu("transpose", {}, {rnd({67, 45}, 54, kF64)}, f64_cmp());
  expect_cuda_matches_cpu("transpose", {}, {rnd({67, 45}, 55)}, half_cmp(kBF16));
  expect_cuda_matches_cpu("transpose", {}, {rnd({67, 45}, 56)}, add_cmp({rnd({45, 67}, 57)}));
  expect_cuda_matches_cpu("transpose", {}, {rnd({5, 6}, 58, DType::kInt8, -9, 9)}, exact_cmp());
}

TEST(CudaShape, SliceAndSliceAxis) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({7, 13, 5}, 60);
  expect_cuda_matches_cpu(
      "slice", {{"begin", "(1, None, 4)"}, {"end", "(5, None, 0)"}, {"step", "(1, None, -2)"}}, {x},
      f32_cmp());
  expect_cuda_matches_cpu("slice", {{"begin", "(2,)"}, {"end", "(-1,)"}}, {x}, f32_cmp());
  expect_cuda_matches_cpu(
      "slice", {{"begin", "(None, 1)"}, {"end", "(None, 12)"}, {"step", "(2, 3)"}}, {x}, f32_cmp());
  expect_cuda_matches_cpu("slice_axis", {{"axis", "1"}, {"begin", "2"}, {"end", "9"}}, {x},
                          f32_cmp());
  expect_cuda_matches_cpu("slice_axis", {{"axis", "-1"}, {"begin", "-3"}, {"end", "None"}}, {x},
                          f32_cmp());
  expect_cuda_matches_cpu("slice_axis", {{"axis", "0"}, {"begin", "1"}, {"end", "4"}}, {x},
                          add_cmp({rnd({3, 13, 5}, 61)}));
  expect_cuda_matches_cpu("slice_axis", {{"axis", "0"}, {"begin", "1"}, {"end", "4"}}, {x},
                          half_cmp(kF16));
}

TEST(CudaShape, ConcatStackSplit) {
  WEFT_REQUIRE_CUDA();
  const HostTensor a = rnd({7, 3, 5}, 70), b = rnd({7, 13, 5}, 71), c = rnd({7, 1, 5}, 72);
  expect_cuda_matches_cpu("Concat", {{"num_args", "3"}, {"dim", "1"}}, {a, b, c}, f32_cmp());
  expect_cuda_matches_cpu("Concat", {{"num_args", "2"}, {"dim", "0"}}, {rnd({2, 13, 5}, 73), b},
                          f32_cmp());
  expect_cuda_matches_cpu("Concat", {{"num_args", "2"}, {"dim", "-1"}}, {rnd({7, 13, 2}, 74), b},
                          add_cmp({rnd({7, 13, 7}, 75)}));
  expect_cuda_matches_cpu("Concat", {{"num_args", "3"}, {"dim", "1"}}, {a, b, c}, half_cmp(kF16));
  const HostTensor s0 = rnd({7, 13, 5}, 76), s1 = rnd({7, 13, 5}, 77), s2 = rnd({7, 13, 5}, 78);
  for (const char* axis : {"0", "1", "-1"})
    expect_cuda_matches_cpu("stack", {{"num_args", "3"}, {"axis", axis}}, {s0, s1, s2}, f32_cmp());
  expect_cuda_matches_cpu("SliceChannel", {{"num_outputs", "3"}, {"axis", "1"}},
                          {rnd({7, 9, 5}, 79)}, f32_cmp());
  expect_cuda_matches_cpu("SliceChannel",
                          {{"num_outputs", "3"}, {"axis", "1"}, {"squeeze_axis", "True"}},
                          {rnd({4, 3, 5}, 80)}, f32_cmp());
  expect_cuda_matches_cpu("SliceChannel", {{"num_outputs", "2"}, {"axis", "-1"}},
                          {rnd({3, 5, 8}, 81)}, f32_cmp());
}

TEST(CudaShape, TileBroadcastTo) {
  WEFT_REQUIRE_CUDA();
  expect_cuda_matches_cpu("tile", {{"reps", "(2, 1, 3)"}}, {rnd({3, 4, 5}, 90)}, f32_cmp());
  expect_cuda_matches_cpu("tile", {{"reps", "(2, 3)"}}, {rnd({7, 13, 5}, 91)}, f32_cmp());
  expect_cuda_matches_cpu("tile", {{"reps", "(2, 2, 3)"}}, {rnd({4, 5}, 92)}, f32_cmp());
  expect_cuda_matches_cpu("tile", {{"reps", "(2, 3)"}}, {rnd({4, 5}, 93)}, half_cmp(kF16));
  expect_cuda_matches_cpu("broadcast_to", {{"shape", "(7, 13, 5)"}}, {rnd({7, 1, 5}, 94)},
                          f32_cmp());
  expect_cuda_matches_cpu("broadcast_to", {{"shape", "(7, 13, 5)"}}, {rnd({1, 13, 1}, 95)},
                          f32_cmp());
  expect_cuda_matches_cpu("broadcast_to", {{"shape", "(0, 6, 0)"}}, {rnd({7, 1, 5}, 96)},
                          add_cmp({rnd({7, 6, 5}, 97)}));
  expect_cuda_matches_cpu("broadcast_to", {{"shape", "(4, 3000)"}}, {rnd({1, 3000}, 98)},
                          half_cmp(kBF16));
}

TEST(CudaShape, CropAndLayoutReorder) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({2, 3, 7, 9}, 100);
  expect_cuda_matches_cpu("Crop", {{"num_args", "1"}, {"h_w", "(3, 4)"}, {"offset", "(1, 2)"}}, {x},
                          f32_cmp());
  expect_cuda_matches_cpu("Crop", {{"num_args", "1"}, {"h_w", "(4, 5)"}, {"center_crop", "True"}},
                          {x}, f32_cmp());
  expect_cuda_matches_cpu("Crop", {{"num_args", "2"}}, {x, rnd({2, 3, 5, 6}, 101)}, f32_cmp());
  expect_cuda_matches_cpu("_layout_reorder", {}, {x}, exact_cmp());
}

// ---- indexing ---------------------------------------------------------------------------------

TEST(CudaIndexing, Embedding) {
  WEFT_REQUIRE_CUDA();
  // Repeated rows, a negative, a fraction and out-of-range indices (clipped).
  const HostTensor idx = HostTensor::of({3, 4}, {0, 5, 5, 2, 9, -1, 3.7, 5, 1, 0, 12, 2});
  const HostTensor w = rnd({10, 7}, 110);
  const AttrMap attrs{{"input_dim", "10"}, {"output_dim", "7"}};
  expect_cuda_matches_cpu("Embedding", attrs, {idx, w}, f32_cmp());
  expect_cuda_matches_cpu("Embedding", attrs, {idx, w}, add_cmp({rnd({3, 4, 7}, 111)}));
  const HostTensor idx_i = HostTensor::of({5}, {3, 3, 0, 9, 3}, DType::kInt32);
  expect_cuda_matches_cpu("Embedding", attrs, {idx_i, rnd({10, 7}, 112, kF64)}, f64_cmp());
  CudaCompare h = half_cmp(kF16);
  expect_cuda_matches_cpu("Embedding", attrs, {idx, w}, h);
  // Many repeats of one row: the atomics must all land.
  std::vector<double> many(2000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(i % 3);
  CudaCompare c = f32_cmp();
  c.rtol = 1e-4;
  c.atol = 1e-4;
  expect_cuda_matches_cpu("Embedding", {{"input_dim", "4"}, {"output_dim", "33"}},
                          {HostTensor::of({2000}, many), rnd({4, 33}, 113)}, c);
}

TEST(CudaIndexing, Pick) {
  WEFT_REQUIRE_CUDA();
  const HostTensor x = rnd({4, 6, 3}, 120);
  const HostTensor idx = HostTensor::of({4, 3}, {0, 5, 7, -2, 3, 1, 2, 2, 6, 0, -7, 4});
  expect_cuda_matches_cpu("pick", {{"axis", "1"}}, {x, idx}, f32_cmp());
  expect_cuda_matches_cpu("pick", {{"axis", "1"}, {"mode", "wrap"}}, {x, idx}, f32_cmp());
  const HostTensor idx_k = HostTensor::of({4, 1, 3}, {0, 5, 7, -2, 3, 1, 2, 2, 6, 0, -7, 4});
  expect_cuda_matches_cpu("pick", {{"axis", "1"}, {"keepdims", "True"}}, {x, idx_k}, f32_cmp());
  const HostTensor m = rnd({5, 8}, 121);
  const HostTensor last = HostTensor::of({5}, {7, 0, 3, 9, 2}, DType::kInt32);
  expect_cuda_matches_cpu("pick", {}, {m, last}, f32_cmp());
  expect_cuda_matches_cpu("pick", {}, {m, last}, add_cmp({rnd({5}, 122)}));
  expect_cuda_matches_cpu("pick", {{"axis", "None"}}, {m, HostTensor::of({1}, {17})}, f32_cmp());
  expect_cuda_matches_cpu("pick", {}, {m, last}, half_cmp(kBF16));
}

TEST(CudaIndexing, OneHot) {
  WEFT_REQUIRE_CUDA();
  const HostTensor idx = HostTensor::of({2, 4}, {0, 5, -1, 7, 2.9, 3, 3, 1});
  expect_cuda_matches_cpu("one_hot", {{"depth", "6"}}, {idx}, exact_cmp());
  expect_cuda_matches_cpu("one_hot", {{"depth", "6"}, {"on_value", "2.5"}, {"off_value", "-1"}},
                          {idx}, exact_cmp());
  expect_cuda_matches_cpu("one_hot", {{"depth", "6"}, {"dtype", "int32"}}, {idx}, exact_cmp());
  expect_cuda_matches_cpu("one_hot", {{"depth", "6"}}, {idx}, add_cmp({rnd({2, 4, 6}, 130)}));
}

}  // namespace
}  // namespace weft::testing
