// The threaded dependency engine: per-variable wait queues, dependency counting, and worker pools
// per device.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/engine.h"
#include "engine/failure_log.h"
#include "engine/gpu_worker_pool.h"
#include "engine/var.h"
#include "engine/worker_pool.h"

namespace weft {

/// See Engine for the contract. Thread-safe.
class ThreadedEngine final : public Engine, private detail::OperationRunner {
 public:
  explicit ThreadedEngine(const EngineConfig& config);
  ~ThreadedEngine() override;

  EngineKind kind() const override { return EngineKind::kThreaded; }
  VarHandle new_var() override;
  void delete_var(VarHandle var, SyncFn on_deleted) override;
  void delete_var_on(VarHandle var, Device device, SyncFn on_deleted) override;
  VarHandle renew_var(VarHandle var, bool device_memory = false) override;
  void push_async(AsyncFn fn, Device device, VarList reads, VarList writes, FnProperty property,
                  int priority, std::string_view name) override;
  void push_sync(SyncFn fn, Device device, VarList reads, VarList writes, FnProperty property,
                 int priority, std::string_view name) override;
  bool run_if_ready(SyncFn& fn, Device device, VarList reads, VarList writes,
                    std::string_view name) override;
  void wait_for_var(VarHandle var) override;
  void wait_for_all() override;
  uint64_t var_version(VarHandle var) const override;
  int num_workers(Device device) const override;
  EngineStats stats() const override;

 private:
  /// Operations made ready by one completion; a few inline, more on the heap.
  class ReadyList {
   public:
    void add(detail::OprBlock* op) {
      if (size_ < kInline) {
        inline_[size_] = op;
      } else {
        overflow_.push_back(op);
      }
      ++size_;
    }
    size_t size() const { return size_; }
    detail::OprBlock* operator[](size_t i) const {
      return i < kInline ? inline_[i] : overflow_[i - kInline];
    }

   private:
    static constexpr size_t kInline = 16;
    detail::OprBlock* inline_[kInline];
    std::vector<detail::OprBlock*> overflow_;
    size_t size_ = 0;
  };
  /// The most distinct variables an operation run at push may have (Note [Ready at push]).
  static constexpr uint32_t kReadyAtPushSlots = 4;
  /// Depth of kAsync operations run inline on this thread (Note [Which threads run operations]).
  static thread_local int async_depth_;

  void push_block(detail::OprBlock* op, VarList reads, VarList writes, std::string_view name);
  // Note [Ready at push]: runs `fn` here when every variable is free; false (and `fn` untouched)
  // otherwise.
  bool run_at_push(SyncFn& fn, detail::OpKind kind, Device device, VarList reads, VarList writes,
                   std::string_view name);
  // Releases an operation's slots: attaches `error_slot` to written variables of a user
  // operation, bumps their versions when it succeeded, and collects what becomes ready.
  void release_slots(detail::VarSlot* slots, uint32_t n, bool user,
                     const std::shared_ptr<detail::ErrorSlot>& error_slot, ReadyList& ready);
  // Frees a variable whose delete_var operation completed.
  void destroy_var(Var* var);
  // Whether the fast path of Note [Ready at push] may be tried for a kAsync operation now.
  bool may_run_at_push() const;
  detail::WorkerPool* pool_for(const detail::OprBlock* op) const;
  void check_device(Device device);
  detail::GpuWorkerPool* gpu_pool(Device device) const;
  detail::EventPoller& poller();
  void dispatch(detail::OprBlock* op, bool may_run_here);
  bool is_worker_thread() const;
  void run(detail::OprBlock* op, const RunContext& context) override;
  detail::OprBlock* execute(detail::OprBlock* op, const RunContext& context);
  detail::OprBlock* complete(detail::OprBlock* op, std::exception_ptr error, bool may_run_inline);
  static void complete_async(void* engine, void* op, std::exception_ptr error);
  static bool release_async_ref(detail::OprBlock* op);
  void count_completion();
  void release_read(Var* var, ReadyList& ready);
  void release_write(Var* var, bool bump_version, ReadyList& ready);
  void finish_pending(int64_t count);
  void worker_idle(bool about_to_sleep) override;
  void wait_idle();

  EngineConfig config_;
  std::unique_ptr<detail::CpuWorkerPool> cpu_pool_;
  std::unique_ptr<detail::CpuWorkerPool> cpu_priority_pool_;
  // GPU pools, created at the first push to their device (Note [GPU var events]).
  static constexpr int kMaxGpus = 16;
  std::array<std::atomic<detail::GpuWorkerPool*>, kMaxGpus> gpu_pools_{};
  std::mutex gpu_mutex_;
  std::vector<std::unique_ptr<detail::GpuWorkerPool>> gpu_owned_;  // guarded by gpu_mutex_
  std::atomic<bool> gpu_used_{false};
  std::unique_ptr<detail::EventPoller> poller_;  // created with the first GPU pool
  detail::FailureLog failures_;

  // Note [Pending count and idle wait]: pending_ counts pushed, uncompleted operations. The
  // decrement that reaches zero happens under idle_mutex_, so a waiter cannot return (and, in the
  // destructor, free the engine) while a completing thread still touches the engine.
  alignas(64) std::atomic<int64_t> pending_{0};
  alignas(64) std::atomic<int64_t> pushed_{0};  // user operations only
  std::atomic<int64_t> internal_pending_{0};    // pending wait_for_var / delete_var operations
  alignas(64) std::atomic<int64_t> vars_created_{0};
  alignas(64) std::atomic<int64_t> vars_destroyed_{0};
  alignas(64) std::atomic<int> waiters_{0};  // threads in wait_idle
  alignas(64) std::mutex idle_mutex_;
  std::condition_variable idle_;
};

}  // namespace weft
