// The operator registry: an op is a name plus typed attributes (params, arity, inference,
// in-place options, resources, kernels per device type, gradient). The built-in ops are
// registered once and frozen; foreign ops are added at run time (Note [Runtime registration]).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/shape.h"
#include "base/tensor_view.h"
#include "engine/engine.h"
#include "ops/params.h"

namespace weft {

class Op;
class Allocator;

/// One application's attributes: the op, the string dict as given, the parsed param struct, and
/// the node name used in messages. Immutable once made (Op::make_attrs); safe to share.
struct OpAttrs {
  const Op* op = nullptr;
  AttrMap dict;
  std::shared_ptr<const void> parsed;  ///< the op's param struct (NoParams when it has none)
  std::string node_name;               ///< for error messages; may be empty

  /// The parsed params; P must be the op's param type.
  template <typename P>
  const P& params() const {
    return *static_cast<const P*>(parsed.get());
  }
  /// "op 'Convolution' (node 'conv1')" for messages.
  std::string where() const;
};

/// How a kernel writes an output (MXNet's OpReqType).
enum class OpReq : uint8_t {
  kNull,     ///< do not write
  kWrite,    ///< overwrite
  kInplace,  ///< overwrite; the output aliases an input (FInplaceOption)
  kAdd,      ///< add to what is there (gradient accumulation)
};

/// A temporary resource an op asks for (FResourceRequest).
struct ResourceRequest {
  enum class Kind : uint8_t {
    kWorkspace,  ///< scratch memory of `bytes` bytes, valid during the call only
    kRandom,  ///< the device's random generator (its engine var is written, so draws are ordered)
  };
  Kind kind = Kind::kWorkspace;
  size_t bytes = 0;
  /// kRandom only: the op's CUDA kernel draws its seed from OpContext::device_seed when that is
  /// set, so its node can be captured in a CUDA graph (Note [Random numbers in captured graphs]
  /// in graph/graph_capture.cc). Ops without it keep a graph from being captured.
  bool device_seed = false;
  /// kRandom only: the op draws numbers in training only (Dropout with mode=training), so a
  /// pass in inference mode needs no seed for it.
  bool train_only = false;
};

/// A device's random-number state. Accessed only inside operations that write its engine var.
struct RandomState {
  std::mt19937_64 engine{0};
  uint64_t seed = 0;
  uint64_t reseeds = 0;  ///< times Runtime::seed reseeded it (captured graphs redraw their word)
};

/// State kept between calls of a stateful op (FCreateOpState). Subclass it.
class OpState {
 public:
  virtual ~OpState() = default;
};

/// A tensor layout other than compact row-major, chosen by layout propagation (graph/layout.h,
/// Note [Layout propagation]). Opaque to everything but the kernels that declare FInferLayout: in
/// builds with oneDNN it is a oneDNN memory descriptor (dnnl_util::DnnlLayout). The logical shape
/// of a tensor does not change with its layout; its size in bytes may (padded blocked formats).
/// Immutable once made; safe to share between threads.
class MemoryLayout {
 public:
  virtual ~MemoryLayout() = default;
  /// Bytes a tensor takes in this layout, padding included.
  virtual size_t bytes() const = 0;
  /// A short name for listings and messages, in oneDNN's spelling ("acdb", "aBcd16b").
  virtual std::string name() const = 0;
  /// A string equal for equal layouts and different otherwise (cache keys).
  virtual const std::string& key() const = 0;
};
/// A tensor's layout; null means plain (compact row-major), the layout of every array outside
/// the executor's arena.
using LayoutRef = std::shared_ptr<const MemoryLayout>;
/// Whether two layouts are the same (both plain, or equal keys).
inline bool same_layout(const MemoryLayout* a, const MemoryLayout* b) {
  return a == b || (a && b && a->key() == b->key());
}

/// What a kernel gets besides its tensors. Valid during the call only.
struct OpContext {
  bool is_train = false;
  RunContext run;
  void* workspace = nullptr;  ///< when the op requested kWorkspace
  size_t workspace_bytes = 0;
  RandomState* random = nullptr;  ///< when the op requested kRandom
  /// Inside a captured CUDA graph, for an op whose kRandom request allows it: device memory
  /// holding the pass's seed word, advanced on the device once per pass. The kernel then draws
  /// nothing from `random` and seeds itself with seed_word::combine(*device_seed, seed_offset)
  /// (ops/defs/seed_word.h), read on the device.
  const uint64_t* device_seed = nullptr;
  uint64_t seed_offset = 0;  ///< with device_seed: the node's number among the pass's random nodes
  int num_threads = 1;       ///< intra-op threads this kernel may use (>= 1)
  /// The pool of the op's device, for temporary memory beyond `workspace` (a GPU kernel's
  /// scratch: cuDNN's workspace for the algorithm it picked). Allocate with allocate_on(bytes,
  /// run.stream) and free when the kernel has been launched: the pool reuses the block on that
  /// stream only after the work queued before the free. Null when the caller provides none.
  Allocator* temp_allocator = nullptr;
  /// Per input, an id unique to its storage for the life of the process (never reused) and the
  /// storage's version (engine var version) at the time of the call; null when unknown. Kernels
  /// may key caches of derived data (weights reordered into a blocked layout) on the pair: equal
  /// pairs mean equal contents.
  const uint64_t* input_storage_ids = nullptr;
  const uint64_t* input_versions = nullptr;
  /// Per input / output, its layout when the executor's layout propagation gave it one other than
  /// plain (null arrays, and null entries, mean plain). Only ops with FInferLayout get non-plain
  /// layouts, and only those their FInferLayout asked for or announced.
  const MemoryLayout* const* input_layouts = nullptr;
  const MemoryLayout* const* output_layouts = nullptr;

  const MemoryLayout* input_layout(size_t i) const {
    return input_layouts ? input_layouts[i] : nullptr;
  }
  const MemoryLayout* output_layout(size_t i) const {
    return output_layouts ? output_layouts[i] : nullptr;
  }
};

/// Shapes and types of one application, as FInferLayout sees them.
struct LayoutQuery {
  std::vector<Shape> in_shapes, out_shapes;
  std::vector<DType> in_types, out_types;
};

// ---- typed attributes --------------------------------------------------------------------------
// Each attribute is its own type, so `op.set_attr<FInferShape>(fn)` names the key by type: a
// misspelt or mistyped attribute does not compile.

#define WEFT_DEFINE_OP_ATTR(Name, ...)          \
  struct Name : std::function<__VA_ARGS__> {    \
    using std::function<__VA_ARGS__>::function; \
    Name() = default;                           \
  }

/// Number of inputs (may depend on params, e.g. Concat's num_args).
WEFT_DEFINE_OP_ATTR(FNumInputs, int(const OpAttrs&));
/// Number of outputs, hidden ones included (BatchNorm: 3).
WEFT_DEFINE_OP_ATTR(FNumOutputs, int(const OpAttrs&));
/// Number of outputs other nodes may consume (BatchNorm: 1, or 3 with output_mean_var).
WEFT_DEFINE_OP_ATTR(FNumVisibleOutputs, int(const OpAttrs&));
WEFT_DEFINE_OP_ATTR(FListInputNames, std::vector<std::string>(const OpAttrs&));
WEFT_DEFINE_OP_ATTR(FListOutputNames, std::vector<std::string>(const OpAttrs&));
/// Shape inference, forward and backward: fills unknown entries of `in` and `out` from the known
/// ones. Returns true when every shape is known afterwards. Throws ShapeError (naming the op, the
/// node and the shapes) when known shapes contradict each other.
WEFT_DEFINE_OP_ATTR(FInferShape,
                    bool(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out));
/// Type inference, likewise (kUnknown = not known yet). Default: all inputs and outputs equal.
WEFT_DEFINE_OP_ATTR(FInferType,
                    bool(const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out));
/// Pairs (input i, output o): output o may reuse input i's memory when i dies here.
WEFT_DEFINE_OP_ATTR(FInplaceOption, std::vector<std::pair<int, int>>(const OpAttrs&));
/// Per FInplaceOption pair: true when the output equals the input (no computation needed in place).
WEFT_DEFINE_OP_ATTR(FInplaceIdentity, std::vector<bool>(const OpAttrs&));
/// Inputs the op writes (BatchNorm's moving mean/var in training): write dependencies.
WEFT_DEFINE_OP_ATTR(FMutateInputs, std::vector<int>(const OpAttrs&));
/// Temporary resources, as a function of the shapes.
WEFT_DEFINE_OP_ATTR(FResourceRequest,
                    std::vector<ResourceRequest>(const OpAttrs&, const std::vector<Shape>& in,
                                                 const std::vector<Shape>& out));
/// A kernel: reads `in`, writes `out` according to `req`. Views are compact; shapes were inferred.
WEFT_DEFINE_OP_ATTR(FCompute, void(const OpAttrs&, const OpContext&, std::span<const TensorView> in,
                                   std::span<const OpReq> req, std::span<const TensorView> out));
/// Layout propagation (Note [Layout propagation] in graph/layout.cc): an op that can read or write
/// layouts other than plain. On entry `in[i]` is the layout input i's producer writes (null =
/// plain) and every `out[o]` is null. The op sets `in[i]` to the layout its kernel reads (the pass
/// inserts a reorder where that differs from what the producer writes) and `out[o]` to the layout
/// its kernel writes, and returns true; returning false means plain everywhere (in and out are
/// then ignored). Called at bind time for CPU inference only. Ops without it take and give plain.
WEFT_DEFINE_OP_ATTR(FInferLayout, bool(const OpAttrs&, const LayoutQuery&,
                                       std::vector<LayoutRef>& in, std::vector<LayoutRef>& out));
/// Temporary resources of an application whose inputs or outputs have layouts other than plain
/// (`in` / `out` as FInferLayout left them); the planner asks it instead of FResourceRequest then
/// (a kernel that needs no conversions on its layouts needs less workspace). Optional.
WEFT_DEFINE_OP_ATTR(FLayoutResourceRequest,
                    std::vector<ResourceRequest>(const OpAttrs&, const LayoutQuery&,
                                                 const std::vector<LayoutRef>& in,
                                                 const std::vector<LayoutRef>& out));
/// Creates the state of a stateful op for given input shapes and types.
WEFT_DEFINE_OP_ATTR(FCreateOpState,
                    std::shared_ptr<OpState>(const OpAttrs&, Device, const std::vector<Shape>& in,
                                             const std::vector<DType>& in_types));
/// A stateful kernel.
WEFT_DEFINE_OP_ATTR(FStatefulCompute,
                    void(OpState&, const OpContext&, std::span<const TensorView> in,
                         std::span<const OpReq> req, std::span<const TensorView> out));
/// An asynchronous kernel: launches work and completes `done` exactly once, later, from any
/// thread (the engine's completion contract). Pushed with Engine::push_async: the views and the
/// context are valid until it returns; the memory they describe stays reserved for the operation
/// until `done` is called. Used by foreign operators of the asynchronous kind.
WEFT_DEFINE_OP_ATTR(FAsyncCompute, void(const OpAttrs&, const OpContext&,
                                        std::span<const TensorView> in, std::span<const OpReq> req,
                                        std::span<const TensorView> out, CallbackOnComplete done));

class GradBuilder;
/// An entry handed out by a GradBuilder; invalid (id < 0) means "no gradient" (zero).
struct GradEntry {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};
/// Builds the gradient of each forward input from the output gradients. Returns one entry per
/// forward input; an invalid entry means the input gets no gradient (zero).
WEFT_DEFINE_OP_ATTR(FGradient, std::vector<GradEntry>(GradBuilder&));

#undef WEFT_DEFINE_OP_ATTR

/// What gradient definitions are written against. Eager autograd implements it by running ops
/// at once; the graph gradient pass implements it by adding nodes. `ops/` knows neither.
class GradBuilder {
 public:
  virtual ~GradBuilder() = default;
  /// The forward application's attributes.
  virtual const OpAttrs& attrs() const = 0;
  /// Forward input i / output i (hidden outputs included).
  virtual GradEntry input(int i) = 0;
  virtual GradEntry output(int i) = 0;
  /// Gradient flowing into forward output i (zeros for outputs nothing used).
  virtual GradEntry out_grad(int i) = 0;
  /// Applies `op` to `inputs` with `attrs`; returns all its outputs.
  virtual std::vector<GradEntry> emit(std::string_view op, std::vector<GradEntry> inputs,
                                      AttrMap attrs = {}) = 0;
  /// Applies `op` with the forward application's own attributes (param struct reused).
  virtual std::vector<GradEntry> emit_with_forward_attrs(std::string_view op,
                                                         std::vector<GradEntry> inputs) = 0;

  /// First output of emit().
  GradEntry emit1(std::string_view op, std::vector<GradEntry> inputs, AttrMap attrs = {}) {
    return emit(op, std::move(inputs), std::move(attrs)).at(0);
  }
  static GradEntry none() { return {}; }
};

/// An operator. Built by registration code (the setters, which return *this for chaining) before
/// the registry is frozen; read-only and thread-safe afterwards.
class Op {
 public:
  explicit Op(std::string name) : name_(std::move(name)) {}
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  const std::string& name() const { return name_; }
  /// Whether the op's parameters are parsed by a schema given at run time (set_param_schema, as
  /// foreign operators do): such attributes are parsed anew rather than shared.
  bool has_runtime_params() const { return runtime_params_; }
  const std::string& description() const { return description_; }
  const std::vector<std::string>& aliases() const { return aliases_; }

  // ---- registration (before freeze) ----
  Op& describe(std::string text);
  Op& set_num_inputs(int n);
  Op& set_num_outputs(int n);
  Op& set_input_names(std::vector<std::string> names);   ///< also sets num_inputs when unset
  Op& set_output_names(std::vector<std::string> names);  ///< also sets num_outputs when unset
  /// The op's param struct P (P::declare describes it).
  template <typename P>
  Op& set_params() {
    check_mutable();
    param_type_ = std::type_index(typeid(P));
    parser_ = [](const AttrMap& dict, const std::string& op,
                 const std::string& node) -> std::shared_ptr<const void> {
      return std::make_shared<const P>(parse_params<P>(dict, op, node));
    };
    param_info_ = param_info<P>();
    return *this;
  }
  /// Sets a typed attribute.
  template <typename A>
  Op& set_attr(A value) {
    check_mutable();
    std::get<A>(attrs_) = std::move(value);
    return *this;
  }
  /// A param schema given at run time (foreign ops): the fields' descriptions and a parser from
  /// the attribute dict to the parsed params (whose type is then `param_type`).
  using ParamParser = std::function<std::shared_ptr<const void>(
      const AttrMap& dict, const std::string& op, const std::string& node)>;
  Op& set_param_schema(std::vector<ParamInfo> info, ParamParser parser, std::type_index param_type);
  /// Sets the kernel (FCompute, FStatefulCompute or FAsyncCompute) for one device type
  /// (Note [Kernel slots]). Pinned host memory (cuda_host) runs the CPU kernel. Throws
  /// ValueError for a device type with no slot, and Error when the device type already has a
  /// kernel.
  template <typename A>
  Op& set_attr(DeviceType device, A value) {
    static_assert(std::is_same_v<A, FCompute> || std::is_same_v<A, FStatefulCompute> ||
                      std::is_same_v<A, FAsyncCompute>,
                  "per-device attributes are FCompute, FStatefulCompute and FAsyncCompute");
    check_mutable();
    KernelSlot& slot = slots_[checked_slot(device)];
    check_slot_empty(slot, device);
    if constexpr (std::is_same_v<A, FCompute>) {
      slot.compute = std::move(value);
    } else if constexpr (std::is_same_v<A, FAsyncCompute>) {
      slot.async = std::move(value);
    } else {
      slot.stateful = std::move(value);
    }
    return *this;
  }

  /// A resource request for one device type's kernels only, in place of the op-wide
  /// FResourceRequest there (the CPU kernel's workspace is not allocated for the CUDA one).
  Op& set_resource_request(DeviceType device, FResourceRequest request);

  // ---- queries (thread-safe after freeze) ----
  /// The attribute, or an empty function when unset.
  template <typename A>
  const A& attr() const {
    return std::get<A>(attrs_);
  }
  /// The kernel for a device type, or null when the op has none there.
  const FCompute* compute(DeviceType device) const;
  const FStatefulCompute* stateful_compute(DeviceType device) const;
  const FAsyncCompute* async_compute(DeviceType device) const;
  /// Whether the op can run on `device` (has a kernel there).
  bool has_kernel(DeviceType device) const {
    return compute(device) || stateful_compute(device) || async_compute(device);
  }
  /// The resource request that holds on `device`: the device's own (set_resource_request), else
  /// the op-wide FResourceRequest; an empty function when the op asks for nothing there.
  const FResourceRequest& resource_request(DeviceType device) const;

  int num_inputs(const OpAttrs& attrs) const;
  int num_outputs(const OpAttrs& attrs) const;
  int num_visible_outputs(const OpAttrs& attrs) const;
  std::vector<std::string> input_names(const OpAttrs& attrs) const;
  std::vector<std::string> output_names(const OpAttrs& attrs) const;
  const std::vector<ParamInfo>& param_info_list() const { return param_info_; }
  std::type_index param_type() const { return param_type_; }

  /// Parses `dict` into an OpAttrs for this op. Throws ValueError naming op, node, key and value.
  OpAttrs make_attrs(AttrMap dict, std::string node_name = {}) const;
  /// Reuses `other`'s parsed params when its param type matches this op's (backward ops that
  /// share the forward's params); parses otherwise.
  OpAttrs make_attrs_like(const OpAttrs& other) const;

  /// Runs FInferShape (or, when the op has none, fails with NotImplemented). Returns whether all
  /// shapes are known. Checks the vector sizes against the op's arity.
  bool infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) const;
  /// Runs FInferType, or the default rule (all inputs and outputs share one type).
  bool infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) const;

 private:
  friend class OpRegistry;
  friend class OpKernels;
  using Attrs =
      std::tuple<FNumInputs, FNumOutputs, FNumVisibleOutputs, FListInputNames, FListOutputNames,
                 FInferShape, FInferType, FInplaceOption, FInplaceIdentity, FMutateInputs,
                 FResourceRequest, FCreateOpState, FGradient, FInferLayout, FLayoutResourceRequest>;
  // Note [Kernel slots]
  // One slot per device type that runs kernels, keyed by the type itself (not by bits of its
  // code: DLPack's ROCm code 10 must not land in the CUDA slot). A slot holds one kernel, of one
  // of the three kinds, and refuses a second: the choice between oneDNN and weft's reference
  // loops is made inside the CPU kernel (oneDNN when the build has it and it has a primitive for
  // the application's shapes, dtypes and params, the reference loop otherwise), where what
  // decides it is known, so a second kernel for a device could only be a registration mistake.
  struct KernelSlot {
    FCompute compute;
    FStatefulCompute stateful;
    FAsyncCompute async;
    bool empty() const { return !compute && !stateful && !async; }
  };
  static constexpr int kDeviceSlots = 2;
  /// The slot of a device type, or -1 when it has none.
  static int device_slot(DeviceType d) {
    switch (d) {
      case DeviceType::kCPU:
      case DeviceType::kCUDAHost:
        return 0;
      case DeviceType::kCUDA:
        return 1;
    }
    return -1;
  }
  int checked_slot(DeviceType d) const;
  void check_slot_empty(const KernelSlot& slot, DeviceType d) const;
  const KernelSlot* kernel_slot(DeviceType d) const {
    int s = device_slot(d);
    return s < 0 ? nullptr : &slots_[s];
  }
  bool has_any_kernel() const {
    for (const KernelSlot& s : slots_) {
      if (!s.empty()) return true;
    }
    return false;
  }
  void check_mutable() const;

  std::string name_;
  std::string description_;
  std::vector<std::string> aliases_;
  Attrs attrs_;
  std::array<KernelSlot, kDeviceSlots> slots_;
  std::array<FResourceRequest, kDeviceSlots> slot_resources_;  // per device; empty: op-wide
  std::type_index param_type_ = std::type_index(typeid(NoParams));
  std::function<std::shared_ptr<const void>(const AttrMap&, const std::string&, const std::string&)>
      parser_;
  std::vector<ParamInfo> param_info_;
  bool runtime_params_ = false;  // set_param_schema: make_attrs_like always parses again
  std::vector<std::string> fixed_input_names_;
  std::vector<std::string> fixed_output_names_;
  const bool* frozen_ = nullptr;
};

/// The kernel side of a built-in op (OpRegistry::kernels): all that a device folder (ops/cpu/,
/// ops/cuda/) may add to an op that ops/defs/ defines, namely kernels, per-device resource
/// requests and the layout hooks of kernels that read or write non-plain layouts. Valid while the
/// registry is being filled; call from the registering thread.
class OpKernels {
 public:
  /// Sets the op's kernel for one device type (Op::set_attr(DeviceType, A)).
  template <typename A>
  OpKernels& set_attr(DeviceType device, A value) {
    op_->set_attr(device, std::move(value));
    return *this;
  }
  /// Sets a layout hook: FInferLayout or FLayoutResourceRequest (the kernel decides the layouts
  /// it takes, so the hook lives with the kernel).
  template <typename A>
  OpKernels& set_attr(A value) {
    static_assert(std::is_same_v<A, FInferLayout> || std::is_same_v<A, FLayoutResourceRequest>,
                  "a kernel file sets kernels, resource requests and layout hooks only; the rest "
                  "of an op is its definition's (ops/defs/)");
    op_->set_attr<A>(std::move(value));
    return *this;
  }
  /// The FCompute kernel set so far for a device type, or null.
  const FCompute* compute(DeviceType device) const { return op_->compute(device); }
  /// Replaces the FCompute kernel set before for a device type by one that wraps it (the oneDNN
  /// layout kernels of add and mul call the plain loops for plain calls). Throws Error when the
  /// device type has no FCompute kernel yet.
  OpKernels& replace_compute(DeviceType device, FCompute value);
  /// The resource request of one device type's kernel (Op::set_resource_request).
  OpKernels& set_resource_request(DeviceType device, FResourceRequest request) {
    op_->set_resource_request(device, std::move(request));
    return *this;
  }

 private:
  friend class OpRegistry;
  explicit OpKernels(Op* op) : op_(op) {}
  Op* op_;
};

/// The process-wide operator table. The built-in ops are registered on first use, after which
/// that part of the registry is frozen. Foreign ops are added at any time with
/// register_runtime() (Note [Runtime registration] in ops/op.cc). Lookups are thread-safe.
class OpRegistry {
 public:
  /// The registry, with every built-in op registered and frozen.
  static const OpRegistry& global();

  /// Registers a foreign op at run time: `define` fills a new, private Op (the setters work on
  /// it); the op is then published atomically and never removed, so pointers to it stay valid
  /// for the life of the process. Throws ValueError when `name` is taken (built-in or runtime)
  /// or is not a valid operator name, and whatever `define` throws (nothing is published then).
  /// Safe to call while other threads look ops up, invoke them or bind graphs.
  static const Op& register_runtime(const std::string& name,
                                    const std::function<void(Op&)>& define);

  /// A private registry filled by `fill` and frozen as global() freezes the built-in one, for
  /// checking the registration rules (Note [Definitions and kernels]). Throws what fill or
  /// freeze() throws.
  static std::unique_ptr<OpRegistry> make_frozen(const std::function<void(OpRegistry&)>& fill);

  /// Looks up an op by name or alias; null when absent.
  const Op* find(std::string_view name) const;
  /// Looks up an op; throws ValueError "unknown operator 'x'" (with close names) when absent.
  const Op& get(std::string_view name) const;
  /// Every op (not aliases), sorted by name.
  std::vector<const Op*> list() const;
  bool frozen() const { return frozen_; }

  // ---- registration (only inside the built-in registration functions) ----
  // Note [Definitions and kernels]
  // An op is defined once, in ops/defs/ (define_op: name, params, arity, inference, gradient),
  // and gets its kernels from the device folders (kernels(name): kernels, per-device resource
  // requests, layout hooks). The two are separate calls so that a misspelt name in a kernel file
  // cannot quietly create an op without a definition: freeze() refuses a kernel whose op no
  // definition made, and a definition that no device gave a kernel, naming the op and the
  // registration function (set_registrar) that made each side.

  /// Defines the op called `name` and returns it for its setters. Throws Error when the op is
  /// already defined.
  Op& define_op(const std::string& name);
  /// The kernel side of the op called `name`, which a definition must make before freeze (the
  /// order of the calls does not matter).
  OpKernels kernels(const std::string& name);
  /// Makes `alias` resolve to the op `name` (which may be registered later).
  void add_alias(const std::string& alias, const std::string& name);
  /// Names the registration function now running ("ops/defs register_elemwise_ops"), for
  /// freeze()'s messages; `where` must outlive the registration.
  void set_registrar(const char* where) { registrar_ = where; }

 private:
  OpRegistry() = default;
  void freeze();
  void check_mutable() const;
  Op& get_or_create(const std::string& name);
  std::unordered_map<std::string, std::unique_ptr<Op>> ops_;
  // Who defined each op, and who first gave it a kernel (Note [Definitions and kernels]).
  std::unordered_map<std::string, const char*> defined_by_;
  std::unordered_map<std::string, const char*> kernels_by_;
  const char* registrar_ = "?";
  std::unordered_map<std::string, std::string> aliases_;
  std::unordered_map<std::string, const Op*> lookup_;  // names and aliases, built at freeze
  bool frozen_ = false;
  // Runtime-registered ops: published under the writer lock, read under the reader lock (taken
  // only when there is at least one, so built-in lookups stay lock-free).
  mutable std::shared_mutex runtime_mutex_;
  std::unordered_map<std::string, std::unique_ptr<Op>> runtime_ops_;
  std::atomic<size_t> num_runtime_ops_{0};
};

/// Shorthand: OpRegistry::global().get(name).
inline const Op& get_op(std::string_view name) { return OpRegistry::global().get(name); }

}  // namespace weft
