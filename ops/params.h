// Typed operator parameters: a schema per param struct (fields, defaults, bounds, enum values)
// and the parser that turns MXNet's string→string attribute dict into the struct.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "base/shape.h"

namespace weft {

/// An operator's attributes as written in graph JSON or passed by a caller: key → string value.
using AttrMap = std::map<std::string, std::string, std::less<>>;

// ---- value parsers (MXNet spellings) ----------------------------------------------------------
// Each throws ValueError with a message that names the expected form; callers add op/key context.

/// "True"/"False", "true"/"false", "1"/"0".
bool parse_bool(std::string_view text);
/// A decimal integer (an "L" suffix is accepted).
int64_t parse_int(std::string_view text);
/// A float ("1e-05", "0.5", "inf", "-inf", "nan").
double parse_float(std::string_view text);
/// A tuple: "(3, 3)", "(3,3)", "(8L, 3L)", "[3, 3]", "()", or a bare integer "3" (one element).
Shape parse_shape(std::string_view text);
/// A tuple of floats: "(0.5, 1.0)", "[1, 2]", or a bare float.
std::vector<double> parse_float_tuple(std::string_view text);
/// "None" (any case) or empty.
bool is_none(std::string_view text);

/// Formats values the way MXNet writes them ("(3, 3)", "True", "0.001").
std::string format_shape_attr(const Shape& s);
std::string format_float_attr(double v);

namespace detail {
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {
  using type = T;
};

template <typename T>
T parse_value(std::string_view text) {
  if constexpr (std::is_same_v<T, bool>) {
    return parse_bool(text);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(parse_int(text));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(parse_float(text));
  } else if constexpr (std::is_same_v<T, std::string>) {
    return std::string(text);
  } else if constexpr (std::is_same_v<T, Shape>) {
    return parse_shape(text);
  } else if constexpr (std::is_same_v<T, std::vector<double>>) {
    return parse_float_tuple(text);
  } else if constexpr (std::is_same_v<T, DType>) {
    return parse_dtype(std::string(text));
  } else {
    static_assert(sizeof(T) == 0, "unsupported parameter type");
  }
}
}  // namespace detail

/// Describes one param struct P: its fields, their defaults and checks. Built once per op type
/// by P::declare(ParamSchema<P>&); immutable afterwards, so parsing is thread-safe.
///
///   struct PoolingParam {
///     Shape kernel; PoolType pool_type; bool global_pool; ...
///     static void declare(ParamSchema<PoolingParam>& s) {
///       s.field("kernel", &PoolingParam::kernel).set_default(Shape{});
///       s.enum_field("pool_type", &PoolingParam::pool_type,
///                    {{"max", PoolType::kMax}, {"avg",
///                    PoolType::kAvg}}).set_default(PoolType::kMax);
///       s.check([](const PoolingParam& p) { ... throw ValueError ... });
///     }
///   };
template <typename P>
class ParamSchema {
 public:
  struct Field {
    std::string name;
    std::string type_name;
    std::string default_text;  ///< "" when required
    bool required = true;
    std::string description;
    std::function<void(P&, std::string_view)> parse;  ///< throws ValueError (no context)
    std::function<void(P&)> set_default;
  };

  /// A builder for one field, returned by field()/enum_field().
  template <typename T>
  class FieldBuilder {
   public:
    FieldBuilder(Field& f, T P::*member, std::function<std::string(const T&)> namer = nullptr)
        : f_(f), member_(member), namer_(std::move(namer)) {}
    /// Makes the field optional with this default.
    FieldBuilder& set_default(T value, std::string text = {}) {
      f_.required = false;
      f_.default_text = !text.empty() ? text : namer_ ? namer_(value) : describe_value(value);
      f_.set_default = [member = member_, value](P& p) { p.*member = value; };
      return *this;
    }
    /// Rejects values below `lo` (numeric fields).
    FieldBuilder& lower_bound(double lo) {
      auto parse = std::move(f_.parse);
      f_.parse = [parse = std::move(parse), member = member_, lo](P& p, std::string_view text) {
        parse(p, text);
        check_bound(p.*member, lo, true);
      };
      return *this;
    }
    FieldBuilder& upper_bound(double hi) {
      auto parse = std::move(f_.parse);
      f_.parse = [parse = std::move(parse), member = member_, hi](P& p, std::string_view text) {
        parse(p, text);
        check_bound(p.*member, hi, false);
      };
      return *this;
    }
    FieldBuilder& describe(std::string text) {
      f_.description = std::move(text);
      return *this;
    }

   private:
    template <typename V>
    static void check_bound(const V& v, double bound, bool lower) {
      if constexpr (std::is_arithmetic_v<V>) {
        if (lower ? (static_cast<double>(v) < bound) : (static_cast<double>(v) > bound)) {
          WEFT_THROW(ValueError) << "value " << v << " is "
                                 << (lower ? "below the minimum " : "above the maximum ") << bound;
        }
      } else if constexpr (IsOpt<V>::value) {
        if (v.has_value()) check_bound(*v, bound, lower);
      }
    }
    template <typename V>
    struct IsOpt : detail::IsOptional<V> {};
    Field& f_;
    T P::*member_;
    std::function<std::string(const T&)> namer_;
  };

  template <typename T>
  FieldBuilder<T> field(std::string name, T P::*member) {
    Field& f = add(std::move(name), type_name<T>());
    f.parse = [member](P& p, std::string_view text) {
      if constexpr (detail::IsOptional<T>::value) {
        if (is_none(text)) {
          p.*member = std::nullopt;
        } else {
          p.*member = detail::parse_value<typename detail::IsOptional<T>::type>(text);
        }
      } else {
        p.*member = detail::parse_value<T>(text);
      }
    };
    return FieldBuilder<T>(f, member);
  }

  /// A field whose string values map to an enum (or any type) E. Accepts the listed spellings
  /// only; the error lists them.
  template <typename E>
  FieldBuilder<E> enum_field(std::string name, E P::*member,
                             std::vector<std::pair<std::string, E>> values) {
    std::string choices;
    for (auto& [k, v] : values) choices += (choices.empty() ? "" : "|") + k;
    Field& f = add(std::move(name), "{" + choices + "}");
    auto shared = std::make_shared<std::vector<std::pair<std::string, E>>>(std::move(values));
    f.parse = [member, shared, choices](P& p, std::string_view text) {
      for (auto& [k, v] : *shared) {
        if (text == k) {
          p.*member = v;
          return;
        }
      }
      WEFT_THROW(ValueError) << "expected one of " << choices;
    };
    return FieldBuilder<E>(f, member, [shared](const E& value) {
      for (auto& [k, v] : *shared)
        if (v == value) return k;
      return std::string("?");
    });
  }
  /// An optional enum: "None" leaves it empty.
  template <typename E>
  FieldBuilder<std::optional<E>> optional_enum_field(
      std::string name, std::optional<E> P::*member,
      std::vector<std::pair<std::string, E>> values) {
    std::string choices;
    for (auto& [k, v] : values) choices += (choices.empty() ? "" : "|") + k;
    Field& f = add(std::move(name), "{None|" + choices + "}");
    auto shared = std::make_shared<std::vector<std::pair<std::string, E>>>(std::move(values));
    f.parse = [member, shared, choices](P& p, std::string_view text) {
      if (is_none(text)) {
        p.*member = std::nullopt;
        return;
      }
      for (auto& [k, v] : *shared) {
        if (text == k) {
          p.*member = v;
          return;
        }
      }
      WEFT_THROW(ValueError) << "expected None or one of " << choices;
    };
    return FieldBuilder<std::optional<E>>(f, member, [shared](const std::optional<E>& value) {
      if (!value) return std::string("None");
      for (auto& [k, v] : *shared)
        if (v == *value) return k;
      return std::string("?");
    });
  }

  /// A whole-struct check run after all fields are set (and defaults applied); throws ValueError.
  void check(std::function<void(P&)> fn) { checks_.push_back(std::move(fn)); }
  /// Keys accepted and ignored (deprecated spellings some files still write).
  void ignore(std::string key) { ignored_.push_back(std::move(key)); }

  const std::vector<Field>& fields() const { return fields_; }
  const std::vector<std::string>& ignored() const { return ignored_; }
  const std::vector<std::function<void(P&)>>& checks() const { return checks_; }

 private:
  Field& add(std::string name, std::string type) {
    fields_.push_back(Field{});
    Field& f = fields_.back();
    f.name = std::move(name);
    f.type_name = std::move(type);
    return f;
  }
  template <typename T>
  static std::string type_name() {
    if constexpr (std::is_same_v<T, bool>)
      return "boolean";
    else if constexpr (std::is_integral_v<T>)
      return "int";
    else if constexpr (std::is_floating_point_v<T>)
      return "float";
    else if constexpr (std::is_same_v<T, std::string>)
      return "string";
    else if constexpr (std::is_same_v<T, Shape>)
      return "Shape(tuple)";
    else if constexpr (std::is_same_v<T, std::vector<double>>)
      return "tuple of floats";
    else if constexpr (std::is_same_v<T, DType>)
      return "dtype";
    else if constexpr (detail::IsOptional<T>::value)
      return "None or " + type_name<typename detail::IsOptional<T>::type>();
    else
      return "value";
  }
  template <typename T>
  static std::string describe_value(const T& v) {
    if constexpr (std::is_same_v<T, bool>)
      return v ? "True" : "False";
    else if constexpr (std::is_integral_v<T>)
      return std::to_string(v);
    else if constexpr (std::is_floating_point_v<T>)
      return format_float_attr(v);
    else if constexpr (std::is_same_v<T, std::string>)
      return v.empty() ? "''" : v;
    else if constexpr (std::is_same_v<T, Shape>)
      return format_shape_attr(v);
    else if constexpr (std::is_same_v<T, DType>)
      return dtype_name(v);
    else if constexpr (detail::IsOptional<T>::value)
      return v ? describe_value(*v) : "None";
    else
      return "(enum)";
  }

  std::vector<Field> fields_;
  std::vector<std::string> ignored_;
  std::vector<std::function<void(P&)>> checks_;
};

/// One field of an op's parameter list, for listings (`weft ops`).
struct ParamInfo {
  std::string name;
  std::string type;
  std::string default_value;  ///< empty when required
  bool required = true;
  std::string description;
};

namespace detail {
/// Thrown inside field parsers, re-thrown by parse_params with op/node/key context.
[[noreturn]] void rethrow_param_error(const std::string& op, const std::string& node,
                                      const std::string& key, std::string_view value,
                                      const std::string& type, const std::exception& e);
[[noreturn]] void throw_missing_param(const std::string& op, const std::string& node,
                                      const std::string& key, const std::string& type);
[[noreturn]] void throw_unknown_param(const std::string& op, const std::string& node,
                                      const std::string& key,
                                      const std::vector<std::string>& known);
/// Keys that are not op parameters: hidden `__x__` keys and MXNet's old user attributes.
bool is_hidden_attr_key(std::string_view key);
}  // namespace detail

/// Parses `attrs` into a P using P's schema. Throws ValueError naming op, node, key, value and
/// the expected type for a bad value; naming the key and the known keys for an unknown one; and
/// naming a missing required key. Hidden keys (`__shape__`, `lr_mult`, ...) are ignored.
template <typename P>
const ParamSchema<P>& param_schema() {
  static const ParamSchema<P> schema = [] {
    ParamSchema<P> s;
    P::declare(s);
    return s;
  }();
  return schema;
}

template <typename P>
P parse_params(const AttrMap& attrs, const std::string& op, const std::string& node) {
  const ParamSchema<P>& schema = param_schema<P>();
  P p{};
  for (const auto& f : schema.fields()) {
    auto it = attrs.find(f.name);
    if (it == attrs.end()) {
      if (f.required) detail::throw_missing_param(op, node, f.name, f.type_name);
      f.set_default(p);
      continue;
    }
    try {
      f.parse(p, it->second);
    } catch (const std::exception& e) {
      detail::rethrow_param_error(op, node, f.name, it->second, f.type_name, e);
    }
  }
  for (const auto& [key, value] : attrs) {
    if (detail::is_hidden_attr_key(key)) continue;
    bool known = false;
    for (const auto& f : schema.fields()) known = known || f.name == key;
    for (const auto& k : schema.ignored()) known = known || k == key;
    if (!known) {
      std::vector<std::string> names;
      for (const auto& f : schema.fields()) names.push_back(f.name);
      detail::throw_unknown_param(op, node, key, names);
    }
  }
  for (const auto& c : schema.checks()) {
    try {
      c(p);
    } catch (const std::exception& e) {
      WEFT_THROW(ValueError) << "op '" << op << "'"
                             << (node.empty() ? "" : " (node '" + node + "')")
                             << ": invalid parameters: " << e.what();
    }
  }
  return p;
}

/// The field list of P, for registry listings.
template <typename P>
std::vector<ParamInfo> param_info() {
  std::vector<ParamInfo> out;
  for (const auto& f : param_schema<P>().fields())
    out.push_back({f.name, f.type_name, f.default_text, f.required, f.description});
  return out;
}

/// A param struct with no fields, for ops without parameters.
struct NoParams {
  static void declare(ParamSchema<NoParams>&) {}
};

}  // namespace weft
