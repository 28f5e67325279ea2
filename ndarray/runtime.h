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
  /// A kernel gets the cores not busy with other kernels: cores / (kernels running now). One big
  /// operation alone uses every core; many small ones run one thread each. (default)
  kAdaptive,
  /// Every kernel uses `intra_op_threads` threads.
  kFixed,
};

struct RuntimeConfig {
  EngineConfig engine = EngineConfig::from_environment();
  PoolConfig pool;
  IntraOpPolicy intra_op_policy = IntraOpPolicy::kAdaptive;
  /// kFixed: threads per kernel (0 = one per core). kAdaptive: the upper bound (0 = cores).
  int intra_op_threads = 0;
};

/// A device's random generator and the engine var that orders its use.
struct RandomResource {
  RandomState state;
  VarHandle var = nullptr;
};

/// The process-wide imperative runtime. Created on first use with RuntimeConfig{} (the engine
/// configured from the environment), or explicitly by Runtime::reset. Thread-safe.
class Runtime {
 public:
  /// The runtime, created on first use.
  static Runtime& get();
  /// Waits for all work, then replaces the runtime with one built from `config`. No NDArray
  /// created under the old runtime may be used (or still be alive) afterwards.
  static void reset(const RuntimeConfig& config);
  /// Whether the runtime exists (false after process teardown began).
  static bool alive();

  explicit Runtime(const RuntimeConfig& config);
  ~Runtime();

  Engine& engine() { return *engine_; }
  const RuntimeConfig& config() const { return config_; }
  /// The pooled allocator of `device` (created on first use). The CPU's is made up front, so
  /// asking for it takes no lock.
  PooledAllocator& allocator(Device device) {
    if (device.type == DeviceType::kCPU && cpu_pool_ != nullptr) return *cpu_pool_;
    return allocator_slow(device);
  }
  /// The random resource of `device` (created on first use, seeded with 0).
  RandomResource& random(Device device);
  /// Reseeds every device's generator; ordered after all draws already pushed. Thread-safe.
  void seed(uint64_t seed);
  /// Distinguishes this runtime from earlier ones (Runtime::reset): storage made under another
  /// generation no longer touches the engine.
  uint64_t generation() const { return generation_; }
  /// A new storage id (never 0, never reused).
  uint64_t next_storage_id();

  /// Intra-op threads for a kernel starting now; pair with kernel_finished().
  int kernel_started();
  void kernel_finished() { running_kernels_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  PooledAllocator& allocator_slow(Device device);
  RuntimeConfig config_;
  int cores_;
  PooledAllocator* cpu_pool_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::mutex mutex_;
  std::unordered_map<Device, std::unique_ptr<PooledAllocator>> allocators_;
  std::unordered_map<Device, std::unique_ptr<RandomResource>> randoms_;
  uint64_t generation_;
  std::atomic<int> running_kernels_{0};
};

/// Waits for every pushed operation (Runtime::get().engine().wait_for_all()).
void waitall();
/// Waits for all work, then destroys the runtime (engine, pools), writing the profiler trace if
/// one was configured. Call before the end of main() when a clean teardown matters; no NDArray may
/// be used afterwards (arrays still alive just release their memory). A later Runtime::get()
/// creates a new runtime.
void shutdown();
/// Seeds the random generators of every device.
void random_seed(uint64_t seed);

}  // namespace weft
