// Engine internals shared by both engines: the variable, the operation block and error slots.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/spin_lock.h"
#include "engine/engine.h"

namespace weft {
namespace detail {

struct StreamClock;

/// The error of one failed operation, shared by every variable it reached. It counts as cleared
/// once wait_for_all ran after it was recorded (`epoch` < the log's clear count); `delivered` is
/// set by the first wait that rethrows it. Fields other than `delivered` are set before the slot
/// is shared and then only read.
struct ErrorSlot {
  std::exception_ptr error;
  uint64_t epoch = 0;                             ///< the log's clear count when recorded
  const std::atomic<uint64_t>* clears = nullptr;  ///< the log's clear count (FailureLog)
  bool retained = false;                          ///< the log keeps it (FailureLog bound)
  std::atomic<bool> delivered{false};

  bool cleared() const {
    // acquire: pairs with the release increment in FailureLog::throw_and_clear.
    return clears != nullptr && clears->load(std::memory_order_acquire) != epoch;
  }
};

/// One (operation, variable) dependency; linked into the variable's wait queue while pending.
struct VarSlot {
  Var* var = nullptr;
  OprBlock* op = nullptr;
  VarSlot* next = nullptr;
  bool write = false;
};

/// What an operation is, for the engine's own bookkeeping.
enum class OpKind : uint8_t {
  kUser,       ///< pushed by push_sync / push_async
  kWaitVar,    ///< wait_for_var: ordered like a write, bumps no version, ignores errors
  kDeleteVar,  ///< delete_var: ordered like a write; frees the variable when it completes
};

/// A short string kept inline (names of operations); longer names go to the heap.
class OpName {
 public:
  OpName() { inline_[0] = '\0'; }
  explicit OpName(std::string_view name) {
    if (name.size() < sizeof(inline_)) {
      // An empty view may have a null data(), which memcpy must not be given.
      if (!name.empty()) std::memcpy(inline_, name.data(), name.size());
      inline_[name.size()] = '\0';
    } else {
      inline_[0] = '\0';
      heap_ = std::make_unique<std::string>(name);
    }
  }
  std::string_view view() const {
    return heap_ ? std::string_view(*heap_) : std::string_view(inline_);
  }
  std::string str() const {
    std::string_view v = view();
    return v.empty() ? "<unnamed>" : std::string(v);
  }

 private:
  char inline_[32];
  std::unique_ptr<std::string> heap_;
};

/// An operation pushed into an engine. Lives from push to completion; pooled.
// Note [Operation block layout]: an operation is written by the pushing thread and read by the
// worker that runs it, so every cache line it spans crosses between cores. The fields the hot
// path touches (counters, flags, slots pointer, ready link, body, the first slots) come first
// and the block starts on a cache line (ObjectPool aligns it), so an operation on one or two
// variables touches three lines; names, errors and profiling fields come last.
struct alignas(64) OprBlock {
  static constexpr int kInlineSlots = 4;

  /// Pending dependencies + 1 (the push guard, Note [Push guard]); the op is ready at zero.
  std::atomic<int32_t> wait{1};
  OpKind kind = OpKind::kUser;
  bool async = false;
  FnProperty property = FnProperty::kNormal;
  bool has_body = false;
  int32_t priority = 0;
  /// The GPU compute stream pinned at push (ComputeStreamScope), or -1: the engine chooses.
  int32_t stream_hint = -1;
  uint32_t num_slots = 0;
  Device device;
  VarSlot* slots = inline_slots;
  std::atomic<OprBlock*> next_ready{nullptr};  ///< link in a ready queue
  /// Asynchronous operations: 2 while running (the body's return and the completion callback
  /// each hold one); whoever drops the last frees the block (Note [Async body lifetime]).
  std::atomic<int8_t> async_refs{0};
  /// The body: `sync` when !async, `async` when async; constructed only when has_body.
  union Body {
    SyncFn sync;
    AsyncFn async;
    Body() {}
    ~Body() {}
  } body;
  VarSlot inline_slots[kInlineSlots];
  uint64_t profile_id = 0;               ///< non-zero while profiling
  void* completion_state = nullptr;      ///< the sync engine's wait for an async completion
  std::shared_ptr<ErrorSlot> inherited;  ///< set when skipped because an input carried an error
  OpName name;
  // Profiling (only filled while the profiler is enabled).
  int64_t queued_ns = 0;
  int64_t ready_ns = 0;
  int64_t start_ns = 0;
  int start_lane = 0;
  /// The stream clock of the worker that ran the body of a GPU operation (Note [GPU var events]).
  StreamClock* gpu_clock = nullptr;

  OprBlock() = default;
  ~OprBlock() {
    reset_body();
    if (slots != inline_slots) delete[] slots;
  }

  void set_body(SyncFn&& fn) {
    ::new (&body.sync) SyncFn(std::move(fn));
    async = false;
    has_body = true;
  }
  void set_body(AsyncFn&& fn) {
    ::new (&body.async) AsyncFn(std::move(fn));
    async = true;
    has_body = true;
  }
  /// Destroys the body (and its captures).
  void reset_body() {
    if (!has_body) return;
    if (async) {
      body.async.~AsyncFn();
    } else {
      body.sync.~SyncFn();
    }
    has_body = false;
  }
  OprBlock(const OprBlock&) = delete;
  OprBlock& operator=(const OprBlock&) = delete;

  /// Reserves room for `n` slots.
  void reserve_slots(uint32_t n) {
    if (n > kInlineSlots) slots = new VarSlot[n];
  }
};

/// Fills op->slots from the read and write lists: duplicates merged, a variable both read and
/// written kept as a write; reads first. Throws ValueError for a null or deleted variable (a
/// stale handle, Note [Variable generations]); `deleting` skips that check for delete_var's own
/// operation, whose handle delete_var has just retired.
void build_slots(OprBlock* op, VarList reads, VarList writes, std::string_view name,
                 bool deleting = false);
/// Throws the ValueError build_slots throws for `var`, entry `index` of the list `list`
/// ("reads" or "writes") of operation `name`: a null or deleted variable.
[[noreturn]] void build_slots_error(std::string_view name, const char* list, size_t index,
                                    VarHandle var);
/// The work of build_slots on any array of at least reads.size() + writes.size() slots, each
/// pointing at `op` (may be null); returns how many it filled.
uint32_t fill_slots(VarSlot* slots, OprBlock* op, VarList reads, VarList writes,
                    std::string_view name, bool deleting = false);

// Note [Variable generations]
// Variables come from an object pool, so a deleted variable's memory soon holds another one: a
// bare pointer kept past delete_var would silently act on the newcomer (ABA). The slot stamp of
// a variable (Note [Slot stamps]) is its generation: new_var hands out (address, stamp), and
// delete_var retires the handle by moving the stamp on with one compare-and-swap, at the moment
// it is called, before the variable is destroyed. Every engine entry point compares a handle's
// generation with the stamp (one load of a line the call touches anyway) before it touches the
// variable, so a handle used after its delete_var was called is refused with a ValueError, in
// every build, whether or not the memory was reused yet. The stamp lives outside the object and
// is never freed, so reading it is safe for any handle the engine ever issued. Not detected: a
// push that races, unordered, with the delete_var of the same handle on another thread (the
// caller's own data race).

/// A handle for a freshly created `var`. Call from the thread that created it.
VarHandle make_var_handle(Var* var);
/// Whether `handle` still names a variable: not null and not deleted. Thread-safe.
bool is_live(VarHandle handle);
/// The variable of `handle`; throws ValueError ("`what`: variable ... was deleted ...") when it
/// is null or stale.
Var* live_var(VarHandle handle, std::string_view what);
/// Retires `handle` (delete_var): true when it was live; false when it was already retired.
bool retire(VarHandle handle);

// Note [Completion tokens]
// An asynchronous operation completes exactly once, however often its CallbackOnComplete (a
// copyable value) is called and whether or not its body throws. When the engine calls the body
// it reads the operation block's slot stamp (Note [Slot stamps]) as the completion's token and
// puts it in the callback. Completing means winning one compare-and-swap of the stamp from the
// token to token + 1: the callback's first call, or the engine when the body throws first. A
// later call (or a body that throws after calling back) loses it and releases nothing; since the
// stamp never goes back, this holds also after the block was freed and reused by another
// operation (whose callbacks carry a newer token).

/// The token for the completion of `op`, whose body is about to be called.
uint64_t completion_token(OprBlock* op);
/// Claims the completion of `op` for `token`: true for exactly one caller. Thread-safe.
bool claim_completion(OprBlock* op, uint64_t token);

/// Marks the calling thread as running the body of `op` with `token` (nests), so that a
/// misused callback called there can name the operation.
class AsyncBodyScope {
 public:
  AsyncBodyScope(const OprBlock* op, uint64_t token);
  ~AsyncBodyScope();
  AsyncBodyScope(const AsyncBodyScope&) = delete;
  AsyncBodyScope& operator=(const AsyncBodyScope&) = delete;

 private:
  const OprBlock* previous_op_;
  uint64_t previous_token_;
};

class FailureLog;
/// Makes `log` the place where completion-contract violations of callbacks issued by `engine`
/// are recorded; unregister before the log is destroyed. Thread-safe.
void register_failure_log(const void* engine, FailureLog* log);
void unregister_failure_log(const void* engine);

/// Thread-local depth of engine-operation calls on this thread (for the wait-inside-op check).
struct OperationScope {
  OperationScope();
  ~OperationScope();
};

/// Throws weft::Error when called from inside an engine operation. `what` names the wait.
void check_not_inside_operation(const char* what);

/// Records a completed operation in the profiler (call only when op->profile_id != 0).
void record_op_trace(const OprBlock* op, int64_t end_ns, bool failed);

/// Builds the message of an EngineError: "operation 'NAME' WHAT_HAPPENED: <error's what()>".
std::string describe_failure(const std::string& op_name, std::exception_ptr error,
                             const std::string& what_happened = "failed");

}  // namespace detail

// Note [GPU var events]
// A GPU operation counts as complete once its work is queued on its stream: the engine marks the
// variables the operation touched with the stream's position after it (its writer mark on those
// it wrote, a reader mark on those it read), then releases them like any completed operation,
// so the next GPU operation can be queued at once, long before the first has run. Whoever
// touches such a variable next orders itself behind those marks without blocking a thread:
// - a GPU operation on another stream makes its stream wait for them (cudaStreamWaitEvent);
//   on the same stream, stream order suffices;
// - a CPU operation, wait_for_var and delete_var's deleter (which frees device memory) are
//   handed to the engine's event poller, which dispatches them once the marks have completed.
// A writer waits for the earlier readers too (their kernels must finish reading before it
// overwrites); readers keep at most one mark per stream, the newest.
//
// Note [Lazy stream marks]
// A mark is a count, not an event: each stream keeps a clock (detail::StreamClock) of the
// operations its worker has queued, and an operation's mark is the count after it. Recording a
// CUDA event for every operation cost a pooled event and a cudaEventRecord on the worker's hot
// path, and almost none was ever waited for: a chain on one stream is ordered by the stream. An
// event is recorded when somebody needs one (another stream, the poller) and none covers the mark
// yet, and at a bounded rate by the stream's owner (Note [Eager events]); when recorded on demand,
// on the marked stream; it covers every operation queued there so far, the marked one among them
// (its mark was published after its work was queued), so waiting for it is never too early, and
// one event then serves every later request for a mark it covers. A stream also remembers how
// far it already waits for each other stream, so a run of readers of one array on another
// stream waits once, and the poller's checks are mostly a comparison with the highest mark
// known complete.
namespace detail {
struct StreamClock;
/// A position in a stream's sequence of queued operations (Note [Lazy stream marks]).
struct StreamMark {
  StreamClock* clock = nullptr;  ///< null: no GPU work
  uint64_t mark = 0;
  explicit operator bool() const { return clock != nullptr; }
};
struct GpuSync {
  StreamMark writer;
  std::vector<StreamMark> readers;
};
}  // namespace detail

/// A variable of the dependency engine. Engines use the fields they need.
class Var {
 public:
  /// Completed writes. Written under `lock` (threaded) or the engine mutex (sync); read anywhere.
  std::atomic<uint64_t> version{0};
  /// The error attached by a failed writer. Written only by the operation that holds the
  /// variable exclusively, read by operations granted after it: the dependency order itself
  /// orders these accesses (Note [Var error ordering]).
  std::shared_ptr<detail::ErrorSlot> error;
  const void* owner = nullptr;  ///< the engine that created it (checked on push)

  // Threaded engine scheduling state, guarded by `lock`.
  detail::SpinLock lock;
  detail::VarSlot* head = nullptr;  ///< first waiting dependency
  detail::VarSlot* tail = nullptr;
  int32_t running_reads = 0;   ///< granted reads not yet completed
  bool write_running = false;  ///< a granted write not yet completed
  bool deleted = false;        ///< delete_var was pushed (guarded by `lock` / engine mutex)
  /// Marks of GPU work queued on it (Note [GPU var events]); null until a GPU operation touches
  /// it. Guarded by `lock`.
  std::unique_ptr<detail::GpuSync> gpu;
  /// Set (once) when `gpu` is created, so that CPU-only work skips the lock.
  std::atomic<bool> gpu_touched{false};

  bool has_error() const { return error && !error->cleared(); }
};

}  // namespace weft
