// Engine creation, configuration, and helpers shared by the threaded and synchronous engines.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <sstream>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/env.h"
#include "base/profiler.h"
#include "engine/failure_log.h"
#include "engine/object_pool.h"
#include "engine/sync_engine.h"
#include "engine/threaded_engine.h"
#include "engine/var.h"

namespace weft {

EngineConfig EngineConfig::from_environment() {
  Environment env = read_environment();
  EngineConfig config;
  if (env.engine) config.kind = *env.engine == "sync" ? EngineKind::kSync : EngineKind::kThreaded;
  if (env.num_threads) config.num_threads = *env.num_threads;
  if (env.cpu_workers) config.cpu_workers = *env.cpu_workers;
  if (env.gpu_streams) config.gpu_compute_streams = *env.gpu_streams;
  if (env.profile_path) config.profile_path = *env.profile_path;
  if (env.profile_max_events) config.profile_max_events = *env.profile_max_events;
  return config;
}

std::unique_ptr<Engine> Engine::create(const EngineConfig& config) {
  WEFT_CHECK(config.num_threads >= 0 && config.num_threads <= 4096)
      << "EngineConfig::num_threads must be in [0, 4096] (0 = the cores available), got "
      << config.num_threads;
  WEFT_CHECK(config.gpu_compute_streams >= 1 && config.gpu_compute_streams <= 64)
      << "EngineConfig::gpu_compute_streams must be in [1, 64], got " << config.gpu_compute_streams;
  WEFT_CHECK(config.cpu_workers >= 0 && config.cpu_workers <= 4096)
      << "EngineConfig::cpu_workers must be in [0, 4096] (0 = the thread budget), got "
      << config.cpu_workers;
  WEFT_CHECK(config.profile_max_events >= 1)
      << "EngineConfig::profile_max_events must be at least 1, got " << config.profile_max_events;
  WEFT_CHECK(config.max_retained_errors >= 0)
      << "EngineConfig::max_retained_errors must not be negative, got "
      << config.max_retained_errors;
  switch (config.kind) {
    case EngineKind::kThreaded:
      return std::make_unique<ThreadedEngine>(config);
    case EngineKind::kSync:
      return std::make_unique<SyncEngine>(config);
  }
  WEFT_THROW(ValueError) << "unknown EngineKind " << static_cast<int>(config.kind);
}

std::ostream& operator<<(std::ostream& os, const VarHandle& var) {
  if (!var) return os << "null variable";
  return os << "variable " << static_cast<const void*>(var.get()) << " (generation "
            << var.generation() << ")";
}

namespace {
// The asynchronous body running on this thread, if any (AsyncBodyScope).
thread_local const detail::OprBlock* t_async_op = nullptr;
thread_local uint64_t t_async_token = 0;

// Where completion-contract violations go, per engine (detail::register_failure_log). Leaked: a
// callback may be misused during static destruction.
struct LogRegistry {
  std::mutex mutex;
  std::vector<std::pair<const void*, detail::FailureLog*>> logs;
};
LogRegistry& log_registry() {
  static LogRegistry* registry = new LogRegistry();
  return *registry;
}
}  // namespace

void CallbackOnComplete::operator()(std::exception_ptr error) const {
  WEFT_CHECK(fn_ != nullptr) << "CallbackOnComplete called on an empty callback (only the "
                                "callback passed to an asynchronous operation completes it)";
  auto* op = static_cast<detail::OprBlock*>(op_);
  if (detail::claim_completion(op, token_)) {
    fn_(engine_, op_, std::move(error));
    return;
  }
  // Note [Completion tokens]: the operation was completed before. Its block may already hold
  // another operation, so it is read only when this thread is inside the body that owns it.
  std::string name;
  if (t_async_op == op && t_async_token == token_) name = op->name.str();
  std::string message =
      "on_complete called twice: the asynchronous operation " +
      (name.empty() ? std::string("(its name is no longer known: it completed earlier)")
                    : "'" + name + "'") +
      " was already completed, by an earlier call or by the engine because its function threw; "
      "nothing was released again (call on_complete exactly once: docs/ENGINE.md, Completion "
      "contract)";
  auto violation = std::make_exception_ptr(CompletionError(message));
  bool recorded = false;
  {
    LogRegistry& registry = log_registry();
    std::lock_guard<std::mutex> lock(registry.mutex);
    for (auto& [engine, log] : registry.logs) {
      if (engine != engine_) continue;
      log->record_violation(violation, name.empty() ? "<completed earlier>" : name,
                            "was completed twice");
      recorded = true;
      break;
    }
  }
  if (!recorded) std::fprintf(stderr, "weft: %s\n", message.c_str());
  std::rethrow_exception(violation);
}

namespace {
thread_local int t_operation_depth = 0;
thread_local int t_stream_hint = -1;
}  // namespace

bool inside_engine_operation() { return t_operation_depth > 0; }

ComputeStreamScope::ComputeStreamScope(int index) : previous_(t_stream_hint) {
  t_stream_hint = index < 0 ? -1 : index;
}
ComputeStreamScope::~ComputeStreamScope() { t_stream_hint = previous_; }
int ComputeStreamScope::current() { return t_stream_hint; }

namespace detail {

OperationScope::OperationScope() { ++t_operation_depth; }
OperationScope::~OperationScope() { --t_operation_depth; }

void check_not_inside_operation(const char* what) {
  if (t_operation_depth > 0) {
    WEFT_THROW(Error) << what
                      << " called from inside an engine operation: the operation would wait for "
                         "work that cannot run until it returns (deadlock). Push a dependent "
                         "operation instead of waiting.";
  }
}

void build_slots_error(std::string_view name, const char* list, size_t index, VarHandle var) {
  WEFT_THROW(ValueError) << "operation '" << (name.empty() ? "<unnamed>" : name) << "': " << list
                         << "[" << index << "] is a "
                         << (var ? "deleted variable (delete_var was called on this handle: "
                                   "its generation "
                                 : "null variable")
                         << (var ? std::to_string(var.generation()) + " is gone)" : "");
}

uint32_t fill_slots(VarSlot* slots, OprBlock* op, VarList reads, VarList writes,
                    std::string_view name, bool deleting) {
  uint32_t n = 0;
  // Null and stale handles (Note [Variable generations]) are refused before any variable is
  // touched.
  auto check = [&](VarHandle var, const char* list, size_t index) -> Var* {
    if (var && (deleting || is_live(var))) return var.get();
    build_slots_error(name, list, index, var);
    return nullptr;
  };
  const size_t total = reads.size() + writes.size();
  if (total <= 32) {
    // Small lists: quadratic scans beat hashing.
    for (size_t i = 0; i < writes.size(); ++i) {
      Var* var = check(writes[i], "writes", i);
      bool seen = false;
      for (uint32_t k = 0; k < n; ++k) seen |= slots[k].var == var;
      if (!seen) slots[n++] = VarSlot{var, op, nullptr, true};
    }
    for (size_t i = 0; i < reads.size(); ++i) {
      Var* var = check(reads[i], "reads", i);
      bool seen = false;
      for (uint32_t k = 0; k < n; ++k) seen |= slots[k].var == var;
      if (!seen) slots[n++] = VarSlot{var, op, nullptr, false};
    }
  } else {
    std::unordered_set<Var*> seen;
    seen.reserve(total * 2);
    for (size_t i = 0; i < writes.size(); ++i) {
      Var* var = check(writes[i], "writes", i);
      if (seen.insert(var).second) slots[n++] = VarSlot{var, op, nullptr, true};
    }
    for (size_t i = 0; i < reads.size(); ++i) {
      Var* var = check(reads[i], "reads", i);
      if (seen.insert(var).second) slots[n++] = VarSlot{var, op, nullptr, false};
    }
  }
  return n;
}

void build_slots(OprBlock* op, VarList reads, VarList writes, std::string_view name,
                 bool deleting) {
  size_t total = reads.size() + writes.size();
  WEFT_CHECK(total <= 1u << 20) << "operation '" << name << "' names " << total
                                << " variables; at most 2^20 are supported";
  op->reserve_slots(static_cast<uint32_t>(total));
  op->num_slots = fill_slots(op->slots, op, reads, writes, name, deleting);
}

VarHandle make_var_handle(Var* var) {
  // relaxed: the stamp was last moved by retire(), which happens-before this reuse of the slot
  // through the pool's own release/acquire hand-back (Note [Object pool ownership]).
  return VarHandle(var, ObjectPool<Var>::stamp(var).load(std::memory_order_relaxed));
}

bool is_live(VarHandle handle) {
  // acquire: pairs with retire()'s release, so a handle retired by a delete_var that
  // happens-before this call is seen retired.
  return handle && ObjectPool<Var>::stamp(handle.get()).load(std::memory_order_acquire) ==
                       handle.generation();
}

Var* live_var(VarHandle handle, std::string_view what) {
  if (is_live(handle)) return handle.get();
  if (!handle) WEFT_THROW(ValueError) << what << ": null variable";
  WEFT_THROW(ValueError) << what << ": " << handle
                         << " was deleted (delete_var was called on this handle; its memory may "
                            "already belong to another variable)";
}

bool retire(VarHandle handle) {
  uint64_t expected = handle.generation();
  // acq_rel: release publishes the retirement to is_live(); only one retire of a handle wins.
  return handle && ObjectPool<Var>::stamp(handle.get())
                       .compare_exchange_strong(expected, expected + 1, std::memory_order_acq_rel,
                                                std::memory_order_relaxed);
}

uint64_t completion_token(OprBlock* op) {
  // relaxed: the previous claim on this slot happens-before the block's reuse (pool hand-back).
  return ObjectPool<OprBlock>::stamp(op).load(std::memory_order_relaxed);
}

bool claim_completion(OprBlock* op, uint64_t token) {
  uint64_t expected = token;
  // acq_rel: the winner's completion is ordered after everything before the body's call (the
  // token's read) and before any later loser's check; only one caller can move the stamp.
  return ObjectPool<OprBlock>::stamp(op).compare_exchange_strong(
      expected, token + 1, std::memory_order_acq_rel, std::memory_order_acquire);
}

AsyncBodyScope::AsyncBodyScope(const OprBlock* op, uint64_t token)
    : previous_op_(t_async_op), previous_token_(t_async_token) {
  t_async_op = op;
  t_async_token = token;
}

AsyncBodyScope::~AsyncBodyScope() {
  t_async_op = previous_op_;
  t_async_token = previous_token_;
}

void register_failure_log(const void* engine, FailureLog* log) {
  LogRegistry& registry = log_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.logs.emplace_back(engine, log);
}

void unregister_failure_log(const void* engine) {
  LogRegistry& registry = log_registry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  std::erase_if(registry.logs, [&](const auto& entry) { return entry.first == engine; });
}

void record_op_trace(const OprBlock* op, int64_t end_ns, bool failed) {
  OpTraceRecord record;
  record.id = op->profile_id;
  record.name = op->name.str();
  record.device = to_string(op->device);
  record.lane = op->start_lane;
  record.queued_ns = op->queued_ns;
  record.ready_ns = op->ready_ns;
  record.start_ns = op->start_ns;
  record.end_ns = end_ns;
  record.skipped = static_cast<bool>(op->inherited);
  record.failed = failed;
  Profiler::global().record_op(std::move(record));
}

std::string describe_failure(const std::string& op_name, std::exception_ptr error,
                             const std::string& what_happened) {
  std::string message = "unknown exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
  }
  return "operation '" + op_name + "' " + what_happened + ": " + message;
}

}  // namespace detail
}  // namespace weft
