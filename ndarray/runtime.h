// The imperative runtime: the engine, per-device pooled allocators and random states, and the
// intra-op threading policy that NDArray operations use.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/engine.h"
#include "memory/allocator.h"
#include "memory/pooled_allocator.h"
#include "ops/op.h"

namespace weft {

/// How kernels share the CPU with the engine's workers.
enum class IntraOpPolicy {
  /// A kernel gets its share of the budget's free cores: (cores of the thread budget that other
  /// processes leave free) / (kernels running now). One big operation alone on a quiet machine
  /// uses every core; many small ones run one thread each; beside a busy process the teams
  /// shrink (Note [Thread budget] in engine/cpu_budget.h). (default)
  kAdaptive,
  /// Every kernel uses `intra_op_threads` threads.
  kFixed,
};

struct RuntimeConfig {
  /// The engine, and the thread budget (engine.num_threads, WEFT_NUM_THREADS) that bounds the
  /// engine's workers and every kernel's intra-op threads.
  EngineConfig engine = EngineConfig::from_environment();
  PoolConfig pool;
  IntraOpPolicy intra_op_policy = IntraOpPolicy::kAdaptive;
  /// kFixed: threads per kernel (0 = the budget). kAdaptive: the upper bound (0 = the budget).
  int intra_op_threads = 0;
};

/// A device's random generator and the engine var that orders its use.
struct RandomResource {
  RandomState state;
  VarHandle var = nullptr;
};

/// The process-wide imperative runtime. Created on first use with RuntimeConfig{} (the engine
/// configured from the environment), or explicitly by Runtime::reset. Thread-safe.
///
/// Lifetimes (docs/LIFETIMES.md, Note [Runtime teardown] in runtime.cc): shutdown() and reset()
/// drain queued work before tearing the runtime down, without holding any lock that the work
/// itself takes. Arrays, executors and pool blocks may outlive the runtime that made them and are
/// freed safely afterwards; a program that exits without shutdown() drains queued work before any
/// static object is destroyed.
class Runtime {
 public:
  /// The runtime, created on first use. During process exit it is the runtime left in place;
  /// throws Error when there is none then (shutdown() ran before exit; docs/LIFETIMES.md).
  static Runtime& get();
  /// Waits for all work, then replaces the runtime with one built from `config`. Arrays and
  /// executors made under the old runtime may still be destroyed afterwards (their memory goes
  /// back safely), but not used. Throws Error when called from inside an engine operation.
  static void reset(const RuntimeConfig& config);
  /// Whether a runtime exists: false before first use, after shutdown() and once process exit
  /// has begun.
  static bool alive();
  /// Whether the current runtime exists and has generation `generation` (so the engine that
  /// made a variable under that generation is still running). Thread-safe.
  static bool is_current(uint64_t generation);

  explicit Runtime(const RuntimeConfig& config);
  /// Waits for the engine's work, destroys the engine (joins its workers), then releases the
  /// pools: a pool with blocks still out is orphaned and frees them as they come back (Note
  /// [Orphaned shards] in memory/pool_shard.cc); a pool shared with an executor lives on.
  ~Runtime();

  Engine& engine() { return *engine_; }
  const RuntimeConfig& config() const { return config_; }
  /// The pooled allocator of `device` (created on first use). The CPU's is made up front, so
  /// asking for it takes no lock. The reference is valid while this runtime lives; hold
  /// shared_allocator() to keep the pool longer.
  PooledAllocator& allocator(Device device) {
    if (device.type == DeviceType::kCPU && cpu_pool_ != nullptr) return *cpu_pool_;
    return *allocator_slow(device);
  }
  /// The same pool, shared: it stays alive (with its cache) for as long as the caller holds it,
  /// after this runtime is gone (an executor's arena holds its pool this way).
  std::shared_ptr<PooledAllocator> shared_allocator(Device device) {
    return allocator_slow(device);
  }
  /// The random resource of `device` (created on first use, seeded with the last seed() or 0).
  RandomResource& random(Device device);
  /// Reseeds every device's generator, and those of devices first used later; ordered after all
  /// draws already pushed. Thread-safe.
  void seed(uint64_t seed);
  /// Distinguishes this runtime from earlier ones (Runtime::reset): storage made under another
  /// generation no longer touches the engine.
  uint64_t generation() const { return generation_; }
  /// A new storage id (never 0, never reused).
  uint64_t next_storage_id();

  /// Intra-op threads for a kernel starting now on the calling thread; pair with
  /// kernel_finished() on the same thread. Sets the thread's OpenMP thread count and makes the
  /// kernel's oneDNN primitives for that count (Note [Thread budget] in engine/cpu_budget.h).
  int kernel_started();
  void kernel_finished();
  /// The thread budget (EngineConfig::num_threads resolved): the most threads kept busy.
  int thread_budget() const { return budget_; }

 private:
  static Runtime& get_slow();
  std::shared_ptr<PooledAllocator> allocator_slow(Device device);
  RuntimeConfig config_;
  int budget_;
  PooledAllocator* cpu_pool_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::mutex mutex_;
  std::unordered_map<Device, std::shared_ptr<PooledAllocator>> allocators_;
  std::unordered_map<Device, std::unique_ptr<RandomResource>> randoms_;
  uint64_t seed_ = 0;  // guarded by mutex_: the last seed(), for generators made later
  uint64_t generation_;
  std::atomic<int> running_kernels_{0};
};

/// Waits for every pushed operation (Runtime::get().engine().wait_for_all()).
void waitall();
/// Waits for all work, then destroys the runtime (engine, pools), writing the profiler trace if
/// one was configured. Work still queued completes first (errors nobody waited for are reported
/// on stderr). Afterwards arrays and executors still alive may only be destroyed: their memory
/// goes back safely (docs/LIFETIMES.md). A later Runtime::get() creates a new runtime. Calling
/// it is optional: exit without it is clean too. Throws Error when called from inside an engine
/// operation; must not race with other threads still using weft.
void shutdown();
/// Seeds the random generators of every device.
void random_seed(uint64_t seed);

}  // namespace weft
