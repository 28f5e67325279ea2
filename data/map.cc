// Dataset::map: the function runs on the engine's CPU workers (or the map's own threads), up
// to num_parallel elements at once, returned in input order or as they finish.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "data/dataset.h"
#include "data/stage_util.h"
#include "ndarray/runtime.h"

namespace weft::data {

namespace {

using detail::DatasetNode;
using NodePtr = std::shared_ptr<const DatasetNode>;

// One element in flight: its input, then its result or error. `done` is written under the
// shared state's mutex.
struct Slot {
  Element element;
  uint64_t sequence = 0;  // position in the map's input order: the element's Rng stream
  std::exception_ptr error;
  bool input_error = false;  // the error came from the map's input: passed on unchanged
  bool done = false;
};

// What the workers share with the iterator: outlives the iterator while work is in flight.
struct MapShared {
  std::mutex mutex;
  std::condition_variable finished;
  int in_flight = 0;
};

// A fixed set of threads for MapExecutor::kThreadPool. Tasks run in FIFO order.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    try {
      for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
    } catch (...) {  // out of threads: stop those started, then report
      stop();
      throw;
    }
  }
  ~ThreadPool() { stop(); }
  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class MapNode final : public DatasetNode {
 public:
  MapNode(NodePtr input, MapFn fn, MapOptions options)
      : input_(std::move(input)),
        fn_(std::make_shared<const MapFn>(std::move(fn))),
        options_(std::move(options)) {
    WEFT_CHECK(*fn_ != nullptr) << "map(" << options_.name << "): no function";
    WEFT_CHECK(options_.num_parallel >= 1)
        << "map(" << options_.name << "): num_parallel must be >= 1, not " << options_.num_parallel;
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override;
  std::string describe() const override {
    return "map(" + options_.name + ", " + std::to_string(options_.num_parallel) + ") <- " +
           input_->describe();
  }
  int64_t cardinality() const override { return input_->cardinality(); }

  NodePtr input_;
  std::shared_ptr<const MapFn> fn_;
  MapOptions options_;
  mutable std::atomic<uint64_t> passes_{0};
};

class MapIterator final : public Iterator {
 public:
  MapIterator(const MapNode& node, const IterContext& ctx)
      : node_(node),
        stage_("map(" + node.options_.name + ")"),
        input_(node.input_->make_iterator(ctx)),
        shared_(std::make_shared<MapShared>()) {
    const uint64_t base = node.options_.seed ? *node.options_.seed : detail::random_seed_from_os();
    // Each pass (an iterate(), a pass of repeat()) draws new random numbers: pass k uses
    // (seed, k), so augmentations differ per epoch and a seeded program repeats them.
    seed_ = mix_seed(mix_seed(base, static_cast<uint64_t>(ctx.epoch)), node.passes_.fetch_add(1));
    if (node.options_.executor == MapExecutor::kThreadPool) {
      pool_ = std::make_unique<ThreadPool>(node.options_.num_parallel);
    }
  }
  // Waits for the elements in flight: their functions may use what the caller owns.
  ~MapIterator() override {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    shared_->finished.wait(lock, [&] { return shared_->in_flight == 0; });
  }

  std::optional<Element> next() override {
    fill();
    if (window_.empty()) return std::nullopt;
    std::shared_ptr<Slot> slot;
    {
      std::unique_lock<std::mutex> lock(shared_->mutex);
      if (node_.options_.deterministic) {
        shared_->finished.wait(lock, [&] { return window_.front()->done; });
        slot = std::move(window_.front());
        window_.pop_front();
      } else {
        auto it = window_.end();
        shared_->finished.wait(lock, [&] {
          for (it = window_.begin(); it != window_.end(); ++it) {
            if ((*it)->done) return true;
          }
          return false;
        });
        slot = std::move(*it);
        window_.erase(it);
      }
    }
    if (slot->error) {
      if (slot->input_error) std::rethrow_exception(slot->error);
      detail::rethrow_stored(slot->error, stage_, slot->element.index, slot->element.origin);
    }
    return std::move(slot->element);
  }

  void collect_stats(IteratorStats& stats) const override { input_->collect_stats(stats); }

 private:
  // Starts work until num_parallel elements are in flight or the input ends. An input error is
  // queued in order, as a finished slot carrying it.
  void fill() {
    while (!input_done_ && static_cast<int>(window_.size()) < node_.options_.num_parallel) {
      auto slot = std::make_shared<Slot>();
      slot->sequence = sequence_++;
      try {
        std::optional<Element> e = input_->next();
        if (!e) {
          input_done_ = true;
          return;
        }
        slot->element = std::move(*e);
        detail::check_host_arrays(slot->element, stage_);
      } catch (...) {
        slot->error = std::current_exception();
        slot->input_error = true;
        slot->done = true;
        window_.push_back(std::move(slot));
        continue;
      }
      window_.push_back(slot);
      launch(std::move(slot));
    }
  }

  void launch(std::shared_ptr<Slot> slot) {
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      ++shared_->in_flight;
    }
    auto run = [shared = shared_, fn = node_.fn_, seed = seed_, slot]() {
      // Exceptions are kept with the slot, never given to the engine: they belong to one
      // element, not to any variable.
      try {
        Rng rng(seed, slot->sequence);
        std::vector<NDArray> out = (*fn)(std::move(slot->element.arrays), rng);
        slot->element.arrays = std::move(out);
      } catch (...) {
        slot->error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        slot->done = true;
        --shared->in_flight;
      }
      shared->finished.notify_all();
    };
    try {
      if (pool_) {
        pool_->submit(std::move(run));
        return;
      }
      // Note [Map on the engine]: the operation names no variables (an element's arrays are
      // owned by this stage alone until they are handed out), so it is ready at once and the
      // engine runs it on a CPU worker beside the model's own operations, within the same thread
      // budget.
      Runtime::get().engine().push_sync([run = std::move(run)](const RunContext&) { run(); },
                                        Device::cpu(), {}, {}, FnProperty::kNormal, 0, "data.map");
    } catch (...) {
      // Not started (no runtime, out of memory): the element fails in its place, in order.
      std::lock_guard<std::mutex> lock(shared_->mutex);
      slot->error = std::current_exception();
      slot->done = true;
      --shared_->in_flight;
    }
  }

  const MapNode& node_;
  std::string stage_;
  std::unique_ptr<Iterator> input_;
  std::shared_ptr<MapShared> shared_;
  std::unique_ptr<ThreadPool> pool_;
  std::deque<std::shared_ptr<Slot>> window_;  // in input order
  uint64_t seed_ = 0;
  uint64_t sequence_ = 0;
  bool input_done_ = false;
};

std::unique_ptr<Iterator> MapNode::make_iterator(const IterContext& ctx) const {
  return std::make_unique<MapIterator>(*this, ctx);
}

}  // namespace

Dataset Dataset::map(MapFn fn, MapOptions options) const {
  return Dataset(std::make_shared<MapNode>(node_, std::move(fn), std::move(options)));
}

}  // namespace weft::data
