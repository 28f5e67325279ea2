// One operator's schema as every frontend reads it (input names, variadic inputs, typed
// parameters with defaults, output counts), built from the registry; and the parameter schema of
// operators defined at run time, shared by the C ABI and Python.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ops/op.h"

namespace weft {

/// A parameter value typed by the parameter's type: None, a boolean, an integer, a float, a
/// string (strings, enumerations, dtypes), or a tuple of integers (shapes) or of floats.
using ParamValue = std::variant<std::monostate, bool, int64_t, double, std::string,
                                std::vector<int64_t>, std::vector<double>>;

/// The typed value of `text` for a parameter of type `type` (a ParamInfo::type spelling:
/// "int", "float", "boolean", "Shape(tuple)", "None or int", "{max|avg}", ...). Text that does not
/// parse as the type stays a string. Thread-safe.
ParamValue typed_param_value(std::string_view type, std::string_view text);

/// One parameter of an operator's schema.
struct OpSchemaParam {
  std::string name;
  std::string type;  ///< as ParamInfo spells it ("int", "Shape(tuple)", "{max|avg}")
  bool required = true;
  std::string default_text;  ///< the default as the registry writes it; empty when required
  ParamValue default_value;  ///< the default, typed (None when required)
  std::string description;
  /// The choices of an enumeration ("{max|avg}"), empty for other types.
  std::vector<std::string> choices;
};

/// What the registry says about one operator. See Note [Operator schema] in op_schema.cc for how
/// the parts that depend on parameters are found.
struct OpSchema {
  std::string name;
  std::string description;
  std::vector<std::string> aliases;
  /// The widest list of input names any parameter choice gives (a bias unless no_bias, ...); an
  /// application passes a prefix of it. Empty and `inputs_known` false when no parse succeeded.
  std::vector<std::string> inputs;
  bool inputs_known = true;
  /// The parameter that counts a variadic operator's inputs ("num_args"); empty otherwise.
  std::string variadic_param;
  /// Output names, the output count (hidden outputs included) and the visible count, at the
  /// defaults; -1 counts when no parse succeeded.
  std::vector<std::string> outputs;
  int num_outputs = -1;
  int num_visible_outputs = -1;
  /// Parameters whose value changes the output counts (SliceChannel's num_outputs, BatchNorm's
  /// output_mean_var); empty when the counts are fixed.
  std::vector<std::string> outputs_depend_on;
  std::vector<OpSchemaParam> params;
  bool has_gradient = false;
  bool cpu_kernel = false;
  bool cuda_kernel = false;
  /// Defined at run time (a foreign or Python operator).
  bool runtime = false;
};

/// The schema of `op`. Pure; thread-safe once the op is registered.
OpSchema op_schema(const Op& op);
/// The schema as a JSON object (docs/OPERATORS.md lists its keys). Non-finite float defaults are
/// written as the strings "inf", "-inf" and "nan".
std::string op_schema_json(const OpSchema& schema, int indent = -1);
/// Every registered operator's schema as a JSON array sorted by name; `_backward_*` operators
/// only with `include_backward`.
std::string registry_schema_json(bool include_backward = false, int indent = -1);

// ---- parameters given at run time -------------------------------------------------------------

/// The types a run-time parameter may have. Each frontend maps its own spelling onto these (the
/// C ABI's "bool"/"shape", Python's "str"/"floats").
enum class RuntimeParamType { kInt, kFloat, kBool, kString, kShape, kFloats, kDType };

/// The registry's spelling of a type ("boolean", "Shape(tuple)", ...), as built-in ops write it.
const char* runtime_param_type_name(RuntimeParamType type);

/// One parameter of an operator defined at run time.
struct RuntimeParam {
  std::string name;
  RuntimeParamType type = RuntimeParamType::kString;
  std::optional<std::string> default_value;  ///< none: required
  std::string description;
};

class RuntimeParamSchema;

/// The parsed parameters of an operator defined at run time: every parameter's text (given or
/// default) in schema order, each checked against its type. Plain C++: made and freed on any
/// thread.
struct RuntimeParams {
  std::shared_ptr<const RuntimeParamSchema> schema;
  std::vector<std::string> values;
  /// The value of parameter `name`, or null when the schema has none.
  const std::string* find(std::string_view name) const;
};

/// The parameter list of an operator defined at run time and its parser (what ParamSchema<P> is
/// for a built-in op). Built before registration, immutable afterwards; thread-safe to read.
class RuntimeParamSchema {
 public:
  /// Adds a parameter. Throws ValueError naming `op` when the name is empty or taken, or when the
  /// default does not parse as the type; `noun` names a parameter in those messages ("attribute"
  /// for the C ABI, "parameter" for Python).
  void add(RuntimeParam param, const std::string& op, const char* noun = "parameter");
  const std::vector<RuntimeParam>& params() const { return params_; }
  /// The index of parameter `name`, or -1.
  int index(std::string_view name) const;
  /// The listing form (Op::param_info_list).
  std::vector<ParamInfo> info() const;
  /// Installs `schema` as `op`'s parameters: Op::set_param_schema with a parser that makes
  /// RuntimeParams, erroring like parse_params (missing, unknown or malformed keys name op, node,
  /// key and type).
  static void install(Op& op, std::shared_ptr<const RuntimeParamSchema> schema);

 private:
  std::vector<RuntimeParam> params_;
};

/// Checks that `text` parses as `type`; throws ValueError (with no context) otherwise.
void check_runtime_value(RuntimeParamType type, std::string_view text);

}  // namespace weft
