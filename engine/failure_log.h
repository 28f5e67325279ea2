// Records failed operations for wait_for_all and the engine's destructor (both engines).
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/var.h"

namespace weft::detail {

/// The failures since the last wait_for_all. Thread-safe.
class FailureLog {
 public:
  /// Records an operation's own failure; returns the slot to attach to the vars it writes.
  std::shared_ptr<ErrorSlot> record_failure(std::exception_ptr error, const OpName& name) {
    auto slot = std::make_shared<ErrorSlot>();
    slot->error = std::move(error);
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back({slot, name.str()});
    ++failed_total_;
    return slot;
  }

  void record_skip() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++skipped_;
    ++skipped_total_;
  }

  /// For wait_for_all: throws EngineError for the first failure since the last wait_for_all
  /// (also when wait_for_var already rethrew it), then clears every error (each slot is marked
  /// cleared, so variables holding it are clean).
  void throw_and_clear() {
    std::vector<Entry> entries;
    int64_t skipped = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entries.swap(entries_);
      skipped = skipped_;
      skipped_ = 0;
    }
    const Entry* first = nullptr;
    int64_t failed = 0;
    for (const Entry& entry : entries) {
      // release: an op that later finds this slot on a var sees it cleared (acquire in has_error).
      entry.slot->cleared.store(true, std::memory_order_release);
      entry.slot->delivered.store(true, std::memory_order_release);
      ++failed;
      if (first == nullptr) first = &entry;
    }
    if (first == nullptr) return;
    std::string message = describe_failure(first->op_name, first->slot->error);
    message += " (" + std::to_string(failed) + " operation" + (failed == 1 ? "" : "s") +
               " failed and " + std::to_string(skipped) +
               " dependent operation(s) were skipped since the last wait_for_all)";
    throw EngineError(message, first->slot->error, failed, skipped);
  }

  /// For the destructor: prints failures that no wait ever reported.
  void report_unobserved(const char* engine_name) {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t unobserved = 0;
    for (const Entry& entry : entries_) {
      if (entry.slot->delivered.load(std::memory_order_acquire)) continue;
      if (unobserved++ == 0) {
        std::fprintf(stderr, "weft: %s engine destroyed with unobserved errors; first: %s\n",
                     engine_name, describe_failure(entry.op_name, entry.slot->error).c_str());
      }
    }
    if (unobserved > 1) {
      std::fprintf(stderr, "weft: ... and %lld more failed operation(s)\n",
                   static_cast<long long>(unobserved - 1));
    }
    entries_.clear();
  }

  int64_t failed_total() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failed_total_;
  }
  int64_t skipped_total() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return skipped_total_;
  }

 private:
  struct Entry {
    std::shared_ptr<ErrorSlot> slot;
    std::string op_name;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  int64_t skipped_ = 0;
  int64_t failed_total_ = 0;
  int64_t skipped_total_ = 0;
};

}  // namespace weft::detail
