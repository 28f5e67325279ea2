// Operators from Python: invoking any registered operator by name (one entry point, with the
// attribute cache every by-name caller shares, Note [Attribute cache] in ops/attr_cache.cc), and
// the registry's operator schema that weft.op and weft.sym generate their functions from.
#include <nanobind/stl/shared_ptr.h>

#include "ndarray/ops.h"
#include "ops/attr_cache.h"
#include "ops/op.h"
#include "ops/op_schema.h"
#include "py_common.h"

namespace weft::py {

// Refuses in-place writes that autograd would lose (py_ndarray.cc).
void check_inplace_write(const NDArray& target, const std::vector<NDArray>& inputs,
                         const char* what);

namespace {

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

// weft.op's and the array methods' one way into C++: the inputs are a list or tuple of NDArrays
// (weft.op converts anything else first), the attributes a dict or None. The attributes' strings
// are made on each call (cheap next to the push) and parsed once per thread and distinct set by
// cached_op_attrs, the cache C++ invoke and the C ABI use.
std::vector<NDArray> invoke_py(const std::string& op, nb::handle inputs_obj, nb::handle attrs,
                               nb::handle out, nb::handle device) {
  std::vector<NDArray> inputs;
  if (PyList_Check(inputs_obj.ptr()) || PyTuple_Check(inputs_obj.ptr())) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(inputs_obj.ptr());
    PyObject** items = PySequence_Fast_ITEMS(inputs_obj.ptr());
    inputs.reserve(static_cast<size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      inputs.push_back(nb::cast<const NDArray&>(nb::handle(items[i])));
  } else {
    inputs = nb::cast<std::vector<NDArray>>(inputs_obj);
  }
  static const AttrMap kNoAttrs;
  std::shared_ptr<const OpAttrs> parsed;
  if (attrs.is_none() || (PyDict_Check(attrs.ptr()) && PyDict_GET_SIZE(attrs.ptr()) == 0)) {
    parsed = cached_op_attrs(op, kNoAttrs);
  } else {
    parsed = cached_op_attrs(op, to_attr_map(attrs));
  }
  InvokeOptions options = with_outputs(out, inputs);
  if (!device.is_none()) options.device = to_device(device);
  return invoke(parsed, inputs, std::move(options));
}

nb::object py_value(const ParamValue& v) {
  struct Visitor {
    nb::object operator()(std::monostate) const { return nb::none(); }
    nb::object operator()(bool b) const { return nb::bool_(b); }
    nb::object operator()(int64_t i) const { return nb::int_(i); }
    nb::object operator()(double d) const { return nb::float_(d); }
    nb::object operator()(const std::string& s) const { return nb::str(s.c_str(), s.size()); }
    nb::object operator()(const std::vector<int64_t>& v) const {
      nb::list items;
      for (int64_t i : v) items.append(nb::int_(i));
      return nb::tuple(items);
    }
    nb::object operator()(const std::vector<double>& v) const {
      nb::list items;
      for (double d : v) items.append(nb::float_(d));
      return nb::tuple(items);
    }
  };
  return std::visit(Visitor{}, v);
}

// The operator's schema (ops/op_schema.h) as the dict weft.op and weft.sym generate from, with
// typed defaults (tuples for shapes).
nb::dict describe(const Op& op) {
  const OpSchema s = op_schema(op);
  nb::dict d;
  d["name"] = s.name;
  d["aliases"] = s.aliases;
  d["description"] = s.description;
  nb::list params;
  for (const OpSchemaParam& p : s.params) {
    nb::dict q;
    q["name"] = p.name;
    q["type"] = p.type;
    q["default"] = py_value(p.default_value);
    q["default_text"] = p.default_text;
    q["required"] = p.required;
    q["description"] = p.description;
    q["choices"] = p.choices;
    params.append(q);
  }
  d["params"] = params;
  d["variadic"] = s.variadic_param.empty() ? nb::object(nb::none()) : nb::cast(s.variadic_param);
  d["inputs"] = s.inputs_known ? nb::cast(s.inputs) : nb::object(nb::none());
  d["outputs"] = s.num_outputs >= 0 ? nb::cast(s.outputs) : nb::object(nb::none());
  d["num_outputs"] = s.num_outputs >= 0 ? nb::cast(s.num_outputs) : nb::object(nb::none());
  // One visible output when the schema cannot tell: what a generated stub then promises.
  d["num_visible_outputs"] = s.num_visible_outputs >= 0 ? s.num_visible_outputs : 1;
  d["outputs_depend_on"] = s.outputs_depend_on;
  d["has_gradient"] = s.has_gradient;
  d["cpu"] = s.cpu_kernel;
  d["cuda"] = s.cuda_kernel;
  d["runtime"] = s.runtime;
  return d;
}

}  // namespace

void init_ops(nb::module_& m) {
  m.def("_invoke", &invoke_py, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::none(),
        nb::arg("out") = nb::none(), nb::arg("device") = nb::none(),
        "Invokes operator `op` on `inputs` (a list of NDArrays) with attributes `attrs` (a dict; "
        "values are converted the way MXNet writes them, None means the op's default); returns "
        "the list of its visible outputs. Pushed; returns at once.");
  m.def("_list_ops", []() {
    nb::list out;
    for (const Op* op : OpRegistry::global().list()) out.append(describe(*op));
    return out;
  });
  m.def(
      "_describe_op", [](const std::string& name) { return describe(get_op(name)); },
      nb::arg("name"));
  m.def(
      "_op_schema_json",
      [](const std::string& name, bool include_backward) {
        return name.empty() ? registry_schema_json(include_backward)
                            : op_schema_json(op_schema(get_op(name)));
      },
      nb::arg("name") = "", nb::arg("include_backward") = false,
      "The registry's schema of operator `name` as JSON (every operator's, as an array, when "
      "`name` is empty): the same text the C ABI's weft_op_schema gives.");
  m.def(
      "_has_op", [](const std::string& name) { return OpRegistry::global().find(name) != nullptr; },
      nb::arg("name"));
  init_register_op(m);
}

}  // namespace weft::py
