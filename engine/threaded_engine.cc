// The threaded dependency engine.
#include "engine/threaded_engine.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <exception>

#include "base/profiler.h"
#include "engine/cpu_budget.h"
#include "engine/object_pool.h"
#include "engine/op_run.h"

namespace weft {

using detail::ObjectPool;
using detail::OpKind;
using detail::OprBlock;
using detail::VarSlot;

// Note [Push guard]
// An operation's `wait` starts at (number of variable slots + 1). Each granted slot takes one
// off; the pusher takes the extra one off after appending to every variable. So the operation
// cannot become ready, run and be freed while push is still appending it, however fast workers
// release the variables it waits on.
//
// Note [Two-phase append]
// An operation is appended to all its variables while holding all their locks, taken in address
// order. Appending one variable at a time would let two concurrent pushes of operations that both
// write x and y interleave as (A on x, B on x, B on y, A on y): A would wait for B on y and B for A
// on x, a deadlock. Holding every lock makes each push atomic with respect to the others, so the
// per-variable queues agree on one order of operations.
//
// Note [Var error ordering]
// Var::error is written only by an operation that holds the variable exclusively (a failed
// writer at completion, before it releases the variable; a wait_for_var operation), and read by
// operations when they start. The variable's queue orders these: every reader was granted after
// the writer released (under the variable's lock), so no access races.

// Note [Which threads run operations]
// Operation functions run on the engine's workers, with two exceptions for FnProperty::kAsync
// operations (tiny kernels, launches), which skip the worker hop: such an operation runs on
//  - the thread that calls push, when it is ready at once (the imperative fast path: the caller
//    runs a tiny kernel whose inputs are computed instead of handing it off), and
//  - the worker whose completion makes it ready.
// A thread that is not one of this engine's workers and completes an operation through
// on_complete (a CUDA host callback, an MPI progress thread, a foreign library's thread) only
// releases variables and enqueues what became ready; it never runs a function there: CUDA
// forbids CUDA calls inside host callbacks, and such threads must not be held up by user code.
// The engine's own trivial operations (a wait_for_var's notification, a delete_var without
// on_deleted) still run on the completing thread, as they call no user code.

namespace {
// kAsync operations run inline (Note [Which threads run operations]). Chains of such operations
// would otherwise recurse without bound; past this depth they go to a pool.
constexpr int kMaxInlineAsyncDepth = 16;

// Note [Batched completion count]: a worker does not decrement pending_ once per operation (a
// cache line every pushing thread also writes); it counts completions locally and subtracts them
// in one step when it runs out of work (worker_idle) or after kCompletionBatch of them. A waiter
// needs pending_ at zero, which happens only once every worker is idle, and so has flushed.
constexpr int64_t kCompletionBatch = 256;
struct CompletionBatch {
  const void* engine = nullptr;
  int64_t count = 0;
};
thread_local CompletionBatch t_completions;
}  // namespace

namespace {
inline void grant(VarSlot* slot, auto& ready) {
  OprBlock* op = slot->op;
  // acq_rel: the decrement that reaches zero acquires every earlier release of the operation's
  // dependencies, so the runner sees what the previous writers wrote. The slot (and op) must not
  // be touched after a decrement that did not reach zero: another thread may run and free it.
  if (op->wait.fetch_sub(1, std::memory_order_acq_rel) == 1) ready.add(op);
}

inline void enqueue(Var* var, VarSlot* slot) {
  slot->next = nullptr;
  if (var->tail != nullptr) {
    var->tail->next = slot;
  } else {
    var->head = slot;
  }
  var->tail = slot;
}

inline VarSlot* dequeue(Var* var) {
  VarSlot* slot = var->head;
  var->head = slot->next;
  if (var->head == nullptr) var->tail = nullptr;
  return slot;
}
}  // namespace

thread_local int ThreadedEngine::async_depth_ = 0;

bool ThreadedEngine::may_run_at_push() const {
  return async_depth_ < kMaxInlineAsyncDepth && !Profiler::global().enabled();
}

ThreadedEngine::ThreadedEngine(const EngineConfig& config)
    : config_(config), failures_(config.max_retained_errors) {
  // Note [Thread budget]
  int workers =
      config.cpu_workers > 0 ? config.cpu_workers : resolve_thread_budget(config.num_threads);
  if (!config_.profile_path.empty()) {
    Profiler::global().set_max_events(config_.profile_max_events);
    Profiler::global().start();
  }
  detail::register_failure_log(static_cast<void*>(this), &failures_);
  auto* runner = static_cast<detail::OperationRunner*>(this);
  const int budget = resolve_thread_budget(config.num_threads);
  cpu_pool_ = std::make_unique<detail::CpuWorkerPool>(runner, workers, "cpu worker", budget);
  if (config.cpu_priority_lane) {
    cpu_priority_pool_ =
        std::make_unique<detail::CpuWorkerPool>(runner, 1, "cpu priority lane", budget);
  }
}

ThreadedEngine::~ThreadedEngine() {
  if (cpu_pool_->is_current_thread_worker() ||
      (cpu_priority_pool_ && cpu_priority_pool_->is_current_thread_worker())) {
    std::fprintf(stderr,
                 "weft: a threaded engine was destroyed from inside one of its own operations; "
                 "it cannot wait for itself\n");
    std::terminate();
  }
  wait_idle();
  detail::unregister_failure_log(static_cast<void*>(this));
  failures_.report_unobserved("threaded");
  if (cpu_priority_pool_) cpu_priority_pool_->shutdown();
  cpu_pool_->shutdown();
  gpu_owned_.clear();  // joins the GPU workers, waits for their streams
  if (poller_) poller_->shutdown();
  if (!config_.profile_path.empty()) {
    try {
      Profiler::global().write_chrome_trace(config_.profile_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "weft: %s\n", e.what());
    }
  }
}

void ThreadedEngine::check_device(Device device) {
  if (device.type == DeviceType::kCPU || device.type == DeviceType::kCUDAHost) return;
  if (device.type == DeviceType::kCUDA) {
    WEFT_CHECK_AS(ValueError, device.id >= 0 && device.id < kMaxGpus)
        << "no worker pool for device '" << to_string(device) << "'";
    if (gpu_pools_[static_cast<size_t>(device.id)].load(std::memory_order_acquire) != nullptr) {
      return;
    }
    std::lock_guard<std::mutex> lock(gpu_mutex_);
    if (gpu_pools_[static_cast<size_t>(device.id)].load(std::memory_order_relaxed) != nullptr) {
      return;
    }
    DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
    WEFT_CHECK_AS(NotImplemented, api != nullptr)
        << "no worker pool for device '" << to_string(device)
        << "': this build of weft has no CUDA support (configure with WEFT_USE_CUDA)";
    if (!poller_) {
      poller_ = std::make_unique<detail::EventPoller>(
          [this](OprBlock* op) { dispatch(op, /*may_run_here=*/false); });
    }
    auto pool = std::make_unique<detail::GpuWorkerPool>(static_cast<detail::OperationRunner*>(this),
                                                        device, config_.gpu_compute_streams);
    gpu_pools_[static_cast<size_t>(device.id)].store(pool.get(), std::memory_order_release);
    gpu_owned_.push_back(std::move(pool));
    gpu_used_.store(true, std::memory_order_release);
    return;
  }
  WEFT_THROW(NotImplemented) << "no worker pool for device '" << to_string(device) << "'";
}

detail::GpuWorkerPool* ThreadedEngine::gpu_pool(Device device) const {
  return gpu_pools_[static_cast<size_t>(device.id)].load(std::memory_order_acquire);
}

detail::EventPoller& ThreadedEngine::poller() { return *poller_; }

detail::WorkerPool* ThreadedEngine::pool_for(const OprBlock* op) const {
  if (op->device.type == DeviceType::kCUDA) return gpu_pool(op->device);
  if (op->property == FnProperty::kCPUPrioritized && cpu_priority_pool_) {
    return cpu_priority_pool_.get();
  }
  return cpu_pool_.get();
}

void ThreadedEngine::push_sync(SyncFn fn, Device device, VarList reads, VarList writes,
                               FnProperty property, int priority, std::string_view name) {
  WEFT_CHECK(static_cast<bool>(fn)) << "push_sync of '" << name << "': empty function";
  check_device(device);
  if (property == FnProperty::kAsync && may_run_at_push() &&
      run_at_push(fn, OpKind::kUser, device, reads, writes, name)) {
    return;  // Note [Ready at push]
  }
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->set_body(std::move(fn));
  op->device = device;
  op->property = property;
  op->priority = priority;
  op->stream_hint = ComputeStreamScope::current();
  push_block(op, reads, writes, name);
}

void ThreadedEngine::push_async(AsyncFn fn, Device device, VarList reads, VarList writes,
                                FnProperty property, int priority, std::string_view name) {
  WEFT_CHECK(static_cast<bool>(fn)) << "push_async of '" << name << "': empty function";
  check_device(device);
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->set_body(std::move(fn));
  op->device = device;
  op->property = property;
  op->priority = priority;
  op->stream_hint = ComputeStreamScope::current();
  push_block(op, reads, writes, name);
}

void ThreadedEngine::push_block(OprBlock* op, VarList reads, VarList writes,
                                std::string_view name) {
  detail::adopt_pushed(op, reads, writes, name);
  if (op->property == FnProperty::kCPUPrioritized && !cpu_priority_pool_) op->priority = INT32_MAX;
  const uint32_t n = op->num_slots;
  op->wait.store(static_cast<int32_t>(n) + 1, std::memory_order_relaxed);
  detail::stamp_queued(op);
  // relaxed: pending_ is only compared with zero by waiters after the final decrement, which is
  // a release sequence (Note [Pending count and idle wait]); this increment happens-before it.
  pending_.fetch_add(1, std::memory_order_relaxed);

  VarSlot* slots = op->slots;
  // Note [Two-phase append]: the variables are locked in address order. The slots stay as
  // built; their variables are ordered in an array of their own (sorting the 32-byte slots
  // cost more than the rest of a small push).
  Var* small_order[OprBlock::kInlineSlots];
  std::vector<Var*> large_order;
  Var** order = small_order;
  if (n > OprBlock::kInlineSlots) {
    large_order.resize(n);
    order = large_order.data();
    for (uint32_t i = 0; i < n; ++i) order[i] = slots[i].var;
    std::sort(order, order + n, std::less<const Var*>());
  } else {
    for (uint32_t i = 0; i < n; ++i) {
      Var* var = slots[i].var;
      uint32_t k = i;
      for (; k > 0 && std::less<const Var*>()(var, order[k - 1]); --k) order[k] = order[k - 1];
      order[k] = var;
    }
  }
  for (uint32_t i = 0; i < n; ++i) order[i]->lock.lock();
  const char* problem = nullptr;
  uint32_t bad = 0;
  for (uint32_t i = 0; i < n && problem == nullptr; ++i) {
    const Var* var = slots[i].var;
    if (var->deleted) {
      problem = "was deleted (delete_var) before this push";
      bad = i;
    } else if (var->owner != this) {
      problem = "belongs to another engine";
      bad = i;
    }
  }
  if (problem != nullptr) {
    for (uint32_t i = n; i-- > 0;) order[i]->lock.unlock();
    const void* var = slots[bad].var;
    std::string op_name = op->name.str();
    ObjectPool<OprBlock>::destroy(op);
    finish_pending(1);
    WEFT_THROW(ValueError) << "push of operation '" << op_name << "': variable " << var << " "
                           << problem;
  }
  int32_t granted = 0;
  for (uint32_t i = 0; i < n; ++i) {
    VarSlot* slot = &slots[i];
    Var* var = slot->var;
    if (slot->write) {
      if (!var->write_running && var->running_reads == 0 && var->head == nullptr) {
        var->write_running = true;
        ++granted;
      } else {
        enqueue(var, slot);
      }
      if (op->kind == OpKind::kDeleteVar) var->deleted = true;
    } else {
      if (!var->write_running && var->head == nullptr) {
        ++var->running_reads;
        ++granted;
      } else {
        enqueue(var, slot);
      }
    }
  }
  for (uint32_t i = n; i-- > 0;) order[i]->lock.unlock();
  // relaxed: statistics only.
  if (op->kind == OpKind::kUser) {
    pushed_.fetch_add(1, std::memory_order_relaxed);
  } else {
    internal_pending_.fetch_add(1, std::memory_order_relaxed);
  }
  // Note [Push guard]: remove the guard together with the grants made above.
  if (op->wait.fetch_sub(granted + 1, std::memory_order_acq_rel) == granted + 1) {
    if (op->profile_id != 0) op->ready_ns = Profiler::now_ns();
    dispatch(op, /*may_run_here=*/true);  // the pushing thread (Note [Which threads run ...])
  }
}

bool ThreadedEngine::is_worker_thread() const {
  if (const detail::GpuWorkerPool* gpu = detail::current_gpu_pool()) {
    return gpu->runner() == static_cast<const detail::OperationRunner*>(this);
  }
  return cpu_pool_->is_current_thread_worker() ||
         (cpu_priority_pool_ && cpu_priority_pool_->is_current_thread_worker());
}

void ThreadedEngine::dispatch(OprBlock* op, bool may_run_here) {
  // Note [Which threads run operations]
  const bool trivial =
      op->kind == OpKind::kWaitVar || (op->kind == OpKind::kDeleteVar && !op->has_body);
  // GPU work runs only on its device's workers, which own the streams.
  if (op->property == FnProperty::kAsync && async_depth_ < kMaxInlineAsyncDepth &&
      (may_run_here || trivial) && op->device.type != DeviceType::kCUDA) {
    ++async_depth_;
    const int worker = is_worker_thread() ? detail::current_worker_index() : -1;
    RunContext context{op->device, Stream{op->device, nullptr}, worker};
    run(op, context);
    --async_depth_;
    return;
  }
  pool_for(op)->submit(op);
}

void ThreadedEngine::run(OprBlock* op, const RunContext& context) {
  while (op != nullptr) op = execute(op, context);
}

OprBlock* ThreadedEngine::execute(OprBlock* op, const RunContext& context) {
  const bool on_gpu = op->device.type == DeviceType::kCUDA && context.stream.handle != nullptr;
  if (!on_gpu && gpu_used_.load(std::memory_order_acquire)) {
    // Note [GPU var events]: work off the GPU streams waits for GPU work queued on its variables
    // in the poller, not on this thread.
    // A deleter need not run soon: leave the event queries to the poller, off this thread.
    std::vector<detail::StreamMark> pending =
        detail::gpu_pending_marks(op, /*query=*/op->kind != OpKind::kDeleteVar);
    if (!pending.empty()) {
      poller_->defer(op, std::move(pending));
      return nullptr;
    }
  }
  detail::begin_run(op);
  if (op->inherited || !op->has_body) return complete(op, nullptr, true);
  std::exception_ptr error;
  if (on_gpu) {
    op->gpu_clock = detail::current_gpu_clock();
    try {
      detail::gpu_before_run(op, *op->gpu_clock);
    } catch (...) {
      return complete(op, std::current_exception(), true);
    }
  }
  if (op->async) {
    // Note [Async body lifetime]: the callback may run (on another thread) before the body
    // returns; the block and the body's captures live until both have happened, and the
    // operation counts as pending until then.
    op->async_refs.store(2, std::memory_order_relaxed);
    const uint64_t token = detail::completion_token(op);  // Note [Completion tokens]
    {
      detail::OperationScope scope;
      error = detail::call_async_body(
          op, context, CallbackOnComplete(&ThreadedEngine::complete_async, this, op, token), token,
          failures_);
    }
    if (error) complete(op, std::move(error), false);  // it threw before calling back
    if (release_async_ref(op)) count_completion();
    return nullptr;
  }
  {
    detail::OperationScope scope;
    error = detail::call_sync_body(op, context);
  }
  return complete(op, std::move(error), true);
}

void ThreadedEngine::complete_async(void* engine, void* op, std::exception_ptr error) {
  static_cast<ThreadedEngine*>(engine)->complete(static_cast<OprBlock*>(op), std::move(error),
                                                 false);
}

void ThreadedEngine::release_read(Var* var, ReadyList& ready) {
  std::lock_guard<detail::SpinLock> lock(var->lock);
  if (--var->running_reads == 0 && var->head != nullptr) {
    // With no write running, the head of the queue is a write (reads queue only behind one).
    VarSlot* slot = dequeue(var);
    WEFT_DCHECK(slot->write);
    var->write_running = true;
    grant(slot, ready);
  }
}

void ThreadedEngine::release_write(Var* var, bool bump_version, ReadyList& ready) {
  std::lock_guard<detail::SpinLock> lock(var->lock);
  var->write_running = false;
  // relaxed: readers of the version synchronise through the dependency order or a wait. Only
  // holders of the lock write it, so a load and a store suffice (no read-modify-write).
  if (bump_version) {
    var->version.store(var->version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  if (var->head == nullptr) return;
  if (var->head->write) {
    VarSlot* slot = dequeue(var);
    var->write_running = true;
    grant(slot, ready);
    return;
  }
  while (var->head != nullptr && !var->head->write) {
    VarSlot* slot = dequeue(var);
    ++var->running_reads;
    grant(slot, ready);
  }
}

bool ThreadedEngine::release_async_ref(OprBlock* op) {
  // acq_rel: the last holder sees everything the other did with the block before freeing it.
  if (op->async_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    op->reset_body();
    ObjectPool<OprBlock>::destroy(op);
    return true;
  }
  return false;
}

void ThreadedEngine::count_completion() {
  // Last: the engine may be destroyed once pending_ reaches zero.
  if (t_completions.engine == this) {
    if (++t_completions.count >= kCompletionBatch) {
      finish_pending(t_completions.count);
      t_completions.count = 0;
    }
  } else {
    finish_pending(1);
  }
}

void ThreadedEngine::release_slots(VarSlot* slots, uint32_t n, bool user,
                                   const std::shared_ptr<detail::ErrorSlot>& error_slot,
                                   ReadyList& ready) {
  const bool bump = user && !error_slot;
  for (uint32_t i = 0; i < n; ++i) {
    VarSlot& slot = slots[i];
    if (slot.write) {
      if (user && error_slot) slot.var->error = error_slot;  // Note [Var error ordering]
      release_write(slot.var, bump, ready);
    } else {
      release_read(slot.var, ready);
    }
  }
}

OprBlock* ThreadedEngine::complete(OprBlock* op, std::exception_ptr error, bool may_run_inline) {
  // Captures go first, so what they hold (buffers, handles) is released before dependents run;
  // an asynchronous body may still be running, so its captures wait for it to return.
  const bool async_body = op->async_refs.load(std::memory_order_relaxed) != 0;
  if (op->device.type == DeviceType::kCUDA) {
    // Note [GPU var events]: completed on its worker, a GPU operation's work may still be queued
    // on the stream: hang its mark on its variables before releasing them. An asynchronous GPU
    // operation completed from another thread (another worker of the pool included) has finished
    // its work already.
    detail::StreamClock* clock = detail::current_gpu_clock();
    if (clock != nullptr && clock == op->gpu_clock && !op->inherited) {
      try {
        detail::gpu_after_run(op, *clock);
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
  }
  if (!async_body) op->reset_body();
  std::shared_ptr<detail::ErrorSlot> error_slot =
      detail::outcome_slot(op, std::move(error), failures_);
  const bool user = op->kind == OpKind::kUser;
  const bool profiled = op->profile_id != 0;
  int64_t end_ns = profiled ? Profiler::now_ns() : 0;

  ReadyList ready;
  release_slots(op->slots, op->num_slots, user, error_slot, ready);
  if (!user) internal_pending_.fetch_sub(1, std::memory_order_relaxed);  // relaxed: statistics
  if (op->kind == OpKind::kDeleteVar) destroy_var(op->slots[0].var);

  if (profiled) {
    Profiler& profiler = Profiler::global();
    int64_t now = Profiler::now_ns();
    for (size_t i = 0; i < ready.size(); ++i) {
      if (ready[i]->profile_id == 0) continue;
      ready[i]->ready_ns = now;
      profiler.record_flow(op->profile_id, ready[i]->profile_id);
    }
    detail::record_op_trace(op, end_ns, error_slot && !op->inherited);
  }

  OprBlock* next = nullptr;
  // Only a worker runs what becomes ready (Note [Which threads run operations]).
  const bool on_worker = ready.size() != 0 && is_worker_thread();
  for (size_t i = 0; i < ready.size(); ++i) {
    OprBlock* successor = ready[i];
    // A worker that completes an op runs one newly ready successor itself when it belongs to the
    // same pool: no queue round trip, and the data it reads is still in this core's cache. Not
    // after a kAsync operation: it ran inline inside another operation's completion or a push,
    // whose remaining work (other successors, the caller) must not wait for a whole kernel.
    if (may_run_inline && next == nullptr && op->property != FnProperty::kAsync &&
        successor->property != FnProperty::kAsync &&
        pool_for(successor)->may_run_inline(*successor)) {
      next = successor;
    } else {
      dispatch(successor, on_worker);
    }
  }
  if (async_body) {
    // The body may still be running: whoever of the two finishes last counts the completion.
    if (release_async_ref(op)) count_completion();
  } else {
    ObjectPool<OprBlock>::destroy(op);
    count_completion();
  }
  return next;
}

void ThreadedEngine::finish_pending(int64_t count) {
  // Note [Pending count and idle wait]
  int64_t previous = pending_.load(std::memory_order_relaxed);
  for (;;) {
    if (previous == count) {
      std::lock_guard<std::mutex> lock(idle_mutex_);
      if (pending_.fetch_sub(count, std::memory_order_acq_rel) == count) idle_.notify_all();
      return;
    }
    // acq_rel: part of the release sequence a waiter's acquire load of zero synchronises with.
    if (pending_.compare_exchange_weak(previous, previous - count, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
      return;
    }
  }
}

void ThreadedEngine::worker_idle(bool about_to_sleep) {
  // Only pool workers call this, so only their completions are batched (Note [Batched
  // completion count]); a thread that completes an asynchronous operation never waits to flush.
  if (t_completions.engine != this) {
    t_completions.engine = this;
    t_completions.count = 0;
  }
  // An idle worker flushes when somebody waits for the count, or before it sleeps; a worker
  // that merely caught up with a pushing thread keeps counting.
  if (t_completions.count != 0 &&
      (about_to_sleep || waiters_.load(std::memory_order_seq_cst) > 0)) {
    int64_t count = t_completions.count;
    t_completions.count = 0;
    finish_pending(count);
  }
}

int ThreadedEngine::num_workers(Device device) const {
  if (device.type == DeviceType::kCPU || device.type == DeviceType::kCUDAHost) {
    return cpu_pool_->num_workers();
  }
  if (device.type == DeviceType::kCUDA && device.id >= 0 && device.id < kMaxGpus) {
    if (const detail::GpuWorkerPool* pool = gpu_pool(device)) return pool->num_workers();
  }
  return 0;
}

EngineStats ThreadedEngine::stats() const {
  EngineStats stats;
  stats.pending_ops =
      pending_.load(std::memory_order_acquire) - internal_pending_.load(std::memory_order_acquire);
  if (stats.pending_ops < 0) stats.pending_ops = 0;
  stats.completed_ops = pushed_.load(std::memory_order_acquire) - stats.pending_ops;
  if (stats.completed_ops < 0) stats.completed_ops = 0;
  failures_.fill_stats(stats);
  stats.live_vars = vars_created_.load(std::memory_order_acquire) -
                    vars_destroyed_.load(std::memory_order_acquire);
  return stats;
}

}  // namespace weft
