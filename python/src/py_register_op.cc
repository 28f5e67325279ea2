// weft.register_op's native part: operators whose kernel, shape and type inference and gradient
// are Python callables. Each becomes an ordinary registry op (OpRegistry::register_runtime), so it
// runs imperatively, under autograd, in graphs and in JSON models like a built-in one. The Python
// side (weft/register.py) validates the definition and wraps the user's functions in an object
// whose methods this file calls: run_forward, run_backward, infer_shape, infer_type, format_error.
//
// Note [Python kernels on engine workers]
// A kernel runs on whichever thread the engine picks: a worker, or the pushing thread for tiny
// kernels. It takes the GIL only around the call (gil_scoped_acquire, which also works on a thread
// that already holds it) and builds NumPy views of the tensors there. The views alias weft's
// memory, which is only reserved for the operation while it runs, so they must not outlive the
// call: the kernel checks that the Python code kept no reference to them and fails the operation
// when it did. Everything on the main thread that waits for the engine releases the GIL first
// (asnumpy, wait_to_read, waitall, ...), and registration releases it while it takes the registry
// lock, so a worker waiting for the GIL never waits on a thread that waits for it.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>

#include "ops/op.h"
#include "ops/op_schema.h"
#include "py_common.h"
#include "py_errors.h"

namespace weft::py {
namespace {

// What the op's attribute functions share.
struct PyOpDef {
  std::string name;
  int num_inputs = 1;
  int num_outputs = 1;
  // The parameters, parsed into RuntimeParams (values in schema order): the run-time schema the
  // C ABI's foreign operators use too.
  std::shared_ptr<const RuntimeParamSchema> params;
  bool has_infer_shape = false;
  bool has_infer_type = false;
  // The Python object behind the op (weft.register._PythonOp). register_python_op takes a strong
  // reference and never releases it: operators are never removed, their kernels may run until the
  // process exits, and a release from a static destructor would touch a finalized interpreter.
  PyObject* spec = nullptr;
};

// weft.register_op's type codes.
RuntimeParamType param_type(const std::string& code, const std::string& op,
                            const std::string& field) {
  static const std::pair<const char*, RuntimeParamType> kTypes[] = {
      {"int", RuntimeParamType::kInt},     {"float", RuntimeParamType::kFloat},
      {"bool", RuntimeParamType::kBool},   {"str", RuntimeParamType::kString},
      {"shape", RuntimeParamType::kShape}, {"floats", RuntimeParamType::kFloats},
  };
  for (const auto& [c, t] : kTypes) {
    if (code == c) return t;
  }
  WEFT_THROW(ValueError) << "register operator '" << op << "': parameter '" << field
                         << "' has type code '" << code << "'";
}

// ---- calls into Python (GIL held) ---------------------------------------------------------------

nb::object param_value(RuntimeParamType type, const std::string& text) {
  switch (type) {
    case RuntimeParamType::kInt:
      return nb::int_(parse_int(text));
    case RuntimeParamType::kFloat:
      return nb::float_(parse_float(text));
    case RuntimeParamType::kBool:
      return nb::bool_(parse_bool(text));
    case RuntimeParamType::kShape:
      return from_shape(parse_shape(text));
    case RuntimeParamType::kFloats: {
      nb::list items;
      for (double v : parse_float_tuple(text)) items.append(nb::float_(v));
      return nb::tuple(items);
    }
    case RuntimeParamType::kString:
    case RuntimeParamType::kDType:
      break;
  }
  return nb::str(text.c_str(), text.size());
}

// The op's parameters as keyword arguments.
nb::dict kwargs_of(const PyOpDef& d, const OpAttrs& a) {
  WEFT_CHECK(a.parsed != nullptr && a.op != nullptr && a.op->param_type() == typeid(RuntimeParams))
      << a.where() << ": not a Python operator's attributes";
  const RuntimeParams& p = a.params<RuntimeParams>();
  const std::vector<RuntimeParam>& fields = d.params->params();
  nb::dict kwargs;
  for (size_t i = 0; i < fields.size(); ++i) {
    kwargs[fields[i].name.c_str()] = param_value(fields[i].type, p.values.at(i));
  }
  return kwargs;
}

// Turns the Python exception `e` into a PythonOpError, so that the wait observing the failure
// raises the same exception type: "op 'name': TypeName: message" and the last traceback lines.
[[noreturn]] void throw_python_op_error(const PyOpDef& d, const char* stage, nb::python_error& e) {
  nb::handle type = e.type();
  std::string message;
  try {
    message = nb::cast<std::string>(nb::handle(d.spec).attr("format_error")(stage, e.value()));
  } catch (const std::exception&) {
    PyErr_Clear();
    message = "op '" + d.name + "': " + e.what();
  }
  // The wait raises type(message); a class that cannot be built from a message alone (such as
  // UnicodeDecodeError) is raised as weft.WeftError instead, with the same message.
  PyObject* raised = type.ptr();
  nb::str text(message.c_str(), message.size());
  PyObject* probe = PyObject_CallOneArg(raised, text.ptr());
  if (probe == nullptr) {
    PyErr_Clear();
    raised = nullptr;
  } else {
    Py_DECREF(probe);
  }
  throw PythonOpError(message, raised);
}

// Runs `fn` holding the GIL (Note [Python kernels on engine workers]); a Python exception raised
// inside becomes a PythonOpError.
template <typename F>
auto with_python(const PyOpDef& d, const OpAttrs& a, const char* stage, F&& fn) {
  // After finalization has begun a thread that asks for the GIL is never given it: fail instead.
  if (!Py_IsInitialized() || interpreter_finalizing()) {
    WEFT_THROW(Error) << a.where() << ": " << stage
                      << " cannot run: the Python interpreter is shutting down";
  }
  nb::gil_scoped_acquire gil;
  try {
    return fn();
  } catch (nb::python_error& e) {
    throw_python_op_error(d, stage, e);
  }
}

// A NumPy array over a tensor's memory, owned by nobody (valid during the call only).
nb::object numpy_view(const TensorView& v, bool writable) {
  std::vector<size_t> shape(static_cast<size_t>(v.ndim));
  for (int i = 0; i < v.ndim; ++i) shape[i] = static_cast<size_t>(v.shape[i]);
  nb::dlpack::dtype dt;
  dt.code = v.dl_dtype.code;
  dt.bits = v.dl_dtype.bits;
  dt.lanes = v.dl_dtype.lanes;
  // rv_policy::reference: wrap, never copy (an ndarray without an owner would be copied).
  if (writable) {
    return nb::ndarray<nb::numpy>(v.raw(), shape.size(), shape.data(), nb::handle(), nullptr, dt,
                                  nb::device::cpu::value)
        .cast(nb::rv_policy::reference);
  }
  return nb::ndarray<nb::numpy, nb::ro>(v.raw(), shape.size(), shape.data(), nb::handle(), nullptr,
                                        dt, nb::device::cpu::value)
      .cast(nb::rv_policy::reference);
}

// Fails the operation when the Python code kept a view (or the list holding them) past the call:
// the memory behind it may be reused as soon as the operation completes.
void check_views_released(const PyOpDef& d, const char* stage, const nb::list& views,
                          const char* what) {
  const bool list_kept = Py_REFCNT(views.ptr()) > 1;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(views.ptr()); ++i) {
    // The list holds the only reference unless the Python code kept one (a view derived from
    // this one holds a reference to it as its base).
    if (!list_kept && Py_REFCNT(PyList_GET_ITEM(views.ptr(), i)) <= 1) continue;
    const std::string_view function = std::string_view(stage).substr(4);  // "run_forward"
    WEFT_THROW(Error) << "op '" << d.name << "': " << function << " kept a reference to the NumPy "
                      << "view of " << what << " " << i
                      << " (or to a view derived from it) after returning. The views alias "
                         "weft's memory and are valid only during the call; keep a copy instead "
                         "(numpy.array(x))";
  }
}

// One kernel call: NumPy views of the tensors, then spec.<method>(inputs, outputs, req, params).
void run_kernel(const PyOpDef& d, const char* method, const OpAttrs& a,
                std::span<const TensorView> in, std::span<const OpReq> req,
                std::span<const TensorView> out) {
  for (const TensorView& v : in) {
    WEFT_CHECK_AS(NotImplemented, v.device.type == DeviceType::kCPU && v.strides == nullptr)
        << a.where() << ": Python operators run on CPU arrays only";
  }
  with_python(d, a, method, [&] {
    nb::list inputs;
    nb::list outputs;
    nb::list reqs;
    for (const TensorView& v : in) inputs.append(numpy_view(v, false));
    for (const TensorView& v : out) outputs.append(numpy_view(v, true));
    for (OpReq r : req) reqs.append(static_cast<int>(r));
    nb::handle(d.spec).attr(method)(inputs, outputs, reqs, kwargs_of(d, a));
    check_views_released(d, method, inputs, "input");
    check_views_released(d, method, outputs, "output");
  });
}

// Checks the shapes inference produced and merges them into `out`.
void set_inferred(const OpAttrs& a, const char* stage, std::vector<Shape> shapes,
                  std::vector<Shape>& out) {
  WEFT_CHECK_AS(ShapeError, shapes.size() == out.size())
      << a.where() << ": " << stage << " gave " << shapes.size() << " shapes for " << out.size()
      << " outputs";
  for (size_t o = 0; o < out.size(); ++o) {
    for (int k = 0; k < shapes[o].ndim(); ++k) {
      WEFT_CHECK_AS(ShapeError, shapes[o][k] >= 0)
          << a.where() << ": " << stage << " gave output " << o << " the shape " << shapes[o];
    }
    (void)shapes[o].size();  // checked product
    WEFT_CHECK_AS(ShapeError, !out[o].known() || out[o] == shapes[o])
        << a.where() << ": output " << o << " is expected to be " << out[o] << " but " << stage
        << " gives " << shapes[o];
    out[o] = std::move(shapes[o]);
  }
}

void set_inferred_types(const OpAttrs& a, const char* stage, const std::vector<DType>& types,
                        std::vector<DType>& out) {
  WEFT_CHECK_AS(ShapeError, types.size() == out.size())
      << a.where() << ": " << stage << " gave " << types.size() << " dtypes for " << out.size()
      << " outputs";
  for (size_t o = 0; o < out.size(); ++o) {
    WEFT_CHECK_AS(ShapeError, out[o] == DType::kUnknown || out[o] == types[o])
        << a.where() << ": output " << o << " is expected to be " << dtype_name(out[o]) << " but "
        << stage << " gives " << dtype_name(types[o]);
    out[o] = types[o];
  }
}

// ---- the two operators --------------------------------------------------------------------------

void define_forward(Op& op, const std::shared_ptr<const PyOpDef>& d,
                    const std::vector<std::string>& input_names,
                    const std::vector<std::string>& output_names, const std::string& description,
                    bool has_backward) {
  op.describe(description);
  RuntimeParamSchema::install(op, d->params);
  op.set_num_inputs(d->num_inputs);
  op.set_num_outputs(d->num_outputs);
  op.set_input_names(input_names);
  op.set_output_names(output_names);

  op.set_attr<FInferShape>([d](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
    for (const Shape& s : in) {
      if (!s.known()) return false;
    }
    std::vector<Shape> shapes;
    if (d->has_infer_shape) {
      shapes = with_python(*d, a, "infer_shape", [&] {
        nb::list given;
        for (const Shape& s : in) given.append(from_shape(s));
        nb::object r = nb::handle(d->spec).attr("infer_shape")(given, kwargs_of(*d, a));
        std::vector<Shape> v;
        for (nb::handle s : r) v.push_back(to_shape(s, "infer_shape"));
        return v;
      });
    } else {
      shapes.assign(out.size(), in.at(0));  // the default: every output has input 0's shape
    }
    set_inferred(a, "infer_shape", std::move(shapes), out);
    return true;
  });
  op.set_attr<FInferType>([d](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
    for (DType t : in) {
      if (t == DType::kUnknown) return false;
    }
    std::vector<DType> types;
    if (d->has_infer_type) {
      types = with_python(*d, a, "infer_type", [&] {
        nb::list given;
        for (DType t : in) given.append(nb::str(dtype_name(t)));
        nb::object r = nb::handle(d->spec).attr("infer_type")(given, kwargs_of(*d, a));
        std::vector<DType> v;
        for (nb::handle t : r) v.push_back(parse_dtype(nb::cast<std::string>(t)));
        return v;
      });
    } else {
      // The default: every output has input 0's dtype (float32 for an op without inputs).
      types.assign(out.size(), in.empty() ? DType::kFloat32 : in[0]);
    }
    set_inferred_types(a, "infer_type", types, out);
    return true;
  });
  op.set_attr(DeviceType::kCPU,
              FCompute([d](const OpAttrs& a, const OpContext&, std::span<const TensorView> in,
                           std::span<const OpReq> req, std::span<const TensorView> out) {
                run_kernel(*d, "run_forward", a, in, req, out);
              }));
  if (has_backward) {
    // The gradient: `_backward_<name>` from (output gradients, inputs, outputs), which returns one
    // gradient per input.
    op.set_attr<FGradient>([d, grad = "_backward_" + d->name](GradBuilder& b) {
      std::vector<GradEntry> args;
      for (int o = 0; o < d->num_outputs; ++o) args.push_back(b.out_grad(o));
      for (int i = 0; i < d->num_inputs; ++i) args.push_back(b.input(i));
      for (int o = 0; o < d->num_outputs; ++o) args.push_back(b.output(o));
      std::vector<GradEntry> g = b.emit(grad, std::move(args), b.attrs().dict);
      g.resize(d->num_inputs);
      return g;
    });
  }
}

void define_backward(Op& op, const std::shared_ptr<const PyOpDef>& d,
                     const std::vector<std::string>& input_names,
                     const std::vector<std::string>& output_names) {
  const int nin = d->num_inputs;
  const int nout = d->num_outputs;
  op.describe("The gradient of the Python operator '" + d->name +
              "': input gradients from (output gradients, inputs, outputs).");
  RuntimeParamSchema::install(op, d->params);
  std::vector<std::string> in_names;
  for (const std::string& o : output_names) in_names.push_back("ograd_" + o);
  for (const std::string& i : input_names) in_names.push_back(i);
  for (const std::string& o : output_names) in_names.push_back("out_" + o);
  std::vector<std::string> out_names;
  for (const std::string& i : input_names) out_names.push_back("grad_" + i);
  op.set_num_inputs(2 * nout + nin);
  op.set_num_outputs(nin);
  op.set_input_names(in_names);
  op.set_output_names(out_names);
  // Each input's gradient has that input's shape and dtype.
  op.set_attr<FInferShape>(
      [nin, nout](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
        std::vector<Shape> shapes;
        for (int i = 0; i < nin; ++i) {
          if (!in[nout + i].known()) return false;
          shapes.push_back(in[nout + i]);
        }
        set_inferred(a, "the gradient's shape inference", std::move(shapes), out);
        return true;
      });
  op.set_attr<FInferType>(
      [nin, nout](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
        std::vector<DType> types;
        for (int i = 0; i < nin; ++i) {
          if (in[nout + i] == DType::kUnknown) return false;
          types.push_back(in[nout + i]);
        }
        set_inferred_types(a, "the gradient's type inference", types, out);
        return true;
      });
  op.set_attr(DeviceType::kCPU,
              FCompute([d](const OpAttrs& a, const OpContext&, std::span<const TensorView> in,
                           std::span<const OpReq> req, std::span<const TensorView> out) {
                run_kernel(*d, "run_backward", a, in, req, out);
              }));
}

// A parameter as weft.register_op passes it: name, type code, default (none: required), text.
using ParamSpec = std::tuple<std::string, std::string, std::optional<std::string>, std::string>;

void register_python_op(const std::string& name, nb::object spec, int num_inputs, int num_outputs,
                        const std::vector<std::string>& input_names,
                        const std::vector<std::string>& output_names,
                        const std::vector<ParamSpec>& params, bool has_infer_shape,
                        bool has_infer_type, bool has_backward, const std::string& description) {
  auto where = [&] { return "register operator '" + name + "': "; };
  WEFT_CHECK_AS(ValueError, num_inputs >= 0 && num_inputs <= 64)
      << where() << "num_inputs " << num_inputs << " is out of range (0 to 64)";
  WEFT_CHECK_AS(ValueError, num_outputs >= 1 && num_outputs <= 64)
      << where() << "num_outputs " << num_outputs << " is out of range (1 to 64)";
  WEFT_CHECK_AS(ValueError, static_cast<int>(input_names.size()) == num_inputs &&
                                static_cast<int>(output_names.size()) == num_outputs)
      << where() << "one name per input and per output is needed";
  WEFT_CHECK_AS(ValueError, num_inputs > 0 || has_infer_shape)
      << where() << "an operator without inputs needs infer_shape";
  const std::string grad = "_backward_" + name;
  // Checked before anything is registered (register_runtime checks again, atomically).
  WEFT_CHECK_AS(ValueError, OpRegistry::global().find(name) == nullptr)
      << where() << "an operator of that name is already registered";
  WEFT_CHECK_AS(ValueError, !has_backward || OpRegistry::global().find(grad) == nullptr)
      << where() << "its gradient's name '" << grad << "' is already registered";

  auto d = std::make_shared<PyOpDef>();
  d->name = name;
  d->num_inputs = num_inputs;
  d->num_outputs = num_outputs;
  d->has_infer_shape = has_infer_shape;
  d->has_infer_type = has_infer_type;
  auto schema = std::make_shared<RuntimeParamSchema>();
  for (const auto& [pname, code, default_value, text] : params) {
    schema->add(RuntimeParam{pname, param_type(code, name, pname), default_value, text}, name);
  }
  d->params = std::move(schema);
  // Kept for the life of the process (PyOpDef::spec); taken before publishing, so a kernel can
  // never see the object go away. A registration that fails below leaks this one reference.
  d->spec = spec.inc_ref().ptr();
  // That reference keeps the user's functions, their globals and the arrays those hold alive at
  // exit on purpose; nanobind's exit-time leak report would list them all as leaks.
  nb::set_leak_warnings(false);
  std::shared_ptr<const PyOpDef> def = d;

  // No waiting for the registry's writer lock while holding the GIL: engine workers running
  // Python kernels need it meanwhile. `define` touches no Python object.
  nb::gil_scoped_release release;
  // The gradient first: a forward op must never refer to a gradient that failed to register.
  if (has_backward) {
    OpRegistry::register_runtime(
        grad, [&](Op& op) { define_backward(op, def, input_names, output_names); });
  }
  OpRegistry::register_runtime(name, [&](Op& op) {
    define_forward(op, def, input_names, output_names, description, has_backward);
  });
}

}  // namespace

void init_register_op(nb::module_& m) {
  m.def("_register_python_op", &register_python_op, nb::arg("name"), nb::arg("spec"),
        nb::arg("num_inputs"), nb::arg("num_outputs"), nb::arg("input_names"),
        nb::arg("output_names"), nb::arg("params"), nb::arg("has_infer_shape"),
        nb::arg("has_infer_type"), nb::arg("has_backward"), nb::arg("description"),
        "Registers an operator whose kernel and inference are methods of `spec` (see "
        "weft.register_op, which validates the definition and builds `spec`).");
}

}  // namespace weft::py
