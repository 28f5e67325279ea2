// Op attribute setters and queries, and the frozen process-wide registry.
#include "ops/op.h"

#include <algorithm>
#include <cctype>
#include <mutex>

#include "ops/builtin_ops.h"

namespace weft {

std::string OpAttrs::where() const {
  std::string s = "op '" + (op ? op->name() : std::string("?")) + "'";
  if (!node_name.empty()) s += " (node '" + node_name + "')";
  return s;
}

void Op::check_mutable() const {
  WEFT_CHECK_AS(Error, frozen_ == nullptr || !*frozen_)
      << "op '" << name_ << "': the operator registry is frozen; register ops before first use";
}

Op& Op::describe(std::string text) {
  check_mutable();
  description_ = std::move(text);
  return *this;
}

Op& Op::set_num_inputs(int n) {
  return set_attr<FNumInputs>([n](const OpAttrs&) { return n; });
}
Op& Op::set_num_outputs(int n) {
  return set_attr<FNumOutputs>([n](const OpAttrs&) { return n; });
}
Op& Op::set_input_names(std::vector<std::string> names) {
  check_mutable();
  fixed_input_names_ = std::move(names);
  if (!attr<FNumInputs>()) set_num_inputs(static_cast<int>(fixed_input_names_.size()));
  return *this;
}
Op& Op::set_output_names(std::vector<std::string> names) {
  check_mutable();
  fixed_output_names_ = std::move(names);
  if (!attr<FNumOutputs>()) set_num_outputs(static_cast<int>(fixed_output_names_.size()));
  return *this;
}

const FCompute* Op::compute(DeviceType device) const {
  const KernelSlot* k = kernel_slot(device);
  return k && k->compute ? &k->compute : nullptr;
}
const FStatefulCompute* Op::stateful_compute(DeviceType device) const {
  const KernelSlot* k = kernel_slot(device);
  return k && k->stateful ? &k->stateful : nullptr;
}
const FAsyncCompute* Op::async_compute(DeviceType device) const {
  const KernelSlot* k = kernel_slot(device);
  return k && k->async ? &k->async : nullptr;
}

Op& Op::set_resource_request(DeviceType device, FResourceRequest request) {
  check_mutable();
  slot_resources_[checked_slot(device)] = std::move(request);
  return *this;
}

const FResourceRequest& Op::resource_request(DeviceType device) const {
  const int s = device_slot(device);
  if (s >= 0 && slot_resources_[s]) return slot_resources_[s];
  return attr<FResourceRequest>();
}

int Op::checked_slot(DeviceType d) const {
  int s = device_slot(d);
  WEFT_CHECK_AS(ValueError, s >= 0)
      << "op '" << name_ << "': no kernel slot for device type " << static_cast<int>(d);
  return s;
}

void Op::check_slot_empty(const KernelSlot& slot, DeviceType d) const {
  WEFT_CHECK_AS(Error, slot.empty())
      << "op '" << name_ << "': a second kernel for device type " << static_cast<int>(d)
      << " (one kernel per device: Note [Kernel slots] in ops/op.h)";
}

OpKernels& OpKernels::replace_compute(DeviceType device, FCompute value) {
  op_->check_mutable();
  Op::KernelSlot& slot = op_->slots_[op_->checked_slot(device)];
  WEFT_CHECK_AS(Error, static_cast<bool>(slot.compute))
      << "op '" << op_->name() << "': no FCompute kernel for device type "
      << static_cast<int>(device) << " to replace";
  slot.compute = std::move(value);
  return *this;
}

Op& Op::set_param_schema(std::vector<ParamInfo> info, ParamParser parser,
                         std::type_index param_type) {
  check_mutable();
  WEFT_CHECK(static_cast<bool>(parser))
      << "op '" << name_ << "': set_param_schema without a parser";
  param_info_ = std::move(info);
  parser_ = std::move(parser);
  param_type_ = param_type;
  runtime_params_ = true;
  return *this;
}

int Op::num_inputs(const OpAttrs& attrs) const {
  const auto& f = attr<FNumInputs>();
  return f ? f(attrs) : 1;
}
int Op::num_outputs(const OpAttrs& attrs) const {
  const auto& f = attr<FNumOutputs>();
  return f ? f(attrs) : 1;
}
int Op::num_visible_outputs(const OpAttrs& attrs) const {
  const auto& f = attr<FNumVisibleOutputs>();
  return f ? f(attrs) : num_outputs(attrs);
}

std::vector<std::string> Op::input_names(const OpAttrs& attrs) const {
  if (const auto& f = attr<FListInputNames>()) return f(attrs);
  const int n = num_inputs(attrs);
  if (static_cast<int>(fixed_input_names_.size()) == n) return fixed_input_names_;
  if (n == 1) return {"data"};
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("arg" + std::to_string(i));
  return names;
}
std::vector<std::string> Op::output_names(const OpAttrs& attrs) const {
  if (const auto& f = attr<FListOutputNames>()) return f(attrs);
  const int n = num_outputs(attrs);
  if (static_cast<int>(fixed_output_names_.size()) == n) return fixed_output_names_;
  if (n == 1) return {"output"};
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("output" + std::to_string(i));
  return names;
}

OpAttrs Op::make_attrs(AttrMap dict, std::string node_name) const {
  OpAttrs a;
  a.op = this;
  a.node_name = std::move(node_name);
  if (parser_) {
    a.parsed = parser_(dict, name_, a.node_name);
  } else {
    a.parsed = std::make_shared<const NoParams>(parse_params<NoParams>(dict, name_, a.node_name));
  }
  a.dict = std::move(dict);
  return a;
}

OpAttrs Op::make_attrs_like(const OpAttrs& other) const {
  if (other.op != nullptr && other.op->param_type_ == param_type_ && other.parsed &&
      !runtime_params_ && !other.op->runtime_params_) {
    OpAttrs a;
    a.op = this;
    a.dict = other.dict;
    a.parsed = other.parsed;
    a.node_name = other.node_name;
    return a;
  }
  return make_attrs(other.dict, other.node_name);
}

bool Op::infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) const {
  const int nin = num_inputs(attrs);
  const int nout = num_outputs(attrs);
  WEFT_CHECK(static_cast<int>(in.size()) == nin)
      << attrs.where() << ": expects " << nin << " inputs, got " << in.size();
  if (static_cast<int>(out.size()) != nout) out.resize(nout);
  const auto& f = attr<FInferShape>();
  WEFT_CHECK_AS(NotImplemented, static_cast<bool>(f)) << attrs.where() << " has no shape inference";
  return f(attrs, in, out);
}

bool Op::infer_type(const OpAttrs& attrs, std::vector<DType>& in, std::vector<DType>& out) const {
  const int nin = num_inputs(attrs);
  const int nout = num_outputs(attrs);
  WEFT_CHECK(static_cast<int>(in.size()) == nin)
      << attrs.where() << ": expects " << nin << " inputs, got " << in.size();
  if (static_cast<int>(out.size()) != nout) out.resize(nout, DType::kUnknown);
  if (const auto& f = attr<FInferType>()) return f(attrs, in, out);
  // Default: one type for everything.
  DType t = DType::kUnknown;
  auto merge = [&](DType d, const char* what, size_t i) {
    if (d == DType::kUnknown) return;
    if (t == DType::kUnknown) t = d;
    WEFT_CHECK_AS(ShapeError, t == d)
        << attrs.where() << ": " << what << " " << i << " has dtype " << dtype_name(d)
        << " but another input/output has " << dtype_name(t);
  };
  for (size_t i = 0; i < in.size(); ++i) merge(in[i], "input", i);
  for (size_t i = 0; i < out.size(); ++i) merge(out[i], "output", i);
  if (t == DType::kUnknown) return false;
  for (auto& d : in) d = t;
  for (auto& d : out) d = t;
  return true;
}

// ---- registry ---------------------------------------------------------------------------------

const OpRegistry& OpRegistry::global() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    detail::register_builtin_ops(*r);
    r->freeze();
    return r;
  }();
  return *registry;
}

std::unique_ptr<OpRegistry> OpRegistry::make_frozen(const std::function<void(OpRegistry&)>& fill) {
  std::unique_ptr<OpRegistry> r(new OpRegistry());
  fill(*r);
  r->freeze();
  return r;
}

void OpRegistry::check_mutable() const {
  WEFT_CHECK_AS(Error, !frozen_)
      << "the operator registry is frozen; register ops before first use";
}

Op& OpRegistry::get_or_create(const std::string& name) {
  check_mutable();
  auto& slot = ops_[name];
  if (!slot) {
    slot = std::make_unique<Op>(name);
    slot->frozen_ = &frozen_;
  }
  return *slot;
}

Op& OpRegistry::define_op(const std::string& name) {
  check_mutable();
  auto [it, added] = defined_by_.emplace(name, registrar_);
  WEFT_CHECK_AS(Error, added) << "op '" << name << "' is defined twice: by " << it->second
                              << " and by " << registrar_;
  return get_or_create(name);
}

OpKernels OpRegistry::kernels(const std::string& name) {
  check_mutable();
  kernels_by_.emplace(name, registrar_);  // keeps the first, for freeze()'s message
  return OpKernels(&get_or_create(name));
}

void OpRegistry::add_alias(const std::string& alias, const std::string& name) {
  check_mutable();
  aliases_[alias] = name;
}

void OpRegistry::freeze() {
  // Note [Definitions and kernels]: every op is defined and runs somewhere. All the faults are
  // listed at once, sorted, so one build shows every misspelt name.
  std::vector<std::string> faults;
  for (const auto& [name, op] : ops_) {
    if (defined_by_.count(name) == 0) {
      faults.push_back("op '" + name + "' has kernels (from " + kernels_by_.at(name) +
                       ") but no definition (define_op in ops/defs/)");
    } else if (!op->has_any_kernel()) {
      faults.push_back("op '" + name + "' (defined by " + defined_by_.at(name) +
                       ") has no kernel on any device");
    }
  }
  std::sort(faults.begin(), faults.end());
  std::string message;
  for (const std::string& f : faults) message += "\n  " + f;
  WEFT_CHECK_AS(Error, faults.empty()) << "the built-in operator table is incomplete:" << message;
  for (auto& [name, op] : ops_) lookup_[name] = op.get();
  for (auto& [alias, name] : aliases_) {
    auto it = ops_.find(name);
    WEFT_ICHECK(it != ops_.end()) << "alias '" << alias << "' names unregistered op '" << name
                                  << "'";
    WEFT_ICHECK(ops_.find(alias) == ops_.end() || alias == name)
        << "alias '" << alias << "' collides with a registered op";
    lookup_[alias] = it->second.get();
    it->second->aliases_.push_back(alias);
  }
  for (auto& [name, op] : ops_) std::sort(op->aliases_.begin(), op->aliases_.end());
  frozen_ = true;
}

// Note [Runtime registration]
// The built-in table is filled once and frozen before anyone can look it up, so its lookups take
// no lock. Foreign ops arrive later, from any thread, while other threads invoke ops and bind
// graphs. They live in a second table: register_runtime() builds the Op privately (nobody can
// see it while `define` runs), then publishes it under the writer lock; find() consults the
// second table under the reader lock, and only once one exists (an atomic count), so a process
// that registers nothing pays nothing. Ops are never removed or replaced: an Op* handed out
// (cached by an executor, a graph node or an autograd record) stays valid for the life of the
// process, which is what lets plugins be loaded at any time but never unloaded.
const Op& OpRegistry::register_runtime(const std::string& name,
                                       const std::function<void(Op&)>& define) {
  static const bool kFrozen = true;
  OpRegistry& r = const_cast<OpRegistry&>(global());
  WEFT_CHECK_AS(ValueError, !name.empty() && name.size() <= 256)
      << "register operator: the name must have 1 to 256 characters";
  for (char c : name) {
    WEFT_CHECK_AS(ValueError, std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                                  c == '-' || c == ':')
        << "register operator '" << name << "': names use letters, digits and _ . - : only";
  }
  WEFT_CHECK_AS(ValueError, r.find(name) == nullptr)
      << "register operator '" << name << "': an operator of that name is already registered";
  auto op = std::make_unique<Op>(name);
  define(*op);
  op->frozen_ = &kFrozen;
  std::unique_lock<std::shared_mutex> lock(r.runtime_mutex_);
  WEFT_CHECK_AS(ValueError, r.lookup_.count(name) == 0 && r.runtime_ops_.count(name) == 0)
      << "register operator '" << name << "': an operator of that name is already registered";
  const Op& result = *op;
  r.runtime_ops_.emplace(name, std::move(op));
  r.num_runtime_ops_.fetch_add(1, std::memory_order_release);
  return result;
}

const Op* OpRegistry::find(std::string_view name) const {
  std::string key(name);
  auto it = lookup_.find(key);
  if (it != lookup_.end()) return it->second;
  if (num_runtime_ops_.load(std::memory_order_acquire) == 0) return nullptr;
  std::shared_lock<std::shared_mutex> lock(runtime_mutex_);
  auto rt = runtime_ops_.find(key);
  return rt == runtime_ops_.end() ? nullptr : rt->second.get();
}

static size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(a[i - 1]) == std::tolower(b[j - 1]);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

const Op& OpRegistry::get(std::string_view name) const {
  if (const Op* op = find(name)) return *op;
  std::string key(name);
  std::vector<std::pair<size_t, std::string>> close;
  for (const auto& [n, op] : lookup_) {
    size_t d = edit_distance(key, n);
    if (d <= 2) close.emplace_back(d, n);
  }
  if (num_runtime_ops_.load(std::memory_order_acquire) != 0) {
    std::shared_lock<std::shared_mutex> lock(runtime_mutex_);
    for (const auto& [n, op] : runtime_ops_) {
      size_t d = edit_distance(key, n);
      if (d <= 2) close.emplace_back(d, n);
    }
  }
  std::sort(close.begin(), close.end());
  std::string hint;
  for (size_t i = 0; i < close.size() && i < 3; ++i) hint += (i ? ", " : "") + close[i].second;
  WEFT_THROW(ValueError) << "unknown operator '" << key << "'"
                         << (hint.empty() ? std::string() : " (did you mean " + hint + "?)");
}

std::vector<const Op*> OpRegistry::list() const {
  std::vector<const Op*> out;
  for (const auto& [name, op] : ops_) out.push_back(op.get());
  if (num_runtime_ops_.load(std::memory_order_acquire) != 0) {
    std::shared_lock<std::shared_mutex> lock(runtime_mutex_);
    for (const auto& [name, op] : runtime_ops_) out.push_back(op.get());
  }
  std::sort(out.begin(), out.end(), [](const Op* a, const Op* b) { return a->name() < b->name(); });
  return out;
}

}  // namespace weft
