// Shared helpers of the engine tests: the engine-parameterised fixture, hang watchdogs, gates.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine.h"

// Whether this build runs under ThreadSanitizer (5-15x slower): hang limits grow to match.
// (Workload sizes need no shrinking: the whole engine suite takes ~30 s of CPU under TSan.)
#if defined(__SANITIZE_THREAD__)
#define WEFT_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_TEST_UNDER_TSAN 1
#endif
#endif
#ifndef WEFT_TEST_UNDER_TSAN
#define WEFT_TEST_UNDER_TSAN 0
#endif

namespace weft::testing {

inline constexpr bool kUnderTsan = WEFT_TEST_UNDER_TSAN != 0;

/// How long a blocking step may take before the test calls it a hang. Generous: it only exists
/// so that a broken engine fails the test instead of stalling CI, never to measure speed.
inline constexpr std::chrono::seconds kHangLimit{kUnderTsan ? 90 : 30};
/// How long an operation body waits for something another operation must provide (a gate, a
/// barrier partner) before it gives up and records the failure.
inline constexpr std::chrono::seconds kBlockLimit{kUnderTsan ? 30 : 10};

/// The error the tests' operations throw: a type of their own, so that a test can tell the
/// original exception apart from anything the engine wraps it in.
class TestFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs `fn` on its own thread and waits at most `limit` for it. Exceptions of `fn` are
/// rethrown here. If it does not finish, the test fails and the binary exits at once: every
/// later step (the engine's destructor included) would hang on the same stuck work.
template <typename Fn>
void run_with_deadline(std::string_view what, Fn&& fn,
                       std::chrono::milliseconds limit = kHangLimit) {
  std::packaged_task<void()> task(std::forward<Fn>(fn));
  std::future<void> done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(limit) != std::future_status::ready) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string test = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name()
                                       : std::string("<no test>");
    ADD_FAILURE() << what << " did not finish within " << limit.count() << " ms";
    std::fprintf(stderr,
                 "\n[ WATCHDOG ] %s: '%.*s' did not finish within %lld ms (engine hang?); "
                 "exiting instead of hanging\n",
                 test.c_str(), static_cast<int>(what.size()), what.data(),
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(EXIT_FAILURE);
  }
  runner.join();
  done.get();
}

/// A one-shot event that threads wait on with a time limit (like absl::Notification).
/// Thread-safe.
class Notification {
 public:
  void notify() {
    // Notifies under the lock: a waiter that sees notified_ may destroy this object at once.
    std::lock_guard<std::mutex> lock(mutex_);
    notified_ = true;
    cv_.notify_all();
  }
  /// True once notify() was called; false if `limit` passed first.
  bool wait_for(std::chrono::milliseconds limit = kBlockLimit) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return notified_; });
  }
  bool notified() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return notified_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool notified_ = false;
};

/// A barrier with a time limit: `parties` threads meet, or each gives up after its limit.
/// Thread-safe.
class Rendezvous {
 public:
  explicit Rendezvous(int parties) : parties_(parties) {}
  /// True when all parties arrived before `limit` passed for this caller.
  bool arrive_and_wait_for(std::chrono::milliseconds limit = kBlockLimit) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++arrived_;
    cv_.notify_all();
    return cv_.wait_for(lock, limit, [&] { return arrived_ >= parties_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int parties_;
  int arrived_ = 0;
};

/// Joins threads that operations start (e.g. completers of async operations) when the owner
/// goes out of scope or join_all() is called. Thread-safe to add to.
class ThreadCollector {
 public:
  ~ThreadCollector() { join_all(); }
  void add(std::thread thread) {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.push_back(std::move(thread));
  }
  /// Starts a thread running `fn` and keeps it, all under the lock: join_all() cannot run (and
  /// the collector cannot be destroyed) before spawn has finished touching it, even when the new
  /// thread completes an operation that lets the test end. An async body that spawns its
  /// completer must use this rather than add(std::thread(...)).
  template <typename F>
  void spawn(F&& fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.emplace_back(std::forward<F>(fn));
  }
  void join_all() {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads.swap(threads_);
    }
    for (auto& thread : threads) thread.join();
  }

 private:
  std::mutex mutex_;
  std::vector<std::thread> threads_;
};

/// One engine configuration a parameterised test runs under.
struct EngineParam {
  EngineKind kind = EngineKind::kThreaded;
  int cpu_workers = 0;  ///< ignored by the sync engine

  EngineConfig config() const;
  std::string name() const {
    return kind == EngineKind::kSync ? std::string("Sync")
                                     : "Threaded" + std::to_string(cpu_workers);
  }
};

/// An engine configuration; the fields not named keep their defaults.
inline EngineConfig make_config(EngineKind kind, int cpu_workers, bool cpu_priority_lane = true,
                                std::string profile_path = {}) {
  EngineConfig config;
  config.kind = kind;
  config.cpu_workers = cpu_workers;
  config.cpu_priority_lane = cpu_priority_lane;
  config.profile_path = std::move(profile_path);
  return config;
}

inline EngineConfig EngineParam::config() const {
  return make_config(kind, kind == EngineKind::kSync ? 0 : cpu_workers);
}

inline void PrintTo(const EngineParam& param, std::ostream* os) { *os << param.name(); }

/// Every engine: threaded with 1, 2 and 8 CPU workers, and the sync engine.
inline std::vector<EngineParam> all_engines() {
  return {{EngineKind::kThreaded, 1},
          {EngineKind::kThreaded, 2},
          {EngineKind::kThreaded, 8},
          {EngineKind::kSync, 0}};
}

/// Threaded engines with at least two workers (for tests that need real concurrency).
inline std::vector<EngineParam> concurrent_engines() {
  return {{EngineKind::kThreaded, 2}, {EngineKind::kThreaded, 8}};
}

/// Test-name suffix for INSTANTIATE_TEST_SUITE_P.
inline std::string engine_param_name(const ::testing::TestParamInfo<EngineParam>& info) {
  return info.param.name();
}

/// Fixture: an engine of the parameter's configuration, destroyed under a watchdog.
class EngineTest : public ::testing::TestWithParam<EngineParam> {
 protected:
  void SetUp() override {
    engine_ = Engine::create(GetParam().config());
    ASSERT_NE(engine_, nullptr);
  }
  void TearDown() override { destroy_engine(); }

  bool is_sync() const { return GetParam().kind == EngineKind::kSync; }

  /// Destroys the engine (waits for its pending work) under the watchdog.
  void destroy_engine() {
    if (!engine_) return;
    run_with_deadline("engine destruction", [this] { engine_.reset(); });
  }

  /// wait_for_all under the watchdog; the engine's exceptions propagate.
  void wait_all() {
    run_with_deadline("wait_for_all", [this] { engine_->wait_for_all(); });
  }

  /// wait_for_var under the watchdog; the engine's exceptions propagate.
  void wait_var(VarHandle var) {
    run_with_deadline("wait_for_var", [this, var] { engine_->wait_for_var(var); });
  }

  /// `count` new variables.
  std::vector<VarHandle> new_vars(int count) {
    std::vector<VarHandle> vars;
    vars.reserve(count);
    for (int i = 0; i < count; ++i) vars.push_back(engine_->new_var());
    return vars;
  }

  std::unique_ptr<Engine> engine_;
};

/// A 64-bit mixing function (splitmix64's finaliser): the tests' deterministic "work".
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// "" when equal, else a message naming the first differing index and both values.
inline std::string first_difference(const std::vector<uint64_t>& actual,
                                    const std::vector<uint64_t>& expected) {
  if (actual.size() != expected.size()) {
    return "sizes differ: " + std::to_string(actual.size()) + " vs " +
           std::to_string(expected.size());
  }
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] != expected[i]) {
      return "index " + std::to_string(i) + ": got " + std::to_string(actual[i]) + ", expected " +
             std::to_string(expected[i]);
    }
  }
  return "";
}

}  // namespace weft::testing
