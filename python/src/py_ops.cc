// Operators from Python: invoking any registered operator by name (attributes parsed once per
// distinct attribute set and cached), and the registry's description that weft.op and weft.sym
// generate their functions from.
#include <nanobind/stl/shared_ptr.h>

#include <list>
#include <mutex>
#include <unordered_map>

#include "ndarray/ops.h"
#include "ops/op.h"
#include "py_common.h"

namespace weft::py {

// Refuses in-place writes that autograd would lose (py_ndarray.cc).
void check_inplace_write(const NDArray& target, const std::vector<NDArray>& inputs,
                         const char* what);

namespace {

// Parsed attributes by "op\0key\0value\0...": repeated calls with the same attributes (the common
// case in a training loop) skip parsing. Bounded: the least recently used entry goes first.
class AttrCache {
 public:
  std::shared_ptr<const OpAttrs> get(const std::string& op, const AttrMap& attrs) {
    std::string key = op;
    for (const auto& [k, v] : attrs) {
      key.push_back('\0');
      key += k;
      key.push_back('\0');
      key += v;
    }
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return it->second->second;
    }
    auto parsed = make_op_attrs(op, attrs);  // throws ValueError naming op and attribute
    order_.emplace_front(key, parsed);
    index_[key] = order_.begin();
    if (order_.size() > kCapacity) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return parsed;
  }

 private:
  static constexpr size_t kCapacity = 4096;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const OpAttrs>>> order_;
  std::unordered_map<std::string, decltype(order_)::iterator> index_;
};

AttrCache& attr_cache() {
  static auto* cache = new AttrCache();  // leaked: used until the interpreter exits
  return *cache;
}

AttrMap to_attr_map(nb::handle attrs) {
  AttrMap out;
  if (attrs.is_none()) return out;
  for (auto [k, v] : nb::cast<nb::dict>(attrs)) {
    if (v.is_none()) continue;  // "not given": the op's default applies
    out[nb::cast<std::string>(k)] = attr_string(v);
  }
  return out;
}

// Invocation options writing into `out` (None, an NDArray or a list of them), refused while
// autograd records a write to an array it tracks.
InvokeOptions with_outputs(nb::handle out, const std::vector<NDArray>& inputs) {
  InvokeOptions options;
  if (out.is_none()) return options;
  if (nb::isinstance<NDArray>(out)) {
    options.outputs.push_back(nb::cast<NDArray>(out));
  } else {
    options.outputs = nb::cast<std::vector<NDArray>>(out);
  }
  for (const NDArray& o : options.outputs) check_inplace_write(o, inputs, "out=");
  return options;
}

std::vector<NDArray> invoke_py(const std::string& op, const std::vector<NDArray>& inputs,
                               nb::handle attrs, nb::handle out, nb::handle device) {
  auto parsed = attr_cache().get(op, to_attr_map(attrs));
  InvokeOptions options = with_outputs(out, inputs);
  if (!device.is_none()) options.device = to_device(device);
  return invoke(parsed, inputs, std::move(options));
}

// Parsed attributes as a Python object, so weft.op can cache them in a dict keyed by the call's
// Python values and skip converting them to strings on every call.
struct ParsedAttrs {
  std::shared_ptr<const OpAttrs> attrs;
};

nb::object invoke_parsed(const ParsedAttrs& p, nb::handle inputs_obj, nb::handle out) {
  // The inputs are a list or tuple of NDArrays (weft.op converts anything else first).
  if (!PyList_Check(inputs_obj.ptr()) && !PyTuple_Check(inputs_obj.ptr())) {
    throw nb::type_error("_invoke_parsed: inputs must be a list or tuple of NDArrays");
  }
  std::vector<NDArray> inputs;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(inputs_obj.ptr());
  PyObject** items = PySequence_Fast_ITEMS(inputs_obj.ptr());
  inputs.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    inputs.push_back(nb::cast<const NDArray&>(nb::handle(items[i])));
  InvokeOptions options = with_outputs(out, inputs);
  std::vector<NDArray> outs = invoke(p.attrs, inputs, std::move(options));
  if (outs.size() == 1) return nb::cast(std::move(outs[0]));
  return nb::cast(std::move(outs));
}

std::vector<std::string> enum_choices(const std::string& t);

// Attribute values that let an op with required params report its inputs and outputs.
std::string placeholder(const ParamInfo& p) {
  const std::string& t = p.type;
  if (t.find("Shape") != std::string::npos || t.find("tuple") != std::string::npos) return "(1, 1)";
  if (t.find("bool") != std::string::npos || t.find("boolean") != std::string::npos) return "False";
  if (t.find("int") != std::string::npos || t.find("float") != std::string::npos ||
      t.find("double") != std::string::npos || t.find("long") != std::string::npos) {
    return "1";
  }
  // An enumeration lists its choices as {'a', 'b'} or {a|b}: take the first.
  auto open = t.find('\'');
  if (open != std::string::npos) {
    auto close = t.find('\'', open + 1);
    if (close != std::string::npos) return t.substr(open + 1, close - open - 1);
  }
  std::vector<std::string> choices = enum_choices(t);
  return choices.empty() ? "1" : choices.front();
}

// The choices of an enumeration written {a|b|c} (empty for other types).
std::vector<std::string> enum_choices(const std::string& t) {
  std::vector<std::string> out;
  if (t.empty() || t.front() != '{' || t.find('|') == std::string::npos) return out;
  size_t start = 1;
  while (start < t.size()) {
    size_t end = t.find_first_of("|}", start);
    if (end == std::string::npos) break;
    out.push_back(t.substr(start, end - start));
    start = end + 1;
    if (t[end] == '}') break;
  }
  return out;
}

// The widest input list of an op whose inputs depend on its attributes (a bias unless no_bias,
// LSTM's cell state, a sequence_length input): the generated functions take every input
// positionally and drop trailing None, so the widest list serves every attribute choice.
std::vector<std::string> widest_inputs(const Op& op, const AttrMap& fill) {
  std::vector<AttrMap> candidates{fill};
  for (const ParamInfo& p : op.param_info_list()) {
    if (p.name == "no_bias") {
      candidates.push_back(fill);
      candidates.back()["no_bias"] = "False";
    } else if (p.name == "use_sequence_length") {
      candidates.push_back(fill);
      candidates.back()["use_sequence_length"] = "True";
    }
    if (p.required) {
      for (const std::string& c : enum_choices(p.type)) {
        candidates.push_back(fill);
        candidates.back()[p.name] = c;
      }
    }
  }
  // Options that add inputs combine: apply every widening choice that helped, in turn.
  std::vector<std::string> best = op.input_names(op.make_attrs(fill));
  AttrMap acc = fill;
  for (const AttrMap& c : candidates) {
    AttrMap trial = acc;
    for (const auto& [k, v] : c) {
      if (fill.count(k) == 0 || fill.at(k) != v) trial[k] = v;
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

nb::dict describe(const Op& op) {
  nb::dict d;
  d["name"] = op.name();
  d["aliases"] = op.aliases();
  d["description"] = op.description();
  nb::list params;
  bool variadic = false;
  AttrMap fill;
  for (const ParamInfo& p : op.param_info_list()) {
    nb::dict q;
    q["name"] = p.name;
    q["type"] = p.type;
    q["default"] = p.default_value;
    q["required"] = p.required;
    q["description"] = p.description;
    params.append(q);
    if (p.name == "num_args") variadic = true;
    if (p.required) fill[p.name] = placeholder(p);
  }
  d["params"] = params;
  d["variadic"] = variadic;
  nb::object inputs = nb::none();
  nb::object outputs = nb::none();
  try {
    OpAttrs a = op.make_attrs(fill);
    inputs = nb::cast(widest_inputs(op, fill));
    outputs = nb::cast(op.output_names(a));
    d["num_visible_outputs"] = op.num_visible_outputs(a);
  } catch (const std::exception&) {
    d["num_visible_outputs"] = 1;
  }
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["has_gradient"] = static_cast<bool>(op.attr<FGradient>());
  d["cpu"] = op.has_kernel(DeviceType::kCPU);
  d["cuda"] = op.has_kernel(DeviceType::kCUDA);
  return d;
}

}  // namespace

void init_ops(nb::module_& m) {
  m.def("_invoke", &invoke_py, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::none(),
        nb::arg("out") = nb::none(), nb::arg("device") = nb::none(),
        "Invokes operator `op` on `inputs` with attributes `attrs` (a dict; values are converted "
        "the way MXNet writes them); returns its visible outputs. Pushed; returns at once.");
  nb::class_<ParsedAttrs>(m, "_ParsedAttrs");
  m.def(
      "_parse_attrs",
      [](const std::string& op, nb::handle attrs) {
        return ParsedAttrs{attr_cache().get(op, to_attr_map(attrs))};
      },
      nb::arg("op"), nb::arg("attrs") = nb::none(),
      "Parses an operator's attributes once, for _invoke_parsed.");
  m.def("_invoke_parsed", &invoke_parsed, nb::arg("attrs"), nb::arg("inputs"),
        nb::arg("out") = nb::none(),
        "Invokes with parsed attributes on a list of NDArrays; returns the one visible output, "
        "or a list when there are several.");
  m.def("_list_ops", []() {
    nb::list out;
    for (const Op* op : OpRegistry::global().list()) out.append(describe(*op));
    return out;
  });
  m.def(
      "_describe_op", [](const std::string& name) { return describe(get_op(name)); },
      nb::arg("name"));
  m.def(
      "_has_op", [](const std::string& name) { return OpRegistry::global().find(name) != nullptr; },
      nb::arg("name"));
  init_register_op(m);
}

}  // namespace weft::py
