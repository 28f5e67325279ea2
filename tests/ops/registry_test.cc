// Registry behaviour: lookup, aliases, freezing, and parameter parsing errors.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace weft
