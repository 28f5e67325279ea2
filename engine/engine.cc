// Engine creation, configuration, and helpers shared by the threaded and synchronous engines.
#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "base/env.h"
#include "base/profiler.h"
#include "engine/sync_engine.h"
#include "engine/threaded_engine.h"
#include "engine/var.h"

namespace weft {

EngineConfig EngineConfig::from_environment() {
  Environment env = read_environment();
  EngineConfig config;
  if (env.engine) config.kind = *env.engine == "sync" ? EngineKind::kSync : EngineKind::kThreaded;
  if (env.cpu_workers) config.cpu_workers = *env.cpu_workers;
  if (env.profile_path) config.profile_path = *env.profile_path;
  return config;
}

std::unique_ptr<Engine> Engine::create(const EngineConfig& config) {
  WEFT_CHECK(config.cpu_workers >= 0 && config.cpu_workers <= 4096)
      << "EngineConfig::cpu_workers must be in [0, 4096] (0 = all cores), got "
      << config.cpu_workers;
  switch (config.kind) {
    case EngineKind::kThreaded: return std::make_unique<ThreadedEngine>(config);
    case EngineKind::kSync: return std::make_unique<SyncEngine>(config);
  }
  WEFT_THROW(ValueError) << "unknown EngineKind " << static_cast<int>(config.kind);
}

void CallbackOnComplete::operator()(std::exception_ptr error) const {
  WEFT_CHECK(fn_ != nullptr) << "CallbackOnComplete called on an empty callback (only the "
                                "callback passed to an asynchronous operation completes it)";
  fn_(engine_, op_, std::move(error));
}

namespace {
thread_local int t_operation_depth = 0;
}

bool inside_engine_operation() { return t_operation_depth > 0; }

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

void build_slots(OprBlock* op, VarList reads, VarList writes, std::string_view name) {
  size_t total = reads.size() + writes.size();
  WEFT_CHECK(total <= 1u << 20) << "operation '" << name << "' names " << total
                                << " variables; at most 2^20 are supported";
  op->reserve_slots(static_cast<uint32_t>(total));
  uint32_t n = 0;
  auto null_check = [&](VarHandle var, const char* list, size_t index) {
    WEFT_CHECK(var != nullptr) << "operation '" << (name.empty() ? "<unnamed>" : name)
                               << "': " << list << "[" << index << "] is a null variable";
  };
  if (total <= 32) {
    // Small lists: quadratic scans beat hashing.
    for (size_t i = 0; i < writes.size(); ++i) {
      VarHandle var = writes[i];
      null_check(var, "writes", i);
      bool seen = false;
      for (uint32_t k = 0; k < n; ++k) seen |= op->slots[k].var == var;
      if (!seen) op->slots[n++] = VarSlot{var, op, nullptr, true};
    }
    for (size_t i = 0; i < reads.size(); ++i) {
      VarHandle var = reads[i];
      null_check(var, "reads", i);
      bool seen = false;
      for (uint32_t k = 0; k < n; ++k) seen |= op->slots[k].var == var;
      if (!seen) op->slots[n++] = VarSlot{var, op, nullptr, false};
    }
  } else {
    std::unordered_set<VarHandle> seen;
    seen.reserve(total * 2);
    for (size_t i = 0; i < writes.size(); ++i) {
      null_check(writes[i], "writes", i);
      if (seen.insert(writes[i]).second) op->slots[n++] = VarSlot{writes[i], op, nullptr, true};
    }
    for (size_t i = 0; i < reads.size(); ++i) {
      null_check(reads[i], "reads", i);
      if (seen.insert(reads[i]).second) op->slots[n++] = VarSlot{reads[i], op, nullptr, false};
    }
  }
  op->num_slots = n;
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

std::string describe_failure(const std::string& op_name, std::exception_ptr error) {
  std::string message = "unknown exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
  }
  return "operation '" + op_name + "' failed: " + message;
}

}  // namespace detail
}  // namespace weft
