// Static graphs from Python: weft.graph.Symbol (MXNet's symbol API over graph::Symbol), the
// executor a symbol binds to and the bundled model builders (files: py_io.cc). Everything that may
// wait on the engine releases the GIL, so operators written in Python can run on the engine's
// workers meanwhile.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/unique_ptr.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "graph/executor.h"
#include "graph/models.h"
#include "graph/symbol.h"
#include "py_common.h"

namespace weft::py {
namespace {

using graph::Executor;
using graph::Symbol;
using ArrayMap = std::map<std::string, NDArray, std::less<>>;

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

nb::object shape_or_none(const Shape& s, bool partial) {
  if (!s.rank_known()) return partial ? nb::object(nb::tuple()) : nb::none();
  nb::list dims;
  // MXNet's partial inference writes unknown dimensions as 0.
  for (int i = 0; i < s.ndim(); ++i) dims.append(s[i] < 0 ? 0 : s[i]);
  return nb::tuple(dims);
}

nb::object dtype_object(DType t) {
  if (t == DType::kUnknown) return nb::none();
  const std::string name = dtype_name(t);
  try {
    return nb::module_::import_("numpy").attr("dtype")(name);
  } catch (const nb::python_error&) {
    return nb::str(name.c_str());  // bfloat16: NumPy has no such dtype
  }
}

// Positional values (in list_arguments() order, None skipped) and keyword values by name.
template <typename F>
void for_each_input(const Symbol& s, nb::args args, nb::kwargs kwargs, const char* what, F fn) {
  if (args.size() > 0) {
    const std::vector<std::string> names = s.list_arguments();
    if (args.size() > names.size()) {
      throw ValueError(std::string(what) + ": " + std::to_string(args.size()) +
                       " positional values for " + std::to_string(names.size()) + " arguments (" +
                       join(names) + ")");
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_none()) fn(names[i], args[i]);
    }
  }
  for (auto [k, v] : kwargs) {
    if (!v.is_none()) fn(nb::cast<std::string>(k), v);
  }
}

nb::tuple infer_shape(const Symbol& s, nb::args args, nb::kwargs kwargs, bool partial) {
  graph::InferInputs in;
  for_each_input(s, args, kwargs, "infer_shape", [&](const std::string& name, nb::handle v) {
    in.shapes[name] = to_shape(v, ("infer_shape: " + name).c_str());
  });
  graph::InferredShapes r;
  {
    nb::gil_scoped_release release;
    r = s.infer_shape(in, !partial);
  }
  auto list = [&](const std::vector<Shape>& shapes) {
    nb::list out;
    for (const Shape& sh : shapes) out.append(shape_or_none(sh, partial));
    return out;
  };
  return nb::make_tuple(list(r.arg_shapes), list(r.out_shapes), list(r.aux_shapes));
}

nb::tuple infer_type(const Symbol& s, nb::args args, nb::kwargs kwargs) {
  graph::InferInputs in;
  for_each_input(s, args, kwargs, "infer_type",
                 [&](const std::string& name, nb::handle v) { in.dtypes[name] = to_dtype(v); });
  graph::InferredShapes r;
  {
    nb::gil_scoped_release release;
    r = s.infer_shape(in, false);
  }
  auto list = [](const std::vector<DType>& types) {
    nb::list out;
    for (DType t : types) out.append(dtype_object(t));
    return out;
  };
  return nb::make_tuple(list(r.arg_types), list(r.out_types), list(r.aux_types));
}

AttrMap to_attrs(nb::handle attrs) {
  AttrMap out;
  if (attrs.is_none()) return out;
  for (auto [k, v] : nb::cast<nb::dict>(attrs)) {
    if (v.is_none()) continue;  // not given: the op's default applies
    out[nb::cast<std::string>(k)] = attr_string(v);
  }
  return out;
}

Symbol make_op(const std::string& op, nb::handle inputs, nb::handle attrs,
               std::optional<std::string> name) {
  std::vector<Symbol> in;
  size_t i = 0;
  for (nb::handle x : nb::iter(inputs)) {
    if (x.is_none()) {
      in.emplace_back();  // created as the variable <name>_<input name>
    } else if (nb::isinstance<Symbol>(x)) {
      in.push_back(nb::cast<Symbol>(x));
    } else {
      throw nb::type_error((op + ": input " + std::to_string(i) + " is a " +
                            nb::inst_name(x).c_str() + "; symbols take Symbol inputs")
                               .c_str());
    }
    ++i;
  }
  return Symbol::op(op, std::move(in), to_attrs(attrs), name.value_or(""));
}

std::string symbol_repr(const Symbol& s) {
  if (s.empty()) return "<Symbol (empty)>";
  if (s.num_outputs() == 1) return "<Symbol " + s.name() + ">";
  return "<Symbol group [" + join(s.list_outputs()) + "]>";
}

// ---- executor --------------------------------------------------------------------------------

// A bound executor and what Python asks of it by name. graph::Executor takes calls from one
// thread at a time; `mutex` keeps it that way when Python threads share one executor. It is only
// ever taken with the GIL released (locked()), so a thread waiting for it never holds the GIL
// that an engine operator written in Python needs to finish.
struct PyExecutor {
  std::unique_ptr<Executor> exec;
  std::vector<std::string> arg_names, aux_names, output_names;
  std::mutex mutex;

  template <typename F>
  auto locked(F&& f) {
    nb::gil_scoped_release release;
    std::lock_guard lock(mutex);
    return f();
  }

  ~PyExecutor() {
    // Destruction waits for the last run.
    locked([&] { exec.reset(); });
  }

  nb::list outputs() {
    nb::list out;
    for (const NDArray& a : locked([&] { return exec->outputs(); })) out.append(a);
    return out;
  }

  nb::dict output_dict() {
    const std::vector<NDArray> outs = locked([&] { return exec->outputs(); });
    nb::dict d;
    for (size_t i = 0; i < outs.size() && i < output_names.size(); ++i)
      d[output_names[i].c_str()] = outs[i];
    return d;
  }

  nb::list output_shapes() {
    nb::list out;
    for (const Shape& s : locked([&] { return exec->output_shapes(); })) out.append(from_shape(s));
    return out;
  }

  // kind: 0 arguments, 1 auxiliary states, 2 gradients (arguments without one left out).
  nb::dict arrays(int kind) {
    const std::vector<std::string>& names = kind == 1 ? aux_names : arg_names;
    const std::vector<NDArray> found = locked([&] {
      std::vector<NDArray> v;
      for (const std::string& n : names)
        v.push_back(kind == 0 ? exec->arg(n) : kind == 1 ? exec->aux(n) : exec->grad(n));
      return v;
    });
    nb::dict d;
    for (size_t i = 0; i < names.size(); ++i) {
      if (!found[i].is_none()) d[names[i].c_str()] = found[i];
    }
    return d;
  }

  nb::list forward(bool is_train, nb::kwargs inputs) {
    std::vector<std::string> names;
    std::vector<nb::handle> values;
    for (auto [k, v] : inputs) {
      names.push_back(nb::cast<std::string>(k));
      values.push_back(v);
      if (!contains(arg_names, names.back())) {
        throw ValueError("forward: '" + names.back() + "' is not an argument of the executor" +
                         (contains(aux_names, names.back()) ? " (it is an auxiliary state)" : "") +
                         "; arguments: " + join(arg_names));
      }
    }
    std::vector<NDArray> src;
    for (size_t i = 0; i < names.size(); ++i) {
      const NDArray dst = locked([&] { return exec->arg(names[i]); });
      const DType dt = dst.dtype();
      src.push_back(to_array(values[i], dst.device(), &dt));
    }
    std::string error;
    locked([&] {
      std::vector<NDArray> dst;
      for (size_t i = 0; i < names.size() && error.empty(); ++i) {
        dst.push_back(exec->arg(names[i]));
        if (src[i].shape() != dst[i].shape()) {
          error = "forward: input '" + names[i] + "' has shape " + src[i].shape().to_string() +
                  ", the executor is bound for " + dst[i].shape().to_string() +
                  "; reshape() it for new shapes";
        }
      }
      if (!error.empty()) return;
      for (size_t i = 0; i < names.size(); ++i) {
        if (!src[i].shares_storage_with(dst[i])) src[i].copy_to(dst[i]);
      }
      exec->forward(is_train);
    });
    if (!error.empty()) throw ShapeError(error);
    return outputs();
  }

  void backward(nb::handle out_grads) {
    std::vector<NDArray> grads;
    auto one = [&](nb::handle g) {
      grads.push_back(g.is_none() ? NDArray() : to_array(g, Device::cpu(), nullptr));
    };
    if (nb::isinstance<NDArray>(out_grads)) {
      one(out_grads);
    } else if (!out_grads.is_none()) {
      for (nb::handle g : nb::iter(out_grads)) one(g);
    }
    locked([&] { exec->backward(grads); });
  }

  void reshape(nb::kwargs shapes) {
    graph::InferInputs in;
    for (auto [k, v] : shapes) {
      const std::string name = nb::cast<std::string>(k);
      if (!contains(arg_names, name) && !contains(aux_names, name)) {
        throw ValueError("reshape: '" + name +
                         "' is not an input of the executor (arguments: " + join(arg_names) + ")");
      }
      in.shapes[name] = to_shape(v, ("reshape: " + name).c_str());
    }
    locked([&] { exec->reshape(in); });
  }
};

GradReq parse_grad_req(nb::handle v, const std::string& name) {
  const std::string s = nb::cast<std::string>(v);
  if (s == "write") return GradReq::kWrite;
  if (s == "add") return GradReq::kAdd;
  if (s == "null") return GradReq::kNull;
  throw ValueError("bind: grad_req '" + s + "'" + (name.empty() ? "" : " for '" + name + "'") +
                   ": expected 'write', 'add' or 'null'");
}

// args/aux given as a dict by name or a list in `names` order (None skipped).
// With `allow_extra`, names the symbol does not have are skipped (a checkpoint's parameters
// bound to a part of its graph).
ArrayMap to_array_map(nb::handle given, const std::vector<std::string>& names, Device device,
                      const char* what, const std::vector<std::string>& other, bool allow_extra) {
  ArrayMap out;
  if (given.is_none()) return out;
  auto add = [&](const std::string& name, nb::handle v) {
    if (v.is_none()) return;
    if (!contains(names, name)) {
      if (allow_extra && !contains(other, name)) return;
      throw ValueError(std::string("bind: ") + what + " has '" + name + "', which is not " +
                       (contains(other, name) ? "one of them (it belongs in the other dict)"
                                              : "a variable of the symbol (allow_extra=True "
                                                "skips such arrays)") +
                       "; expected one of: " + join(names));
    }
    out[name] = to_array(v, device, nullptr);
  };
  if (nb::isinstance<nb::dict>(given)) {
    for (auto [k, v] : nb::cast<nb::dict>(given)) add(nb::cast<std::string>(k), v);
    return out;
  }
  size_t i = 0;
  for (nb::handle v : nb::iter(given)) {
    if (i >= names.size()) {
      throw ValueError(std::string("bind: more ") + what + " than the symbol has (" + join(names) +
                       ")");
    }
    add(names[i++], v);
  }
  return out;
}

std::unique_ptr<PyExecutor> bind(const Symbol& s, nb::handle device, nb::handle args,
                                 nb::handle aux, nb::handle grad_req, nb::handle shapes,
                                 nb::handle dtypes, bool fuse, bool allow_extra, bool layouts,
                                 uint32_t bulk) {
  auto g = std::make_shared<const graph::Graph>(s.to_graph());
  const std::vector<std::string> arg_names = g->list_arguments();
  const std::vector<std::string> aux_names = g->list_auxiliary_states();
  graph::BindOptions bo;
  bo.device = to_device(device);
  bo.fuse = fuse;
  bo.layouts = layouts;
  if (bulk < 1) throw ValueError("bind: bulk must be at least 1 (1 pushes every node alone)");
  bo.bulk_max_nodes = bulk;
  auto check_input = [&](const std::string& name, const char* what) {
    if (!contains(arg_names, name) && !contains(aux_names, name)) {
      throw ValueError(std::string("bind: ") + what + " given for '" + name +
                       "', which is not a variable of the symbol (arguments: " + join(arg_names) +
                       ")");
    }
  };
  if (!shapes.is_none()) {
    for (auto [k, v] : nb::cast<nb::dict>(shapes)) {
      const std::string name = nb::cast<std::string>(k);
      check_input(name, "a shape");
      bo.inputs.shapes[name] = to_shape(v, ("bind: shape of " + name).c_str());
    }
  }
  if (!dtypes.is_none()) {
    for (auto [k, v] : nb::cast<nb::dict>(dtypes)) {
      const std::string name = nb::cast<std::string>(k);
      check_input(name, "a dtype");
      bo.inputs.dtypes[name] = to_dtype(v);
    }
  }
  if (PyUnicode_Check(grad_req.ptr())) {
    bo.default_grad_req = parse_grad_req(grad_req, "");
  } else if (nb::isinstance<nb::dict>(grad_req)) {
    for (auto [k, v] : nb::cast<nb::dict>(grad_req)) {
      const std::string name = nb::cast<std::string>(k);
      if (!contains(arg_names, name)) {
        throw ValueError(
            "bind: grad_req given for '" + name +
            "', which is not an argument of the symbol (arguments: " + join(arg_names) + ")");
      }
      bo.grad_req[name] = parse_grad_req(v, name);
    }
  } else if (!grad_req.is_none()) {
    size_t i = 0;
    for (nb::handle v : nb::iter(grad_req)) {
      if (i >= arg_names.size()) throw ValueError("bind: more grad_req values than arguments");
      bo.grad_req[arg_names[i]] = parse_grad_req(v, arg_names[i]);
      ++i;
    }
  }
  ArrayMap a = to_array_map(args, arg_names, bo.device, "args", aux_names, allow_extra);
  ArrayMap x = to_array_map(aux, aux_names, bo.device, "aux", arg_names, allow_extra);

  auto out = std::make_unique<PyExecutor>();
  out->arg_names = arg_names;
  out->aux_names = aux_names;
  out->output_names = g->list_outputs();
  nb::gil_scoped_release release;
  out->exec = Executor::bind(std::move(g), bo, std::move(a), std::move(x));
  return out;
}

// A naming scope as a Python context manager: see graph::NameScope.
struct PyNameScope {
  explicit PyNameScope(std::string p) : prefix(std::move(p)) {}
  std::string prefix;
  std::unique_ptr<graph::NameScope> scope;
};

}  // namespace

void init_graph(nb::module_& m) {
  nb::class_<Symbol>(m, "Symbol",
                     "A symbolic graph: one or more outputs of immutable nodes (MXNet's Symbol). "
                     "Build with weft.sym, load with weft.graph.load, run with bind().")
      .def_static(
          "var",
          [](const std::string& name, nb::handle shape, nb::handle dtype, nb::handle attr) {
            const Shape s = shape.is_none() ? Shape() : to_shape(shape, "Variable: shape");
            const DType t = dtype.is_none() ? DType::kUnknown : to_dtype(dtype);
            return Symbol::variable(name, s, t, to_attrs(attr));
          },
          nb::arg("name"), nb::arg("shape") = nb::none(), nb::arg("dtype") = nb::none(),
          nb::arg("attr") = nb::none(),
          "A variable (an input or a learned parameter), with an optional declared shape, dtype "
          "and attributes such as __lr_mult__.")
      .def_static("_op", &make_op, nb::arg("op_name"), nb::arg("inputs"),
                  nb::arg("attrs") = nb::none(), nb::arg("name") = nb::none(),
                  "Applies operator `op_name` to `inputs` (None: created as the variable "
                  "<name>_<input>), with attributes converted the way MXNet writes them.")
      .def_static("group", &Symbol::group, nb::arg("symbols"),
                  "The outputs of every symbol, in order (MXNet's Group).")
      .def_static(
          "load",
          [](const std::filesystem::path& path) {
            nb::gil_scoped_release release;
            return Symbol::load(path);
          },
          nb::arg("path"), "Reads an MXNet symbol JSON file (any MXNet version's layout).")
      .def_static(
          "from_json", [](const std::string& text) { return Symbol::from_json(text); },
          nb::arg("text"), "Parses MXNet symbol JSON text.")
      .def("tojson", &Symbol::to_json, "MXNet symbol JSON (the >= 1.0 layout).")
      .def(
          "save", [](const Symbol& s, const std::filesystem::path& path) { s.save(path); },
          nb::arg("path"), "Writes tojson() to `path`.")
      .def("list_arguments", &Symbol::list_arguments,
           "Variables that are not auxiliary states (inputs, labels, parameters), DFS order.")
      .def("list_outputs", &Symbol::list_outputs, "One name per output.")
      .def("list_auxiliary_states", &Symbol::list_auxiliary_states,
           "Variables operators update in place (BatchNorm's moving statistics).")
      .def("list_inputs", &Symbol::list_inputs, "Every variable, DFS order.")
      .def("get_internals", &Symbol::get_internals,
           "A group of every output of every node (index by name, e.g. ['fc1_output']).")
      .def(
          "__getitem__",
          [](const Symbol& s, nb::handle key) {
            if (PyUnicode_Check(key.ptr())) return s[nb::cast<std::string>(key)];
            const int64_t n = static_cast<int64_t>(s.num_outputs());
            int64_t i = nb::cast<int64_t>(key);
            if (i < -n || i >= n) {
              throw nb::index_error(("Symbol: output " + std::to_string(i) +
                                     " is out of range; the symbol has " + std::to_string(n) +
                                     " outputs")
                                        .c_str());
            }
            return s[static_cast<size_t>(i < 0 ? i + n : i)];
          },
          nb::arg("key"))
      .def("__len__", &Symbol::num_outputs)
      .def_prop_ro(
          "name",
          [](const Symbol& s) -> std::optional<std::string> {
            if (s.num_outputs() != 1) return std::nullopt;
            return s.name();
          },
          "The node name (None for a group).")
      .def_prop_ro(
          "op_name", [](const Symbol& s) { return s.op_name(); },
          "The operator of a single-output symbol ('null' for a variable).")
      .def(
          "attr", [](const Symbol& s, const std::string& key) { return s.attr(key); },
          nb::arg("key"), "The attribute `key` of this node (None when unset).")
      .def(
          "list_attr",
          [](const Symbol& s) {
            return std::map<std::string, std::string>(s.list_attr().begin(), s.list_attr().end());
          },
          "Every attribute of this node (operator parameters and hidden keys).")
      .def(
          "infer_shape",
          [](const Symbol& s, nb::args a, nb::kwargs k) { return infer_shape(s, a, k, false); },
          "infer_shape(*shapes, **shapes) -> (arg_shapes, out_shapes, aux_shapes): shapes in "
          "list_arguments(), list_outputs() and list_auxiliary_states() order, from input "
          "shapes given by name or positionally. Raises weft.ShapeError naming what is missing "
          "when a shape cannot be inferred.")
      .def(
          "infer_shape_partial",
          [](const Symbol& s, nb::args a, nb::kwargs k) { return infer_shape(s, a, k, true); },
          "Like infer_shape, but what cannot be inferred comes back as 0 dimensions or ().")
      .def("infer_type", &infer_type,
           "infer_type(*dtypes, **dtypes) -> (arg_types, out_types, aux_types) as NumPy dtypes "
           "(None where unknown).")
      .def("bind", &bind, nb::arg("device") = nb::none(), nb::arg("args") = nb::none(),
           nb::arg("aux") = nb::none(), nb::arg("grad_req") = "null",
           nb::arg("shapes") = nb::none(), nb::arg("dtypes") = nb::none(), nb::arg("fuse") = true,
           nb::arg("allow_extra") = false, nb::arg("layouts") = true, nb::arg("bulk") = 16,
           "Binds to an executor. args/aux: arrays by name (a dict) or in list order, used as "
           "they are; the rest are allocated (zeros); allow_extra: skip arrays of variables the "
           "symbol lacks. shapes/dtypes: of inputs given no array. "
           "grad_req: 'null', 'write', 'add', or a dict by argument name. fuse: inference "
           "rewrites (conv+BN+ReLU) when no gradient is requested. layouts: keep oneDNN's formats "
           "between operators in inference (reorders only where needed). bulk: most chained "
           "nodes pushed as one engine operation (1: every node alone).")
      .def("__repr__", &symbol_repr);

  nb::class_<PyExecutor>(m, "Executor",
                         "A symbol bound to a device with planned memory (Symbol.bind).")
      .def("forward", &PyExecutor::forward, nb::arg("is_train") = false, nb::arg("inputs"),
           "Copies the given inputs (by name) into the bound arguments and runs the graph; "
           "returns the outputs before the work runs (reading them waits).")
      .def("backward", &PyExecutor::backward, nb::arg("out_grads") = nb::none(),
           "Runs the backward pass: gradients into grad_dict. out_grads: one array per head "
           "(None: ones; loss heads need none).")
      .def(
          "reshape",
          [](nb::handle self, nb::kwargs shapes) {
            nb::cast<PyExecutor&>(self).reshape(shapes);
            return nb::borrow(self);
          },
          nb::arg("shapes"),
          "Rebinds in place for new input shapes (arrays whose shape changes are replaced: "
          "fetch arg_dict again); returns this executor.")
      .def_prop_ro("outputs", &PyExecutor::outputs, "The head outputs (reading them waits).")
      .def_prop_ro("output_dict", &PyExecutor::output_dict, "The outputs by name.")
      .def_prop_ro(
          "arg_dict", [](PyExecutor& e) { return e.arrays(0); }, "Bound arguments by name.")
      .def_prop_ro(
          "aux_dict", [](PyExecutor& e) { return e.arrays(1); }, "Bound auxiliary states by name.")
      .def_prop_ro(
          "grad_dict", [](PyExecutor& e) { return e.arrays(2); },
          "Gradient arrays by argument name (arguments with grad_req 'null' are absent).")
      .def_prop_ro("output_shapes", &PyExecutor::output_shapes, "Inferred shapes of the outputs.");

  nb::class_<PyNameScope>(m, "_NameScope")
      .def(nb::init<std::string>(), nb::arg("prefix") = "")
      .def("__enter__",
           [](nb::handle self) {
             PyNameScope& s = nb::cast<PyNameScope&>(self);
             if (s.scope) throw ValueError("name scope: already entered");
             s.scope = std::make_unique<graph::NameScope>(s.prefix);
             return nb::borrow(self);
           })
      .def("__exit__", [](PyNameScope& s, nb::args) { s.scope.reset(); });

  init_io(m);
  m.def(
      "_model",
      [](const std::string& name, int64_t batch) {
        Symbol s = graph::models::build(name);
        graph::InferInputs in = graph::models::default_inputs(name, batch);
        nb::dict shapes;
        for (const auto& [k, v] : in.shapes) shapes[k.c_str()] = from_shape(v);
        return nb::make_tuple(s, shapes);
      },
      nb::arg("name"), nb::arg("batch") = 1,
      "A bundled model's symbol and its input shapes at batch size `batch`.");
  m.def("_model_names", &graph::models::model_names, "The bundled models' names.");
}

}  // namespace weft::py
