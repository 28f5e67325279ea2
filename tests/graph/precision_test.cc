// Reduced-precision binds (graph/precision.h): the 16-bit conversions against IEEE bit patterns
// worked out by hand, the dtype plan of every MXNet model of ../shared/models (BatchNorm
// parameters, labels and indices float32, convolution and FullyConnected weights 16-bit, the plan
// accepted by inference), and the refusals: CTC in 16 bits, the fused convolution, and the CPU's
// kernels naming op and type.
#include "graph/precision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <string>

#include "graph/executor.h"
#include "graph/json.h"
#include "ndarray/runtime.h"
#include "tests/graph/model_inputs.h"
#include "tests/graph/models_dir.h"

namespace weft::graph {
namespace {

float pow2(int e) { return std::ldexp(1.0f, e); }

TEST(PrecisionConversion, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bfloat16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bfloat16(1.0f + pow2(-8)), 0x3F80);              // tie: to even
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * pow2(-8)), 0x3F82);          // tie: to even
  EXPECT_EQ(float_to_bfloat16(1.0f + pow2(-8) + pow2(-20)), 0x3F81);  // above the tie
  EXPECT_EQ(float_to_bfloat16(1001.0f), float_to_bfloat16(1000.0f));  // why labels stay f32
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7F80);  // past the last tie
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  EXPECT_EQ(bfloat16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0x0001), pow2(-133));  // the smallest subnormal
}

TEST(PrecisionConversion, Float16RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(float_to_float16(1.0f), 0x3C00);
  EXPECT_EQ(float_to_float16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_float16(0.1f), 0x2E66);
  EXPECT_EQ(float_to_float16(1.0f + pow2(-11)), 0x3C00);      // tie: to even
  EXPECT_EQ(float_to_float16(1.0f + 3 * pow2(-11)), 0x3C02);  // tie: to even
  EXPECT_EQ(float_to_float16(65504.0f), 0x7BFF);              // the largest finite
  EXPECT_EQ(float_to_float16(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_float16(65520.0f), 0x7C00);  // the tie above 65504 goes to infinity
  EXPECT_EQ(float_to_float16(-1e9f), 0xFC00);
  EXPECT_EQ(float_to_float16(pow2(-14)), 0x0400);  // the smallest normal
  EXPECT_EQ(float_to_float16(pow2(-24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(float_to_float16(pow2(-25)), 0x0000);  // tie: to even (zero)
  EXPECT_EQ(float_to_float16(1.5f * pow2(-25)), 0x0001);
  EXPECT_EQ(float_to_float16(3 * pow2(-25)), 0x0002);          // tie between 1 and 2: to even
  EXPECT_EQ(float_to_float16(pow2(-14) - pow2(-26)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(float_to_float16(2049.0f), 0x6800);                // 2048: why indices stay f32
  EXPECT_EQ(float16_to_float(0x7BFF), 65504.0f);
  EXPECT_EQ(float16_to_float(0x0001), pow2(-24));
  EXPECT_EQ(float16_to_float(0x83FF), -1023 * pow2(-24));
  EXPECT_TRUE(std::isinf(float16_to_float(0x7C00)));
  EXPECT_TRUE(std::isnan(float16_to_float(float_to_float16(std::nanf("")))));
}

TEST(PrecisionConversion, EveryPatternSurvivesARoundTrip) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float h = float16_to_float(bits);
    if (!std::isnan(h)) {
      EXPECT_EQ(float_to_float16(h), bits) << std::hex << b;
    }
    const float bf = bfloat16_to_float(bits);
    if (!std::isnan(bf)) {
      EXPECT_EQ(float_to_bfloat16(bf), bits) << std::hex << b;
    }
  }
}

TEST(PrecisionConversion, CastArrayConvertsOnTheHost) {
  const NDArray x = NDArray::from_vector<float>(Shape{2, 2}, {1.0f, 1.0f + pow2(-9), 65520.0f, -3});
  const NDArray h = cast_array(x, DType::kFloat16, Device::cpu());
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_EQ(h.shape(), Shape({2, 2}));
  const std::vector<float> back = cast_array(h, DType::kFloat32, Device::cpu()).to_vector<float>();
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f + pow2(-9));
  EXPECT_TRUE(std::isinf(back[2]));
  EXPECT_EQ(back[3], -3.0f);
  const NDArray b = cast_array(x, DType::kBFloat16, Device::cpu());
  const std::vector<float> bb = cast_array(b, DType::kFloat32, Device::cpu()).to_vector<float>();
  EXPECT_EQ(bb[1], 1.0f);  // 8 significant bits
  EXPECT_EQ(bb[2], 65536.0f);
  // float64 in and out, and an array already of the type is returned as it is.
  const NDArray d = NDArray::from_vector<double>(Shape{2}, {0.5, -0.25});
  EXPECT_EQ(
      cast_array(cast_array(d, DType::kFloat16, Device::cpu()), DType::kFloat64, Device::cpu())
          .to_vector<double>(),
      (std::vector<double>{0.5, -0.25}));
  EXPECT_EQ(cast_array(x, DType::kFloat32, Device::cpu()).raw_data(), x.raw_data());
}

TEST(PrecisionPlanning, NamesAndTolerances) {
  EXPECT_EQ(parse_precision("bf16"), DType::kBFloat16);
  EXPECT_EQ(parse_precision("float16"), DType::kFloat16);
  EXPECT_EQ(parse_precision("float32"), DType::kFloat32);
  EXPECT_THROW(parse_precision("int8"), ValueError);
  EXPECT_GT(precision_tolerance(DType::kBFloat16).rtol, precision_tolerance(DType::kFloat16).rtol);
  EXPECT_GT(precision_tolerance(DType::kFloat16).rtol, precision_tolerance(DType::kFloat32).rtol);
}

// The plan of every model in each 16-bit type, checked against the graph's structure: what
// reads each variable decides its type.
class PrecisionModels : public ::testing::TestWithParam<std::string> {};

TEST_P(PrecisionModels, BatchNormParametersLabelsAndIndicesStayFloat32) {
  WEFT_REQUIRE_MODELS();
  const std::string file = GetParam();
  const Graph g = load_json_file(testing::models_dir() / file);
  const InferInputs inputs = testing::model_inputs(file, 2);
  bool has_ctc = false;
  for (const Node& n : g.nodes) has_ctc = has_ctc || (n.op && n.op->name() == "_contrib_CTCLoss");
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    if (has_ctc) {
      // CTC computes in float32/float64 only: its type rule refuses, naming the node.
      try {
        plan_precision(g, inputs, dtype);
        ADD_FAILURE() << file << ": a 16-bit CTC loss was planned";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("CTCLoss"), std::string::npos) << e.what();
      }
      continue;
    }
    const PrecisionPlan plan = plan_precision(g, inputs, dtype);
    EXPECT_GT(plan.cast, 0) << file;
    // What reads each variable, by input name.
    std::map<std::string, std::set<std::string>> reads;  // variable -> "Op:input"
    for (const Node& n : g.nodes) {
      if (n.is_variable()) continue;
      const auto names = n.op->input_names(*n.op_attrs);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Node& v = g.nodes[n.inputs[i].node];
        if (v.is_variable()) reads[v.name].insert(n.op->name() + ":" + names.at(i));
      }
    }
    int bn_params = 0, weights = 0;
    for (const auto& [name, readers] : reads) {
      ASSERT_TRUE(plan.dtypes.count(name)) << file << ": " << name << " has no type";
      const DType t = plan.dtypes.at(name);
      for (const std::string& r : readers) {
        if (r == "BatchNorm:gamma" || r == "BatchNorm:beta" || r == "BatchNorm:moving_mean" ||
            r == "BatchNorm:moving_var") {
          EXPECT_EQ(t, DType::kFloat32) << file << ": " << name << " (" << r << ")";
          EXPECT_TRUE(plan.kept_float32.count(name)) << name;
          ++bn_params;
        } else if (r == "SoftmaxOutput:label" || r == "Embedding:data") {
          EXPECT_EQ(t, DType::kFloat32) << file << ": " << name << " (" << r << ")";
        } else if (r == "Convolution:weight" || r == "FullyConnected:weight" ||
                   r == "Embedding:weight" || r == "Convolution:bias") {
          EXPECT_EQ(t, dtype) << file << ": " << name << " (" << r << ")";
          ++weights;
        }
      }
      if (inputs.shapes.count(name) &&
          !(readers.count("SoftmaxOutput:label") || readers.count("Embedding:data"))) {
        EXPECT_EQ(t, dtype) << file << ": data input " << name;
      }
    }
    EXPECT_GT(weights, 0) << file;
    EXPECT_EQ(bn_params > 0,
              g.nodes.end() !=
                  std::find_if(g.nodes.begin(), g.nodes.end(),
                               [](const Node& n) { return n.op && n.op->name() == "BatchNorm"; }))
        << file;
    // Inference accepts the plan completely, and every head has the type.
    InferInputs typed = inputs;
    typed.dtypes = plan.dtypes;
    const InferResult r = infer_shapes_types(g, typed, true);
    for (const NodeEntry& h : g.heads) {
      EXPECT_EQ(r.dtypes[g.entry_id(h)], dtype) << file << " head " << g.nodes[h.node].name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PrecisionModels, ::testing::ValuesIn(testing::mxnet_model_files()),
                         testing::ModelTestName());

// A file whose variables all carry `__dtype__` float32 (Gluon's export): the plan overrides it.
TEST(PrecisionPlanning, OverridesFloat32DtypeAttributes) {
  WEFT_REQUIRE_MODELS();
  const std::string file = "fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json";
  if (!std::filesystem::exists(testing::models_dir() / file)) GTEST_SKIP() << file << " absent";
  const Graph g = load_json_file(testing::models_dir() / file);
  InferInputs inputs;
  inputs.shapes["data"] = Shape{1, 3, 224, 224};
  const PrecisionPlan plan = plan_precision(g, inputs, DType::kBFloat16);
  EXPECT_EQ(plan.dtypes.at("resnetv10_conv0_weight"), DType::kBFloat16);
  EXPECT_EQ(plan.dtypes.at("resnetv10_batchnorm0_gamma"), DType::kFloat32);
  InferInputs typed = inputs;
  typed.dtypes = plan.dtypes;
  EXPECT_NO_THROW(infer_shapes_types(g, typed, true));
}

// 16-bit binds must be unfused: the fused convolution's type rule says so.
TEST(PrecisionPlanning, FusedBindRefusesSixteenBitsNamingTheFix) {
  WEFT_REQUIRE_MODELS();
  const std::string file = "pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json";
  auto g = std::make_shared<Graph>(load_json_file(testing::models_dir() / file));
  BindOptions bo;
  bo.inputs = testing::model_inputs(file, 1);
  bo.inputs.dtypes = plan_precision(*g, bo.inputs, DType::kBFloat16).dtypes;
  try {
    Executor::bind(g, bo);
    ADD_FAILURE() << "a fused bfloat16 bind was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fuse = false"), std::string::npos) << e.what();
  }
}

// On the CPU a 16-bit bind runs until the first kernel without the type, whose error names op,
// node and type; the process carries on.
TEST(PrecisionPlanning, CpuKernelsRefuseSixteenBitsNamingOpAndType) {
  WEFT_REQUIRE_MODELS();
  const std::string file = "apache__mxnet__save_000800.json";
  auto g = std::make_shared<Graph>(load_json_file(testing::models_dir() / file));
  BindOptions bo;
  bo.inputs = testing::model_inputs(file, 2);
  bo.inputs.dtypes = plan_precision(*g, bo.inputs, DType::kBFloat16).dtypes;
  bo.fuse = false;
  auto ex = Executor::bind(g, bo);
  for (const std::string& name : ex->arg_names()) {
    NDArray a = ex->arg(name);
    cast_array(NDArray::full(a.shape(), 0.5), a.dtype(), Device::cpu()).copy_to(a);
  }
  try {
    ex->forward(false);
    ex->outputs()[0].wait_to_read();
    waitall();
    ADD_FAILURE() << "the CPU ran a bfloat16 graph";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("FullyConnected"), std::string::npos) << m;
    EXPECT_NE(m.find("bfloat16"), std::string::npos) << m;
  }
  try {
    waitall();  // (the engine's record of the failure, delivered once)
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace weft::graph
