// The dependency engine's public interface: versioned variables, operation push (sync, async),
// waits, errors, and the configuration that selects an implementation.
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "devices/device.h"
#include "devices/device_api.h"
#include "engine/inline_function.h"

namespace weft {

class Var;
/// A variable: stands for a piece of mutable state (an array's memory, an RNG, a communicator).
/// Created by Engine::new_var, destroyed by Engine::delete_var. Opaque to users.
using VarHandle = Var*;

namespace detail {
struct OprBlock;
}
class Engine;

/// What kind of work an operation is; decides where it runs.
enum class FnProperty : uint8_t {
  kNormal,          ///< ordinary computation on the device's workers
  kCopyToDevice,    ///< host→device transfer (copy workers of a GPU; normal workers on the CPU)
  kCopyFromDevice,  ///< device→host transfer (likewise)
  kCPUPrioritized,  ///< CPU work that must not wait behind normal work: runs on the priority lane
  kAsync,           ///< the function only launches work and returns: it is called directly on the
                    ///< thread that makes the operation ready, without a worker hop
};

/// What an operation's function learns about where it runs. Valid during the call only.
struct RunContext {
  Device device;  ///< the device the operation was pushed for
  Stream stream;  ///< the stream to submit device work to (CPU: null handle)
  int worker = -1;  ///< index of the worker thread within its pool; -1 on a non-worker thread
};

/// Completes an asynchronous operation. Call exactly once, from any thread, optionally with the
/// error that made the operation fail. Cheap to copy (two pointers).
class CallbackOnComplete {
 public:
  CallbackOnComplete() = default;
  void operator()(std::exception_ptr error = nullptr) const;

 private:
  friend class ThreadedEngine;
  friend class SyncEngine;
  using Fn = void (*)(void* engine, void* op, std::exception_ptr error);
  CallbackOnComplete(Fn fn, void* engine, void* op) : fn_(fn), engine_(engine), op_(op) {}
  Fn fn_ = nullptr;
  void* engine_ = nullptr;
  void* op_ = nullptr;
};

/// A synchronous operation body: runs to completion inside the call.
using SyncFn = detail::InlineFunction<void(const RunContext&)>;
/// An asynchronous operation body: must call `on_complete` exactly once, on any thread. If it
/// throws instead, it must not have called `on_complete`; the engine completes it with the error.
using AsyncFn = detail::InlineFunction<void(const RunContext&, CallbackOnComplete)>;

/// A list of variables passed to push; built from a braced list, a vector or a span. Does not
/// own its elements: it is read inside the push call only.
class VarList {
 public:
  VarList() = default;
  // The braced list's array lives until the end of the full expression, i.e. the push call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  VarList(std::initializer_list<VarHandle> vars) : data_(vars.begin()), size_(vars.size()) {}  // NOLINT
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  VarList(const std::vector<VarHandle>& vars) : data_(vars.data()), size_(vars.size()) {}     // NOLINT
  VarList(std::span<const VarHandle> vars) : data_(vars.data()), size_(vars.size()) {}        // NOLINT
  const VarHandle* begin() const { return data_; }
  const VarHandle* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  VarHandle operator[](size_t i) const { return data_[i]; }

 private:
  const VarHandle* data_ = nullptr;
  size_t size_ = 0;
};

/// The engine implementation to use.
enum class EngineKind {
  kThreaded,  ///< dependency scheduling on per-device worker pools
  kSync,      ///< runs each operation on the calling thread (debugging, reference in tests)
};

/// The one configuration of an engine. Pass it explicitly; from_environment() is the only
/// place that consults WEFT_ENGINE, WEFT_CPU_WORKERS and WEFT_PROFILE.
struct EngineConfig {
  EngineKind kind = EngineKind::kThreaded;
  /// CPU worker threads for normal work; 0 means one per hardware thread.
  int cpu_workers = 0;
  /// Run kCPUPrioritized operations on a dedicated priority-lane thread. When false they run on
  /// the normal workers ahead of queued normal work.
  bool cpu_priority_lane = true;
  /// When non-empty, the profiler is started with the engine and a Chrome trace is written to
  /// this path when the engine is destroyed.
  std::string profile_path;

  /// Defaults overridden by WEFT_ENGINE (threaded|sync), WEFT_CPU_WORKERS (N) and WEFT_PROFILE
  /// (trace path). Throws ValueError naming a malformed variable.
  static EngineConfig from_environment();
};

/// Counters of an engine's activity. A snapshot; fields may be mutually inconsistent while work
/// is running.
struct EngineStats {
  int64_t pending_ops = 0;    ///< pushed and not yet completed
  int64_t completed_ops = 0;  ///< completed (ran, failed or skipped) since creation
  int64_t failed_ops = 0;     ///< whose function threw or reported an error
  int64_t skipped_ops = 0;    ///< not run because an input or output carried an error
  int64_t live_vars = 0;      ///< created and not yet destroyed (deletion runs after pending ops)
};

/// Thrown by wait_for_all when operations failed since the last wait: carries the first error
/// (rethrow it with rethrow_first()) and how many operations failed and were skipped.
class EngineError : public Error {
 public:
  EngineError(const std::string& message, std::exception_ptr first, int64_t failed, int64_t skipped)
      : Error(message), first_(std::move(first)), failed_(failed), skipped_(skipped) {}
  /// The exception of the first operation that failed.
  std::exception_ptr first() const { return first_; }
  [[noreturn]] void rethrow_first() const { std::rethrow_exception(first_); }
  /// Operations that failed themselves since the last wait_for_all.
  int64_t failed_count() const { return failed_; }
  /// Operations skipped because they depended on a failed one.
  int64_t skipped_count() const { return skipped_; }

 private:
  std::exception_ptr first_;
  int64_t failed_;
  int64_t skipped_;
};

/// The dependency engine.
///
/// Operations name the variables they read and write. Reads of a variable run concurrently; a
/// write waits for every earlier read and write of it; reads after a write wait for it. A variable
/// listed more than once counts once, and a variable both read and written is a write. Each
/// variable's version increases by one per successfully completed write.
///
/// Errors: an operation's exception is attached to every variable it writes; operations that use
/// such a variable are skipped and pass the error on to the variables they write. wait_for_var
/// rethrows the variable's error (and clears it); wait_for_all throws EngineError with the first
/// error and clears all of them. The engine stays usable.
///
/// Thread safety: every method is thread-safe; operations may be pushed from any thread,
/// including from inside running operations. Waiting from inside an operation throws Error.
class Engine {
 public:
  /// Creates an engine of `config.kind`. Throws ValueError on an invalid configuration.
  static std::unique_ptr<Engine> create(const EngineConfig& config = EngineConfig::from_environment());

  /// Waits for all pending operations, then stops the workers. Errors never observed by a wait
  /// are reported on stderr. Must not be called from inside one of this engine's operations.
  virtual ~Engine() = default;

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  virtual EngineKind kind() const = 0;

  /// Creates a variable with version 0.
  virtual VarHandle new_var() = 0;

  /// Destroys `var` after every operation already pushed on it has completed; returns at once.
  /// `on_deleted`, when given, runs at that moment, just before the variable is freed: the place
  /// to give back what the variable stood for, e.g. an array's memory to its pool
  /// (`[block = std::move(data_ptr)](const RunContext&) mutable { block.reset(); }`), so that it
  /// cannot be handed out again while an operation may still touch it. Pushing or waiting on
  /// `var` afterwards is an error (ValueError when detected).
  virtual void delete_var(VarHandle var, SyncFn on_deleted = nullptr) = 0;

  /// Pushes an asynchronous operation: `fn` runs once every dependency is satisfied and must
  /// call its CallbackOnComplete exactly once. Returns at once. Throws ValueError (and pushes
  /// nothing) for a null or deleted variable; NotImplemented for a device with no worker pool.
  virtual void push_async(AsyncFn fn, Device device, VarList reads, VarList writes,
                          FnProperty property = FnProperty::kNormal, int priority = 0,
                          std::string_view name = {}) = 0;

  /// Pushes a synchronous operation: completes when `fn` returns (or throws). Returns at once.
  /// Higher `priority` runs earlier among ready operations of the same worker pool.
  virtual void push_sync(SyncFn fn, Device device, VarList reads, VarList writes,
                         FnProperty property = FnProperty::kNormal, int priority = 0,
                         std::string_view name = {}) = 0;

  /// Same as push_sync.
  void push(SyncFn fn, Device device, VarList reads, VarList writes,
            FnProperty property = FnProperty::kNormal, int priority = 0,
            std::string_view name = {}) {
    push_sync(std::move(fn), device, reads, writes, property, priority, name);
  }

  /// Blocks until every operation pushed so far that reads or writes `var` has completed, then
  /// rethrows (and clears) the error attached to `var`, if any.
  virtual void wait_for_var(VarHandle var) = 0;

  /// Blocks until every pushed operation has completed. If any failed since the last
  /// wait_for_all, throws EngineError with the first error and the counts, and clears all errors.
  virtual void wait_for_all() = 0;

  /// Number of completed writes to `var`. A snapshot when writes are pending.
  virtual uint64_t var_version(VarHandle var) const = 0;

  /// Worker threads that serve normal operations on `device` (sync engine: 0).
  virtual int num_workers(Device device) const = 0;

  virtual EngineStats stats() const = 0;

 protected:
  Engine() = default;
};

/// Whether the calling thread is inside an engine operation's function (any engine).
bool inside_engine_operation();

}  // namespace weft
