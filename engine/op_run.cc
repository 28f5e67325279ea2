// Running one operation's body and settling its outcome, shared by SyncEngine and ThreadedEngine.
#include "engine/op_run.h"

#include <utility>

#include "base/profiler.h"
#include "engine/failure_log.h"
#include "engine/object_pool.h"

namespace weft::detail {

void adopt_pushed(OprBlock* op, VarList reads, VarList writes, std::string_view name) {
  try {
    build_slots(op, reads, writes, name, op->kind == OpKind::kDeleteVar);
  } catch (...) {
    ObjectPool<OprBlock>::destroy(op);
    throw;
  }
  if (!name.empty()) op->name = OpName(name);
}

void stamp_queued(OprBlock* op) {
  if (Profiler::global().enabled()) {
    op->profile_id = Profiler::global().next_op_id();
    op->queued_ns = Profiler::now_ns();
  }
}

void begin_run(OprBlock* op) {
  if (op->kind == OpKind::kUser) {
    for (uint32_t i = 0; i < op->num_slots; ++i) {
      Var* var = op->slots[i].var;
      if (var->has_error()) {
        op->inherited = var->error;
        break;
      }
    }
  }
  if (op->profile_id != 0) {
    op->start_ns = Profiler::now_ns();
    op->start_lane = Profiler::global().thread_lane();
  }
}

std::exception_ptr call_sync_body(OprBlock* op, const RunContext& context) {
  try {
    op->body.sync(context);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

std::exception_ptr call_async_body(OprBlock* op, const RunContext& context,
                                   const CallbackOnComplete& on_complete, uint64_t token,
                                   FailureLog& failures) {
  std::exception_ptr error;
  bool already_recorded = false;
  {
    AsyncBodyScope body_scope(op, token);
    try {
      op->body.async(context, on_complete);
    } catch (const CompletionError&) {
      error = std::current_exception();  // a second on_complete escaping the body: recorded
      already_recorded = true;
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error) return nullptr;
  if (claim_completion(op, token)) return error;  // it threw before calling back
  if (!already_recorded) {
    // It threw after calling back: the variables are released, so the error can reach no
    // variable; the failure log reports it. Nothing is released again.
    failures.record_violation(std::move(error), op->name.str(),
                              "threw after calling on_complete (its variables were already "
                              "released)");
  }
  return nullptr;
}

std::shared_ptr<ErrorSlot> outcome_slot(OprBlock* op, std::exception_ptr error,
                                        FailureLog& failures) {
  if (error) return failures.record_failure(std::move(error), op->name);
  if (op->inherited) failures.record_skip();
  return op->inherited;
}

}  // namespace weft::detail
