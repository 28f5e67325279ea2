// Process-wide trace recorder: operator slices, dependency flows and counters, written as Chrome
// trace JSON (opens in Perfetto and chrome://tracing).
//
// Note [Profiler placement]: DESIGN.md lists the profiler under engine/. It lives in base/ because
// memory/ (below engine/) must emit allocator counter events into the same trace, and a layer may
// only use the layers below it. The engine records its operations here.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

/// One executed operation. Times are nanoseconds on Profiler::now_ns()'s clock.
struct OpTraceRecord {
  uint64_t id = 0;        ///< unique per recorded operation (Profiler::next_op_id)
  std::string name;       ///< operation name
  std::string device;     ///< e.g. "cpu:0"
  int lane = 0;           ///< trace lane (thread) that ran it
  int64_t queued_ns = 0;  ///< when it was pushed
  int64_t ready_ns = 0;   ///< when its last dependency was released
  int64_t start_ns = 0;   ///< when its function started
  int64_t end_ns = 0;     ///< when it completed
  bool skipped = false;   ///< it did not run because an input carried an error
  bool failed = false;    ///< its function threw
};

/// Records trace events from any thread and writes them as Chrome trace JSON.
///
/// Thread safety: every method is thread-safe. Recording appends to a per-thread buffer (one
/// uncontended lock), so recording threads do not serialise on each other. Recording costs
/// nothing but one relaxed load when the profiler is disabled.
///
/// Bound: at most max_events() events (operation slices, flows and counter samples together)
/// are kept between clear() calls; later ones are dropped and counted (dropped_events(), and
/// "otherData" of the trace). Note [Profiler event budget].
class Profiler {
 public:
  /// The default of max_events(): about 150 MB of records at most.
  static constexpr int64_t kDefaultMaxEvents = 1'000'000;

  /// The process-wide profiler.
  static Profiler& global();

  /// Nanoseconds since the profiler's epoch (a steady clock).
  static int64_t now_ns();

  /// Starts recording. Thread-safe.
  void start();
  /// Stops recording; recorded events are kept until clear(). Thread-safe.
  void stop();
  /// Whether recording is on. Thread-safe; relaxed: a record racing with start/stop may be kept
  /// or dropped, which is all a profiler needs.
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// Drops every recorded event and resets the dropped count. Thread-safe.
  void clear();

  /// Sets the most events kept (>= 1; smaller values count as 1); applies to events recorded
  /// from now on, keeping those already recorded. Thread-safe.
  void set_max_events(int64_t max_events);
  int64_t max_events() const { return max_events_.load(std::memory_order_relaxed); }
  /// Events not recorded because the bound was reached, since the last clear(). Thread-safe.
  int64_t dropped_events() const;
  /// Events currently recorded (slices, flows and counter samples). Thread-safe.
  size_t event_count() const;

  /// A fresh operation id, unique within the process. Thread-safe.
  uint64_t next_op_id() { return next_id_.fetch_add(1, std::memory_order_relaxed) + 1; }

  /// Names the calling thread's lane (e.g. "cpu worker 0") and returns its lane id.
  int set_thread_lane(std::string name);
  /// The calling thread's lane id; threads that never named theirs get "thread N".
  int thread_lane();

  /// Records an operation slice.
  void record_op(OpTraceRecord record);
  /// Records that completing operation `from_id` released operation `to_id`.
  void record_flow(uint64_t from_id, uint64_t to_id);
  /// Records a counter sample on the track `track` (e.g. allocator bytes in use).
  void record_counter(std::string_view track, double value);

  /// Number of operation slices currently recorded.
  size_t op_count() const;

  /// The whole trace as Chrome trace JSON ("traceEvents" array): one lane per thread with its
  /// name, an "X" slice per operation, "s"/"f" flow arrows from an operation to those it
  /// released, and "C" counter events.
  std::string chrome_trace_json() const;
  /// Writes chrome_trace_json() to `path`; throws weft::Error naming the path on failure.
  void write_chrome_trace(const std::string& path) const;

 private:
  struct Buffer;
  Profiler();
  Buffer& local_buffer();
  bool admit(Buffer& buffer);  // requires buffer.mutex

  std::atomic<bool> enabled_{false};
  std::atomic<int64_t> max_events_{kDefaultMaxEvents};
  std::atomic<int64_t> reserved_{0};  // events handed to buffers' quotas since clear()
  std::atomic<uint64_t> next_id_{0};
  mutable std::mutex mutex_;  // guards buffers_ and lane_names_
  std::vector<std::shared_ptr<Buffer>> buffers_;
  std::vector<std::string> lane_names_;
};

}  // namespace weft
