// A bound executor's inference forward as one engine operation that runs the nodes over the
// stream plan's streams, captured into a CUDA graph on its second run and replayed with one
// launch after that (Note [CUDA graph capture] in graph_capture.cc). Private to the executor.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "engine/engine.h"
#include "graph/executor_run.h"
#include "graph/streams.h"

namespace weft::graph::executor_detail {

class CaptureScratch;

/// Advances a pass's seed word on the device, on `rc.stream`: word = seed_word::next(word)
/// (the executor runs `_random_seed_next`'s kernel; Note [Random numbers in captured graphs]).
using SeedAdvance = std::function<void(uint64_t* word, const RunContext& rc)>;

class GraphCapture {
 public:
  enum class State {
    kWarmUp,    ///< the next run is eager, and measures each node's scratch memory
    kCapture,   ///< the next run captures the graph, then launches it
    kCaptured,  ///< runs launch the captured graph
    kEager,     ///< capture failed (failure() says why): runs stay eager, in one operation
  };

  /// `runs`: the forward's node operations in order (kept by the executor, which outlives this);
  /// `plan`: their stream plan (null: one stream), indexed by NodeRun::nid. `pool`: the device's
  /// allocator, for scratch memory. `is_train`: the mode the runs run in. `advance`: required
  /// when some run has a random resource (every such op must take a device seed). Creates the
  /// plan's extra streams and the events, and the seed word.
  GraphCapture(Device device, std::span<NodeRun> runs, const StreamPlan* plan,
               std::shared_ptr<Allocator> pool, bool is_train = false, SeedAdvance advance = {});
  ~GraphCapture();
  GraphCapture(const GraphCapture&) = delete;
  GraphCapture& operator=(const GraphCapture&) = delete;

  /// The engine operation's body (on a GPU worker; `rc.stream` is its stream): one pass over
  /// the runs (in training mode when is_train()). Throws what a kernel throws in an eager run.
  void run(Engine& engine, const RunContext& rc);

  State state() const { return state_.load(std::memory_order_relaxed); }
  bool is_train() const { return is_train_; }
  /// Why capture failed (empty unless state() is kEager).
  std::string failure() const;
  /// Launches of the captured graph so far.
  int64_t launches() const { return launches_.load(std::memory_order_relaxed); }
  /// Runs that draw random numbers from the pass's seed word, and the word (device memory; null
  /// when there are none). For tests.
  size_t random_runs() const { return random_runs_.size(); }
  const uint64_t* seed_word() const { return static_cast<const uint64_t*>(seed_word_.get()); }

 private:
  enum class Mode { kEager, kMeasure, kCapture };
  void run_nodes(Engine& engine, const RunContext& rc, Mode mode);
  void load_seed(const Stream& stream);

  Device device_;
  DeviceAPI* api_ = nullptr;
  std::span<NodeRun> runs_;
  const StreamPlan* plan_ = nullptr;
  std::shared_ptr<Allocator> pool_;  // kept alive: the executor may outlive its runtime
  int num_streams_ = 1;
  bool is_train_ = false;
  std::vector<Stream> streams_;       // plan streams 0..k-1, the capture's own
  std::vector<Event> after_;          // per run: recorded after it when another stream waits
  std::vector<int32_t> event_index_;  // per node id: index into after_, -1 when not needed
  Event fork_;                        // stream 0 to the others
  std::vector<Event> join_;           // the others back to stream 0
  Event entry_, exit_;                // the worker's stream to stream 0 and back, in eager runs
  Event done_;                        // recorded on the worker's stream after every run
  std::unique_ptr<CaptureScratch> scratch_;
  // Note [Random numbers in captured graphs]
  SeedAdvance advance_;
  std::vector<size_t> random_runs_;  // indices into runs_ of the nodes with a random resource
  DataPtr seed_word_;                // one uint64_t on the device
  uint64_t seed_init_ = 0;           // the word's start, copied from here (load_seed)
  uint64_t reseeds_seen_ = 0;        // the generator's reseeds when seed_init_ was drawn
  bool seeded_ = false;              // seed_init_ drawn and its copy enqueued
  std::vector<size_t> need_;         // per plan stream: the most scratch one node there used
  void* graph_ = nullptr;
  // Written by the worker running the pass, read by the executor's accessors.
  std::atomic<State> state_{State::kWarmUp};
  mutable std::mutex failure_mutex_;
  std::string failure_;  // guarded by failure_mutex_
  std::atomic<int64_t> launches_{0};
};

}  // namespace weft::graph::executor_detail
