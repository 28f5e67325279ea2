// The C ABI: foreign operators registered at run time (weft_register_op) and the attribute
// getters their callbacks use. A weft_op_def becomes an ordinary Op through
// OpRegistry::register_runtime: its schema parses attributes, its callbacks become FInferShape,
// FInferType, FResourceRequest and an FCompute or FAsyncCompute per device, and its gradient an
// FGradient, so the op works imperatively, in graph JSON, inference, planning and the executor.
#include <algorithm>
#include <cstddef>

#include "base/build_config.h"
#include "base/small_vector.h"
#include "capi/c_api_internal.h"
#include "ops/op_schema.h"

namespace weft::capi {
namespace {

// The C ABI's type spellings for a foreign op's attributes.
RuntimeParamType parse_attr_type(const char* type, const std::string& op,
                                 const std::string& field) {
  const std::string t = type != nullptr ? type : "";
  if (t == "int") return RuntimeParamType::kInt;
  if (t == "float") return RuntimeParamType::kFloat;
  if (t == "bool") return RuntimeParamType::kBool;
  if (t == "string") return RuntimeParamType::kString;
  if (t == "shape") return RuntimeParamType::kShape;
  if (t == "dtype") return RuntimeParamType::kDType;
  WEFT_THROW(ValueError) << "register operator '" << op << "': attribute '" << field
                         << "' has type '" << t
                         << "' (expected int, float, bool, string, shape or dtype)";
}

// The value of `key` for a callback: from a foreign op's parsed params, else from the dict.
const std::string& attr_value(const weft_attrs_t* attrs, const char* key) {
  require(attrs, "attrs");
  require(key, "key");
  WEFT_CHECK_AS(ValueError, attrs->attrs != nullptr) << "argument 'attrs' is not live";
  const OpAttrs& a = *attrs->attrs;
  const std::string* value = nullptr;
  if (a.op != nullptr && a.op->param_type() == typeid(RuntimeParams)) {
    value = a.params<RuntimeParams>().find(key);
  } else if (auto it = a.dict.find(std::string_view(key)); it != a.dict.end()) {
    value = &it->second;
  }
  WEFT_CHECK_AS(ValueError, value != nullptr)
      << a.where() << ": no attribute '" << key << "' (not in the operator's schema)";
  return *value;
}

// A foreign op's callbacks and shape of things, shared by the Op's attribute functions.
struct ForeignDef {
  std::string name;
  int num_inputs = 0;
  int num_outputs = 0;
  int kind = WEFT_OP_PURE;
  weft_infer_shape_fn infer_shape = nullptr;
  weft_infer_type_fn infer_type = nullptr;
  weft_workspace_fn workspace_size = nullptr;
  weft_compute_fn compute = nullptr;
  weft_async_compute_fn compute_async = nullptr;
  void* user = nullptr;
};

enum class ErrorKind { kShape, kOther };

[[noreturn]] void throw_callback(ErrorKind kind, const OpAttrs& attrs, const char* callback,
                                 int rc) {
  std::string msg = take_foreign_error();
  if (msg.empty()) msg = "returned " + std::to_string(rc) + " without weft_set_error";
  if (kind == ErrorKind::kShape) {
    WEFT_THROW(ShapeError) << attrs.where() << ": " << callback << " failed: " << msg;
  }
  WEFT_THROW(Error) << attrs.where() << ": " << callback << " failed: " << msg;
}

DLTensor to_dltensor(const TensorView& v) {
  DLTensor t{};
  t.data = v.raw();
  t.device.device_type = static_cast<DLDeviceType>(v.device.type);
  t.device.device_id = v.device.id;
  t.ndim = v.ndim;
  t.dtype.code = v.dl_dtype.code;
  t.dtype.bits = v.dl_dtype.bits;
  t.dtype.lanes = v.dl_dtype.lanes;
  t.shape = const_cast<int64_t*>(v.shape);
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

// The call struct of one kernel invocation, with its tensors (valid while this lives).
struct CallFrame {
  SmallVector<DLTensor, 4> in, out;
  SmallVector<int, 4> req;
  weft_attrs_t attrs;
  weft_op_call_t call{};
  CallFrame(const OpAttrs& a, const OpContext& ctx, std::span<const TensorView> inputs,
            std::span<const OpReq> reqs, std::span<const TensorView> outputs) {
    for (const TensorView& v : inputs) in.push_back(to_dltensor(v));
    for (const TensorView& v : outputs) out.push_back(to_dltensor(v));
    for (OpReq r : reqs) req.push_back(static_cast<int>(r));
    attrs.attrs = &a;
    call.struct_size = sizeof(weft_op_call_t);
    call.attrs = &attrs;
    call.inputs = in.data();
    call.num_inputs = static_cast<int>(in.size());
    call.outputs = out.data();
    call.num_outputs = static_cast<int>(out.size());
    call.req = req.data();
    call.workspace = ctx.workspace;
    call.workspace_bytes = ctx.workspace_bytes;
    call.ctx = from_run_context(ctx.run);
    call.is_train = ctx.is_train ? 1 : 0;
    call.num_threads = ctx.num_threads;
  }
};

// Collects input shapes as C arrays; false when one is not known yet.
bool shape_arrays(const std::vector<Shape>& in, std::vector<const int64_t*>& dims,
                  std::vector<int>& ndims) {
  dims.resize(in.size());
  ndims.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].known()) return false;
    dims[i] = in[i].data();
    ndims[i] = in[i].ndim();
  }
  return true;
}

void define_op(Op& op, const weft_op_def& d, std::shared_ptr<const ForeignDef> f) {
  const std::string& name = f->name;
  if (d.description != nullptr) op.describe(d.description);
  // Schema (the run-time parameter schema Python's operators share).
  auto schema = std::make_shared<RuntimeParamSchema>();
  WEFT_CHECK_AS(ValueError,
                d.num_attrs >= 0 && d.num_attrs <= 256 && (d.num_attrs == 0 || d.attrs != nullptr))
      << "register operator '" << name << "': attrs is NULL or num_attrs " << d.num_attrs
      << " is out of range";
  for (int i = 0; i < d.num_attrs; ++i) {
    const weft_attr_def& a = d.attrs[i];
    WEFT_CHECK_AS(ValueError, a.name != nullptr && a.name[0] != '\0')
        << "register operator '" << name << "': attrs[" << i << "] has no name";
    RuntimeParam p;
    p.name = a.name;
    p.type = parse_attr_type(a.type, name, p.name);
    if (a.default_value != nullptr) p.default_value = a.default_value;
    if (a.description != nullptr) p.description = a.description;
    schema->add(std::move(p), name, "attribute");
  }
  RuntimeParamSchema::install(op, std::move(schema));

  // Arity and names.
  auto names = [&](const char* const* given, int n, const char* what, const char* stem) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      if (given != nullptr) {
        WEFT_CHECK_AS(ValueError, given[i] != nullptr)
            << "register operator '" << name << "': " << what << "[" << i << "] is NULL";
        out.emplace_back(given[i]);
      } else {
        out.push_back(n == 1 ? std::string(stem) : std::string(stem) + std::to_string(i));
      }
    }
    return out;
  };
  op.set_num_inputs(f->num_inputs);
  op.set_num_outputs(f->num_outputs);
  op.set_input_names(names(d.input_names, d.num_inputs, "input_names", "data"));
  op.set_output_names(names(d.output_names, d.num_outputs, "output_names", "output"));

  // Inference.
  op.set_attr<FInferShape>([f](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
    std::vector<const int64_t*> dims;
    std::vector<int> ndims;
    if (!shape_arrays(in, dims, ndims)) return false;
    std::vector<int64_t> out_dims(static_cast<size_t>(f->num_outputs) * WEFT_MAX_NDIM, -1);
    std::vector<int> out_ndims(f->num_outputs, -1);
    weft_attrs_t attrs{&a};
    const int rc = f->infer_shape(&attrs, f->num_inputs, dims.data(), ndims.data(), f->num_outputs,
                                  out_dims.data(), out_ndims.data(), f->user);
    if (rc != 0) throw_callback(ErrorKind::kShape, a, "infer_shape", rc);
    for (int o = 0; o < f->num_outputs; ++o) {
      WEFT_CHECK_AS(ShapeError, out_ndims[o] >= 0 && out_ndims[o] <= WEFT_MAX_NDIM)
          << a.where() << ": infer_shape gave output " << o << " rank " << out_ndims[o] << " (0 to "
          << WEFT_MAX_NDIM << " expected)";
      const int64_t* od = out_dims.data() + static_cast<size_t>(o) * WEFT_MAX_NDIM;
      Shape s(od, od + out_ndims[o]);
      for (int k = 0; k < s.ndim(); ++k) {
        WEFT_CHECK_AS(ShapeError, s[k] >= 0)
            << a.where() << ": infer_shape gave output " << o << " the shape " << s;
      }
      (void)s.size();  // checked product
      WEFT_CHECK_AS(ShapeError, !out[o].known() || out[o] == s)
          << a.where() << ": output " << o << " is expected to be " << out[o]
          << " but infer_shape gives " << s;
      out[o] = std::move(s);
    }
    return true;
  });
  if (d.infer_type != nullptr) {
    op.set_attr<FInferType>([f](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      std::vector<int> in_codes(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] == DType::kUnknown) return false;
        in_codes[i] = static_cast<int>(in[i]);
      }
      std::vector<int> out_codes(out.size(), -1);
      weft_attrs_t attrs{&a};
      const int rc = f->infer_type(&attrs, static_cast<int>(in.size()), in_codes.data(),
                                   static_cast<int>(out.size()), out_codes.data(), f->user);
      if (rc != 0) throw_callback(ErrorKind::kShape, a, "infer_type", rc);
      for (size_t o = 0; o < out.size(); ++o) {
        const DType t = to_dtype(out_codes[o]);
        WEFT_CHECK_AS(ShapeError, out[o] == DType::kUnknown || out[o] == t)
            << a.where() << ": output " << o << " is expected to be " << dtype_name(out[o])
            << " but infer_type gives " << dtype_name(t);
        out[o] = t;
      }
      return true;
    });
  }
  if (f->kind == WEFT_OP_WORKSPACE) {
    op.set_attr<FResourceRequest>(
        [f](const OpAttrs& a, const std::vector<Shape>& in, const std::vector<Shape>&) {
          std::vector<const int64_t*> dims;
          std::vector<int> ndims;
          WEFT_CHECK_AS(ShapeError, shape_arrays(in, dims, ndims))
              << a.where() << ": workspace_size needs known input shapes";
          size_t bytes = 0;
          weft_attrs_t attrs{&a};
          const int rc =
              f->workspace_size(&attrs, f->num_inputs, dims.data(), ndims.data(), &bytes, f->user);
          if (rc != 0) throw_callback(ErrorKind::kOther, a, "workspace_size", rc);
          WEFT_CHECK_AS(OutOfMemory, bytes <= (size_t{1} << 40))
              << a.where() << ": workspace_size asks for " << bytes << " bytes";
          return std::vector<ResourceRequest>{{ResourceRequest::Kind::kWorkspace, bytes}};
        });
  }

  // Kernels, per device the definition accepts.
  std::vector<DeviceType> devices;
  const uint32_t mask = d.devices == 0 ? WEFT_DEVICE_MASK_CPU : d.devices;
  WEFT_CHECK_AS(ValueError, (mask & ~(WEFT_DEVICE_MASK_CPU | WEFT_DEVICE_MASK_CUDA)) == 0)
      << "register operator '" << name << "': devices mask " << d.devices << " has unknown bits";
  if (mask & WEFT_DEVICE_MASK_CPU) devices.push_back(DeviceType::kCPU);
  if (mask & WEFT_DEVICE_MASK_CUDA) {
    WEFT_CHECK_AS(NotImplemented, WEFT_USE_CUDA != 0)
        << "register operator '" << name << "': a CUDA kernel, but this weft has no CUDA";
    devices.push_back(DeviceType::kCUDA);
  }
  for (DeviceType dev : devices) {
    if (f->kind == WEFT_OP_ASYNC) {
      op.set_attr(dev, FAsyncCompute([f](const OpAttrs& a, const OpContext& ctx,
                                         std::span<const TensorView> in, std::span<const OpReq> req,
                                         std::span<const TensorView> out, CallbackOnComplete done) {
                    CallFrame frame(a, ctx, in, req, out);
                    CurrentContextScope scope(&frame.call.ctx);
                    f->compute_async(&frame.call, from_completion(done), f->user);
                  }));
    } else {
      op.set_attr(
          dev, FCompute([f](const OpAttrs& a, const OpContext& ctx, std::span<const TensorView> in,
                            std::span<const OpReq> req, std::span<const TensorView> out) {
            CallFrame frame(a, ctx, in, req, out);
            CurrentContextScope scope(&frame.call.ctx);
            const int rc = f->compute(&frame.call, f->user);
            if (rc != 0) throw_callback(ErrorKind::kOther, a, "compute", rc);
          }));
    }
  }

  // Gradient: one registered op from (output gradients, inputs, outputs) to input gradients.
  if (d.gradient != nullptr) {
    const std::string grad = d.gradient;
    WEFT_CHECK_AS(ValueError, OpRegistry::global().find(grad) != nullptr)
        << "register operator '" << name << "': its gradient operator '" << grad
        << "' is not registered (register it first)";
    op.set_attr<FGradient>([f, grad](GradBuilder& b) {
      std::vector<GradEntry> args;
      for (int o = 0; o < f->num_outputs; ++o) args.push_back(b.out_grad(o));
      for (int i = 0; i < f->num_inputs; ++i) args.push_back(b.input(i));
      for (int o = 0; o < f->num_outputs; ++o) args.push_back(b.output(o));
      std::vector<GradEntry> g = b.emit(grad, std::move(args), b.attrs().dict);
      WEFT_CHECK_AS(ValueError, static_cast<int>(g.size()) >= f->num_inputs)
          << b.attrs().where() << ": gradient operator '" << grad << "' has " << g.size()
          << " outputs; one per input (" << f->num_inputs << ") is needed";
      g.resize(f->num_inputs);
      return g;
    });
  }
}

}  // namespace
}  // namespace weft::capi

using namespace weft;        // NOLINT(google-build-using-namespace)
using namespace weft::capi;  // NOLINT(google-build-using-namespace)

extern "C" {

int weft_register_op(const weft_op_def* def) {
  WEFT_C_BEGIN
  require(def, "def");
  WEFT_CHECK_AS(ValueError, def->struct_size == sizeof(weft_op_def))
      << "weft_op_def.struct_size is " << def->struct_size << "; this weft (C ABI "
      << WEFT_C_ABI_VERSION << ") expects " << sizeof(weft_op_def);
  WEFT_CHECK_AS(ValueError, def->name != nullptr) << "weft_op_def.name is NULL";
  const std::string name = def->name;
  auto f = std::make_shared<ForeignDef>();
  f->name = name;
  f->num_inputs = def->num_inputs;
  f->num_outputs = def->num_outputs;
  f->kind = def->kind;
  f->infer_shape = def->infer_shape;
  f->infer_type = def->infer_type;
  f->workspace_size = def->workspace_size;
  f->compute = def->compute;
  f->compute_async = def->compute_async;
  f->user = def->user;
  auto where = [&] { return "register operator '" + name + "': "; };
  WEFT_CHECK_AS(ValueError, f->num_inputs >= 0 && f->num_inputs <= 64)
      << where() << "num_inputs " << f->num_inputs << " is out of range (0 to 64)";
  WEFT_CHECK_AS(ValueError, f->num_outputs >= 1 && f->num_outputs <= 64)
      << where() << "num_outputs " << f->num_outputs << " is out of range (1 to 64)";
  WEFT_CHECK_AS(ValueError, f->kind >= WEFT_OP_PURE && f->kind <= WEFT_OP_ASYNC)
      << where() << "kind " << f->kind
      << " is not WEFT_OP_PURE, WEFT_OP_WORKSPACE or WEFT_OP_ASYNC";
  WEFT_CHECK_AS(ValueError, f->infer_shape != nullptr) << where() << "infer_shape is NULL";
  if (f->kind == WEFT_OP_ASYNC) {
    WEFT_CHECK_AS(ValueError, f->compute_async != nullptr)
        << where() << "an asynchronous operator needs compute_async";
  } else {
    WEFT_CHECK_AS(ValueError, f->compute != nullptr) << where() << "compute is NULL";
  }
  WEFT_CHECK_AS(ValueError, f->kind != WEFT_OP_WORKSPACE || f->workspace_size != nullptr)
      << where() << "a workspace operator needs workspace_size";
  OpRegistry::register_runtime(name, [&](Op& op) { define_op(op, *def, f); });
  WEFT_C_END("weft_register_op")
}

int weft_attrs_get_string(const weft_attrs_t* attrs, const char* key, const char** out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = attr_value(attrs, key).c_str();
  WEFT_C_END("weft_attrs_get_string")
}

int weft_attrs_get_int(const weft_attrs_t* attrs, const char* key, int64_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = parse_int(attr_value(attrs, key));
  WEFT_C_END("weft_attrs_get_int")
}

int weft_attrs_get_float(const weft_attrs_t* attrs, const char* key, double* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = parse_float(attr_value(attrs, key));
  WEFT_C_END("weft_attrs_get_float")
}

int weft_attrs_get_shape(const weft_attrs_t* attrs, const char* key, int64_t* out, int capacity,
                         int* ndim) {
  WEFT_C_BEGIN
  require(ndim, "ndim");
  const Shape s = parse_shape(attr_value(attrs, key));
  WEFT_CHECK_AS(ValueError, s.ndim() <= capacity && (s.ndim() == 0 || out != nullptr))
      << "attribute '" << key << "' has " << s.ndim() << " entries; 'out' has room for "
      << capacity;
  for (int i = 0; i < s.ndim(); ++i) out[i] = s[i];
  *ndim = s.ndim();
  WEFT_C_END("weft_attrs_get_shape")
}

}  // extern "C"
