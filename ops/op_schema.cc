// Operator schemas from the registry, their JSON form, and the run-time parameter schema.
#include "ops/op_schema.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <typeindex>

namespace weft {
namespace {

constexpr std::string_view kNonePrefix = "None or ";

// The choices of an enumeration written {a|b|c} or {None|a|b} (empty for other types).
std::vector<std::string> enum_choices(std::string_view t) {
  std::vector<std::string> out;
  if (t.size() < 2 || t.front() != '{' || t.back() != '}') return out;
  size_t start = 1;
  while (start < t.size()) {
    const size_t end = t.find_first_of("|}", start);
    if (end == std::string_view::npos) break;
    out.emplace_back(t.substr(start, end - start));
    start = end + 1;
    if (t[end] == '}') break;
  }
  return out;
}

// A value of type `type` that lets an op with required params be parsed, so the schema can ask it
// for its inputs and outputs (Note [Operator schema]).
std::string placeholder(const OpSchemaParam& p) {
  const std::string& t = p.type;
  auto has = [&t](const char* word) { return t.find(word) != std::string::npos; };
  if (has("Shape") || has("tuple")) return "(1, 1)";
  if (has("bool")) return "False";
  if (has("int") || has("float") || has("double") || has("long")) return "1";
  if (!p.choices.empty()) return p.choices.front();
  if (t == "dtype") return "float32";
  return "1";
}

// Note [Operator schema]
// The registry knows an op's input names, output counts and visible outputs only for one parsed
// application (Op::input_names(attrs) and friends): Convolution has a bias input unless no_bias,
// RNN a cell state for LSTM, SliceChannel as many outputs as num_outputs says. The schema is what
// every frontend needs without attributes in hand, so it asks the op for concrete applications:
//  - the defaults, with a placeholder value for each required parameter (the first choice of an
//    enumeration, 1, (1, 1), False);
//  - each choice that may add inputs (no_bias=False, use_sequence_length=True, every choice of a
//    required enumeration such as RNN's mode), kept when it widens the list. Choices combine, so
//    the result is the widest list any choice gives; a call passes a prefix of it, leaving the
//    trailing optional inputs out;
//  - each boolean flipped, each enumeration choice and num_outputs-like integers 2 and 3, to find
//    the parameters the output counts depend on.
// Applications that fail to parse (a placeholder that breaks a cross-field check) are skipped.
// The Op API has no declaration of optional inputs or of what the arity depends on; if it gains
// one, this probing is what it replaces, and the schema's shape stays the same.

std::vector<std::string> widest_inputs(const Op& op, const OpSchema& s, const AttrMap& fill) {
  std::vector<AttrMap> candidates;
  for (const OpSchemaParam& p : s.params) {
    if (p.name == "no_bias") {
      candidates.push_back(fill);
      candidates.back()["no_bias"] = "False";
    } else if (p.name == "use_sequence_length") {
      candidates.push_back(fill);
      candidates.back()["use_sequence_length"] = "True";
    }
    if (p.required) {
      for (const std::string& c : p.choices) {
        candidates.push_back(fill);
        candidates.back()[p.name] = c;
      }
    }
  }
  std::vector<std::string> best = op.input_names(op.make_attrs(fill));
  AttrMap acc = fill;
  for (const AttrMap& c : candidates) {
    AttrMap trial = acc;
    for (const auto& [k, v] : c) {
      auto it = fill.find(k);
      if (it == fill.end() || it->second != v) trial[k] = v;
    }
    try {
      std::vector<std::string> names = op.input_names(op.make_attrs(trial));
      if (names.size() > best.size()) {
        best = std::move(names);
        acc = std::move(trial);
      }
    } catch (const std::exception&) {
    }
  }
  return best;
}

// The parameters whose value changes the number of outputs or visible outputs.
std::vector<std::string> output_params(const Op& op, const OpSchema& s, const AttrMap& fill) {
  std::vector<std::string> out;
  for (const OpSchemaParam& p : s.params) {
    std::vector<std::string> values;
    if (p.type == "boolean") {
      values = {"True", "False"};
    } else if (!p.choices.empty()) {
      values = p.choices;
    } else if (p.type == "int" && p.name.find("num_output") != std::string::npos) {
      values = {"2", "3"};
    }
    for (const std::string& v : values) {
      AttrMap trial = fill;
      trial[p.name] = v;
      try {
        OpAttrs a = op.make_attrs(trial);
        if (op.num_outputs(a) != s.num_outputs ||
            op.num_visible_outputs(a) != s.num_visible_outputs) {
          out.push_back(p.name);
          break;
        }
      } catch (const std::exception&) {
      }
    }
  }
  return out;
}

template <typename T>
std::vector<T> to_vector(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

nlohmann::json value_json(const ParamValue& v) {
  struct Visitor {
    nlohmann::json operator()(std::monostate) const { return nullptr; }
    nlohmann::json operator()(bool b) const { return b; }
    nlohmann::json operator()(int64_t i) const { return i; }
    nlohmann::json operator()(double d) const {
      if (std::isnan(d)) return "nan";
      if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
      return d;
    }
    nlohmann::json operator()(const std::string& s) const { return s; }
    nlohmann::json operator()(const std::vector<int64_t>& v) const { return v; }
    nlohmann::json operator()(const std::vector<double>& v) const {
      nlohmann::json a = nlohmann::json::array();
      for (double d : v) a.push_back((*this)(d));
      return a;
    }
  };
  return std::visit(Visitor{}, v);
}

nlohmann::json schema_json(const OpSchema& s) {
  nlohmann::json j;
  j["name"] = s.name;
  j["description"] = s.description;
  j["aliases"] = s.aliases;
  j["inputs"] = s.inputs_known ? nlohmann::json(s.inputs) : nlohmann::json(nullptr);
  j["variadic"] =
      s.variadic_param.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.variadic_param);
  j["outputs"] = s.num_outputs >= 0 ? nlohmann::json(s.outputs) : nlohmann::json(nullptr);
  j["num_outputs"] = s.num_outputs >= 0 ? nlohmann::json(s.num_outputs) : nlohmann::json(nullptr);
  j["num_visible_outputs"] =
      s.num_visible_outputs >= 0 ? nlohmann::json(s.num_visible_outputs) : nlohmann::json(nullptr);
  j["outputs_depend_on"] = s.outputs_depend_on;
  nlohmann::json params = nlohmann::json::array();
  for (const OpSchemaParam& p : s.params) {
    nlohmann::json q;
    q["name"] = p.name;
    q["type"] = p.type;
    q["required"] = p.required;
    q["default"] = value_json(p.default_value);
    q["default_text"] = p.default_text;
    q["description"] = p.description;
    if (!p.choices.empty()) q["choices"] = p.choices;
    params.push_back(std::move(q));
  }
  j["params"] = std::move(params);
  j["has_gradient"] = s.has_gradient;
  nlohmann::json kernels = nlohmann::json::array();
  if (s.cpu_kernel) kernels.push_back("cpu");
  if (s.cuda_kernel) kernels.push_back("cuda");
  j["kernels"] = std::move(kernels);
  j["runtime"] = s.runtime;
  return j;
}

}  // namespace

ParamValue typed_param_value(std::string_view type, std::string_view text) {
  const bool nullable = type.substr(0, kNonePrefix.size()) == kNonePrefix ||
                        type.substr(0, 6) == "{None|" || type.empty();
  if (nullable && is_none(text)) return std::monostate{};
  if (type.substr(0, kNonePrefix.size()) == kNonePrefix) type.remove_prefix(kNonePrefix.size());
  try {
    if (type == "boolean") return parse_bool(text);
    if (type == "int") return parse_int(text);
    if (type == "float") return parse_float(text);
    if (type == "Shape(tuple)") {
      if (is_none(text)) return std::monostate{};
      const Shape s = parse_shape(text);
      return std::vector<int64_t>(s.data(), s.data() + s.ndim());
    }
    if (type == "tuple of floats") return parse_float_tuple(text);
  } catch (const std::exception&) {
    // Not the type's spelling (a default written by hand): the text itself.
  }
  // Strings, enumerations and dtypes; the registry writes an empty string as ''.
  if (text == "''" || text == "\"\"") return std::string();
  return std::string(text);
}

OpSchema op_schema(const Op& op) {
  OpSchema s;
  s.name = op.name();
  s.description = op.description();
  s.aliases = op.aliases();
  s.runtime = op.has_runtime_params();
  AttrMap fill;
  for (const ParamInfo& p : op.param_info_list()) {
    OpSchemaParam q;
    q.name = p.name;
    q.type = p.type;
    q.required = p.required;
    q.default_text = p.required ? std::string() : p.default_value;
    if (!p.required) q.default_value = typed_param_value(p.type, p.default_value);
    q.description = p.description;
    q.choices = enum_choices(p.type);
    if (p.name == "num_args") s.variadic_param = p.name;
    if (p.required) fill[p.name] = placeholder(q);
    s.params.push_back(std::move(q));
  }
  try {
    OpAttrs a = op.make_attrs(fill);
    s.outputs = op.output_names(a);
    s.num_outputs = op.num_outputs(a);
    s.num_visible_outputs = op.num_visible_outputs(a);
    s.inputs = widest_inputs(op, s, fill);
    s.outputs_depend_on = output_params(op, s, fill);
  } catch (const std::exception&) {
    s.inputs.clear();
    s.inputs_known = false;
    s.outputs.clear();
    s.num_outputs = s.num_visible_outputs = -1;
  }
  s.has_gradient = static_cast<bool>(op.attr<FGradient>());
  s.cpu_kernel = op.has_kernel(DeviceType::kCPU);
  s.cuda_kernel = op.has_kernel(DeviceType::kCUDA);
  return s;
}

std::string op_schema_json(const OpSchema& schema, int indent) {
  return schema_json(schema).dump(indent);
}

std::string registry_schema_json(bool include_backward, int indent) {
  nlohmann::json all = nlohmann::json::array();
  for (const Op* op : OpRegistry::global().list()) {
    if (!include_backward && op->name().rfind("_backward", 0) == 0) continue;
    all.push_back(schema_json(op_schema(*op)));
  }
  return all.dump(indent);
}

// ---- parameters given at run time -------------------------------------------------------------

const char* runtime_param_type_name(RuntimeParamType type) {
  switch (type) {
    case RuntimeParamType::kInt:
      return "int";
    case RuntimeParamType::kFloat:
      return "float";
    case RuntimeParamType::kBool:
      return "boolean";
    case RuntimeParamType::kString:
      return "string";
    case RuntimeParamType::kShape:
      return "Shape(tuple)";
    case RuntimeParamType::kFloats:
      return "tuple of floats";
    case RuntimeParamType::kDType:
      return "dtype";
  }
  return "value";
}

void check_runtime_value(RuntimeParamType type, std::string_view text) {
  switch (type) {
    case RuntimeParamType::kInt:
      (void)parse_int(text);
      break;
    case RuntimeParamType::kFloat:
      (void)parse_float(text);
      break;
    case RuntimeParamType::kBool:
      (void)parse_bool(text);
      break;
    case RuntimeParamType::kShape:
      (void)parse_shape(text);
      break;
    case RuntimeParamType::kFloats:
      (void)parse_float_tuple(text);
      break;
    case RuntimeParamType::kDType:
      (void)parse_dtype(std::string(text));
      break;
    case RuntimeParamType::kString:
      break;
  }
}

const std::string* RuntimeParams::find(std::string_view name) const {
  const int i = schema ? schema->index(name) : -1;
  return i < 0 ? nullptr : &values[static_cast<size_t>(i)];
}

void RuntimeParamSchema::add(RuntimeParam param, const std::string& op, const char* noun) {
  WEFT_CHECK_AS(ValueError, !param.name.empty())
      << "register operator '" << op << "': a " << noun << " has no name";
  WEFT_CHECK_AS(ValueError, index(param.name) < 0)
      << "register operator '" << op << "': " << noun << " '" << param.name << "' appears twice";
  if (param.default_value) {
    try {
      check_runtime_value(param.type, *param.default_value);
    } catch (const std::exception& e) {
      WEFT_THROW(ValueError) << "register operator '" << op << "': the default '"
                             << *param.default_value << "' of " << noun << " '" << param.name
                             << "' is not a valid " << runtime_param_type_name(param.type) << ": "
                             << e.what();
    }
  }
  params_.push_back(std::move(param));
}

int RuntimeParamSchema::index(std::string_view name) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<ParamInfo> RuntimeParamSchema::info() const {
  std::vector<ParamInfo> out;
  for (const RuntimeParam& p : params_) {
    out.push_back(ParamInfo{p.name, runtime_param_type_name(p.type), p.default_value.value_or(""),
                            !p.default_value.has_value(), p.description});
  }
  return out;
}

void RuntimeParamSchema::install(Op& op, std::shared_ptr<const RuntimeParamSchema> schema) {
  WEFT_ICHECK(schema != nullptr);
  std::vector<ParamInfo> info = schema->info();
  op.set_param_schema(
      std::move(info),
      [schema](const AttrMap& dict, const std::string& o,
               const std::string& node) -> std::shared_ptr<const void> {
        auto p = std::make_shared<RuntimeParams>();
        p->schema = schema;
        p->values.reserve(schema->params_.size());
        for (const RuntimeParam& f : schema->params_) {
          const char* type = runtime_param_type_name(f.type);
          auto it = dict.find(f.name);
          if (it == dict.end()) {
            if (!f.default_value) detail::throw_missing_param(o, node, f.name, type);
            p->values.push_back(*f.default_value);
            continue;
          }
          try {
            check_runtime_value(f.type, it->second);
          } catch (const std::exception& e) {
            detail::rethrow_param_error(o, node, f.name, it->second, type, e);
          }
          p->values.push_back(it->second);
        }
        for (const auto& [key, value] : dict) {
          if (detail::is_hidden_attr_key(key) || schema->index(key) >= 0) continue;
          std::vector<std::string> names;
          for (const RuntimeParam& f : schema->params_) names.push_back(f.name);
          detail::throw_unknown_param(o, node, key, names);
        }
        return p;
      },
      std::type_index(typeid(RuntimeParams)));
}

}  // namespace weft
