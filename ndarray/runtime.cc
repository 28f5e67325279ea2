// The process-wide imperative runtime: creation on first use, shutdown/reset, and what happens
// at process exit.
#include "ndarray/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "devices/device_api.h"
#include "engine/cpu_budget.h"
#include "ops/kernel_threads.h"

namespace weft {

// Note [Runtime teardown]
// (The contract is docs/LIFETIMES.md; this is how it is kept.)
//
// Two locks. `lifecycle_mutex` serialises shutdown(), reset() and the exit drain; it is held
// while waiting for queued work, and nothing that queued work does ever takes it. `runtime_mutex`
// guards creating and publishing a runtime; it is held only for pointer swaps, never while
// waiting. (Holding one lock for both was the deadlock: shutdown() held it while the engine
// drained, and a queued kernel calling Runtime::get() on the then-null pointer blocked on it.)
//
// Teardown order: (1) drain the engine while the runtime is still published, so that queued
// kernels find it through the lock-free fast path; (2) unpublish it under runtime_mutex, leaving
// a `retiring` pointer that engine operations still running on it can find (work pushed during
// the drain by another thread); (3) destroy it outside every lock: the engine drains again and
// joins its workers, then the pools are released. A pool with blocks still out is orphaned and
// frees them when they come back; arrays of the dead runtime see a generation that is no longer
// current and free their memory directly, without the engine.
//
// Process exit without shutdown(). Static objects are destroyed while the engine's workers keep
// running, so a kernel still queued at exit could run against a destroyed static (oneDNN's
// engine and caches, the C library's state) and crash. So the runtime is drained before any
// static object is destroyed: the thread that calls exit() runs its thread_local destructors
// before every static destructor and atexit handler, and a thread_local guard armed on the main
// thread (the first time that thread uses the runtime) drains the engine there. An atexit
// handler registered when the runtime is created is the fallback for programs whose main thread
// never uses weft. After the drain the runtime is marked as exiting: alive() is false, so arrays
// destroyed later (static ones) free their memory directly; the runtime itself, its idle workers
// and its pools are left in place (reachable from a static, so not a leak), because other
// threads of the program may still be running and the workers are idle. get() still returns it
// (a thread that checked alive() just before the drain ended must not be handed an exception in
// a destructor), so work pushed during exit still runs, at its own risk.

namespace {
std::mutex& runtime_mutex() {
  static auto* m = new std::mutex();  // leaked: used by exit handlers after statics are gone
  return *m;
}
std::mutex& lifecycle_mutex() {
  static auto* m = new std::mutex();  // leaked, as above
  return *m;
}
// Leaked on purpose: the runtime left in place at exit stays reachable (Note [Runtime teardown]).
std::unique_ptr<Runtime>& runtime_slot() {
  static auto* slot = new std::unique_ptr<Runtime>();
  return *slot;
}
std::atomic<Runtime*> g_runtime{nullptr};
// The runtime being destroyed by shutdown(), for engine operations still running on it.
std::atomic<Runtime*> g_retiring{nullptr};
// The generation of g_runtime (0: none), readable without touching the runtime.
std::atomic<uint64_t> g_current_generation{0};
std::atomic<bool> g_exiting{false};
std::atomic<bool> g_atexit_registered{false};
std::atomic<uint64_t> g_generation{1};
// Storage ids stay unique across runtimes, so caches keyed on them never see a reused id.
std::atomic<uint64_t> g_next_storage_id{1};
// Whether this thread went through get_slow() once (and armed the exit guard if it is main).
thread_local bool t_checked_exit_guard = false;  // constant-initialised: no TLS guard

bool is_main_thread() {
#if defined(__linux__)
  return static_cast<pid_t>(::syscall(SYS_gettid)) == ::getpid();
#else
  return true;
#endif
}

// Waits for every queued operation of `engine`. Errors nobody waited for are reported on stderr
// (wait_for_all clears them, so the engine could not report them any more).
void drain(Engine& engine, const char* who) noexcept {
  try {
    engine.wait_for_all();
  } catch (const EngineError& e) {
    std::fprintf(
        stderr,
        "weft: %s: %lld operation(s) failed and %lld were skipped with nobody waiting; first: %s\n",
        who, static_cast<long long>(e.failed_count()), static_cast<long long>(e.skipped_count()),
        e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: %s: %s\n", who, e.what());
  }
}

// Publishes `next` (may be null) as the runtime and returns the previous one, which stays
// reachable through g_retiring until the caller clears it. Requires lifecycle_mutex.
std::unique_ptr<Runtime> swap_runtime(std::unique_ptr<Runtime> next) {
  std::lock_guard<std::mutex> lock(runtime_mutex());
  std::unique_ptr<Runtime> old = std::move(runtime_slot());
  // release: a thread that loads the new pointer sees the runtime fully built.
  g_retiring.store(old.get(), std::memory_order_release);
  g_current_generation.store(next ? next->generation() : 0, std::memory_order_release);
  g_runtime.store(next.get(), std::memory_order_release);
  runtime_slot() = std::move(next);
  return old;
}

// Destroys a runtime taken out by swap_runtime, outside runtime_mutex.
void retire(std::unique_ptr<Runtime> old) {
  old.reset();
  g_retiring.store(nullptr, std::memory_order_release);
}

// Drains the runtime at process exit (Note [Runtime teardown]). Idempotent.
void drain_at_exit() noexcept {
  if (g_exiting.load(std::memory_order_acquire)) return;
  if (inside_engine_operation()) return;  // exit() from inside a kernel: nothing can be waited for
  std::lock_guard<std::mutex> life(lifecycle_mutex());
  if (g_exiting.exchange(true)) return;
  Runtime* r = g_runtime.load(std::memory_order_acquire);
  if (r != nullptr) drain(r->engine(), "exit");
  std::lock_guard<std::mutex> lock(runtime_mutex());
  // From now on arrays free their memory without the engine, and get() returns the runtime left
  // in runtime_slot() (idle) instead of building one.
  g_current_generation.store(0, std::memory_order_release);
  g_runtime.store(nullptr, std::memory_order_release);
}

struct MainThreadExitGuard {
  ~MainThreadExitGuard() { drain_at_exit(); }
};

void arm_exit_guard() {
  t_checked_exit_guard = true;
  if (is_main_thread()) {
    static thread_local MainThreadExitGuard guard;
    static_cast<void>(guard);
  }
}
}  // namespace

Runtime& Runtime::get() {
  // Acquire pairs with the release store in swap_runtime: the runtime is fully built when seen.
  Runtime* r = g_runtime.load(std::memory_order_acquire);
  if (r != nullptr && t_checked_exit_guard) return *r;
  return get_slow();
}

Runtime& Runtime::get_slow() {
  if (!t_checked_exit_guard) arm_exit_guard();
  if (Runtime* r = g_runtime.load(std::memory_order_acquire)) return *r;
  // An operation of a runtime being shut down keeps using that runtime.
  if (inside_engine_operation()) {
    if (Runtime* retiring = g_retiring.load(std::memory_order_acquire)) return *retiring;
  }
  std::lock_guard<std::mutex> lock(runtime_mutex());
  if (g_exiting.load()) {
    // The runtime left in place at exit still works (its workers are idle); there is none to
    // return when shutdown() ran before exit, and a new one is not built during exit.
    WEFT_CHECK_AS(Error, runtime_slot() != nullptr)
        << "the weft runtime was used after shutdown() and after process exit began (from a static "
           "object's destructor?)";
    return *runtime_slot();
  }
  if (!runtime_slot()) {
    auto fresh = std::make_unique<Runtime>(RuntimeConfig{});
    g_current_generation.store(fresh->generation(), std::memory_order_release);
    g_runtime.store(fresh.get(), std::memory_order_release);
    runtime_slot() = std::move(fresh);
  }
  return *runtime_slot();
}

void Runtime::reset(const RuntimeConfig& config) {
  WEFT_CHECK(!inside_engine_operation()) << "Runtime::reset called from inside an engine operation";
  if (!t_checked_exit_guard) arm_exit_guard();
  std::lock_guard<std::mutex> life(lifecycle_mutex());
  WEFT_CHECK_AS(Error, !g_exiting.load()) << "Runtime::reset called after process exit began";
  // Drain first, with the old runtime still published (Note [Runtime teardown]).
  if (Runtime* old = g_runtime.load(std::memory_order_acquire))
    drain(old->engine(), "Runtime::reset");
  auto next = std::make_unique<Runtime>(config);
  retire(swap_runtime(std::move(next)));
}

bool Runtime::alive() { return g_runtime.load(std::memory_order_acquire) != nullptr; }

bool Runtime::is_current(uint64_t generation) {
  return generation != 0 && g_current_generation.load(std::memory_order_acquire) == generation;
}

Runtime::Runtime(const RuntimeConfig& config)
    : config_(config),
      budget_(resolve_thread_budget(config.engine.num_threads)),
      engine_(Engine::create(config.engine)),
      generation_(g_generation.fetch_add(1)) {
  cpu_pool_ = allocator_slow(Device::cpu()).get();
  // oneDNN primitives are made for the most threads a kernel can get (Note [Primitive thread
  // count] in ops/cpu/dnnl_util.cc).
  set_max_kernel_threads(std::max(budget_, config_.intra_op_threads));
  // The exit fallback for programs whose main thread never uses weft (Note [Runtime teardown]).
  if (!g_atexit_registered.exchange(true)) std::atexit([] { drain_at_exit(); });
}

uint64_t Runtime::next_storage_id() {
  return g_next_storage_id.fetch_add(1, std::memory_order_relaxed);
}

Runtime::~Runtime() {
  drain(*engine_, "shutdown");
  for (auto& [device, r] : randoms_) engine_->delete_var(r->var);
  engine_.reset();  // waits for the deletions and joins the workers: no operation runs any more
  randoms_.clear();
  // Pools with blocks still out are orphaned (memory/pool_shard.cc); pools an executor shares
  // live on with it.
  cpu_pool_ = nullptr;
  allocators_.clear();
}

std::shared_ptr<PooledAllocator> Runtime::allocator_slow(Device device) {
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
    slot = std::make_shared<PooledAllocator>(std::move(upstream), config_.pool);
  }
  return slot;
}

RandomResource& Runtime::random(Device device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = randoms_[device];
  if (!slot) {
    slot = std::make_unique<RandomResource>();
    slot->state.engine.seed(seed_);
    slot->state.seed = seed_;
    slot->var = engine_->new_var();
  }
  return *slot;
}

void Runtime::seed(uint64_t seed) {
  std::vector<RandomResource*> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    for (auto& [device, r] : randoms_) all.push_back(r.get());
  }
  if (all.empty()) all.push_back(&random(Device::cpu()));
  for (RandomResource* r : all) {
    engine_->push_sync(
        [r, seed](const RunContext&) {
          r->state.engine.seed(seed);
          r->state.seed = seed;
          ++r->state.reseeds;
        },
        Device::cpu(), {}, {r->var}, FnProperty::kNormal, 0, "random_seed");
  }
  // Generators made later start from this seed too (random()), as MXNet's seed() does.
}

int Runtime::kernel_started() {
  // relaxed: the count only sizes teams; a stale view costs at most one thread too many.
  const int running = running_kernels_.fetch_add(1, std::memory_order_relaxed) + 1;
  const int cap = config_.intra_op_threads > 0 ? config_.intra_op_threads : budget_;
  int threads = cap;
  if (config_.intra_op_policy == IntraOpPolicy::kAdaptive) {
    // Note [Thread budget]: the cores other processes leave free, shared among running kernels.
    threads = std::max(1, std::min(cap, uncontended_cores(budget_) / running));
  }
  begin_kernel_threads(threads);
  return threads;
}

void Runtime::kernel_finished() {
  end_kernel_threads();
  running_kernels_.fetch_sub(1, std::memory_order_relaxed);
}

void waitall() { Runtime::get().engine().wait_for_all(); }

void shutdown() {
  WEFT_CHECK(!inside_engine_operation()) << "shutdown() called from inside an engine operation";
  std::lock_guard<std::mutex> life(lifecycle_mutex());
  Runtime* current = g_runtime.load(std::memory_order_acquire);
  if (current == nullptr) return;
  // Drain with the runtime still published: queued kernels call Runtime::get() (Note [Runtime
  // teardown]).
  drain(current->engine(), "shutdown");
  retire(swap_runtime(nullptr));
}

void random_seed(uint64_t seed) { Runtime::get().seed(seed); }

}  // namespace weft
