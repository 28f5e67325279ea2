// The synchronous engine: runs each operation on the calling thread, in push order. The
// reference the threaded engine is tested against, and a debugging aid (WEFT_ENGINE=sync).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/failure_log.h"
#include "engine/var.h"

namespace weft {

/// See Engine for the contract. Operations run inside push, on the calling thread, one at a time
/// across all threads: a push from another thread waits until the engine is idle. Two kinds of
/// push run later instead, in push order, on the thread that is running operations: a push from
/// inside a running operation (after that operation returns), and a push from any thread while
/// an asynchronous operation waits for its callback (a completer thread that pushes before it
/// calls back must not block). An asynchronous operation's push returns once its callback ran.
/// Thread-safe.
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
  void execute(detail::OprBlock* op);
  Stream stream_for(Device device);
  void wait_idle(std::unique_lock<std::mutex>& lock);
  static void complete_async(void* state, void* op, std::exception_ptr error);

  EngineConfig config_;
  detail::FailureLog failures_;
  // Note [Sync engine runner]: one thread at a time is the runner: it drains queue_, executing
  // each operation with mutex_ released. Variables' scheduling state (versions, errors, deleted)
  // is touched only by the runner, or by others under mutex_ while no runner exists.
  std::mutex mutex_;
  std::mutex streams_mutex_;
  std::vector<Stream> streams_;          // one per GPU used, guarded by streams_mutex_
  std::condition_variable idle_;         // signalled when the runner finishes
  std::deque<detail::OprBlock*> queue_;  // guarded by mutex_
  bool running_ = false;                 // a runner exists; guarded by mutex_
  bool async_waiting_ = false;           // the runner waits for an async callback; guarded
  std::thread::id runner_;               // guarded by mutex_
  std::atomic<int64_t> pending_{0};
  std::atomic<int64_t> completed_{0};
  std::atomic<int64_t> vars_created_{0};
  std::atomic<int64_t> vars_destroyed_{0};
};

}  // namespace weft
