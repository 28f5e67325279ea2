// Records failed operations for the waits and the engine's destructor (both engines), within a
// bound.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/var.h"

namespace weft::detail {

/// The failures of one engine. Thread-safe.
///
/// Note [Failure log bound]: the log must not grow with the number of failures on a path that
/// never calls wait_for_all (the imperative front end waits per array). It keeps:
/// - the first failure since the last wait_for_all (its exception and operation name) and the
///   counts of failed and skipped operations since then, for wait_for_all's EngineError: O(1);
/// - the failures no wait has delivered yet, at most `max_retained` of them, for
///   EngineStats::undelivered_errors and the destructor's report; beyond the bound they are only
///   counted. wait_for_var drops each error it rethrows (delivered once, at the wait of a variable
///   it is attached to); wait_for_all drops them all.
/// The error slots themselves live as long as a variable or a pending operation holds them.
class FailureLog {
 public:
  explicit FailureLog(int64_t max_retained = 1024)
      : max_retained_(static_cast<size_t>(std::max<int64_t>(max_retained, 0))) {}

  /// Records an operation's own failure; returns the slot to attach to the vars it writes.
  std::shared_ptr<ErrorSlot> record_failure(std::exception_ptr error, const OpName& name) {
    return record(std::move(error), name.str(), "failed");
  }

  /// Records a broken completion contract (a second on_complete, an exception after it): a
  /// failure attached to no variable, reported by wait_for_all and the destructor. `what_happened`
  /// completes "operation 'NAME' ..." in the report.
  void record_violation(std::exception_ptr error, const std::string& op_name,
                        std::string what_happened) {
    record(std::move(error), op_name, std::move(what_happened));
  }

  void record_skip() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++skipped_;
    ++skipped_total_;
  }

  /// A wait rethrew `slot`'s error: it is delivered, and no longer retained.
  void delivered(const std::shared_ptr<ErrorSlot>& slot) {
    // acq_rel: only the first delivery of a slot updates the log.
    if (slot->delivered.exchange(true, std::memory_order_acq_rel)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (slot->cleared()) return;  // wait_for_all already dropped it
    if (!slot->retained) {
      if (unretained_ > 0) --unretained_;
      return;
    }
    auto it = std::find_if(retained_.begin(), retained_.end(),
                           [&](const Entry& e) { return e.slot == slot; });
    if (it != retained_.end()) retained_.erase(it);
  }

  /// For wait_for_all: throws EngineError for the first failure since the last wait_for_all
  /// (also when wait_for_var already rethrew it), then clears every error: each slot recorded so
  /// far counts as cleared (ErrorSlot::cleared), so variables holding it are clean.
  void throw_and_clear() {
    std::exception_ptr first;
    std::string first_description;
    int64_t failed = 0;
    int64_t skipped = 0;
    std::vector<Entry> dropped;  // destroyed outside the lock
    {
      std::lock_guard<std::mutex> lock(mutex_);
      first = std::move(first_error_);
      first_description = std::move(first_description_);
      first_error_ = nullptr;
      first_description_.clear();
      failed = failed_;
      skipped = skipped_;
      failed_ = skipped_ = 0;
      dropped.swap(retained_);
      unretained_ = 0;
      // release: an op that later finds one of these slots on a var sees it cleared (acquire in
      // ErrorSlot::cleared). Under the mutex, so a failure is either reported here or after.
      clears_.fetch_add(1, std::memory_order_release);
    }
    if (failed == 0) return;
    std::string message = first_description;
    message += " (" + std::to_string(failed) + " operation" + (failed == 1 ? "" : "s") +
               " failed and " + std::to_string(skipped) +
               " dependent operation(s) were skipped since the last wait_for_all)";
    throw EngineError(message, first, failed, skipped);
  }

  /// For the destructor: prints failures that no wait ever reported.
  void report_unobserved(const char* engine_name) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t unobserved = static_cast<int64_t>(retained_.size()) + unretained_;
    if (unobserved == 0) return;
    std::string first = retained_.empty()
                            ? std::string("(not retained: over the failure log's bound)")
                            : describe(retained_.front());
    std::fprintf(stderr, "weft: %s engine destroyed with unobserved errors; first: %s\n",
                 engine_name, first.c_str());
    if (unobserved > 1) {
      std::fprintf(stderr, "weft: ... and %lld more failed operation(s)\n",
                   static_cast<long long>(unobserved - 1));
    }
    retained_.clear();
    unretained_ = 0;
  }

  int64_t failed_total() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failed_total_;
  }
  int64_t skipped_total() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return skipped_total_;
  }
  /// Failures not yet delivered by a wait (retained or only counted).
  int64_t undelivered() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(retained_.size()) + unretained_;
  }
  /// Fills the failure counts of an engine's stats (failed, skipped, undelivered).
  void fill_stats(EngineStats& stats) const {
    stats.failed_ops = failed_total();
    stats.skipped_ops = skipped_total();
    stats.undelivered_errors = undelivered();
  }
  /// Failures kept with their exception (at most the bound).
  size_t retained() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return retained_.size();
  }

 private:
  struct Entry {
    std::shared_ptr<ErrorSlot> slot;
    std::string op_name;
    std::string what_happened;
  };

  static std::string describe(const Entry& entry) {
    return describe_failure(entry.op_name, entry.slot->error, entry.what_happened);
  }

  std::shared_ptr<ErrorSlot> record(std::exception_ptr error, std::string op_name,
                                    std::string what_happened) {
    auto slot = std::make_shared<ErrorSlot>();
    slot->error = std::move(error);
    slot->clears = &clears_;
    Entry entry{slot, std::move(op_name), std::move(what_happened)};
    std::lock_guard<std::mutex> lock(mutex_);
    slot->epoch = clears_.load(std::memory_order_relaxed);  // relaxed: written under mutex_
    ++failed_total_;
    if (failed_++ == 0) {
      first_error_ = slot->error;
      first_description_ = describe(entry);
    }
    if (retained_.size() < max_retained_) {
      slot->retained = true;
      retained_.push_back(std::move(entry));
    } else {
      ++unretained_;
    }
    return slot;
  }

  const size_t max_retained_;
  mutable std::mutex mutex_;
  std::atomic<uint64_t> clears_{0};  // wait_for_all calls so far; incremented under mutex_
  // Since the last wait_for_all.
  std::exception_ptr first_error_;
  std::string first_description_;
  int64_t failed_ = 0;
  int64_t skipped_ = 0;
  // Undelivered (Note [Failure log bound]).
  std::vector<Entry> retained_;
  int64_t unretained_ = 0;
  // Since creation.
  int64_t failed_total_ = 0;
  int64_t skipped_total_ = 0;
};

}  // namespace weft::detail
