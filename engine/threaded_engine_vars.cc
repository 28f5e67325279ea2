// The threaded engine's variables and waits: creating, deleting and reading variables, and the
// calls that wait for them or for the whole engine (the rest is in threaded_engine.cc, the
// ready-at-push path in ready_at_push.cc).
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>

#include "engine/object_pool.h"
#include "engine/threaded_engine.h"

namespace weft {

using detail::ObjectPool;
using detail::OpKind;
using detail::OprBlock;

VarHandle ThreadedEngine::new_var() {
  Var* var = ObjectPool<Var>::create();
  var->owner = this;
  vars_created_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics only
  return detail::make_var_handle(var);
}

void ThreadedEngine::destroy_var(Var* var) {
  WEFT_DCHECK(var->head == nullptr && !var->write_running && var->running_reads == 0);
  ObjectPool<Var>::destroy(var);
  vars_destroyed_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics only
}

void ThreadedEngine::wait_idle() {
  // seq_cst: a spinning worker that checks waiters_ after this increment flushes its count.
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  struct Leave {
    std::atomic<int>& waiters;
    ~Leave() { waiters.fetch_sub(1, std::memory_order_seq_cst); }
  } leave{waiters_};
  std::unique_lock<std::mutex> lock(idle_mutex_);
  auto idle = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  while (!idle_.wait_for(lock, std::chrono::seconds(30), idle)) {
    std::fprintf(stderr,
                 "weft: still waiting for %lld pending operation(s) after 30 s (an asynchronous "
                 "operation that never calls on_complete keeps the engine busy)\n",
                 static_cast<long long>(pending_.load(std::memory_order_relaxed)));
  }
}

void ThreadedEngine::delete_var(VarHandle var, SyncFn on_deleted) {
  Var* target = detail::live_var(var, "delete_var");
  WEFT_CHECK(target->owner == this) << "delete_var: " << var << " belongs to another engine";
  // Note [Variable generations]: the handle is invalid from now on.
  WEFT_CHECK(detail::retire(var)) << "delete_var: " << var
                                  << " was deleted (delete_var called twice on this handle)";
  // An idle variable is freed here and now (Note [Ready at push]).
  if (may_run_at_push() &&
      run_at_push(on_deleted, OpKind::kDeleteVar, Device::cpu(), {}, {var}, "delete_var")) {
    return;
  }
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->kind = OpKind::kDeleteVar;
  op->device = Device::cpu();
  if (on_deleted) op->set_body(std::move(on_deleted));
  op->property = FnProperty::kAsync;  // trivial: run on the thread that releases the variable
  push_block(op, {}, {var}, "delete_var");
}

// Note [Stream-ordered frees]
// A variable of device memory dies with GPU work still queued on it (GPU operations complete
// when queued). As a CPU operation its deleter would wait in the event poller until that work
// has run, then run on a CPU worker woken for it: a wake-up and a trip through the poller per
// dropped array, on the way of every `a = a + 1`. Instead delete_var_on makes the deleter a GPU
// operation of the memory's device, writing the variable: the pool routes it to the stream that
// last wrote the variable (Note [GPU stream choice]), and a deleter made ready by the operation
// that last used the variable runs inline on that operation's worker. Like any GPU operation it
// makes its stream wait for the variable's marks on other streams, so the free is ordered after
// all the work that touches the memory, and it runs with the stream current: the device pool
// hands the block to later work on that stream at once and to other streams behind an event
// (PooledAllocator in memory/pooled_allocator.h). No thread waits for the device.
void ThreadedEngine::delete_var_on(VarHandle var, Device device, SyncFn on_deleted) {
  if (device.type != DeviceType::kCUDA) {
    delete_var(var, std::move(on_deleted));
    return;
  }
  Var* target = detail::live_var(var, "delete_var");
  WEFT_CHECK(target->owner == this) << "delete_var: " << var << " belongs to another engine";
  check_device(device);  // before retiring: a device without workers leaves the handle live
  WEFT_CHECK(detail::retire(var)) << "delete_var: " << var
                                  << " was deleted (delete_var called twice on this handle)";
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->kind = OpKind::kDeleteVar;
  op->device = device;
  if (on_deleted) op->set_body(std::move(on_deleted));
  push_block(op, {}, {var}, "delete_var");
}

void ThreadedEngine::wait_for_var(VarHandle var) {
  detail::check_not_inside_operation("wait_for_var");
  Var* target = detail::live_var(var, "wait_for_var");
  // Runs holding `var` exclusively (ordered as a write): Note [Var error ordering].
  auto take_error = [this](Var* v) {
    std::exception_ptr error;
    if (v->has_error()) {
      error = v->error->error;
      failures_.delivered(v->error);  // Note [Failure log bound]
    }
    v->error.reset();
    return error;
  };
  if (may_run_at_push()) {
    // An idle variable: nothing to wait for (Note [Ready at push]).
    std::exception_ptr error;
    SyncFn now([&](const RunContext&) { error = take_error(target); });
    if (run_at_push(now, OpKind::kWaitVar, Device::cpu(), {}, {var}, "wait_for_var")) {
      if (error) std::rethrow_exception(error);
      return;
    }
  }
  struct WaitState {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::exception_ptr error;
  };
  auto state = std::make_shared<WaitState>();
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->kind = OpKind::kWaitVar;
  op->property = FnProperty::kAsync;  // trivial: run on the thread that releases the variable
  op->set_body(SyncFn([state, var = target, take_error](const RunContext&) {
    std::exception_ptr error = take_error(var);
    std::lock_guard<std::mutex> lock(state->mutex);
    state->error = error;
    state->done = true;
    state->done_cv.notify_all();
  }));
  push_block(op, {}, {var}, "wait_for_var");
  std::unique_lock<std::mutex> lock(state->mutex);
  state->done_cv.wait(lock, [&] { return state->done; });
  if (state->error) std::rethrow_exception(state->error);
}

void ThreadedEngine::wait_for_all() {
  detail::check_not_inside_operation("wait_for_all");
  wait_idle();
  if (gpu_used_.load(std::memory_order_acquire)) {
    // GPU operations complete when queued (Note [GPU var events]): wait for the devices too.
    std::lock_guard<std::mutex> lock(gpu_mutex_);
    for (auto& pool : gpu_owned_) pool->synchronize();
  }
  failures_.throw_and_clear();
}

uint64_t ThreadedEngine::var_version(VarHandle var) const {
  return detail::live_var(var, "var_version")->version.load(std::memory_order_acquire);
}

}  // namespace weft
