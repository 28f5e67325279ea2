// The synchronous engine: runs each operation on the calling thread, in push order. The
// reference the threaded engine is tested against, and a debugging aid (WEFT_ENGINE=sync).
#pragma once

#include <atomic>
#include <deque>
#include <mutex>

#include "engine/engine.h"
#include "engine/failure_log.h"
#include "engine/var.h"

namespace weft {

/// See Engine for the contract. Operations run inside push, one at a time across all threads
/// (a process of several pushing threads is serialised by one mutex). An operation pushed from
/// inside another one runs right after the outer one returns, keeping push order. An
/// asynchronous operation's push returns once its callback has been called. Thread-safe.
class SyncEngine final : public Engine {
 public:
  explicit SyncEngine(const EngineConfig& config);
  ~SyncEngine() override;

  EngineKind kind() const override { return EngineKind::kSync; }
  VarHandle new_var() override;
  void delete_var(VarHandle var, SyncFn on_deleted) override;
  void push_async(AsyncFn fn, Device device, VarList reads, VarList writes, FnProperty property,
                  int priority, std::string_view name) override;
  void push_sync(SyncFn fn, Device device, VarList reads, VarList writes, FnProperty property,
                 int priority, std::string_view name) override;
  void wait_for_var(VarHandle var) override;
  void wait_for_all() override;
  uint64_t var_version(VarHandle var) const override;
  int num_workers(Device) const override { return 0; }
  EngineStats stats() const override;

 private:
  void push_block(detail::OprBlock* op, VarList reads, VarList writes, std::string_view name);
  void run_queued();  // requires mutex_
  void execute(detail::OprBlock* op);
  static void complete_async(void* state, void* op, std::exception_ptr error);

  EngineConfig config_;
  detail::FailureLog failures_;
  std::recursive_mutex mutex_;           // serialises operations
  std::deque<detail::OprBlock*> queue_;  // pushed from inside an operation; guarded by mutex_
  bool running_ = false;                 // an operation is executing; guarded by mutex_
  std::atomic<int64_t> pending_{0};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> vars_created_{0};
  std::atomic<int64_t> vars_destroyed_{0};
};

}  // namespace weft
