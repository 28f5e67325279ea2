// The threaded engine's path for operations that are ready when pushed and run on the pushing
// thread (Note [Ready at push]).
#include <algorithm>

#include "engine/threaded_engine.h"

namespace weft {

using detail::OpKind;

// Note [Ready at push]
// A FnProperty::kAsync operation that is ready when pushed runs on the pushing thread (Note
// [Which threads run operations]). Such an operation is never queued anywhere, so it needs no
// operation block: its variables are taken and released around the call, under their locks,
// exactly as the queued path grants and releases them. The push checks, under every
// variable's lock at once (Note [Two-phase append]), that each variable could be granted right
// now: no write running, no read running for a write, and nobody queued (an operation queued on
// a variable must run first: the per-variable order is the push order). Then it marks them
// granted, unlocks, calls the function, and releases them like any completion, waking what they
// unblock. If any variable is busy it touches nothing and the operation takes the queued path.
//
// Nothing is counted as pending: a thread that waits concurrently (wait_for_all) waits for the
// operations pushed before it waited, and this push has not returned yet. A wait_for_var or
// delete_var of one of the variables, pushed concurrently from another thread, queues behind
// the granted operation like behind any running one. The engine's own trivial operations use
// the same path: wait_for_var on an idle variable takes its error without an operation block
// or a condition variable, and delete_var of an idle variable frees it at once.
//
// Operations with more than kReadyAtPushSlots distinct variables, all operations while the
// profiler records (their trace needs the block's timestamps), and operations on a variable that
// GPU work ever touched (its pending marks are waited for on the queued path: Note [GPU var
// events] in engine/var.h) take the queued path.
//
// Note [Renewed GPU variables]
// renew_var hands a variable on to a new array with the memory it guards (Note [Recycled
// storage] in ndarray/ndarray.cc). For a variable of device memory, GPU work on the old array
// may still be queued when the engine has released it (GPU operations complete when queued).
// The variable keeps its marks through the renewal, so the new array's first operation orders
// itself behind that work exactly as a later operation on the old array would have: on the same
// stream by stream order, on another stream by an event, off the GPU in the poller. That is the
// order the memory needs, since the old array's work is the only work that touches it. So a GPU
// array overwritten in a loop (`c = a + b`) gives its memory and variable to the next result
// with no delete_var, no trip through the pool and no new variable. Only for device memory
// (renew_var's `device_memory`): host memory that a copy still reads or writes (a pinned array,
// a staged copy-out's destination) would be written by the new array's host code, which no mark
// orders, so a host variable GPU work touched is refused.

VarHandle ThreadedEngine::renew_var(VarHandle handle, bool device_memory) {
  Var* var = detail::live_var(handle, "renew_var");
  WEFT_CHECK(var->owner == this) << "renew_var: " << handle << " belongs to another engine";
  std::lock_guard<detail::SpinLock> lock(var->lock);
  // A variable of device memory with GPU work still queued may be renewed: its marks stay (Note
  // [Renewed GPU variables]). Host memory that GPU work touched may not: a copy may still be
  // reading or writing it, and the new array's host code writes it without the engine.
  if (var->write_running || var->running_reads != 0 || var->head != nullptr || var->deleted ||
      var->has_error() || (!device_memory && var->gpu_touched.load(std::memory_order_acquire))) {
    return nullptr;
  }
  // Note [Variable generations]: the old handle is invalid from now on.
  if (!detail::retire(handle)) return nullptr;
  var->error.reset();
  // relaxed: nothing runs on the variable; later operations are ordered by their pushes.
  var->version.store(0, std::memory_order_relaxed);
  return detail::make_var_handle(var);
}

bool ThreadedEngine::run_if_ready(SyncFn& fn, Device device, VarList reads, VarList writes,
                                  std::string_view name) {
  WEFT_CHECK(static_cast<bool>(fn)) << "run_if_ready of '" << name << "': empty function";
  check_device(device);
  return may_run_at_push() && run_at_push(fn, OpKind::kUser, device, reads, writes, name);
}

bool ThreadedEngine::run_at_push(SyncFn& fn, OpKind kind, Device device, VarList reads,
                                 VarList writes, std::string_view name) {
  if (reads.size() + writes.size() > kReadyAtPushSlots || device.type == DeviceType::kCUDA) {
    return false;
  }
  // The distinct variables, writes first (a variable both read and written is a write), and the
  // same variables in address order for locking (Note [Two-phase append]). Kept apart, as plain
  // pointers: sorting the slots themselves cost more than the rest of the push.
  Var* vars[kReadyAtPushSlots];
  Var* order[kReadyAtPushSlots];
  uint32_t n = 0, num_writes = 0;
  const bool deleting = kind == OpKind::kDeleteVar;
  auto add = [&](VarHandle handle, bool write, const char* list, size_t index) {
    if (!handle || (!deleting && !detail::is_live(handle))) {
      detail::build_slots_error(name, list, index, handle);  // throws
    }
    Var* var = handle.get();
    if (var->gpu_touched.load(std::memory_order_acquire)) return false;
    for (uint32_t k = 0; k < n; ++k) {
      if (vars[k] == var) return true;
    }
    vars[n++] = var;
    if (write) ++num_writes;
    return true;
  };
  for (size_t i = 0; i < writes.size(); ++i) {
    if (!add(writes[i], true, "writes", i)) return false;
  }
  for (size_t i = 0; i < reads.size(); ++i) {
    if (!add(reads[i], false, "reads", i)) return false;
  }
  for (uint32_t i = 0; i < n; ++i) {
    Var* var = vars[i];
    uint32_t k = i;
    for (; k > 0 && std::less<const Var*>()(var, order[k - 1]); --k) order[k] = order[k - 1];
    order[k] = var;
  }
  for (uint32_t i = 0; i < n; ++i) order[i]->lock.lock();
  bool ready = true;
  for (uint32_t i = 0; i < n; ++i) {
    const Var* var = vars[i];
    if (var->deleted || var->owner != this) {
      // The queued path reports it (with the same checks, under the same locks).
      ready = false;
      break;
    }
    if (var->write_running || var->head != nullptr || (i < num_writes && var->running_reads > 0))
      ready = false;
  }
  if (!ready) {
    for (uint32_t i = n; i-- > 0;) order[i]->lock.unlock();
    return false;
  }
  for (uint32_t i = 0; i < n; ++i) {
    Var* var = vars[i];
    if (i < num_writes) {
      var->write_running = true;
      if (deleting) var->deleted = true;
    } else {
      ++var->running_reads;
    }
  }
  for (uint32_t i = n; i-- > 0;) order[i]->lock.unlock();

  const bool user = kind == OpKind::kUser;
  // relaxed: statistics only.
  if (user) pushed_.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<detail::ErrorSlot> error_slot;
  if (user) {
    // Note [Var error ordering]: the variables are held, so their errors are stable.
    for (uint32_t i = 0; i < n; ++i) {
      if (vars[i]->has_error()) {
        error_slot = vars[i]->error;
        break;
      }
    }
  }
  const bool skipped = static_cast<bool>(error_slot);
  std::exception_ptr error;
  if (!skipped && fn) {
    ++async_depth_;
    const int worker = is_worker_thread() ? detail::current_worker_index() : -1;
    RunContext context{device, Stream{device, nullptr}, worker};
    {
      detail::OperationScope scope;
      try {
        fn(context);
      } catch (...) {
        error = std::current_exception();
      }
    }
    --async_depth_;
  }
  // Captures go first, so what they hold is released before dependents run.
  fn.reset();
  if (error) {
    error_slot = failures_.record_failure(std::move(error), detail::OpName(name));
  } else if (skipped) {
    failures_.record_skip();
  }
  ReadyList ready_ops;
  const bool bump = user && !error_slot;
  for (uint32_t i = 0; i < n; ++i) {
    if (i < num_writes) {
      if (user && error_slot) vars[i]->error = error_slot;  // Note [Var error ordering]
      release_write(vars[i], bump, ready_ops);
    } else {
      release_read(vars[i], ready_ops);
    }
  }
  if (deleting) destroy_var(vars[0]);
  const bool on_worker = ready_ops.size() != 0 && is_worker_thread();
  for (size_t i = 0; i < ready_ops.size(); ++i) dispatch(ready_ops[i], on_worker);
  return true;
}

}  // namespace weft
