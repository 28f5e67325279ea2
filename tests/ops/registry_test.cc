// Registry behaviour: lookup, aliases, freezing, and parameter parsing errors.
#include <gtest/gtest.h>

#include <functional>
#include <span>
#include <string>

#include "ops/op.h"

namespace weft {
namespace {

struct DemoParam {
  Shape kernel;
  int64_t num_filter = 0;
  bool no_bias = false;
  double eps = 0;
  std::optional<int64_t> axis;
  static void declare(ParamSchema<DemoParam>& s) {
    s.field("kernel", &DemoParam::kernel);
    s.field("num_filter", &DemoParam::num_filter).lower_bound(1);
    s.field("no_bias", &DemoParam::no_bias).set_default(false);
    s.field("eps", &DemoParam::eps).set_default(1e-3);
    s.field("axis", &DemoParam::axis).set_default(std::nullopt);
  }
};

TEST(Params, ParsesMxnetSpellings) {
  AttrMap a{{"kernel", "(8L, 3L)"}, {"num_filter", "4"},    {"no_bias", "True"},
            {"axis", "None"},       {"__shape__", "(1,2)"}, {"lr_mult", "2"}};
  auto p = parse_params<DemoParam>(a, "demo", "n1");
  EXPECT_EQ(p.kernel, (Shape{8, 3}));
  EXPECT_EQ(p.num_filter, 4);
  EXPECT_TRUE(p.no_bias);
  EXPECT_DOUBLE_EQ(p.eps, 1e-3);
  EXPECT_FALSE(p.axis.has_value());
  EXPECT_EQ(parse_shape("[3,3]"), (Shape{3, 3}));
  EXPECT_EQ(parse_shape("()").ndim(), 0);
  EXPECT_EQ(parse_shape("(3,)"), (Shape{3}));
  EXPECT_TRUE(parse_bool("1"));
  EXPECT_FALSE(parse_bool("false"));
}

TEST(Params, BadValueNamesOpNodeKeyAndValue) {
  AttrMap a{{"kernel", "(3, x)"}, {"num_filter", "4"}};
  try {
    parse_params<DemoParam>(a, "demo", "conv7");
    FAIL();
  } catch (const ValueError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("demo"), std::string::npos) << m;
    EXPECT_NE(m.find("conv7"), std::string::npos) << m;
    EXPECT_NE(m.find("kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, x)"), std::string::npos) << m;
  }
  EXPECT_THROW(parse_params<DemoParam>(AttrMap{{"kernel", "(1,1)"}}, "demo", ""),
               ValueError);  // missing
  EXPECT_THROW(
      parse_params<DemoParam>(AttrMap{{"kernel", "(1,1)"}, {"num_filter", "0"}}, "demo", ""),
      ValueError);  // bound
  EXPECT_THROW(parse_params<DemoParam>(
                   AttrMap{{"kernel", "(1,1)"}, {"num_filter", "2"}, {"bogus", "1"}}, "demo", ""),
               ValueError);  // unknown key
}

TEST(Registry, IsFrozenAndRejectsUnknownOps) {
  const OpRegistry& r = OpRegistry::global();
  EXPECT_TRUE(r.frozen());
  EXPECT_EQ(r.find("no_such_op"), nullptr);
  EXPECT_THROW(r.get("no_such_op"), ValueError);
  EXPECT_THROW(const_cast<OpRegistry&>(r).define_op("late_op"), Error);
}

// Note [Definitions and kernels]: a kernel whose op nobody defined (a misspelt name in a kernel
// file) and a definition no device gave a kernel are both refused at freeze, each named with the
// registration function that made it.
void noop_kernel(const OpAttrs&, const OpContext&, std::span<const TensorView>,
                 std::span<const OpReq>, std::span<const TensorView>) {}

std::string freeze_error(const std::function<void(OpRegistry&)>& fill) {
  try {
    OpRegistry::make_frozen(fill);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RegistryFreeze, AKernelWithoutADefinitionIsRefusedNamingOpAndRegistrar) {
  const std::string what = freeze_error([](OpRegistry& r) {
    r.set_registrar("defs test_defs");
    r.define_op("scale").set_num_inputs(1);
    r.set_registrar("cpu test_kernels");
    r.kernels("scale").set_attr<FCompute>(DeviceType::kCPU, noop_kernel);
    r.kernels("sclae").set_attr<FCompute>(DeviceType::kCPU, noop_kernel);  // the typo
  });
  EXPECT_NE(what.find("op 'sclae' has kernels (from cpu test_kernels) but no definition"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find("'scale'"), std::string::npos) << what;
}

TEST(RegistryFreeze, ADefinitionWithoutAnyKernelIsRefusedNamingOpAndRegistrar) {
  const std::string what = freeze_error([](OpRegistry& r) {
    r.set_registrar("defs test_defs");
    r.define_op("orphan").set_num_inputs(1);
  });
  EXPECT_NE(what.find("op 'orphan' (defined by defs test_defs) has no kernel on any device"),
            std::string::npos)
      << what;
}

TEST(RegistryFreeze, ACompleteTableFreezesAndDefiningTwiceIsRefused) {
  auto r = OpRegistry::make_frozen([](OpRegistry& r) {
    r.define_op("scale").set_num_inputs(1);
    r.kernels("scale").set_attr<FCompute>(DeviceType::kCUDA, noop_kernel);
  });
  ASSERT_NE(r->find("scale"), nullptr);
  EXPECT_TRUE(r->find("scale")->has_kernel(DeviceType::kCUDA));
  EXPECT_FALSE(r->find("scale")->has_kernel(DeviceType::kCPU));
  EXPECT_NE(freeze_error([](OpRegistry& r) {
              r.define_op("twice");
              r.define_op("twice");
            }).find("op 'twice' is defined twice"),
            std::string::npos);
}

}  // namespace
}  // namespace weft
