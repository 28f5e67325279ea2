// The dependency engine's public interface: versioned variables, operation push (sync, async),
// waits, errors, and the configuration that selects an implementation.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/device.h"
#include "base/error.h"
#include "devices/device_api.h"
#include "engine/inline_function.h"

namespace weft {

class Var;

/// A handle to a variable: stands for a piece of mutable state (an array's memory, an RNG, a
/// communicator). Created by Engine::new_var, invalidated by Engine::delete_var. A value type
/// (16 bytes): copy it freely; the default (and nullptr) handle is null.
///
/// A handle carries the generation of the variable it was created for (Note [Variable
/// generations] in engine/var.h): variables are pooled, and once a variable is deleted its
/// memory is reused for later ones, so a handle used after delete_var is detected and refused
/// with a ValueError by every engine method, in every build, instead of silently acting on the
/// variable that reuses the memory. Comparisons order by address, then generation.
class VarHandle {
 public:
  constexpr VarHandle() = default;
  constexpr VarHandle(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  /// For engines: the handle of `var` at `generation`.
  constexpr VarHandle(Var* var, uint64_t generation) : var_(var), generation_(generation) {}

  /// The variable's address (meaningful to engines only; compare handles, not addresses).
  Var* get() const { return var_; }
  /// The generation the handle was created for.
  uint64_t generation() const { return generation_; }
  explicit operator bool() const { return var_ != nullptr; }

  friend bool operator==(const VarHandle& a, const VarHandle& b) = default;
  friend auto operator<=>(const VarHandle& a, const VarHandle& b) {
    if (auto c = std::compare_three_way()(a.var_, b.var_); c != 0) return c;
    return a.generation_ <=> b.generation_;
  }

 private:
  Var* var_ = nullptr;
  uint64_t generation_ = 0;
};

/// Writes "var 0x... gen N" (for messages).
std::ostream& operator<<(std::ostream& os, const VarHandle& var);

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
  kAsync,           ///< a short function (launches work, or a tiny kernel): called directly,
                    ///< without a worker hop, on the thread that makes the operation ready when
                    ///< that is one of the engine's workers or the thread calling push; when a
                    ///< foreign thread's on_complete makes it ready, it goes to a worker
                    ///< (docs/ENGINE.md, "Which threads run operations")
};

/// What an operation's function learns about where it runs. Valid during the call only.
struct RunContext {
  Device device;    ///< the device the operation was pushed for
  Stream stream;    ///< the stream to submit device work to (CPU: null handle)
  int worker = -1;  ///< index of the worker thread within its pool; -1 on a non-worker thread
};

/// Completes an asynchronous operation: call it exactly once, from any thread, optionally with
/// the error that made the operation fail. Cheap to copy (four words); every copy refers to the
/// same completion. See docs/ENGINE.md, "Completion contract":
///
/// - The first call (from whichever copy) completes the operation: its variables are released and
///   the operations that become ready are run by the engine's workers. On a thread that is not
///   one of the engine's workers (a CUDA host callback, an MPI progress thread, any foreign
///   thread) the call only releases and enqueues; it never runs an operation's function there.
/// - Any later call releases nothing: it throws CompletionError to its caller and records the
///   misuse in the engine's failure log (reported by the next wait_for_all), when the engine
///   still exists. Calls racing from two threads are safe: exactly one completes.
/// - Never calling it leaves the operation pending: its variables stay held and wait_for_all
///   and the engine's destructor wait for it (printing a notice every 30 s).
class CallbackOnComplete {
 public:
  CallbackOnComplete() = default;
  /// Completes the operation (see the class comment). Thread-safe. Throws CompletionError when
  /// the operation was already completed, Error on an empty callback.
  void operator()(std::exception_ptr error = nullptr) const;

 private:
  friend class ThreadedEngine;
  friend class SyncEngine;
  using Fn = void (*)(void* engine, void* op, std::exception_ptr error);
  CallbackOnComplete(Fn fn, void* engine, void* op, uint64_t token)
      : fn_(fn), engine_(engine), op_(op), token_(token) {}
  Fn fn_ = nullptr;
  void* engine_ = nullptr;
  void* op_ = nullptr;
  uint64_t token_ = 0;  // Note [Completion tokens]
};

/// Thrown by a CallbackOnComplete called after its operation was already completed (a second
/// call, or a call after the operation's function threw and the engine completed it).
class CompletionError : public Error {
 public:
  using Error::Error;
};

/// A synchronous operation body: runs to completion inside the call.
using SyncFn = detail::InlineFunction<void(const RunContext&)>;
/// An asynchronous operation body: must call `on_complete` exactly once, on any thread. If it
/// throws before calling it, the engine completes the operation with the exception (a later call
/// of `on_complete` is then a CompletionError). If it throws after calling it, the variables were
/// already released: the exception is recorded in the engine's failure log (the next
/// wait_for_all reports it) and nothing is released twice. The operation counts as pending until
/// both the body has returned and `on_complete` was called.
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
  VarList(std::initializer_list<VarHandle> vars)
      : data_(vars.begin()), size_(vars.size()) {}  // NOLINT
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  VarList(const std::vector<VarHandle>& vars) : data_(vars.data()), size_(vars.size()) {}  // NOLINT
  VarList(std::span<const VarHandle> vars) : data_(vars.data()), size_(vars.size()) {}     // NOLINT
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
/// place that consults the engine's WEFT_* variables.
struct EngineConfig {
  EngineKind kind = EngineKind::kThreaded;
  /// The thread budget: the most threads weft keeps busy on CPUs (engine workers running
  /// kernels times each kernel's intra-op threads; Note [Thread budget] in engine/cpu_budget.h).
  /// 0 means the cores this process may run on (its affinity mask, capped by a cgroup quota).
  int num_threads = 0;
  /// CPU worker threads for normal work; 0 means one per thread of the budget.
  int cpu_workers = 0;
  /// Run kCPUPrioritized operations on a dedicated priority-lane thread. When false they run on
  /// the normal workers ahead of queued normal work.
  bool cpu_priority_lane = true;
  /// Per GPU: compute streams, each owned by one worker thread (plus one host-to-device and one
  /// device-to-host copy stream with their own workers). Work on different compute streams may
  /// run concurrently on the device.
  int gpu_compute_streams = 2;
  /// When non-empty, the profiler is started with the engine and a Chrome trace is written to
  /// this path when the engine is destroyed.
  std::string profile_path;
  /// With profile_path: the most trace events (operation slices, flows and counter samples
  /// together) the profiler keeps; later ones are dropped and counted in the trace.
  int64_t profile_max_events = 1'000'000;
  /// The most undelivered failures the engine keeps with their exception for reporting
  /// (EngineStats::undelivered_errors, the destructor's report); beyond it failures are only
  /// counted. wait_for_var drops what it delivers; wait_for_all drops everything.
  int64_t max_retained_errors = 1024;

  /// Defaults overridden by WEFT_ENGINE (threaded|sync), WEFT_NUM_THREADS (N), WEFT_CPU_WORKERS
  /// (N), WEFT_GPU_STREAMS (N), WEFT_PROFILE (trace path) and WEFT_PROFILE_MAX_EVENTS (N). Throws
  /// ValueError naming a malformed variable.
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
  /// Failures no wait has delivered yet, as retained by the failure log (at most
  /// EngineConfig::max_retained_errors; the rest are only counted). Drops as wait_for_var
  /// rethrows them, and to zero at wait_for_all.
  int64_t undelivered_errors = 0;
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
  static std::unique_ptr<Engine> create(
      const EngineConfig& config = EngineConfig::from_environment());

  /// Waits for all pending operations, then stops the workers. Errors never observed by a wait
  /// are reported on stderr. Must not be called from inside one of this engine's operations.
  virtual ~Engine() = default;

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  virtual EngineKind kind() const = 0;

  /// Creates a variable with version 0. Its handle is valid until delete_var is called on it.
  virtual VarHandle new_var() = 0;

  /// Destroys `var` after every operation already pushed on it has completed; returns at once.
  /// `on_deleted`, when given, runs at that moment, just before the variable is freed: the place
  /// to give back what the variable stood for, e.g. an array's memory to its pool
  /// (`[block = std::move(data_ptr)](const RunContext&) mutable { block.reset(); }`), so that it
  /// cannot be handed out again while an operation may still touch it. `on_deleted` runs on an
  /// engine worker or on the thread that calls delete_var, never on a foreign completing thread.
  /// The handle is invalid from this call on: pushing, waiting, reading the version or deleting
  /// it again throws ValueError (Note [Variable generations]), also after its memory was reused.
  /// A call racing with a push of the same handle on another thread, unordered, is a bug in the
  /// caller that the engine does not promise to detect.
  virtual void delete_var(VarHandle var, SyncFn on_deleted = nullptr) = 0;

  /// delete_var for a variable that guards memory of `device`, which `on_deleted` frees. On a
  /// GPU the deleter is an operation of the device's streams (Note [Stream-ordered frees] in
  /// engine/threaded_engine_vars.cc): it runs on a stream behind the variable's work (on other
  /// streams through events, never a host wait) with that stream current, so a stream-aware pool
  /// takes the memory back in stream order. Elsewhere, and in engines without GPU streams, it is
  /// delete_var.
  virtual void delete_var_on(VarHandle var, Device device, SyncFn on_deleted) {
    static_cast<void>(device);
    delete_var(var, std::move(on_deleted));
  }

  /// Hands `var` on for new state without deleting it: when no operation runs or waits on it and
  /// it carries no error, retires the handle (as delete_var does: using it afterwards is refused)
  /// and returns a new handle to a variable in the state new_var gives (version 0, no error);
  /// otherwise returns a null handle and changes nothing (call delete_var instead). With
  /// `device_memory` (the variable guards GPU memory), GPU work still queued on it stays ordered
  /// before the new handle's first operation (Note [Renewed GPU variables] in
  /// engine/ready_at_push.cc); without, a variable GPU work touched is refused, since host code
  /// may write the memory of the new state directly. What
  /// delete_var and new_var would do together, without their work: the imperative runtime reuses
  /// the variable and memory of an array that died idle this way. Thread-safe; a call racing
  /// with a push of the same handle on another thread, unordered, is a bug in the caller.
  virtual VarHandle renew_var(VarHandle var, bool device_memory = false) {
    static_cast<void>(var);
    static_cast<void>(device_memory);
    return nullptr;
  }

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

  /// Runs `fn` on the calling thread now when the operation it stands for is ready: when no
  /// operation runs or waits on any of its variables, so that push_sync with FnProperty::kAsync
  /// would run it at once on this thread. Ordering, versions and errors are exactly those of that
  /// push (Note [Ready at push] in engine/ready_at_push.cc), but nothing is queued: when some
  /// variable is busy (or the engine has no such path) it returns false and leaves `fn`
  /// untouched, and the caller pushes the operation instead. So `fn` may refer to the caller's
  /// stack. Throws ValueError for a null or deleted variable. Thread-safe.
  virtual bool run_if_ready(SyncFn& fn, Device device, VarList reads, VarList writes,
                            std::string_view name = {}) {
    static_cast<void>(fn), static_cast<void>(device), static_cast<void>(reads);
    static_cast<void>(writes), static_cast<void>(name);
    return false;
  }

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

  /// Number of completed writes to `var`. A snapshot when writes are pending. Throws ValueError
  /// for a deleted variable.
  virtual uint64_t var_version(VarHandle var) const = 0;

  /// Worker threads that serve normal operations on `device` (sync engine: 0).
  virtual int num_workers(Device device) const = 0;

  virtual EngineStats stats() const = 0;

 protected:
  Engine() = default;
};

/// Whether the calling thread is inside an engine operation's function (any engine).
bool inside_engine_operation();

/// Pins the GPU compute stream of the normal operations this thread pushes while the scope
/// lives: stream `index` modulo the device's compute streams (Note [Stream plans] in
/// graph/streams.h). A graph executor with a stream plan pushes each node inside one, so that
/// independent branches run on different streams and a chain stays on one. -1 (and any negative
/// index) leaves the choice to the engine (Note [GPU stream choice]). Copies keep their copy
/// streams; CPU operations and engines without GPU streams ignore it. Scopes nest.
class ComputeStreamScope {
 public:
  explicit ComputeStreamScope(int index);
  ~ComputeStreamScope();
  ComputeStreamScope(const ComputeStreamScope&) = delete;
  ComputeStreamScope& operator=(const ComputeStreamScope&) = delete;
  /// The calling thread's pinned stream index, or -1.
  static int current();

 private:
  int previous_;
};

}  // namespace weft
