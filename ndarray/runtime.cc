// The process-wide imperative runtime.
#include "ndarray/runtime.h"

#include <algorithm>

#include "devices/device_api.h"

namespace weft {
namespace {
std::mutex& runtime_mutex() {
  static std::mutex m;
  return m;
}
// Leaked on purpose (see Teardown): never destroyed by static destruction.
std::unique_ptr<Runtime>& runtime_slot() {
  static auto* slot = new std::unique_ptr<Runtime>();
  return *slot;
}
std::atomic<Runtime*> g_runtime{nullptr};
std::atomic<bool> g_torn_down{false};
std::atomic<uint64_t> g_generation{1};
// Storage ids stay unique across runtimes, so caches keyed on them never see a reused id.
std::atomic<uint64_t> g_next_storage_id{1};

// At exit the runtime is left alive (its workers idle): by the time static destructors run, the
// main thread's thread-local state that the engine uses (object-pool caches) is already gone, so
// destroying the engine then is unsafe. weft::shutdown() tears it down properly.
struct Teardown {
  ~Teardown() {}
};
}  // namespace

Runtime& Runtime::get() {
  // Acquire pairs with the release store below: the runtime is fully built when seen.
  Runtime* r = g_runtime.load(std::memory_order_acquire);
  if (r != nullptr) return *r;
  static Teardown teardown;
  std::lock_guard<std::mutex> lock(runtime_mutex());
  WEFT_CHECK_AS(Error, !g_torn_down.load()) << "the weft runtime was used after process teardown";
  if (!runtime_slot()) {
    runtime_slot() = std::make_unique<Runtime>(RuntimeConfig{});
    g_runtime.store(runtime_slot().get(), std::memory_order_release);
  }
  return *runtime_slot();
}

void Runtime::reset(const RuntimeConfig& config) {
  static Teardown teardown;
  std::lock_guard<std::mutex> lock(runtime_mutex());
  g_runtime.store(nullptr, std::memory_order_release);
  runtime_slot().reset();
  runtime_slot() = std::make_unique<Runtime>(config);
  g_runtime.store(runtime_slot().get(), std::memory_order_release);
}

bool Runtime::alive() { return g_runtime.load(std::memory_order_acquire) != nullptr; }

Runtime::Runtime(const RuntimeConfig& config)
    : config_(config),
      cores_(std::max(1, cpu_core_count())),
      engine_(Engine::create(config.engine)),
      generation_(g_generation.fetch_add(1)) {
  cpu_pool_ = &allocator_slow(Device::cpu());
}

uint64_t Runtime::next_storage_id() { return g_next_storage_id.fetch_add(1, std::memory_order_relaxed); }

Runtime::~Runtime() {
  try {
    engine_->wait_for_all();
  } catch (const std::exception&) {
    // Errors nobody waited for; the engine reports them when destroyed.
  }
  for (auto& [device, r] : randoms_) engine_->delete_var(r->var);
  engine_.reset();  // joins the workers; every storage deletion has run
  randoms_.clear();
  allocators_.clear();
}

PooledAllocator& Runtime::allocator_slow(Device device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = allocators_[device];
  if (!slot) {
    std::shared_ptr<Allocator> upstream;
    if (device.type == DeviceType::kCPU) {
      upstream = cpu_allocator();
    } else if (device.type == DeviceType::kCUDA) {
      upstream = make_cuda_allocator(device.id);
    } else {
      upstream = make_pinned_allocator();
    }
    slot = std::make_unique<PooledAllocator>(std::move(upstream), config_.pool);
  }
  return *slot;
}

RandomResource& Runtime::random(Device device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = randoms_[device];
  if (!slot) {
    slot = std::make_unique<RandomResource>();
    slot->var = engine_->new_var();
  }
  return *slot;
}

void Runtime::seed(uint64_t seed) {
  std::vector<RandomResource*> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [device, r] : randoms_) all.push_back(r.get());
  }
  if (all.empty()) all.push_back(&random(Device::cpu()));
  for (RandomResource* r : all) {
    engine_->push_sync(
        [r, seed](const RunContext&) {
          r->state.engine.seed(seed);
          r->state.seed = seed;
        },
        Device::cpu(), {}, {r->var}, FnProperty::kNormal, 0, "random_seed");
  }
  // Devices created later start from their default seed 0; seed them too when they appear.
}

int Runtime::kernel_started() {
  const int running = running_kernels_.fetch_add(1, std::memory_order_relaxed) + 1;
  const int cap = config_.intra_op_threads > 0 ? config_.intra_op_threads : cores_;
  if (config_.intra_op_policy == IntraOpPolicy::kFixed) return cap;
  return std::max(1, std::min(cap, cores_ / running));
}

void waitall() { Runtime::get().engine().wait_for_all(); }

void shutdown() {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  g_runtime.store(nullptr, std::memory_order_release);
  runtime_slot().reset();
}
void random_seed(uint64_t seed) { Runtime::get().seed(seed); }

}  // namespace weft
