// Shared helpers of the memory tests: a budgeted upstream allocator, a fake DeviceAPI whose events
// complete only when the test says so, byte patterns and sanitizer-aware workload sizes.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "devices/device_api.h"
#include "memory/allocator.h"
#include "memory/pooled_allocator.h"

// Whether this build runs under ThreadSanitizer (5-15x slower): tests shrink their workloads.
#if defined(__SANITIZE_THREAD__)
#define WEFT_MEMORY_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEFT_MEMORY_TEST_UNDER_TSAN 1
#endif
#endif
#ifndef WEFT_MEMORY_TEST_UNDER_TSAN
#define WEFT_MEMORY_TEST_UNDER_TSAN 0
#endif

namespace weft::testing {

inline constexpr size_t KiB = size_t{1} << 10;
inline constexpr size_t MiB = size_t{1} << 20;

inline constexpr bool kUnderTsan = WEFT_MEMORY_TEST_UNDER_TSAN != 0;

/// `normal` in an ordinary build (and under AddressSanitizer, about 2x slower), `tsan` under
/// ThreadSanitizer (5-15x slower, and every byte written is instrumented).
constexpr int scaled(int normal, int tsan) { return kUnderTsan ? tsan : normal; }

inline uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }
inline bool is_aligned(const void* p, size_t alignment) { return address(p) % alignment == 0; }

/// A pool configuration with one arena (so that statistics are exact on any thread) and no
/// profiler counters. Best fit uses PyTorch's segment sizes (20 MiB for 1-10 MiB requests),
/// which the scripted expectations are written against; tests of the default segment policy
/// set large_buffer_segments = false themselves.
inline PoolConfig pool_config(PoolStrategy strategy) {
  PoolConfig config;
  config.strategy = strategy;
  config.arenas = 1;
  config.trace_counters = false;
  config.large_buffer_segments = true;
  return config;
}

inline std::string strategy_test_name(const ::testing::TestParamInfo<PoolStrategy>& info) {
  switch (info.param) {
    case PoolStrategy::kExact:
      return "Exact";
    case PoolStrategy::kRound:
      return "Round";
    case PoolStrategy::kBestFit:
      return "BestFit";
  }
  return "Unknown";
}

/// Fills `bytes` bytes at `p` with a pattern derived from `seed`.
inline void fill_pattern(void* p, size_t bytes, uint32_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>((seed * 131u + i * 7u) >> 1);
}

/// Whether `bytes` bytes at `p` still hold fill_pattern(p, bytes, seed).
inline bool has_pattern(const void* p, size_t bytes, uint32_t seed) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) {
    if (b[i] != static_cast<unsigned char>((seed * 131u + i * 7u) >> 1)) return false;
  }
  return true;
}

/// An upstream allocator over cpu_allocator() with a byte budget: an allocation that would take
/// the live bytes over the budget throws OutOfMemory. Counts live bytes and calls. Thread-safe.
/// Its DataPtrs may outlive it only as long as the pool holding it does (the pool keeps it alive).
class BudgetAllocator final : public Allocator {
 public:
  explicit BudgetAllocator(size_t budget) : budget_(budget) {}

  DataPtr allocate(size_t bytes, size_t alignment = kDefaultAlignment) override {
    size_t live = live_.load();
    do {
      if (live + bytes > budget_) {
        failures_.fetch_add(1);
        WEFT_THROW(OutOfMemory) << "budget allocator: " << bytes << " bytes would exceed the "
                                << budget_ << "-byte budget (" << live << " live)";
      }
    } while (!live_.compare_exchange_weak(live, live + bytes));
    auto* holder = new Holder{cpu_allocator()->allocate(bytes, alignment), this};
    calls_.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(bytes);
    }
    return DataPtr(holder->memory.get(), bytes, Device::cpu(), holder,
                   [](void* context, void*, size_t size) noexcept {
                     auto* h = static_cast<Holder*>(context);
                     BudgetAllocator* owner = h->owner;
                     delete h;  // frees the memory
                     owner->live_.fetch_sub(size);
                     owner->frees_.fetch_add(1);
                   });
  }
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "budget"; }

  void set_budget(size_t budget) { budget_ = budget; }
  /// Bytes handed out and not yet freed.
  size_t live_bytes() const { return live_.load(); }
  uint64_t calls() const { return calls_.load(); }
  uint64_t frees() const { return frees_.load(); }
  uint64_t failures() const { return failures_.load(); }
  /// The sizes of every successful allocation, in order.
  std::vector<size_t> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  struct Holder {
    DataPtr memory;
    BudgetAllocator* owner;
  };
  std::atomic<size_t> budget_;
  std::atomic<size_t> live_{0};
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> frees_{0};
  std::atomic<uint64_t> failures_{0};
  mutable std::mutex mutex_;
  std::vector<size_t> requests_;
};

/// A DeviceAPI for the CPU device whose events complete only when the test says so
/// (complete_stream / complete_all), or when someone synchronizes on them. Thread-safe.
/// Streams are any non-null handles the test makes up (see make_stream).
class FakeDeviceAPI final : public DeviceAPI {
 public:
  int device_count() override { return 1; }
  int64_t attribute(Device, DeviceAttribute attribute) override {
    return attribute == DeviceAttribute::kExists ? 1 : 0;
  }
  Stream create_stream(Device device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return Stream{device, reinterpret_cast<void*>(next_stream_++)};
  }
  void destroy_stream(const Stream&) override {}
  void synchronize(const Stream& stream) override {
    complete_stream(stream.handle);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stream_synchronizations_;
  }

  Event create_event(Device device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fail_event_creation_) {
      WEFT_THROW(Error) << "fake device: event creation failed (as the test asked)";
    }
    const uintptr_t id = next_event_++;
    events_[id] = EventState{};
    ++created_;
    return Event(device, reinterpret_cast<void*>(id), this);
  }

  /// Completes every event recorded on the stream with `handle`.
  void complete_stream(void* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, state] : events_) {
      if (state.stream == handle) state.completed = true;
    }
  }
  /// Completes every event.
  void complete_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, state] : events_) state.completed = true;
  }
  /// Events recorded and not yet completed.
  int pending_events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int n = 0;
    for (const auto& [id, state] : events_) n += state.completed ? 0 : 1;
    return n;
  }
  int events_created() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return created_;
  }
  int live_events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(events_.size());
  }
  int event_synchronizations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return synchronizations_;
  }
  /// Calls of synchronize(stream).
  int stream_synchronizations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stream_synchronizations_;
  }
  /// Makes create_event throw from now on (or not).
  void set_fail_event_creation(bool fail) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_event_creation_ = fail;
  }

 protected:
  void destroy_event(Device, void* handle) override {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.erase(reinterpret_cast<uintptr_t>(handle));
  }
  void record_event(void* handle, const Stream& stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    EventState& state = events_.at(reinterpret_cast<uintptr_t>(handle));
    state.stream = stream.handle;
    state.completed = false;
  }
  bool query_event(Device, void* handle) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_.at(reinterpret_cast<uintptr_t>(handle)).completed;
  }
  void synchronize_event(Device, void* handle) override {
    // Waiting for an event on a fake device: the work "finishes" now.
    std::lock_guard<std::mutex> lock(mutex_);
    events_.at(reinterpret_cast<uintptr_t>(handle)).completed = true;
    ++synchronizations_;
  }
  void stream_wait_event(const Stream&, void*) override {}

 private:
  struct EventState {
    void* stream = nullptr;
    bool completed = true;  // an event never recorded is complete
  };
  mutable std::mutex mutex_;
  std::map<uintptr_t, EventState> events_;
  uintptr_t next_event_ = 1;
  uintptr_t next_stream_ = 0x1000;
  int created_ = 0;
  int synchronizations_ = 0;
  int stream_synchronizations_ = 0;
  bool fail_event_creation_ = false;
};

}  // namespace weft::testing
