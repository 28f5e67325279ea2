// Operator invocation: inference, output allocation, and the push of one kernel onto the engine.
#include <algorithm>
#include <span>

#include "base/small_vector.h"
#include "ndarray/autograd.h"
#include "ndarray/kernel_scope.h"
#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"
#include "ops/op_call.h"

namespace weft {
namespace {

// Kernels writing at most this many elements run inline (Note [Tiny kernels run where they
// become ready]).
constexpr int64_t kInlineKernelElements = 4096;

// Calls a kernel: fills the rest of `ctx` (threads, input identities taken now: reads of the
// inputs are ordered after their writes and before later ones, so their versions are stable) and
// runs the call.
void run_kernel(const OpCall& call, const RunContext& rc, OpContext& ctx, bool is_train,
                Engine& engine, std::span<const TensorView> in, std::span<const TensorView> out,
                std::span<const OpReq> req, std::span<const VarHandle> in_vars,
                const uint64_t* storage_ids, uint64_t* versions, CallbackOnComplete* on_complete) {
  ctx.is_train = is_train;
  ctx.run = rc;
  for (size_t i = 0; i < in_vars.size(); ++i) versions[i] = engine.var_version(in_vars[i]);
  ctx.input_storage_ids = storage_ids;
  ctx.input_versions = versions;
  KernelScope scope(Runtime::get());
  ctx.num_threads = scope.threads();
  call.run(ctx, in, req, out, on_complete);
}

// Everything one pushed kernel needs, owned by its engine operation.
struct PendingKernel {
  std::shared_ptr<const OpAttrs> attrs;  // keeps call.attrs alive
  OpCall call;
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
    ctx.workspace = workspace.get();
    ctx.workspace_bytes = workspace_bytes;
    ctx.random = random ? &random->state : nullptr;
    ctx.temp_allocator = temp_allocator;
    run_kernel(call, rc, ctx, is_train, *engine, {in_views.data(), in_views.size()},
               {out_views.data(), out_views.size()}, {req.data(), req.size()},
               {in_vars.data(), in_vars.size()}, storage_ids.data(), versions.data(), on_complete);
    if (call.kernel.async == nullptr) workspace.reset();
  }
};

// Note [Inference cache]
// Imperative code calls the same operator on the same shapes over and over (a training loop, an
// elementwise update per parameter), and inference (the op's shape and type functions, the
// checks) is a good part of a small call's cost. Each thread keeps the results of its last few
// inferences of calls without given outputs, keyed by the parsed attributes and the input shapes
// and dtypes; inference is a pure function of those. An entry holds its attributes, so their
// address cannot be reused by other attributes while the entry exists.
struct InferenceMemo {
  std::shared_ptr<const OpAttrs> attrs;
  std::vector<Shape> in_shapes, out_shapes;
  std::vector<DType> in_types, out_types;
};
constexpr int kInferenceMemos = 4;
thread_local InferenceMemo t_memos[kInferenceMemos];
thread_local int t_next_memo = 0;

// The memo for `attrs` on `inputs` (calls without given outputs only), or null. Valid until the
// next remember_inference on this thread.
const InferenceMemo* recall_inference(const OpAttrs& attrs, const std::vector<NDArray>& inputs,
                                      const std::vector<NDArray>& given) {
  if (!given.empty()) return nullptr;
  for (const InferenceMemo& m : t_memos) {
    if (m.attrs.get() != &attrs || m.in_shapes.size() != inputs.size()) continue;
    bool same = true;
    for (size_t i = 0; i < inputs.size() && same; ++i) {
      same = m.in_types[i] == inputs[i].dtype() && m.in_shapes[i] == inputs[i].shape();
    }
    if (same) return &m;
  }
  return nullptr;
}

void remember_inference(const std::shared_ptr<const OpAttrs>& attrs,
                        const std::vector<Shape>& in_shapes, const std::vector<DType>& in_types,
                        const std::vector<Shape>& out_shapes, const std::vector<DType>& out_types) {
  InferenceMemo& m = t_memos[t_next_memo];
  t_next_memo = (t_next_memo + 1) % kInferenceMemos;
  m.attrs = attrs;
  m.in_shapes = in_shapes;
  m.in_types = in_types;
  m.out_shapes = out_shapes;
  m.out_types = out_types;
}

}  // namespace

void infer_outputs(const OpAttrs& attrs, const std::vector<NDArray>& inputs,
                   std::vector<Shape>& in_shapes, std::vector<DType>& in_types,
                   std::vector<Shape>& out_shapes, std::vector<DType>& out_types) {
  const size_t nin = inputs.size();
  in_shapes.resize(nin);
  in_types.resize(nin);
  for (size_t i = 0; i < nin; ++i) {
    in_shapes[i] = inputs[i].shape();
    in_types[i] = inputs[i].dtype();
  }
  infer_call(attrs, in_shapes, in_types, out_shapes, out_types);
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

  // Inference, in per-thread scratch vectors, or remembered (Note [Inference cache]). The
  // shapes are used only before the kernel runs (a kernel run here may invoke again).
  thread_local std::vector<Shape> scratch_in_shapes, scratch_out_shapes;
  thread_local std::vector<DType> scratch_in_types, scratch_out_types;
  const std::vector<Shape>* in_shapes_p = &scratch_in_shapes;
  const std::vector<Shape>* out_shapes_p = &scratch_out_shapes;
  const std::vector<DType>* in_types_p = &scratch_in_types;
  const std::vector<DType>* out_types_p = &scratch_out_types;
  if (const InferenceMemo* memo = recall_inference(attrs, inputs, given)) {
    in_shapes_p = &memo->in_shapes;
    out_shapes_p = &memo->out_shapes;
    in_types_p = &memo->in_types;
    out_types_p = &memo->out_types;
  } else {
    scratch_in_shapes.resize(nin);
    scratch_out_shapes.assign(nout, Shape());
    scratch_in_types.resize(nin);
    scratch_out_types.assign(nout, DType::kUnknown);
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i].is_none()) continue;
      scratch_out_shapes[i] = given[i].shape();
      scratch_out_types[i] = given[i].dtype();
    }
    infer_outputs(attrs, inputs, scratch_in_shapes, scratch_in_types, scratch_out_shapes,
                  scratch_out_types);
    if (given.empty()) {
      remember_inference(attrs_ptr, scratch_in_shapes, scratch_in_types, scratch_out_shapes,
                         scratch_out_types);
    }
  }
  const std::vector<Shape>& in_shapes = *in_shapes_p;
  const std::vector<Shape>& out_shapes = *out_shapes_p;
  const std::vector<DType>& in_types = *in_types_p;
  const std::vector<DType>& out_types = *out_types_p;

  // Kernel, resources, state (Note [One call path] in ops/op_call.cc).
  OpCall call = OpCall::make(attrs, device, in_shapes, in_types, out_shapes);
  const FCompute* compute = call.kernel.compute;

  // Outputs.
  std::vector<NDArray> outputs;
  outputs.reserve(nout);
  for (int i = 0; i < nout; ++i) {
    if (i < static_cast<int>(given.size()) && !given[i].is_none()) {
      outputs.push_back(given[i]);
      WEFT_CHECK(!outputs[i].storage()->read_only)
          << attrs.where() << ": output " << i
          << " is a read-only array (imported from a read-only DLPack tensor)";
      WEFT_CHECK(outputs[i].device() == device)
          << attrs.where() << ": output " << i << " is on " << to_string(outputs[i].device());
    } else {
      outputs.push_back(NDArray::empty(out_shapes[i], out_types[i], device));
    }
  }
  SmallVector<OpReq, 3> req;
  for (OpReq r : options.req) req.push_back(r);
  if (req.empty()) req.resize(nout, OpReq::kWrite);
  if (static_cast<int>(req.size()) == nvis && nvis < nout) req.resize(nout, OpReq::kWrite);
  WEFT_CHECK(static_cast<int>(req.size()) == nout)
      << attrs.where() << ": req needs one entry per output";

  // Resources.
  Runtime& rt = Runtime::get();
  Engine& engine = rt.engine();
  SmallVector<VarHandle, 4> writes;
  DataPtr workspace;
  size_t workspace_bytes = 0;
  RandomResource* random = nullptr;
  if (call.resources.workspace) {
    workspace_bytes = call.resources.workspace_bytes;
    workspace = rt.allocator(device).allocate(std::max<size_t>(workspace_bytes, 1));
  }
  if (call.resources.random) {
    random = &rt.random(device);
    writes.push_back(random->var);
  }
  SmallVector<VarHandle, 4> reads;
  for (int i = 0; i < nin; ++i) reads.push_back(inputs[i].var());
  for (int i = 0; i < nout; ++i) writes.push_back(outputs[i].var());
  if (const auto& f = op.attr<FMutateInputs>()) {
    for (int i : f(attrs)) {
      WEFT_CHECK(!inputs.at(i).storage()->read_only)
          << attrs.where() << ": input " << i
          << " is written by the op but is a read-only array (imported from a read-only DLPack "
             "tensor)";
      writes.push_back(inputs.at(i).var());
    }
  }
  const bool is_train = autograd::is_training();
  std::span<const VarHandle> read_span(reads.data(), reads.size());
  std::span<const VarHandle> write_span(writes.data(), writes.size());

  // Note [Tiny kernels run where they become ready]: a CPU kernel writing few elements costs
  // less than the hand-off to a worker (a wake-up, and memory allocated on one thread and freed
  // on another). Such kernels are pushed as kAsync operations, which the engine runs on the
  // thread that makes them ready: the caller's thread when the inputs are already computed, or the
  // worker that completes the last dependency. When a foreign thread's on_complete (a CUDA host
  // callback, an MPI thread) makes one ready, the engine hands it to a worker instead (Note [Which
  // threads run operations] in engine/threaded_engine.cc). Ordering and error semantics are
  // unchanged, and the engine chains no further operation into the thread that ran one.
  //
  // Most of them are ready when pushed: the engine then runs them at once, here
  // (Engine::run_if_ready, Note [Ready at push] in engine/ready_at_push.cc), and the kernel's
  // views, requests and input identities stay on this stack; only a kernel that has to wait is
  // copied into a PendingKernel that its queued operation owns.
  int64_t out_elements = 0;
  for (int i = 0; i < nout; ++i) out_elements += outputs[i].size();
  const bool tiny = device.type == DeviceType::kCPU && compute != nullptr &&
                    out_elements <= kInlineKernelElements && workspace_bytes == 0;
  constexpr int kMaxStackInputs = 8, kMaxStackOutputs = 4;
  if (tiny && nin <= kMaxStackInputs && nout <= kMaxStackOutputs) {
    // Built in place, field by field: a view constructed and then copied here was read back
    // with wide loads from narrow stores still in flight, stalling each call.
    alignas(TensorView) unsigned char in_bytes[sizeof(TensorView) * kMaxStackInputs];
    alignas(TensorView) unsigned char out_bytes[sizeof(TensorView) * kMaxStackOutputs];
    auto* in_views = reinterpret_cast<TensorView*>(in_bytes);
    auto* out_views = reinterpret_cast<TensorView*>(out_bytes);
    uint64_t ids[kMaxStackInputs], versions[kMaxStackInputs];
    for (int i = 0; i < nin; ++i) {
      // The shapes are the arrays' own (alive during this call).
      const detail::Storage& st = *inputs[i].storage();
      auto* v = ::new (&in_views[i])
          TensorView(st.data.get(), device, inputs[i].dtype(), inputs[i].shape());
      v->byte_offset = inputs[i].byte_offset();
      ids[i] = st.id;
    }
    for (int i = 0; i < nout; ++i) {
      auto* v = ::new (&out_views[i]) TensorView(outputs[i].storage()->data.get(), device,
                                                 outputs[i].dtype(), outputs[i].shape());
      v->byte_offset = outputs[i].byte_offset();
    }
    // One pointer captured, so the function stays within SyncFn's inline storage (a lambda
    // capturing each local by reference would not, and would be allocated).
    struct Call {
      const OpCall& call;
      RandomResource* random;
      bool is_train;
      Engine& engine;
      std::span<const TensorView> in, out;
      std::span<const OpReq> req;
      std::span<const VarHandle> in_vars;
      const uint64_t* ids;
      uint64_t* versions;
    } inline_call{call,
                  random,
                  is_train,
                  engine,
                  {in_views, static_cast<size_t>(nin)},
                  {out_views, static_cast<size_t>(nout)},
                  {req.data(), req.size()},
                  read_span,
                  ids,
                  versions};
    SyncFn now([c = &inline_call](const RunContext& rc) {
      OpContext ctx;
      ctx.random = c->random ? &c->random->state : nullptr;
      run_kernel(c->call, rc, ctx, c->is_train, c->engine, c->in, c->out, c->req, c->in_vars,
                 c->ids, c->versions, nullptr);
    });
    if (engine.run_if_ready(now, device, read_span, write_span, op.name())) {
      detail::maybe_record(attrs_ptr, inputs, outputs);
      return outputs;
    }
  }

  auto pk = std::make_unique<PendingKernel>();
  pk->attrs = attrs_ptr;
  const bool async = call.kernel.async != nullptr;
  pk->call = std::move(call);
  pk->req = req;
  pk->workspace = std::move(workspace);
  pk->workspace_bytes = workspace_bytes;
  pk->random = random;
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
  pk->engine = &engine;
  if (device.type == DeviceType::kCUDA) pk->temp_allocator = &rt.allocator(device);
  pk->is_train = is_train;
  // The operation owns the kernel state; it is freed with the operation, also when the engine
  // skips it because an input carries an error.
  if (async) {
    engine.push_async(
        [pk = std::move(pk)](const RunContext& rc, CallbackOnComplete done) { pk->run(rc, &done); },
        device, read_span, write_span, FnProperty::kNormal, 0, op.name());
  } else {
    engine.push_sync([pk = std::move(pk)](const RunContext& rc) { pk->run(rc); }, device, read_span,
                     write_span, tiny ? FnProperty::kAsync : FnProperty::kNormal, 0, op.name());
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
  return invoke(cached_op_attrs(op, attrs), inputs, std::move(options));
}

NDArray invoke1(std::string_view op, const std::vector<NDArray>& inputs, const AttrMap& attrs) {
  return invoke(op, inputs, attrs).at(0);
}

}  // namespace weft
