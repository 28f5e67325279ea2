// The synchronous engine.
#include "engine/sync_engine.h"

#include <condition_variable>
#include <cstdio>

#include "base/profiler.h"
#include "engine/object_pool.h"
#include "engine/op_run.h"

namespace weft {

using detail::ObjectPool;
using detail::OpKind;
using detail::OprBlock;

SyncEngine::SyncEngine(const EngineConfig& config)
    : config_(config), failures_(config.max_retained_errors) {
  if (!config_.profile_path.empty()) {
    Profiler::global().set_max_events(config_.profile_max_events);
    Profiler::global().start();
  }
  detail::register_failure_log(static_cast<void*>(this), &failures_);
}

SyncEngine::~SyncEngine() {
  for (const Stream& s : streams_) DeviceAPI::get(DeviceType::kCUDA)->destroy_stream(s);
  detail::unregister_failure_log(static_cast<void*>(this));
  failures_.report_unobserved("sync");
  if (!config_.profile_path.empty()) {
    try {
      Profiler::global().write_chrome_trace(config_.profile_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "weft: %s\n", e.what());
    }
  }
}

VarHandle SyncEngine::new_var() {
  Var* var = ObjectPool<Var>::create();
  var->owner = this;
  vars_created_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics only
  return detail::make_var_handle(var);
}

void SyncEngine::push_sync(SyncFn fn, Device device, VarList reads, VarList writes,
                           FnProperty property, int priority, std::string_view name) {
  WEFT_CHECK(static_cast<bool>(fn)) << "push_sync of '" << name << "': empty function";
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->set_body(std::move(fn));
  op->device = device;
  op->property = property;
  op->priority = priority;
  push_block(op, reads, writes, name);
}

void SyncEngine::push_async(AsyncFn fn, Device device, VarList reads, VarList writes,
                            FnProperty property, int priority, std::string_view name) {
  WEFT_CHECK(static_cast<bool>(fn)) << "push_async of '" << name << "': empty function";
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->set_body(std::move(fn));
  op->device = device;
  op->property = property;
  op->priority = priority;
  push_block(op, reads, writes, name);
}

void SyncEngine::push_block(OprBlock* op, VarList reads, VarList writes, std::string_view name) {
  detail::adopt_pushed(op, reads, writes, name);
  if (op->device.type == DeviceType::kCUDA) {
    try {
      stream_for(op->device);  // creates the device's stream on first use; throws without one
    } catch (...) {
      ObjectPool<OprBlock>::destroy(op);
      throw;
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  const std::thread::id me = std::this_thread::get_id();
  const bool defer = running_ && (runner_ == me || async_waiting_);
  if (running_ && !defer) idle_.wait(lock, [&] { return !running_; });
  for (uint32_t i = 0; i < op->num_slots; ++i) {
    const Var* var = op->slots[i].var;
    const char* problem = var->deleted         ? "was deleted (delete_var) before this push"
                          : var->owner != this ? "belongs to another engine"
                                               : nullptr;
    if (problem != nullptr) {
      std::string op_name = op->name.str();
      ObjectPool<OprBlock>::destroy(op);
      WEFT_THROW(ValueError) << "push of operation '" << op_name << "': variable "
                             << static_cast<const void*>(var) << " " << problem;
    }
  }
  if (op->kind == OpKind::kDeleteVar) op->slots[0].var->deleted = true;
  detail::stamp_queued(op);
  if (op->kind == OpKind::kUser) pending_.fetch_add(1, std::memory_order_relaxed);  // statistics
  queue_.push_back(op);
  if (defer) return;  // the runner executes it in order (Note [Sync engine runner])
  running_ = true;
  runner_ = me;
  while (!queue_.empty()) {
    OprBlock* next = queue_.front();
    queue_.pop_front();
    lock.unlock();
    execute(next);  // never throws: errors are recorded on the operation's variables
    lock.lock();
  }
  running_ = false;
  runner_ = std::thread::id();
  lock.unlock();
  idle_.notify_all();
}

void SyncEngine::wait_idle(std::unique_lock<std::mutex>& lock) {
  idle_.wait(lock, [&] { return !running_; });
}

namespace {
struct AsyncWait {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
};
}  // namespace

void SyncEngine::complete_async(void*, void* op, std::exception_ptr error) {
  // The block lives until execute() has seen this (it waits for it).
  auto* wait = static_cast<AsyncWait*>(static_cast<OprBlock*>(op)->completion_state);
  std::lock_guard<std::mutex> lock(wait->mutex);
  wait->error = std::move(error);
  wait->done = true;
  wait->done_cv.notify_all();
}

void SyncEngine::execute(OprBlock* op) {
  detail::begin_run(op);
  const bool profiled = op->profile_id != 0;
  if (profiled) op->ready_ns = op->start_ns;  // ready as soon as pushed: nothing runs beside it
  std::exception_ptr error;
  if (!op->inherited && op->has_body) {
    detail::OperationScope scope;
    // A GPU operation gets the device's one stream and is waited for before the next runs: the
    // synchronous engine is the serial reference, ordered by construction.
    const bool gpu = op->device.type == DeviceType::kCUDA;
    RunContext context{op->device, gpu ? stream_for(op->device) : Stream{op->device, nullptr}, -1};
    CurrentStreamScope current(context.stream);
    struct GpuWait {
      const Stream* stream;
      std::exception_ptr* error;
      ~GpuWait() {
        if (stream == nullptr) return;
        try {
          DeviceAPI::get(DeviceType::kCUDA)->synchronize(*stream);
        } catch (...) {
          if (!*error) *error = std::current_exception();
        }
      }
    } gpu_wait{gpu ? &context.stream : nullptr, &error};
    if (op->async) {
      AsyncWait wait;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        async_waiting_ = true;  // pushes from other threads queue instead of blocking
      }
      op->completion_state = &wait;
      const uint64_t token = detail::completion_token(op);  // Note [Completion tokens]
      std::exception_ptr thrown = detail::call_async_body(
          op, context, CallbackOnComplete(&SyncEngine::complete_async, this, op, token), token,
          failures_);
      if (thrown) {
        std::lock_guard<std::mutex> lock(wait.mutex);  // it threw before calling back
        wait.error = std::move(thrown);
        wait.done = true;
      }
      {
        std::unique_lock<std::mutex> lock(wait.mutex);
        wait.done_cv.wait(lock, [&] { return wait.done; });
        error = wait.error;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      async_waiting_ = false;
    } else {
      error = detail::call_sync_body(op, context);
    }
  }
  op->reset_body();
  std::shared_ptr<detail::ErrorSlot> error_slot =
      detail::outcome_slot(op, std::move(error), failures_);
  const bool user = op->kind == OpKind::kUser;
  for (uint32_t i = 0; i < op->num_slots; ++i) {
    if (!op->slots[i].write) continue;
    Var* var = op->slots[i].var;
    if (user && error_slot) var->error = error_slot;
    // relaxed: the engine mutex orders every access.
    if (user && !error_slot) var->version.fetch_add(1, std::memory_order_relaxed);
  }
  if (profiled) {
    detail::record_op_trace(op, Profiler::now_ns(), error_slot && !op->inherited);
  }
  if (op->kind == OpKind::kDeleteVar) {
    ObjectPool<Var>::destroy(op->slots[0].var);
    vars_destroyed_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics only
  }
  ObjectPool<OprBlock>::destroy(op);
  if (user) {
    completed_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics only
    pending_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void SyncEngine::delete_var(VarHandle var, SyncFn on_deleted) {
  Var* target = detail::live_var(var, "delete_var");
  WEFT_CHECK(target->owner == this) << "delete_var: " << var << " belongs to another engine";
  // Note [Variable generations]: the handle is invalid from now on.
  WEFT_CHECK(detail::retire(var)) << "delete_var: " << var
                                  << " was deleted (delete_var called twice on this handle)";
  OprBlock* op = ObjectPool<OprBlock>::create();
  op->kind = OpKind::kDeleteVar;
  op->device = Device::cpu();
  if (on_deleted) op->set_body(std::move(on_deleted));
  push_block(op, {}, {var}, "delete_var");
}

void SyncEngine::wait_for_var(VarHandle var) {
  detail::check_not_inside_operation("wait_for_var");
  detail::live_var(var, "wait_for_var");
  std::unique_lock<std::mutex> lock(mutex_);
  wait_idle(lock);
  Var* target = detail::live_var(var, "wait_for_var");  // deleted while this thread waited?
  WEFT_CHECK(!target->deleted) << "wait_for_var: " << var << " was deleted (delete_var)";
  WEFT_CHECK(target->owner == this) << "wait_for_var: " << var << " belongs to another engine";
  std::exception_ptr error;
  if (target->has_error()) {
    error = target->error->error;
    failures_.delivered(target->error);  // Note [Failure log bound]
  }
  target->error.reset();
  if (error) std::rethrow_exception(error);
}

void SyncEngine::wait_for_all() {
  detail::check_not_inside_operation("wait_for_all");
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wait_idle(lock);  // a runner on another thread finishes what is queued
  }
  failures_.throw_and_clear();
}

uint64_t SyncEngine::var_version(VarHandle var) const {
  return detail::live_var(var, "var_version")->version.load(std::memory_order_acquire);
}

EngineStats SyncEngine::stats() const {
  EngineStats stats;
  stats.pending_ops = pending_.load(std::memory_order_relaxed);
  stats.completed_ops = completed_.load(std::memory_order_relaxed);
  failures_.fill_stats(stats);
  stats.live_vars = vars_created_.load(std::memory_order_relaxed) -
                    vars_destroyed_.load(std::memory_order_relaxed);
  return stats;
}

Stream SyncEngine::stream_for(Device device) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  for (const Stream& s : streams_) {
    if (s.device == device) return s;
  }
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  WEFT_CHECK_AS(NotImplemented, api != nullptr)
      << "no stream for device '" << to_string(device)
      << "': this build of weft has no CUDA support (configure with WEFT_USE_CUDA)";
  const int count = api->device_count();
  WEFT_CHECK_AS(NotImplemented, device.id >= 0 && device.id < count)
      << "no stream for device '" << to_string(device) << "': this machine has " << count
      << " CUDA device" << (count == 1 ? "" : "s");
  streams_.push_back(api->create_stream(device));
  return streams_.back();
}

}  // namespace weft
