// Dynamic batching: requests for one model wait in a bounded queue; one thread gathers them into
// an executor run of up to `max_batch` rows, waiting at most `max_delay_ms` after the first, runs
// it on the executor bound for the smallest allowed batch size that holds them (padded), and
// splits the outputs back, row for row, to each request's callback.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/codec.h"
#include "serve/model.h"

namespace weft::graph {
class Executor;
}

namespace weft::serve {

class Metrics;

/// What a request's callback receives.
struct InferReply {
  int status = 200;   ///< 200, or 400 (inputs no longer fit a reloaded model), 500 (the run failed)
  std::string error;  ///< the message when status != 200
  std::shared_ptr<const Model> model;  ///< the version that ran (or would have)
  std::vector<HostTensor> outputs;     ///< one per head, with the request's rows
  double queue_seconds = 0;            ///< arrival to the start of its batch
};

struct InferRequest {
  /// One per model input, in config order, each with the same number of rows (validate_inputs).
  std::vector<HostTensor> inputs;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
  /// Answers the request, on the batcher's thread (keep it short: post elsewhere). Called once
  /// with the reply; only when that call throws, once more with a 500 whose message is a fixed
  /// ASCII text made before the first call (kAnswerFailed), so that a reply whose rendering
  /// throws still gets an answer (Note [One answer per request] in batcher.cc).
  std::function<void(InferReply&&)> done;
  int64_t rows() const { return inputs.empty() ? 0 : inputs[0].rows(); }
};

/// The message of the 500 a request gets when rendering its reply threw.
inline constexpr const char* kAnswerFailed =
    "the answer could not be written (an internal error; see the server log)";

/// Checks named request tensors against the model's inputs and orders them: every input present,
/// no unknown name, shapes equal to the config's apart from the batch, the same rows everywhere,
/// 1 <= rows <= max_batch. Throws ValueError naming the input, expected and actual shape.
std::vector<HostTensor> validate_inputs(const Model& model,
                                        std::vector<std::pair<std::string, HostTensor>> named);

enum class Admit { kQueued, kQueueFull, kStopped };

/// The executors of one model version: one per batch size of config.batch_sizes, kept while the
/// version serves, and up to config.extra_executors more for other row counts (a model that runs
/// requests alone binds one per distinct row count), least recently used dropped first (Note
/// [Bounded executor set] in batcher.cc). Built, and with config.warmup run once each, by
/// whoever makes it (the loader thread on a reload, so the old version serves meanwhile); used
/// by one batcher thread afterwards. bound() may be read from any thread.
class ExecutorSet {
 public:
  explicit ExecutorSet(std::shared_ptr<const Model> model);
  ~ExecutorSet();
  const std::shared_ptr<const Model>& model() const { return model_; }
  /// The executor for `size` rows (bound now if it was not). The reference stays valid until
  /// the next call of at(). Call from the batcher's thread.
  graph::Executor& at(int64_t size);
  /// Requests are combined: Model::batchable, until a run showed an output that is not
  /// batch-first (run_alone()). Call from the batcher's thread.
  bool batchable() const { return batchable_; }
  /// From now on each request runs alone, at its own row count. Call from the batcher's thread.
  void run_alone() { batchable_ = false; }
  /// The batch size a run of `rows` rows uses (Model::run_size while batchable(), else `rows`).
  int64_t run_size(int64_t rows) const;
  /// Executors bound now. Thread-safe.
  size_t bound() const { return bound_.load(std::memory_order_relaxed); }
  /// The most executors ever bound at once: batch sizes plus config.extra_executors.
  size_t capacity() const;

 private:
  struct Slot {
    int64_t size;
    std::unique_ptr<graph::Executor> exec;
    uint64_t last_use;
    bool kept;  // one of config.batch_sizes: never dropped
  };
  std::shared_ptr<const Model> model_;
  bool batchable_;
  std::vector<Slot> executors_;
  uint64_t uses_ = 0;
  // Relaxed: a count for tests and metrics, ordered with nothing else.
  std::atomic<size_t> bound_{0};
};

class Batcher {
 public:
  /// `batching` false: every request runs alone (one executor run per request).
  Batcher(std::shared_ptr<const Model> model, bool batching, Metrics* metrics);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  std::shared_ptr<const Model> model() const;
  /// Serves `model` from the next batch on (a reload). Its executors are bound (and warmed up)
  /// here, on the caller's thread, before the switch.
  void set_model(std::shared_ptr<const Model> model);
  /// Queues `request` unless the queue holds queue_capacity requests or the batcher stopped.
  Admit submit(InferRequest&& request);
  /// Stops taking requests, runs every queued one (without waiting for delays), joins. Idempotent.
  void stop();
  int64_t depth() const;
  /// Executors the serving version holds now (ExecutorSet::bound()). Thread-safe.
  size_t executors_bound() const;

 private:
  void loop();
  void run(std::vector<InferRequest>& batch, ExecutorSet& executors);

  const bool batching_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<InferRequest> queue_;
  std::shared_ptr<ExecutorSet> executors_;  // the version serving; its executors are the thread's
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace weft::serve
