// Reductions (sum, mean, max, min, argmax, argmin): values against a naive multi-index
// reference, MXNet's shape rules, gradients, parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
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
using testing::op_gradient;
using testing::run_op;
using testing::RunOptions;

constexpr DType kF64 = DType::kFloat64;

// Naive reduction: `axes` are normalised; kind is "sum", "mean", "max" or "min". MXNet shapes:
// reduced dims dropped (or kept as 1), (1,) when nothing is left.
HostTensor reduce_ref(const HostTensor& x, std::vector<int> axes, bool keepdims,
                      const std::string& kind) {
  const int n = x.shape.ndim();
  std::vector<bool> red(n, false);
  for (int a : axes) red[a] = true;
  Shape keep = x.shape;
  for (int d = 0; d < n; ++d)
    if (red[d]) keep[d] = 1;
  const double init = kind == "max" ? -INFINITY : kind == "min" ? INFINITY : 0.0;
  std::vector<double> acc(static_cast<size_t>(keep.size()), init);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = n - 1; d >= 0; --d) {
      const int64_t idx = rem % x.shape[d];
      rem /= x.shape[d];
      if (!red[d]) o += idx * mul;
      mul *= keep[d];
    }
    const double v = x.data[i];
    if (kind == "max")
      acc[o] = std::max(acc[o], v);
    else if (kind == "min")
      acc[o] = std::min(acc[o], v);
    else
      acc[o] += v;
  }
  if (kind == "mean") {
    const double count = static_cast<double>(x.size()) / static_cast<double>(keep.size());
    for (auto& v : acc) v /= count;
  }
  Shape out;
  if (keepdims) {
    out = keep;
  } else {
    std::vector<int64_t> dims;
    for (int d = 0; d < n; ++d)
      if (!red[d]) dims.push_back(x.shape[d]);
    if (dims.empty()) dims.push_back(1);
    out = Shape(dims);
  }
  return HostTensor::of(out, acc, x.dtype);
}

TEST(ReduceAxes, SumMeanMaxMinMatchReferenceForAxisVariants) {
  auto x = HostTensor::random({2, 3, 4, 5}, 3, -2, 2, kF64);
  struct Case {
    AttrMap attrs;
    std::vector<int> axes;
    bool keepdims;
  };
  const std::vector<Case> cases{
      {{}, {0, 1, 2, 3}, false},
      {{{"axis", "None"}, {"keepdims", "True"}}, {0, 1, 2, 3}, true},
      {{{"axis", "1"}}, {1}, false},
      {{{"axis", "(1,)"}}, {1}, false},
      {{{"axis", "-1"}, {"keepdims", "1"}}, {3}, true},
      {{{"axis", "(0, 2)"}}, {0, 2}, false},
      {{{"axis", "(3, -3)"}, {"keepdims", "True"}}, {1, 3}, true},
      {{{"axis", "(1, 2)"}, {"exclude", "True"}}, {0, 3}, false},
      {{{"axis", "0"}, {"exclude", "True"}, {"keepdims", "True"}}, {1, 2, 3}, true},
      {{{"axis", "(0, 1, 2, 3)"}}, {0, 1, 2, 3}, false},
  };
  for (const std::string kind : {"sum", "mean", "max", "min"}) {
    for (const auto& c : cases) {
      auto out = run_op(kind, c.attrs, {x})[0];
      EXPECT_TRUE(all_close(out, reduce_ref(x, c.axes, c.keepdims, kind), 1e-12, 1e-12))
          << kind << " axis=" << (c.attrs.count("axis") ? c.attrs.at("axis") : "-");
    }
  }
}

TEST(ReduceAxes, AliasesResolve) {
  EXPECT_EQ(&get_op("sum_axis"), &get_op("sum"));
  EXPECT_EQ(&get_op("max_axis"), &get_op("max"));
  EXPECT_EQ(&get_op("min_axis"), &get_op("min"));
}

TEST(ReduceAxes, ReducingEverythingGivesShapeOneAsMxnet) {
  auto [in, out] = infer_shapes("sum", {}, {Shape{3, 4}});
  EXPECT_EQ(out[0], (Shape{1}));
  auto [in2, out2] = infer_shapes("mean", {{"keepdims", "True"}}, {Shape{3, 4}});
  EXPECT_EQ(out2[0], (Shape{1, 1}));
  auto [in3, out3] = infer_shapes("max", {{"axis", "()"}}, {Shape{3, 4}});
  EXPECT_EQ(out3[0], (Shape{1}));
  auto [in4, out4] = infer_shapes("sum", {{"axis", "0"}}, {Shape{7}});
  EXPECT_EQ(out4[0], (Shape{1}));
}

TEST(ReduceAxes, ShapeInferenceFillsKeptInputDimsFromOutput) {
  auto [in, out] = infer_shapes("sum", {{"axis", "1"}}, {Shape{-1, 5, -1}}, {Shape{2, 3}});
  EXPECT_EQ(in[0], (Shape{2, 5, 3}));
  // keepdims: an unknown-rank input gets the output's rank and kept dims.
  auto [in2, out2] =
      infer_shapes("sum", {{"axis", "1"}, {"keepdims", "True"}}, {Shape{}}, {Shape{2, 1, 3}});
  EXPECT_EQ(in2[0], (Shape{2, -1, 3}));
  EXPECT_THROW(infer_shapes("sum", {{"axis", "1"}}, {Shape{2, 5, 3}}, {Shape{2, 5}}), ShapeError);
  // Unknown rank without keepdims: nothing known, no error.
  auto [in3, out3] = infer_shapes("mean", {{"axis", "1"}}, {Shape{}});
  EXPECT_FALSE(out3[0].rank_known());
}

TEST(ReduceAxes, BadAxesAndAttributesAreValueErrors) {
  EXPECT_THROW(infer_shapes("sum", {{"axis", "2"}}, {Shape{3, 4}}), ValueError);
  EXPECT_THROW(infer_shapes("sum", {{"axis", "-3"}}, {Shape{3, 4}}), ValueError);
  EXPECT_THROW(infer_shapes("sum", {{"axis", "(1, -1)"}}, {Shape{3, 4}}), ValueError);
  EXPECT_THROW(get_op("sum").make_attrs({{"keepdims", "perhaps"}}), ValueError);
  EXPECT_THROW(get_op("sum").make_attrs({{"axes", "1"}}), ValueError);
  EXPECT_THROW(get_op("mean").make_attrs({{"axis", "(1, x)"}}), ValueError);
}

TEST(ReduceAxes, GradientsMatchFiniteDifferences) {
  auto x =
      HostTensor::random({2, 3, 4}, 5, -1, 1, kF64);  // distinct values: max/min differentiable
  const std::vector<AttrMap> attrs{{},
                                   {{"axis", "1"}},
                                   {{"axis", "(0, 2)"}, {"keepdims", "True"}},
                                   {{"axis", "1"}, {"exclude", "True"}}};
  for (const char* op : {"sum", "mean", "max", "min"}) {
    for (const auto& a : attrs) {
      EXPECT_TRUE(check_gradient(op, a, {x}, {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7})) << op;
    }
  }
}

TEST(ReduceAxes, MaxGradientGoesToEveryTiedPosition) {
  auto x = HostTensor::of({2, 3}, {1, 5, 5, 2, 0, 2}, kF64);
  auto g = op_gradient("max", {{"axis", "1"}}, {x}, {HostTensor::of({2}, {10, 20}, kF64)});
  EXPECT_TRUE(all_close(g[0], HostTensor::of({2, 3}, {0, 10, 10, 20, 0, 20}, kF64)));
  auto gm = op_gradient("min", {{"axis", "0"}}, {x}, {HostTensor::of({3}, {1, 2, 3}, kF64)});
  EXPECT_TRUE(all_close(gm[0], HostTensor::of({2, 3}, {1, 0, 0, 0, 2, 3}, kF64)));
}

TEST(ReduceAxes, AddRequestAccumulates) {
  auto x = HostTensor::of({2, 2}, {1, 2, 3, 4});
  RunOptions o;
  o.req = {OpReq::kAdd};
  o.initial_outputs = {HostTensor::of({2}, {10, 20})};
  EXPECT_TRUE(all_close(run_op("sum", {{"axis", "1"}}, {x}, o)[0], HostTensor::of({2}, {13, 27})));
  EXPECT_TRUE(all_close(run_op("mean", {{"axis", "0"}}, {x}, o)[0], HostTensor::of({2}, {12, 23})));
  EXPECT_TRUE(all_close(run_op("max", {{"axis", "0"}}, {x}, o)[0], HostTensor::of({2}, {13, 24})));
}

TEST(ReduceAxes, IntegerInputsReduceInTheirType) {
  auto x = HostTensor::of({2, 3}, {1, -2, 3, 4, 5, -6}, DType::kInt32);
  auto s = run_op("sum", {{"axis", "1"}}, {x})[0];
  EXPECT_EQ(s.dtype, DType::kInt32);
  EXPECT_TRUE(all_close(s, HostTensor::of({2}, {2, 3}, DType::kInt32)));
  EXPECT_TRUE(all_close(run_op("min", {}, {x})[0], HostTensor::of({1}, {-6}, DType::kInt32)));
}

TEST(ReduceAxes, LargeInputsRunInParallelCorrectly) {
  auto x = HostTensor::random({300, 256}, 8);
  RunOptions o;
  o.num_threads = 2;
  for (int axis : {0, 1}) {
    for (const std::string kind : {"sum", "max"}) {
      auto out = run_op(kind, {{"axis", std::to_string(axis)}}, {x}, o)[0];
      EXPECT_TRUE(all_close(out, reduce_ref(x, {axis}, false, kind), 1e-4, 1e-4)) << kind << axis;
    }
  }
  auto x3 = HostTensor::random({64, 40, 32}, 9);
  auto out = run_op("sum", {{"axis", "(0, 2)"}}, {x3}, o)[0];
  EXPECT_TRUE(all_close(out, reduce_ref(x3, {0, 2}, false, "sum"), 1e-4, 1e-4));
  out = run_op("mean", {{"axis", "1"}}, {x3}, o)[0];
  EXPECT_TRUE(all_close(out, reduce_ref(x3, {1}, false, "mean"), 1e-4, 1e-5));
}

// ---- argmax / argmin --------------------------------------------------------------------------

TEST(ReduceArgmax, FindsFirstExtremeAlongAxisInInputType) {
  auto x = HostTensor::of({2, 3}, {1, 7, 7, 9, 0, 2});
  auto a1 = run_op("argmax", {{"axis", "1"}}, {x})[0];
  EXPECT_EQ(a1.dtype, DType::kFloat32);
  EXPECT_TRUE(all_close(a1, HostTensor::of({2}, {1, 0})));
  EXPECT_TRUE(all_close(run_op("argmax", {{"axis", "0"}, {"keepdims", "True"}}, {x})[0],
                        HostTensor::of({1, 3}, {1, 0, 0})));
  EXPECT_TRUE(all_close(run_op("argmax", {{"axis", "-1"}}, {x})[0], HostTensor::of({2}, {1, 0})));
  EXPECT_TRUE(all_close(run_op("argmax", {}, {x})[0], HostTensor::of({1}, {3})));  // flattened
  EXPECT_TRUE(all_close(run_op("argmin", {{"axis", "1"}}, {x})[0], HostTensor::of({2}, {0, 1})));
  auto x3 = HostTensor::random({2, 4, 3}, 4, -1, 1, kF64);
  auto a3 = run_op("argmax", {{"axis", "1"}}, {x3})[0];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      int best = 0;
      for (int k = 1; k < 4; ++k)
        if (x3.at({i, k, j}) > x3.at({i, best, j})) best = k;
      EXPECT_EQ(a3.at({i, j}), best);
    }
  }
}

TEST(ReduceArgmax, ShapesNoGradientAndBadAxis) {
  auto [in, out] = infer_shapes("argmax", {{"axis", "1"}}, {Shape{2, 3, 4}});
  EXPECT_EQ(out[0], (Shape{2, 4}));
  auto [in2, out2] = infer_shapes("argmax", {{"keepdims", "True"}}, {Shape{2, 3}});
  EXPECT_EQ(out2[0], (Shape{1, 1}));
  EXPECT_THROW(infer_shapes("argmax", {{"axis", "3"}}, {Shape{2, 3, 4}}), ValueError);
  EXPECT_THROW(infer_shapes("argmax", {{"axis", "1"}}, {Shape{2, 3, 4}}, {Shape{2, 3}}),
               ShapeError);
  EXPECT_THROW(get_op("argmax").make_attrs({{"axis", "(1, 2)"}}), ValueError);
  auto g = op_gradient("argmax", {{"axis", "0"}}, {HostTensor::random({3}, 1)},
                       {HostTensor::random({1}, 2)});
  EXPECT_TRUE(g[0].empty());
}

}  // namespace
}  // namespace weft
