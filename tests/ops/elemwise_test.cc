// Elementwise ops: forward values against naive references, gradients against finite
// differences, shape/type inference, parameters and in-place attributes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

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
using testing::RunOptions;

constexpr DType kF64 = DType::kFloat64;

HostTensor map_ref(const HostTensor& a, const std::function<double(double)>& f) {
  HostTensor r = a;
  for (auto& v : r.data) v = f(v);
  return r;
}

HostTensor zip_ref(const HostTensor& a, const HostTensor& b,
                   const std::function<double(double, double)>& f) {
  HostTensor r = a;
  for (size_t i = 0; i < r.data.size(); ++i) r.data[i] = f(a.data[i], b.data[i]);
  return r;
}

// Naive NumPy broadcasting via multi-indices.
HostTensor broadcast_ref(const HostTensor& a, const HostTensor& b,
                         const std::function<double(double, double)>& f) {
  const int n = std::max(a.shape.ndim(), b.shape.ndim());
  std::vector<int64_t> os(n);
  auto dim = [n](const Shape& s, int d) {
    return d - (n - s.ndim()) < 0 ? int64_t{1} : s[d - (n - s.ndim())];
  };
  for (int d = 0; d < n; ++d) os[d] = std::max(dim(a.shape, d), dim(b.shape, d));
  HostTensor r;
  r.shape = Shape(os);
  r.dtype = a.dtype;
  r.data.resize(static_cast<size_t>(r.shape.size()));
  for (int64_t i = 0; i < r.shape.size(); ++i) {
    std::vector<int64_t> idx(n);
    int64_t rem = i;
    for (int d = n - 1; d >= 0; --d) {
      idx[d] = rem % os[d];
      rem /= os[d];
    }
    auto flat = [&](const Shape& s) {
      int64_t f = 0;
      for (int d = 0; d < n; ++d) {
        const int sd = d - (n - s.ndim());
        if (sd < 0) continue;
        f = f * s[sd] + (s[sd] == 1 ? 0 : idx[d]);
      }
      return f;
    };
    r.data[i] = f(a.data[flat(a.shape)], b.data[flat(b.shape)]);
  }
  return r;
}

struct BinaryCase {
  std::string op;
  std::function<double(double, double)> ref;
};

std::vector<BinaryCase> arith_cases() {
  return {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"power", [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](double a, double b) { return a > b ? a : b; }},
      {"minimum", [](double a, double b) { return a < b ? a : b; }},
  };
}
std::vector<BinaryCase> compare_cases() {
  return {
      {"equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
      {"not_equal", [](double a, double b) { return a != b ? 1.0 : 0.0; }},
      {"greater", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
      {"greater_equal", [](double a, double b) { return a >= b ? 1.0 : 0.0; }},
      {"lesser", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
      {"lesser_equal", [](double a, double b) { return a <= b ? 1.0 : 0.0; }},
  };
}

std::string elem_name(const std::string& base) {
  if (base == "add" || base == "sub" || base == "mul" || base == "div") return "elemwise_" + base;
  return "_" + base;
}

// Positive inputs (power needs them); a few equal pairs so comparisons see ties.
std::pair<HostTensor, HostTensor> binary_inputs(Shape sa, Shape sb, DType t = kF64) {
  HostTensor a = HostTensor::random(sa, 11, 0.5, 2.0, t);
  HostTensor b = HostTensor::random(sb, 12, 0.5, 2.0, t);
  if (a.shape == b.shape) b.data[0] = a.data[0];
  return {a, b};
}

// ---- the ops the rest of the system relies on first --------------------------------------------

TEST(ElemwiseAddN, SumsAllInputsAndAliasResolves) {
  auto a = HostTensor::random({2, 3}, 1), b = HostTensor::random({2, 3}, 2),
       c = HostTensor::random({2, 3}, 3);
  HostTensor expected = a;
  for (int i = 0; i < 6; ++i) expected.data[i] = a.data[i] + b.data[i] + c.data[i];
  EXPECT_TRUE(all_close(run_op("add_n", {{"num_args", "3"}}, {a, b, c})[0], expected));
  EXPECT_TRUE(all_close(run_op("ElementWiseSum", {{"num_args", "3"}}, {a, b, c})[0], expected));
  EXPECT_TRUE(all_close(run_op("add_n", {{"num_args", "1"}}, {a})[0], a));
  EXPECT_EQ(&get_op("ElementWiseSum"), &get_op("add_n"));
}

TEST(ElemwiseAddN, AccumulatesWithAddRequest) {
  auto a = HostTensor::of({3}, {1, 2, 3}), b = HostTensor::of({3}, {10, 20, 30});
  RunOptions o;
  o.req = {OpReq::kAdd};
  o.initial_outputs = {HostTensor::of({3}, {100, 100, 100})};
  EXPECT_TRUE(all_close(run_op("add_n", {{"num_args", "2"}}, {a, b}, o)[0],
                        HostTensor::of({3}, {111, 122, 133})));
}

TEST(ElemwiseAddN, GradientCopiesHeadToEveryInput) {
  auto a = HostTensor::random({2, 2}, 1, -1, 1, kF64),
       b = HostTensor::random({2, 2}, 2, -1, 1, kF64);
  EXPECT_TRUE(check_gradient("add_n", {{"num_args", "2"}}, {a, b}));
}

TEST(ElemwiseAddN, RejectsMissingOrZeroNumArgsAndInfersShapes) {
  EXPECT_THROW(get_op("add_n").make_attrs({}), ValueError);
  EXPECT_THROW(get_op("add_n").make_attrs({{"num_args", "0"}}), ValueError);
  auto [in, out] =
      infer_shapes("add_n", {{"num_args", "3"}}, {Shape{}, Shape{2, -1}, Shape{}}, {Shape{-1, 5}});
  EXPECT_EQ(in[0], (Shape{2, 5}));
  EXPECT_EQ(in[2], (Shape{2, 5}));
  EXPECT_EQ(out[0], (Shape{2, 5}));
  EXPECT_THROW(infer_shapes("add_n", {{"num_args", "2"}}, {Shape{2, 3}, Shape{3, 2}}), ShapeError);
}

TEST(ElemwiseCopy, CopiesAndIdentityAliasResolves) {
  auto a = HostTensor::random({4}, 5);
  EXPECT_TRUE(all_close(run_op("_copy", {}, {a})[0], a));
  EXPECT_TRUE(all_close(run_op("identity", {}, {a})[0], a));
  auto i = HostTensor::of({3}, {1, -2, 7}, DType::kInt32);
  EXPECT_TRUE(all_close(run_op("_copy", {}, {i})[0], i));
  EXPECT_TRUE(check_gradient("_copy", {}, {HostTensor::random({3}, 1, -1, 1, kF64)}));
  const Op& op = get_op("_copy");
  OpAttrs attrs = op.make_attrs({});
  ASSERT_TRUE(op.attr<FInplaceIdentity>());
  EXPECT_EQ(op.attr<FInplaceIdentity>()(attrs), std::vector<bool>{true});
}

TEST(ElemwiseLike, ZerosLikeAndOnesLikeKeepShapeAndType) {
  auto x = HostTensor::of({2, 2}, {1, 2, 3, 4}, DType::kInt32);
  auto z = run_op("zeros_like", {}, {x})[0];
  auto o = run_op("ones_like", {}, {x})[0];
  EXPECT_EQ(z.dtype, DType::kInt32);
  EXPECT_TRUE(all_close(z, HostTensor::of({2, 2}, {0, 0, 0, 0}, DType::kInt32)));
  EXPECT_TRUE(all_close(o, HostTensor::of({2, 2}, {1, 1, 1, 1}, DType::kInt32)));
  auto g = op_gradient("ones_like", {}, {HostTensor::random({2}, 1)}, {HostTensor::random({2}, 2)});
  EXPECT_TRUE(g[0].empty());
}

// ---- binary, identical shapes -----------------------------------------------------------------

TEST(ElemwiseBinary, ArithmeticMatchesReference) {
  for (const auto& c : arith_cases()) {
    auto [a, b] = binary_inputs({3, 4}, {3, 4});
    auto out = run_op(elem_name(c.op), {}, {a, b});
    EXPECT_TRUE(all_close(out[0], zip_ref(a, b, c.ref), 1e-12, 1e-12)) << c.op;
  }
}

TEST(ElemwiseBinary, ComparisonsGiveOneOrZeroInInputType) {
  auto a = HostTensor::of({4}, {1, 2, 3, 4}), b = HostTensor::of({4}, {1, 3, 2, 4});
  for (const auto& c : compare_cases()) {
    auto out = run_op("_" + c.op, {}, {a, b});
    EXPECT_EQ(out[0].dtype, DType::kFloat32);
    EXPECT_TRUE(all_close(out[0], zip_ref(a, b, c.ref))) << c.op;
    auto g = op_gradient("_" + c.op, {}, {a, b}, {HostTensor::random({4}, 3)});
    EXPECT_TRUE(g[0].empty() && g[1].empty()) << c.op;
  }
}

TEST(ElemwiseBinary, GradientsMatchFiniteDifferences) {
  for (const auto& c : arith_cases()) {
    auto [a, b] = binary_inputs({2, 3}, {2, 3});
    b.data[0] += 0.3;  // no ties: max/min are not differentiable there
    EXPECT_TRUE(
        check_gradient(elem_name(c.op), {}, {a, b}, {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7}))
        << c.op;
  }
}

TEST(ElemwiseBinary, MaximumTiesSendGradientToLhs) {
  auto a = HostTensor::of({2}, {1, 2}, kF64), b = HostTensor::of({2}, {1, 3}, kF64);
  auto g = op_gradient("_maximum", {}, {a, b}, {HostTensor::of({2}, {5, 7}, kF64)});
  EXPECT_TRUE(all_close(g[0], HostTensor::of({2}, {5, 0}, kF64)));
  EXPECT_TRUE(all_close(g[1], HostTensor::of({2}, {0, 7}, kF64)));
}

TEST(ElemwiseBinary, LegacyAliasesResolve) {
  const std::vector<std::pair<std::string, std::string>> aliases{
      {"_Plus", "elemwise_add"},  {"_plus", "elemwise_add"},  {"_add", "elemwise_add"},
      {"_Minus", "elemwise_sub"}, {"_minus", "elemwise_sub"}, {"_sub", "elemwise_sub"},
      {"_Mul", "elemwise_mul"},   {"_mul", "elemwise_mul"},   {"_Div", "elemwise_div"},
      {"_div", "elemwise_div"},   {"_Power", "_power"},       {"_Maximum", "_maximum"},
      {"_Minimum", "_minimum"}};
  for (const auto& [alias, name] : aliases) EXPECT_EQ(&get_op(alias), &get_op(name)) << alias;
}

TEST(ElemwiseBinary, IntegerInputsComputeInTheirType) {
  auto a = HostTensor::of({4}, {7, -7, 5, 3}, DType::kInt32),
       b = HostTensor::of({4}, {2, 2, 0, -1}, DType::kInt32);
  auto q = run_op("elemwise_div", {}, {a, b})[0];
  EXPECT_EQ(q.dtype, DType::kInt32);
  EXPECT_TRUE(
      all_close(q, HostTensor::of({4}, {3, -3, 0, -3}, DType::kInt32)));  // x/0 gives 0, no trap
  EXPECT_TRUE(all_close(run_op("elemwise_mul", {}, {a, b})[0],
                        HostTensor::of({4}, {14, -14, 0, -3}, DType::kInt32)));
}

TEST(ElemwiseBinary, ShapeInferenceFillsInputsFromOutputAndRejectsMismatch) {
  auto [in, out] = infer_shapes("elemwise_mul", {}, {Shape{}, Shape{2, -1}}, {Shape{-1, 4}});
  EXPECT_EQ(in[0], (Shape{2, 4}));
  EXPECT_EQ(in[1], (Shape{2, 4}));
  EXPECT_EQ(out[0], (Shape{2, 4}));
  EXPECT_THROW(infer_shapes("elemwise_add", {}, {Shape{2, 3}, Shape{2, 4}}), ShapeError);
  EXPECT_THROW(infer_shapes("_maximum", {}, {Shape{2, 3}, Shape{2, 3}}, {Shape{3, 2}}), ShapeError);
  // Unknown ranks: nothing to do, no error.
  auto [in2, out2] = infer_shapes("elemwise_add", {}, {Shape{}, Shape{}});
  EXPECT_FALSE(out2[0].rank_known());
  EXPECT_THROW(infer_types("elemwise_add", {}, {DType::kFloat32, DType::kInt32}), ShapeError);
}

TEST(ElemwiseBinary, AddRequestAccumulatesAndInplaceIsDeclared) {
  auto a = HostTensor::of({2}, {1, 2}), b = HostTensor::of({2}, {3, 4});
  RunOptions o;
  o.req = {OpReq::kAdd};
  o.initial_outputs = {HostTensor::of({2}, {10, 10})};
  EXPECT_TRUE(all_close(run_op("elemwise_mul", {}, {a, b}, o)[0], HostTensor::of({2}, {13, 18})));
  const Op& op = get_op("elemwise_add");
  auto pairs = op.attr<FInplaceOption>()(op.make_attrs({}));
  EXPECT_EQ(pairs.front(), (std::pair<int, int>{0, 0}));
}

TEST(ElemwiseBinary, LargeInputsRunInParallelCorrectly) {
  auto [a, b] = binary_inputs({300, 256}, {300, 256}, DType::kFloat32);
  RunOptions o;
  o.num_threads = 2;
  EXPECT_TRUE(
      all_close(run_op("elemwise_add", {}, {a, b}, o)[0], zip_ref(a, b, [](double x, double y) {
                  return static_cast<double>(static_cast<float>(x) + static_cast<float>(y));
                })));
}

// ---- broadcasting -----------------------------------------------------------------------------

TEST(ElemwiseBroadcast, ArithmeticAndComparisonsMatchReference) {
  const std::vector<std::pair<Shape, Shape>> shapes{
      {{2, 3, 4}, {3, 1}}, {{2, 1, 4}, {1, 3, 1}}, {{4}, {2, 3, 4}},
      {{2, 3}, {2, 3}},    {{1}, {2, 2}},          {{5, 1, 1, 2}, {5, 3, 1, 2}}};
  auto cases = arith_cases();
  for (auto& c : compare_cases()) cases.push_back(c);
  for (const auto& c : cases) {
    for (const auto& [sa, sb] : shapes) {
      auto [a, b] = binary_inputs(sa, sb);
      a.data[0] = b.data[0];
      auto out = run_op("broadcast_" + c.op, {}, {a, b});
      EXPECT_TRUE(all_close(out[0], broadcast_ref(a, b, c.ref), 1e-12, 1e-12))
          << c.op << " " << sa << " " << sb;
    }
  }
}

TEST(ElemwiseBroadcast, GradientsSumOverBroadcastAxes) {
  for (const auto& c : arith_cases()) {
    for (const auto& [sa, sb] :
         std::vector<std::pair<Shape, Shape>>{{{2, 3, 1}, {1, 3, 4}}, {{3, 4}, {4}}}) {
      auto [a, b] = binary_inputs(sa, sb);
      EXPECT_TRUE(check_gradient("broadcast_" + c.op, {}, {a, b},
                                 {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7}))
          << c.op << " " << sa << " " << sb;
    }
  }
}

TEST(ElemwiseBroadcast, AliasesAndSeGatingShapeInference) {
  EXPECT_EQ(&get_op("broadcast_plus"), &get_op("broadcast_add"));
  EXPECT_EQ(&get_op("broadcast_minus"), &get_op("broadcast_sub"));
  auto [in, out] = infer_shapes("broadcast_mul", {}, {Shape{8, 16, 7, 7}, Shape{8, 16, 1, 1}});
  EXPECT_EQ(out[0], (Shape{8, 16, 7, 7}));
  auto [in2, out2] = infer_shapes("broadcast_add", {}, {Shape{2, 1, 4}, Shape{3, 1}});
  EXPECT_EQ(out2[0], (Shape{2, 3, 4}));
  EXPECT_THROW(infer_shapes("broadcast_add", {}, {Shape{2, 3}, Shape{4}}), ShapeError);
  EXPECT_THROW(infer_shapes("broadcast_add", {}, {Shape{2, 3}, Shape{3}}, {Shape{2, 4}}),
               ShapeError);
}

TEST(ElemwiseBroadcast, UnknownOperandDimIsInferredFromOutput) {
  // rhs is 1 on axis 1, so lhs must carry the output's 5 there.
  auto [in, out] = infer_shapes("broadcast_add", {}, {Shape{2, -1}, Shape{2, 1}}, {Shape{2, 5}});
  EXPECT_EQ(in[0], (Shape{2, 5}));
  auto [in2, out2] = infer_shapes("broadcast_mul", {}, {Shape{-1, 3}, Shape{3}}, {Shape{1, 3}});
  EXPECT_EQ(in2[0], (Shape{1, 3}));
}

TEST(ElemwiseBroadcast, AddRequestAndParallelRowsAreCorrect) {
  auto a = HostTensor::random({256, 300}, 1), b = HostTensor::random({1, 300}, 2);
  RunOptions o;
  o.num_threads = 2;
  o.req = {OpReq::kAdd};
  o.initial_outputs = {HostTensor::filled({256, 300}, 1.0)};
  auto expected =
      broadcast_ref(a, b, [](double x, double y) { return 1.0 + static_cast<float>(x * y); });
  EXPECT_TRUE(all_close(run_op("broadcast_mul", {}, {a, b}, o)[0], expected, 1e-5, 1e-6));
}

// ---- scalar -----------------------------------------------------------------------------------

TEST(ElemwiseScalar, AllOpsMatchReference) {
  const double s = 1.5;
  const std::vector<std::pair<std::string, std::function<double(double)>>> cases{
      {"_plus_scalar", [=](double x) { return x + s; }},
      {"_minus_scalar", [=](double x) { return x - s; }},
      {"_rminus_scalar", [=](double x) { return s - x; }},
      {"_mul_scalar", [=](double x) { return x * s; }},
      {"_div_scalar", [=](double x) { return x / s; }},
      {"_rdiv_scalar", [=](double x) { return s / x; }},
      {"_power_scalar", [=](double x) { return std::pow(x, s); }},
      {"_rpower_scalar", [=](double x) { return std::pow(s, x); }},
      {"_maximum_scalar", [=](double x) { return std::max(x, s); }},
      {"_minimum_scalar", [=](double x) { return std::min(x, s); }},
      {"_equal_scalar", [=](double x) { return x == s ? 1.0 : 0.0; }},
      {"_not_equal_scalar", [=](double x) { return x != s ? 1.0 : 0.0; }},
      {"_greater_scalar", [=](double x) { return x > s ? 1.0 : 0.0; }},
      {"_greater_equal_scalar", [=](double x) { return x >= s ? 1.0 : 0.0; }},
      {"_lesser_scalar", [=](double x) { return x < s ? 1.0 : 0.0; }},
      {"_lesser_equal_scalar", [=](double x) { return x <= s ? 1.0 : 0.0; }},
  };
  auto x = HostTensor::random({3, 5}, 4, 0.5, 3.0, kF64);
  x.data[0] = s;
  for (const auto& [op, ref] : cases) {
    EXPECT_TRUE(all_close(run_op(op, {{"scalar", "1.5"}}, {x})[0], map_ref(x, ref), 1e-12, 1e-12))
        << op;
  }
}

TEST(ElemwiseScalar, DefaultScalarIsOneAndAliasesResolve) {
  auto x = HostTensor::of({2}, {2, 4});
  EXPECT_TRUE(all_close(run_op("_plus_scalar", {}, {x})[0], HostTensor::of({2}, {3, 5})));
  for (const auto& [alias, name] :
       std::vector<std::pair<std::string, std::string>>{{"_PlusScalar", "_plus_scalar"},
                                                        {"_MinusScalar", "_minus_scalar"},
                                                        {"_RMinusScalar", "_rminus_scalar"},
                                                        {"_MulScalar", "_mul_scalar"},
                                                        {"_DivScalar", "_div_scalar"},
                                                        {"_RDivScalar", "_rdiv_scalar"},
                                                        {"_PowerScalar", "_power_scalar"},
                                                        {"_RPowerScalar", "_rpower_scalar"}}) {
    EXPECT_EQ(&get_op(alias), &get_op(name)) << alias;
  }
  // MobileFaceNet preprocessing: (x - 127.5) * 0.0078125.
  auto y = run_op("_MinusScalar", {{"scalar", "127.5"}}, {HostTensor::of({2}, {0, 255})})[0];
  y = run_op("_MulScalar", {{"scalar", "0.0078125"}}, {y})[0];
  EXPECT_TRUE(all_close(y, HostTensor::of({2}, {-0.99609375, 0.99609375})));
}

TEST(ElemwiseScalar, IsIntControlsIntegerArithmetic) {
  auto x = HostTensor::of({3}, {1, 2, 3}, DType::kInt32);
  // is_int (default): the scalar 2.7 is truncated to 2.
  EXPECT_TRUE(all_close(run_op("_mul_scalar", {{"scalar", "2.7"}}, {x})[0],
                        HostTensor::of({3}, {2, 4, 6}, DType::kInt32)));
  // is_int=False: computed in double, then truncated to int32.
  EXPECT_TRUE(all_close(run_op("_mul_scalar", {{"scalar", "2.7"}, {"is_int", "False"}}, {x})[0],
                        HostTensor::of({3}, {2, 5, 8}, DType::kInt32)));
}

TEST(ElemwiseScalar, GradientsMatchFiniteDifferences) {
  auto x = HostTensor::random({2, 3}, 9, 0.5, 2.0, kF64);
  for (const char* op :
       {"_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar",
        "_rdiv_scalar", "_power_scalar", "_rpower_scalar", "_maximum_scalar", "_minimum_scalar"}) {
    EXPECT_TRUE(
        check_gradient(op, {{"scalar", "1.3"}}, {x}, {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7}))
        << op;
  }
  auto g = op_gradient("_greater_scalar", {{"scalar", "1"}}, {x}, {x});
  EXPECT_TRUE(g[0].empty());
}

TEST(ElemwiseScalar, BadAttributesAreValueErrors) {
  EXPECT_THROW(get_op("_plus_scalar").make_attrs({{"scalar", "abc"}}), ValueError);
  EXPECT_THROW(get_op("_plus_scalar").make_attrs({{"scalr", "1"}}), ValueError);
  EXPECT_THROW(get_op("_mul_scalar").make_attrs({{"is_int", "maybe"}}), ValueError);
}

// ---- unary ------------------------------------------------------------------------------------

TEST(ElemwiseUnary, ForwardMatchesStdFunctions) {
  const std::vector<std::pair<std::string, std::function<double(double)>>> cases{
      {"relu", [](double x) { return x > 0 ? x : 0; }},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(std::abs(x)); }},
      {"sqrt", [](double x) { return std::sqrt(std::abs(x)); }},
      {"square", [](double x) { return x * x; }},
      {"abs", [](double x) { return std::abs(x); }},
      {"negative", [](double x) { return -x; }},
      {"reciprocal", [](double x) { return 1 / x; }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
  };
  auto x = HostTensor::random({4, 3}, 21, -2, 2, kF64);
  auto pos = map_ref(x, [](double v) { return std::abs(v); });
  for (const auto& [op, ref] : cases) {
    const bool needs_positive = op == "log" || op == "sqrt";
    const HostTensor& in = needs_positive ? pos : x;
    EXPECT_TRUE(all_close(run_op(op, {}, {in})[0], map_ref(x, ref), 1e-12, 1e-12)) << op;
  }
  // float32 path too.
  auto xf = HostTensor::random({8}, 22, -2, 2);
  EXPECT_TRUE(all_close(run_op("tanh", {}, {xf})[0],
                        map_ref(xf, [](double v) { return std::tanh(v); }), 1e-6, 1e-6));
}

TEST(ElemwiseUnary, GradientsMatchFiniteDifferences) {
  auto x = HostTensor::random({2, 3}, 23, 0.3, 2.0, kF64);
  x.data[1] = -x.data[1];  // relu/abs on both sides of 0 (positive-only ops use another input)
  auto pos = HostTensor::random({2, 3}, 24, 0.3, 2.0, kF64);
  for (const char* op : {"relu", "sigmoid", "tanh", "exp", "square", "abs", "negative",
                         "reciprocal", "sin", "cos"}) {
    EXPECT_TRUE(check_gradient(op, {}, {x}, {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7})) << op;
  }
  for (const char* op : {"log", "sqrt"}) {
    EXPECT_TRUE(check_gradient(op, {}, {pos}, {.eps = 1e-6, .rtol = 1e-5, .atol = 1e-7})) << op;
  }
  // float32 with a coarse step.
  EXPECT_TRUE(check_gradient("sigmoid", {}, {HostTensor::random({5}, 25)},
                             {.eps = 1e-2, .rtol = 5e-2, .atol = 5e-3}));
}

TEST(ElemwiseUnary, IntegerReluAbsNegativeWorkAndTranscendentalsRefuseIntegers) {
  auto x = HostTensor::of({3}, {-2, 0, 3}, DType::kInt32);
  EXPECT_TRUE(all_close(run_op("relu", {}, {x})[0], HostTensor::of({3}, {0, 0, 3}, DType::kInt32)));
  EXPECT_TRUE(all_close(run_op("abs", {}, {x})[0], HostTensor::of({3}, {2, 0, 3}, DType::kInt32)));
  EXPECT_TRUE(
      all_close(run_op("negative", {}, {x})[0], HostTensor::of({3}, {2, 0, -3}, DType::kInt32)));
  EXPECT_THROW(run_op("exp", {}, {x}), NotImplemented);
}

TEST(ElemwiseUnary, ShapeInferenceWorksBothWaysAndRejectsParams) {
  auto [in, out] = infer_shapes("sigmoid", {}, {Shape{}}, {Shape{3, 2}});
  EXPECT_EQ(in[0], (Shape{3, 2}));
  EXPECT_THROW(infer_shapes("relu", {}, {Shape{3}}, {Shape{4}}), ShapeError);
  EXPECT_THROW(get_op("relu").make_attrs({{"alpha", "1"}}), ValueError);
}

// ---- clip, where, Cast, BlockGrad, MakeLoss -----------------------------------------------------

TEST(ElemwiseClip, ClipsForwardAndPassesGradientInsideRange) {
  auto x = HostTensor::of({5}, {-3, -1, 0, 1, 3}, kF64);
  AttrMap a{{"a_min", "-1.5"}, {"a_max", "2"}};
  EXPECT_TRUE(all_close(run_op("clip", a, {x})[0], HostTensor::of({5}, {-1.5, -1, 0, 1, 2}, kF64)));
  EXPECT_TRUE(all_close(run_op("Clip", a, {x})[0], HostTensor::of({5}, {-1.5, -1, 0, 1, 2}, kF64)));
  auto g = op_gradient("clip", a, {x}, {HostTensor::of({5}, {1, 2, 3, 4, 5}, kF64)});
  EXPECT_TRUE(all_close(g[0], HostTensor::of({5}, {0, 2, 3, 4, 0}, kF64)));
  EXPECT_TRUE(check_gradient("clip", a, {HostTensor::of({4}, {-2.5, -0.5, 0.7, 2.8}, kF64)},
                             {.eps = 1e-6, .rtol = 1e-6, .atol = 1e-8}));
  auto xi = HostTensor::of({3}, {-5, 1, 9}, DType::kInt32);
  EXPECT_TRUE(all_close(run_op("clip", {{"a_min", "0"}, {"a_max", "4"}}, {xi})[0],
                        HostTensor::of({3}, {0, 1, 4}, DType::kInt32)));
}

TEST(ElemwiseClip, InvalidBoundsAreValueErrors) {
  EXPECT_THROW(get_op("clip").make_attrs({{"a_min", "2"}, {"a_max", "1"}}), ValueError);
  EXPECT_THROW(get_op("clip").make_attrs({{"a_min", "0"}}), ValueError);
}

TEST(ElemwiseWhere, SelectsElementwiseOrByRow) {
  auto x = HostTensor::of({2, 2}, {1, 2, 3, 4}), y = HostTensor::of({2, 2}, {-1, -2, -3, -4});
  auto c = HostTensor::of({2, 2}, {1, 0, 0, 2});
  EXPECT_TRUE(all_close(run_op("where", {}, {c, x, y})[0], HostTensor::of({2, 2}, {1, -2, -3, 4})));
  auto rows = HostTensor::of({2}, {0, 1}, DType::kInt32);  // condition of another type
  EXPECT_TRUE(
      all_close(run_op("where", {}, {rows, x, y})[0], HostTensor::of({2, 2}, {-1, -2, 3, 4})));
}

TEST(ElemwiseWhere, GradientGoesToTheChosenSideOnly) {
  auto c = HostTensor::of({3}, {1, 0, 1}, kF64);
  auto x = HostTensor::random({3}, 1, -1, 1, kF64), y = HostTensor::random({3}, 2, -1, 1, kF64);
  EXPECT_TRUE(check_gradient("where", {}, {c, x, y},
                             {.eps = 1e-6, .rtol = 1e-6, .atol = 1e-8, .no_grad_inputs = {0}}));
  auto g = op_gradient("where", {}, {c, x, y}, {HostTensor::of({3}, {1, 2, 3}, kF64)});
  EXPECT_TRUE(g[0].empty());
  EXPECT_TRUE(all_close(g[1], HostTensor::of({3}, {1, 0, 3}, kF64)));
  EXPECT_TRUE(all_close(g[2], HostTensor::of({3}, {0, 2, 0}, kF64)));
}

TEST(ElemwiseWhere, ShapeInferenceChecksCondition) {
  auto [in, out] = infer_shapes("where", {}, {Shape{}, Shape{}, Shape{4, 2}});
  EXPECT_EQ(in[1], (Shape{4, 2}));
  EXPECT_EQ(out[0], (Shape{4, 2}));
  EXPECT_THROW(infer_shapes("where", {}, {Shape{3}, Shape{4, 2}, Shape{4, 2}}), ShapeError);
  EXPECT_THROW(infer_shapes("where", {}, {Shape{4, 3}, Shape{4, 2}, Shape{4, 2}}), ShapeError);
  EXPECT_THROW(infer_shapes("where", {}, {Shape{4, 2}, Shape{4, 2}, Shape{4, 3}}), ShapeError);
}

TEST(ElemwiseCast, ConvertsTypesAndGradientReturnsToInputType) {
  auto x = HostTensor::of({3}, {1.7, -2.5, 3.0});
  auto y = run_op("Cast", {{"dtype", "int32"}}, {x})[0];
  EXPECT_EQ(y.dtype, DType::kInt32);
  EXPECT_TRUE(all_close(y, HostTensor::of({3}, {1, -2, 3}, DType::kInt32)));
  auto z = run_op("cast", {{"dtype", "float64"}}, {y})[0];
  EXPECT_EQ(z.dtype, kF64);
  auto [tin, tout] = infer_types("Cast", {{"dtype", "uint8"}}, {DType::kFloat32});
  EXPECT_EQ(tout[0], DType::kUInt8);
  auto xd = HostTensor::random({4}, 3, -1, 1, kF64);
  auto g = op_gradient("Cast", {{"dtype", "float32"}}, {xd}, {HostTensor::of({4}, {1, 2, 3, 4})});
  EXPECT_EQ(g[0].dtype, kF64);
  EXPECT_TRUE(all_close(g[0], HostTensor::of({4}, {1, 2, 3, 4}, kF64)));
  EXPECT_TRUE(check_gradient("Cast", {{"dtype", "float64"}}, {xd},
                             {.eps = 1e-6, .rtol = 1e-6, .atol = 1e-8}));
  EXPECT_THROW(get_op("Cast").make_attrs({{"dtype", "float13"}}), ValueError);
  EXPECT_THROW(get_op("Cast").make_attrs({}), ValueError);
}

TEST(ElemwiseBlockGrad, IsIdentityWithNoGradient) {
  auto x = HostTensor::random({2, 3}, 4, -1, 1, kF64);
  EXPECT_TRUE(all_close(run_op("BlockGrad", {}, {x})[0], x));
  auto g = op_gradient("stop_gradient", {}, {x}, {x});
  EXPECT_TRUE(g[0].empty());
  const Op& op = get_op("BlockGrad");
  EXPECT_EQ(op.attr<FInplaceIdentity>()(op.make_attrs({})), std::vector<bool>{true});
}

TEST(ElemwiseMakeLoss, IdentityForwardAndScaledOnesGradientIgnoringHead) {
  auto x = HostTensor::of({2, 3}, {0.5, -1, 2, 0, 3, -2}, kF64);
  EXPECT_TRUE(all_close(run_op("MakeLoss", {}, {x})[0], x));
  auto head = HostTensor::random({2, 3}, 7, -1, 1, kF64);
  auto g = op_gradient("MakeLoss", {{"grad_scale", "3"}}, {x}, {head});
  EXPECT_TRUE(all_close(g[0], HostTensor::filled({2, 3}, 3.0, kF64)));
  g = op_gradient("MakeLoss", {{"grad_scale", "3"}, {"normalization", "batch"}}, {x}, {head});
  EXPECT_TRUE(all_close(g[0], HostTensor::filled({2, 3}, 1.5, kF64)));
  // valid: 3 elements exceed 0.4 -> grad_scale / 3.
  g = op_gradient("MakeLoss",
                  {{"grad_scale", "3"}, {"normalization", "valid"}, {"valid_thresh", "0.4"}}, {x},
                  {head});
  EXPECT_TRUE(all_close(g[0], HostTensor::filled({2, 3}, 1.0, kF64)));
  EXPECT_THROW(get_op("MakeLoss").make_attrs({{"normalization", "sum"}}), ValueError);
  const Op& op = get_op("MakeLoss");
  EXPECT_EQ(op.attr<FInplaceIdentity>()(op.make_attrs({})), std::vector<bool>{true});
}

TEST(ElemwiseRegistry, EveryOpIsDescribedAndHasAKernel) {
  for (const char* name : {"add_n",
                           "zeros_like",
                           "ones_like",
                           "_copy",
                           "elemwise_add",
                           "elemwise_sub",
                           "elemwise_mul",
                           "elemwise_div",
                           "_power",
                           "_maximum",
                           "_minimum",
                           "_equal",
                           "_not_equal",
                           "_greater",
                           "_greater_equal",
                           "_lesser",
                           "_lesser_equal",
                           "broadcast_add",
                           "broadcast_sub",
                           "broadcast_mul",
                           "broadcast_div",
                           "broadcast_power",
                           "broadcast_maximum",
                           "broadcast_minimum",
                           "broadcast_equal",
                           "broadcast_not_equal",
                           "broadcast_greater",
                           "broadcast_greater_equal",
                           "broadcast_lesser",
                           "broadcast_lesser_equal",
                           "relu",
                           "sigmoid",
                           "tanh",
                           "exp",
                           "log",
                           "sqrt",
                           "square",
                           "abs",
                           "negative",
                           "reciprocal",
                           "sin",
                           "cos",
                           "clip",
                           "where",
                           "Cast",
                           "BlockGrad",
                           "MakeLoss",
                           "_backward_add",
                           "_backward_broadcast_mul",
                           "_backward_relu",
                           "_backward_rdiv_scalar"}) {
    const Op& op = get_op(name);
    EXPECT_FALSE(op.description().empty()) << name;
    EXPECT_TRUE(op.has_kernel(DeviceType::kCPU)) << name;
    EXPECT_TRUE(static_cast<bool>(op.attr<FInferShape>())) << name;
  }
}

}  // namespace
}  // namespace weft
