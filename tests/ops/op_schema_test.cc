// The operator schema against MXNet 1.9.1's own listings (input names, required parameters,
// defaults, variadic inputs, output counts), its JSON form, and the run-time parameter schema.
#include "ops/op_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace weft {
namespace {

const OpSchemaParam& param(const OpSchema& s, const std::string& name) {
  for (const OpSchemaParam& p : s.params) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << s.name << " has no parameter " << name;
  static const OpSchemaParam kNone;
  return kNone;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(OpSchema, ConvolutionListsMxnetInputsAndParams) {
  // MXNet 1.9.1: Convolution's arguments are data, weight, bias; kernel and num_filter are
  // required; num_group defaults to 1, no_bias to False.
  const OpSchema s = op_schema(get_op("Convolution"));
  EXPECT_TRUE(s.inputs_known);
  EXPECT_EQ(s.inputs, (std::vector<std::string>{"data", "weight", "bias"}));
  EXPECT_TRUE(param(s, "kernel").required);
  EXPECT_TRUE(param(s, "num_filter").required);
  EXPECT_FALSE(param(s, "num_group").required);
  EXPECT_EQ(std::get<int64_t>(param(s, "num_group").default_value), 1);
  EXPECT_EQ(std::get<bool>(param(s, "no_bias").default_value), false);
  EXPECT_TRUE(s.variadic_param.empty());
  EXPECT_EQ(s.num_outputs, 1);
  EXPECT_EQ(s.num_visible_outputs, 1);
}

TEST(OpSchema, ConcatIsVariadicByNumArgs) {
  const OpSchema s = op_schema(get_op("Concat"));
  EXPECT_EQ(s.variadic_param, "num_args");
  EXPECT_TRUE(param(s, "num_args").required);
  EXPECT_TRUE(contains(s.aliases, "concat"));
}

TEST(OpSchema, AliasesResolveToTheSameSchema) {
  EXPECT_EQ(op_schema(get_op("concat")).name, "Concat");
}

TEST(OpSchema, RnnListsTheWidestInputs) {
  // MXNet 1.9.1: data, parameters, state, then state_cell for LSTM and sequence_length with
  // use_sequence_length.
  const OpSchema s = op_schema(get_op("RNN"));
  EXPECT_EQ(s.inputs, (std::vector<std::string>{"data", "parameters", "state", "state_cell",
                                                "sequence_length"}));
}

TEST(OpSchema, OutputCountsNameTheParametersTheyDependOn) {
  // BatchNorm has 3 outputs, 1 visible unless output_mean_var; SliceChannel has num_outputs.
  const OpSchema bn = op_schema(get_op("BatchNorm"));
  EXPECT_EQ(bn.num_outputs, 3);
  EXPECT_EQ(bn.num_visible_outputs, 1);
  EXPECT_TRUE(contains(bn.outputs_depend_on, "output_mean_var"));
  EXPECT_EQ(bn.inputs,
            (std::vector<std::string>{"data", "gamma", "beta", "moving_mean", "moving_var"}));
  const OpSchema split = op_schema(get_op("SliceChannel"));
  EXPECT_TRUE(contains(split.outputs_depend_on, "num_outputs"));
  EXPECT_TRUE(op_schema(get_op("FullyConnected")).outputs_depend_on.empty());
}

TEST(OpSchema, EnumerationsListTheirChoices) {
  const OpSchema s = op_schema(get_op("Pooling"));
  const OpSchemaParam& p = param(s, "pool_type");
  EXPECT_TRUE(contains(p.choices, "max"));
  EXPECT_TRUE(contains(p.choices, "avg"));
  EXPECT_EQ(std::get<std::string>(p.default_value), "max");
}

TEST(OpSchema, DefaultsAreTypedByTheParameterType) {
  EXPECT_EQ(std::get<std::vector<int64_t>>(typed_param_value("Shape(tuple)", "(3, 3)")),
            (std::vector<int64_t>{3, 3}));
  EXPECT_TRUE(std::get<std::vector<int64_t>>(typed_param_value("Shape(tuple)", "()")).empty());
  EXPECT_TRUE(std::holds_alternative<std::monostate>(typed_param_value("None or int", "None")));
  EXPECT_EQ(std::get<int64_t>(typed_param_value("None or int", "-1")), -1);
  EXPECT_EQ(std::get<bool>(typed_param_value("boolean", "True")), true);
  EXPECT_DOUBLE_EQ(std::get<double>(typed_param_value("float", "0.001")), 0.001);
  EXPECT_DOUBLE_EQ(std::get<double>(typed_param_value("float", "1")), 1.0);
  EXPECT_EQ(std::get<std::string>(typed_param_value("string", "''")), "");
  EXPECT_EQ(std::get<std::string>(typed_param_value("{max|avg}", "avg")), "avg");
  EXPECT_TRUE(std::holds_alternative<std::monostate>(typed_param_value("{None|a|b}", "None")));
  EXPECT_EQ(std::get<std::vector<double>>(typed_param_value("tuple of floats", "(0.5, 2)")),
            (std::vector<double>{0.5, 2.0}));
}

TEST(OpSchema, JsonCarriesTheSameFacts) {
  const auto j = nlohmann::json::parse(op_schema_json(op_schema(get_op("Convolution"))));
  EXPECT_EQ(j["name"], "Convolution");
  EXPECT_EQ(j["inputs"], nlohmann::json({"data", "weight", "bias"}));
  EXPECT_TRUE(j["variadic"].is_null());
  bool saw_kernel = false;
  for (const auto& p : j["params"]) {
    if (p["name"] == "kernel") {
      saw_kernel = true;
      EXPECT_TRUE(p["required"].get<bool>());
      EXPECT_TRUE(p["default"].is_null());
    }
    if (p["name"] == "num_group") {
      EXPECT_EQ(p["default"], 1);
    }
    if (p["name"] == "stride") {
      EXPECT_TRUE(p["default"].is_array());
    }
  }
  EXPECT_TRUE(saw_kernel);
  const auto all = nlohmann::json::parse(registry_schema_json());
  ASSERT_TRUE(all.is_array());
  bool saw_concat = false;
  for (const auto& op : all) {
    EXPECT_NE(op["name"].get<std::string>().rfind("_backward", 0), 0u);
    if (op["name"] == "Concat") saw_concat = op["variadic"] == "num_args";
  }
  EXPECT_TRUE(saw_concat);
}

TEST(RuntimeParamSchema, RejectsDuplicatesAndBadDefaults) {
  RuntimeParamSchema s;
  s.add({"scale", RuntimeParamType::kFloat, "2", "a factor"}, "t_op");
  EXPECT_THROW(s.add({"scale", RuntimeParamType::kInt, std::nullopt, ""}, "t_op"), ValueError);
  try {
    s.add({"axes", RuntimeParamType::kShape, "(1, x)", ""}, "t_op", "attribute");
    FAIL() << "a malformed default was accepted";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("attribute 'axes'"), std::string::npos) << what;
    EXPECT_NE(what.find("t_op"), std::string::npos) << what;
  }
  EXPECT_EQ(s.index("scale"), 0);
  EXPECT_EQ(s.index("axes"), -1);
}

TEST(RuntimeParamSchema, InstalledSchemaParsesDescribesAndRejects) {
  auto schema = std::make_shared<RuntimeParamSchema>();
  schema->add({"factor", RuntimeParamType::kFloat, "2.0", "multiplier"}, "t_schema_rt");
  schema->add({"axes", RuntimeParamType::kShape, std::nullopt, "axes to use"}, "t_schema_rt");
  const Op& op = OpRegistry::register_runtime("t_schema_rt", [&](Op& o) {
    RuntimeParamSchema::install(o, schema);
    o.set_num_inputs(1);
    o.set_num_outputs(1);
  });
  OpAttrs a = op.make_attrs({{"axes", "(0, 1)"}});
  const auto& p = a.params<RuntimeParams>();
  ASSERT_NE(p.find("factor"), nullptr);
  EXPECT_EQ(*p.find("factor"), "2.0");
  EXPECT_EQ(*p.find("axes"), "(0, 1)");
  EXPECT_EQ(p.find("other"), nullptr);
  EXPECT_THROW(op.make_attrs({}), ValueError);                                   // axes missing
  EXPECT_THROW(op.make_attrs({{"axes", "(0,)"}, {"bogus", "1"}}), ValueError);   // unknown key
  EXPECT_THROW(op.make_attrs({{"axes", "(0,)"}, {"factor", "x"}}), ValueError);  // bad value

  const OpSchema s = op_schema(op);
  EXPECT_TRUE(s.runtime);
  EXPECT_EQ(s.inputs, (std::vector<std::string>{"data"}));
  EXPECT_EQ(param(s, "factor").type, "float");
  EXPECT_DOUBLE_EQ(std::get<double>(param(s, "factor").default_value), 2.0);
  EXPECT_EQ(param(s, "factor").default_text, "2.0");
  EXPECT_EQ(param(s, "axes").type, "Shape(tuple)");
  EXPECT_TRUE(param(s, "axes").required);
  EXPECT_EQ(param(s, "axes").description, "axes to use");
}

}  // namespace
}  // namespace weft
