// Operator invocation: inference, output allocation, and the push of one kernel onto the engine.
#include <algorithm>
#include <span>

#include "base/small_vector.h"
#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"
#include "ops/cpu/dnnl_util.h"

namespace weft {
namespace {

// Kernels writing at most this many elements run inline (Note [Tiny kernels run where they
// become ready]).
constexpr int64_t kInlineKernelElements = 4096;

// Everything one pushed kernel needs, owned by its engine operation.
struct PendingKernel {
  std::shared_ptr<const OpAttrs> attrs;
  const FCompute* compute = nullptr;
  const FStatefulCompute* stateful = nullptr;
  const FAsyncCompute* async = nullptr;
  std::shared_ptr<OpState> state;
  // Inline capacity covers nearly every op, so a pushed kernel is one allocation.
  SmallVector<std::shared_ptr<detail::Storage>, 6> keep_alive;
  SmallVector<Shape, 6> shapes;  // inputs then outputs; views point into these
  SmallVector<TensorView, 4> in_views;
  SmallVector<TensorView, 3> out_views;
  SmallVector<OpReq, 3> req;
  SmallVector<VarHandle, 4> in_vars;
  SmallVector<uint64_t, 4> storage_ids;
  SmallVector<uint64_t, 4> versions;
  DataPtr workspace;
  size_t workspace_bytes = 0;
  RandomResource* random = nullptr;
  Allocator* temp_allocator = nullptr;  // the device's pool (kept alive by the runtime)
  Engine* engine = nullptr;
  bool is_train = false;

  // Runs the kernel; an asynchronous one (async != null) is handed `done` and completes through
  // it. The workspace of an asynchronous kernel is kept until the operation is freed (after
  // completion), since the launched work may still use it when this returns.
  void run(const RunContext& rc, CallbackOnComplete* on_complete = nullptr) {
    OpContext ctx;
    ctx.is_train = is_train;
    ctx.run = rc;
    ctx.workspace = workspace.get();
    ctx.workspace_bytes = workspace_bytes;
    ctx.random = random ? &random->state : nullptr;
    ctx.temp_allocator = temp_allocator;
    // Reads of these vars are ordered after their writes and before later ones: stable now.
    for (size_t i = 0; i < in_vars.size(); ++i) versions[i] = engine->var_version(in_vars[i]);
    ctx.input_storage_ids = storage_ids.data();
    ctx.input_versions = versions.data();
    Runtime& rt = Runtime::get();
    ctx.num_threads = rt.kernel_started();
    struct Done {
      Runtime& rt;
      ~Done() { rt.kernel_finished(); }
    } done{rt};
    std::span<const TensorView> in(in_views.data(), in_views.size());
    std::span<const TensorView> out(out_views.data(), out_views.size());
    std::span<const OpReq> rq(req.data(), req.size());
    if (compute != nullptr) {
      (*compute)(*attrs, ctx, in, rq, out);
    } else if (async != nullptr) {
      (*async)(*attrs, ctx, in, rq, out, *on_complete);
      return;
    } else {
      (*stateful)(*state, ctx, in, rq, out);
    }
    workspace.reset();
  }
};

}  // namespace

std::shared_ptr<const OpAttrs> make_op_attrs(std::string_view op, const AttrMap& attrs) {
  return std::make_shared<const OpAttrs>(get_op(op).make_attrs(attrs));
}

void infer_outputs(const OpAttrs& attrs, const std::vector<NDArray>& inputs,
                   std::vector<Shape>& in_shapes, std::vector<DType>& in_types,
                   std::vector<Shape>& out_shapes, std::vector<DType>& out_types) {
  const Op& op = *attrs.op;
  const int nin = static_cast<int>(inputs.size()), nout = static_cast<int>(out_shapes.size());
  in_shapes.resize(nin);
  in_types.resize(nin);
  for (int i = 0; i < nin; ++i) {
    in_shapes[i] = inputs[i].shape();
    in_types[i] = inputs[i].dtype();
  }
  op.infer_shape(attrs, in_shapes, out_shapes);
  op.infer_type(attrs, in_types, out_types);
  for (int i = 0; i < nin; ++i) {
    WEFT_CHECK_AS(ShapeError, in_shapes[i] == inputs[i].shape())
        << attrs.where() << ": input " << i << " has shape " << inputs[i].shape()
        << " but the op needs " << in_shapes[i];
    WEFT_CHECK_AS(ShapeError, in_types[i] == inputs[i].dtype())
        << attrs.where() << ": input " << i << " has dtype " << dtype_name(inputs[i].dtype())
        << " but the op needs " << dtype_name(in_types[i]);
  }
  for (int i = 0; i < nout; ++i) {
    WEFT_CHECK_AS(ShapeError, out_shapes[i].known())
        << attrs.where() << ": could not infer the shape of output " << i << " (got "
        << out_shapes[i] << ")";
    WEFT_CHECK_AS(ShapeError, out_types[i] != DType::kUnknown)
        << attrs.where() << ": could not infer the dtype of output " << i;
  }
}

std::vector<NDArray> invoke_all(const std::shared_ptr<const OpAttrs>& attrs_ptr,
                                const std::vector<NDArray>& inputs, InvokeOptions options) {
  WEFT_CHECK(attrs_ptr && attrs_ptr->op) << "invoke: no operator";
  const OpAttrs& attrs = *attrs_ptr;
  const Op& op = *attrs.op;
  const int nin = op.num_inputs(attrs);
  const int nout = op.num_outputs(attrs);
  const int nvis = op.num_visible_outputs(attrs);
  WEFT_CHECK(static_cast<int>(inputs.size()) == nin)
      << attrs.where() << ": expects " << nin << " inputs, got " << inputs.size();

  // Device: from the inputs, which must agree.
  Device device = options.device.value_or(
      inputs.empty() || inputs[0].is_none() ? Device::cpu() : inputs[0].device());
  for (int i = 0; i < nin; ++i) {
    WEFT_CHECK(!inputs[i].is_none()) << attrs.where() << ": input " << i << " is a none array";
    WEFT_CHECK(inputs[i].device() == device)
        << attrs.where() << ": input " << i << " is on " << to_string(inputs[i].device())
        << ", expected " << to_string(device);
  }

  // Outputs given by the caller: all outputs or only the visible ones.
  std::vector<NDArray>& given = options.outputs;
  WEFT_CHECK(given.empty() || static_cast<int>(given.size()) == nout ||
             static_cast<int>(given.size()) == nvis)
      << attrs.where() << ": " << given.size() << " output arrays given; the op has " << nvis
      << " visible and " << nout << " total outputs";

  // Inference, in per-thread scratch vectors (invoke never re-enters itself on one thread).
  thread_local std::vector<Shape> in_shapes, out_shapes;
  thread_local std::vector<DType> in_types, out_types;
  in_shapes.resize(nin);
  out_shapes.assign(nout, Shape());
  in_types.resize(nin);
  out_types.assign(nout, DType::kUnknown);
  for (size_t i = 0; i < given.size(); ++i) {
    if (given[i].is_none()) continue;
    out_shapes[i] = given[i].shape();
    out_types[i] = given[i].dtype();
  }
  infer_outputs(attrs, inputs, in_shapes, in_types, out_shapes, out_types);

  // Kernel.
  auto pk = std::make_unique<PendingKernel>();
  pk->attrs = attrs_ptr;
  pk->compute = op.compute(device.type);
  if (pk->compute == nullptr) pk->async = op.async_compute(device.type);
  if (pk->compute == nullptr && pk->async == nullptr) {
    pk->stateful = op.stateful_compute(device.type);
    WEFT_CHECK_AS(NotImplemented, pk->stateful != nullptr)
        << attrs.where() << " has no kernel for " << device_type_name(device.type);
    const auto& create = op.attr<FCreateOpState>();
    WEFT_CHECK_AS(InternalError, static_cast<bool>(create))
        << attrs.where() << ": stateful op without FCreateOpState";
    pk->state = create(attrs, device, in_shapes, in_types);
  }

  // Outputs.
  std::vector<NDArray> outputs(nout);
  for (int i = 0; i < nout; ++i) {
    if (i < static_cast<int>(given.size()) && !given[i].is_none()) {
      outputs[i] = given[i];
      WEFT_CHECK(!outputs[i].storage()->read_only)
          << attrs.where() << ": output " << i
          << " is a read-only array (imported from a read-only DLPack tensor)";
      WEFT_CHECK(outputs[i].device() == device)
          << attrs.where() << ": output " << i << " is on " << to_string(outputs[i].device());
    } else {
      outputs[i] = NDArray::empty(out_shapes[i], out_types[i], device);
    }
  }
  for (OpReq r : options.req) pk->req.push_back(r);
  if (pk->req.empty()) pk->req.resize(nout, OpReq::kWrite);
  if (static_cast<int>(pk->req.size()) == nvis && nvis < nout) pk->req.resize(nout, OpReq::kWrite);
  WEFT_CHECK(static_cast<int>(pk->req.size()) == nout)
      << attrs.where() << ": req needs one entry per output";

  // Resources.
  Runtime& rt = Runtime::get();
  SmallVector<VarHandle, 4> writes;
  if (const auto& f = op.attr<FResourceRequest>()) {
#if WEFT_USE_ONEDNN
    // The workspace is sized for the most threads the kernel may get, also when this push
    // happens inside another kernel (Note [Primitive thread count] in ops/cpu/dnnl_util.cc).
    dnnl_util::WidestPlans widest;
#endif
    for (const auto& r : f(attrs, in_shapes, out_shapes)) {
      if (r.kind == ResourceRequest::Kind::kWorkspace) {
        pk->workspace = rt.allocator(device).allocate(std::max<size_t>(r.bytes, 1));
        pk->workspace_bytes = r.bytes;
      } else {
        pk->random = &rt.random(device);
        writes.push_back(pk->random->var);
      }
    }
  }

  // Views (data pointers are fixed now; shapes live in pk->shapes).
  for (int i = 0; i < nin; ++i) {
    pk->shapes.push_back(inputs[i].shape());
    pk->keep_alive.push_back(inputs[i].storage());
    pk->in_vars.push_back(inputs[i].var());
    pk->storage_ids.push_back(inputs[i].storage_id());
  }
  for (int i = 0; i < nout; ++i) {
    pk->shapes.push_back(outputs[i].shape());
    pk->keep_alive.push_back(outputs[i].storage());
    writes.push_back(outputs[i].var());
  }
  for (int i = 0; i < nin; ++i) {
    TensorView v(inputs[i].storage()->data.get(), device, inputs[i].dtype(), pk->shapes[i]);
    v.byte_offset = inputs[i].byte_offset();
    pk->in_views.push_back(v);
  }
  for (int i = 0; i < nout; ++i) {
    TensorView v(outputs[i].storage()->data.get(), device, outputs[i].dtype(), pk->shapes[nin + i]);
    v.byte_offset = outputs[i].byte_offset();
    pk->out_views.push_back(v);
  }
  pk->versions.resize(nin);
  if (const auto& f = op.attr<FMutateInputs>()) {
    for (int i : f(attrs)) {
      WEFT_CHECK(!inputs.at(i).storage()->read_only)
          << attrs.where() << ": input " << i
          << " is written by the op but is a read-only array (imported from a read-only DLPack "
             "tensor)";
      writes.push_back(inputs.at(i).var());
    }
  }
  pk->engine = &rt.engine();
  if (device.type == DeviceType::kCUDA) pk->temp_allocator = &rt.allocator(device);
  pk->is_train = autograd::is_training();

  SmallVector<VarHandle, 4> reads = pk->in_vars;
  // The operation owns the kernel state; it is freed with the operation, also when the engine
  // skips it because an input carries an error.
  std::span<const VarHandle> read_span(reads.data(), reads.size());
  std::span<const VarHandle> write_span(writes.data(), writes.size());
  // Note [Tiny kernels run where they become ready]: a CPU kernel writing few elements costs
  // less than the hand-off to a worker (a wake-up, and memory allocated on one thread and freed
  // on another). Such kernels are pushed as kAsync operations, which the engine runs on the
  // thread that makes them ready: the caller's thread when the inputs are already computed, or the
  // worker that completes the last dependency. When a foreign thread's on_complete (a CUDA host
  // callback, an MPI thread) makes one ready, the engine hands it to a worker instead (Note [Which
  // threads run operations] in engine/threaded_engine.cc). Ordering and error semantics are
  // unchanged. The body completes through its callback, not as a push_sync body, so that the
  // engine does not chain further operations into the thread that runs it inline.
  int64_t out_elements = 0;
  for (int i = 0; i < nout; ++i) out_elements += outputs[i].size();
  if (pk->async != nullptr) {
    rt.engine().push_async(
        [pk = std::move(pk)](const RunContext& rc, CallbackOnComplete done) { pk->run(rc, &done); },
        device, read_span, write_span, FnProperty::kNormal, 0, op.name());
  } else if (device.type == DeviceType::kCPU && pk->compute != nullptr &&
             out_elements <= kInlineKernelElements && pk->workspace_bytes == 0) {
    rt.engine().push_async(
        [pk = std::move(pk)](const RunContext& rc, CallbackOnComplete done) {
          pk->run(rc);
          done();
        },
        device, read_span, write_span, FnProperty::kAsync, 0, op.name());
  } else {
    rt.engine().push_sync([pk = std::move(pk)](const RunContext& rc) { pk->run(rc); }, device,
                          read_span, write_span, FnProperty::kNormal, 0, op.name());
  }

  detail::maybe_record(attrs_ptr, inputs, outputs);
  return outputs;
}

std::vector<NDArray> invoke(const std::shared_ptr<const OpAttrs>& attrs,
                            const std::vector<NDArray>& inputs, InvokeOptions options) {
  auto all = invoke_all(attrs, inputs, std::move(options));
  const int nvis = attrs->op->num_visible_outputs(*attrs);
  all.resize(nvis);
  return all;
}

std::vector<NDArray> invoke(std::string_view op, const std::vector<NDArray>& inputs,
                            const AttrMap& attrs, InvokeOptions options) {
  return invoke(make_op_attrs(op, attrs), inputs, std::move(options));
}

NDArray invoke1(std::string_view op, const std::vector<NDArray>& inputs, const AttrMap& attrs) {
  return invoke(op, inputs, attrs).at(0);
}

}  // namespace weft
