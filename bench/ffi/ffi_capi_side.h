// The C side of the ffi benchmark: pushes, worker holds and DLPack round trips made through
// include/weft/c_api.h only, so that the same code measures the static C ABI layer (weft_ffi_bench,
// beside native C++ pushes on the same engine) and libweft_c.so (weft_ffi_so_bench).
#pragma once

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "weft/c_api.h"

namespace weft::bench::ffi {

/// Which variables the N operations of a batch write.
enum class Pattern {
  kChain,        ///< every operation writes the same variable (each waits for the one before)
  kIndependent,  ///< operation i writes its own variable i (all ready at once)
};

/// "chain" or "independent".
const char* pattern_name(Pattern pattern);

/// Throws std::runtime_error with weft_last_error() when a C ABI call returned non-zero.
void check_rc(int rc, const char* what);

/// Batch sizes and repetitions of one run.
struct Sizes {
  int64_t ops;           ///< operations per push batch
  int64_t dlpack_trips;  ///< DLPack round trips per timed loop
  int reps;              ///< repetitions of every measurement (median reported)
};
inline constexpr Sizes kQuickSizes{int64_t{1} << 14, int64_t{1} << 12, 5};
inline constexpr Sizes kFullSizes{int64_t{1} << 18, int64_t{1} << 16, 15};

/// Keeps every CPU worker of the engine busy in a sleeping operation, so that a batch pushed
/// meanwhile only queues (its push is timed without workers running anything against it). The
/// blocking operations are pushed through the C ABI (the engine is the one the C ABI uses). Call
/// from one thread.
class WorkerGate {
 public:
  /// `workers`: the engine's CPU workers (every one must be held).
  explicit WorkerGate(int workers);
  ~WorkerGate();
  WorkerGate(const WorkerGate&) = delete;
  WorkerGate& operator=(const WorkerGate&) = delete;

  /// Pushes one sleeping operation per worker and waits until all of them run (at most 5 s;
  /// returns false when fewer started, i.e. the engine has fewer workers than said).
  bool hold();
  /// Lets the sleeping operations return.
  void release();

 private:
  struct State {
    std::atomic<int> started{0};
    std::atomic<bool> open{false};
  };
  static int block(const weft_run_context_t* ctx, void* user);

  int workers_;
  State state_;
  std::vector<weft_var_t> vars_;
};

/// One timed batch of pushes.
struct BatchTime {
  double push_ns = 0;   ///< the push loop alone
  double drain_ns = 0;  ///< from the end of the push loop until every operation completed
  double total_ns() const { return push_ns + drain_ns; }
};

/// Times `ops` calls of push(i), then wait_all(). With `gate`, the workers are held during the
/// push loop and released after it (the push figure is then the push call alone and the drain
/// figure the execution alone); without, they run operations while the loop pushes.
template <typename PushFn, typename WaitFn>
BatchTime time_batch(int64_t ops, WorkerGate* gate, PushFn&& push, WaitFn&& wait_all) {
  if (gate != nullptr && !gate->hold()) {
    throw std::runtime_error("could not hold every engine worker (fewer workers than assumed?)");
  }
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < ops; ++i) push(i);
  const Clock::time_point pushed = Clock::now();
  if (gate != nullptr) gate->release();
  wait_all();
  const Clock::time_point done = Clock::now();
  return BatchTime{elapsed_ns(start, pushed), elapsed_ns(pushed, done)};
}

/// Foreign operations pushed with weft_push_sync: an empty C function (returns 0), no user data,
/// no name, writing one variable (Pattern). Owns its variables. Call from one thread.
class CapiPusher {
 public:
  /// Creates the variables for batches of `ops` operations (weft_var_new).
  explicit CapiPusher(int64_t ops);
  ~CapiPusher();
  CapiPusher(const CapiPusher&) = delete;
  CapiPusher& operator=(const CapiPusher&) = delete;

  /// Pushes operation `i` of a batch of `pattern`.
  void push(Pattern pattern, int64_t i) {
    const weft_var_t* var = pattern == Pattern::kChain ? &chain_ : &independent_[i];
    const int rc = weft_push_sync(&noop, nullptr, nullptr, weft_device_t{1, 0}, nullptr, 0, var, 1,
                                  0, nullptr);
    if (rc != 0) check_rc(rc, "weft_push_sync");
  }
  /// weft_wait_all, checked.
  static void wait_all();

 private:
  static int noop(const weft_run_context_t* ctx, void* user);
  weft_var_t chain_{};
  std::vector<weft_var_t> independent_;
};

/// DLPack timings through the C ABI, ns per call sequence, on a small float32 array.
struct DlpackTimes {
  double roundtrip_ns = 0;            ///< to_dlpack + from_dlpack + array_free (runs the deleter)
  double roundtrip_versioned_ns = 0;  ///< the same with the versioned functions
  double export_ns = 0;               ///< to_dlpack + the tensor's deleter
  double import_ns = 0;               ///< from_dlpack of a foreign tensor + array_free
};

/// Times `trips` of each DLPack sequence once (call it once per repetition). Call from one thread.
DlpackTimes time_dlpack(int64_t trips);

/// "weft 0.1.0, C ABI 1".
std::string describe_library();

}  // namespace weft::bench::ffi
