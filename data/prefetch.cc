// Dataset::prefetch: a producer thread runs the pipeline ahead of the consumer into a bounded
// buffer, optionally copying each element to a device on the engine.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "data/dataset.h"
#include "data/stage_util.h"

namespace weft::data {

namespace {

using detail::DatasetNode;
using NodePtr = std::shared_ptr<const DatasetNode>;

class PrefetchNode final : public DatasetNode {
 public:
  PrefetchNode(NodePtr input, PrefetchOptions options)
      : input_(std::move(input)), options_(std::move(options)) {
    WEFT_CHECK(options_.buffer >= 1)
        << "prefetch(" << options_.buffer << "): the buffer must hold at least 1 element";
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override;
  std::string describe() const override {
    std::string what = "prefetch(" + std::to_string(options_.buffer);
    if (options_.device) what += ", " + to_string(*options_.device);
    return what + ") <- " + input_->describe();
  }
  int64_t cardinality() const override { return input_->cardinality(); }

  NodePtr input_;
  PrefetchOptions options_;
};

// Note [Prefetch producer]: the producer is a thread of its own, not an engine operation. It
// spends most of its time waiting (for map results that engine workers compute, or for room in
// the buffer); an engine operation that waits would hold one of the workers the map needs, and
// on a 2-core machine could stall the pipeline. The thread computes nothing heavy itself: sources
// read files, batch hands large copies to the engine, and device copies are engine operations.
class PrefetchIterator final : public Iterator {
 public:
  PrefetchIterator(const PrefetchNode& node, const IterContext& ctx)
      : node_(node), input_(node.input_->make_iterator(ctx)) {
    producer_ = std::thread([this] { run(); });
  }
  ~PrefetchIterator() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    producer_.join();  // returns once the producer's current next() returns
  }

  std::optional<Element> next() override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (queue_.empty() && !finished_) {
      const auto start = std::chrono::steady_clock::now();
      ready_.wait(lock, [&] { return !queue_.empty() || finished_; });
      wait_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
    }
    if (queue_.empty()) return std::nullopt;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    space_.notify_one();
    if (item.error) std::rethrow_exception(item.error);
    return std::move(item.element);
  }

  void collect_stats(IteratorStats& stats) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats.consumer_wait_ns += wait_ns_;
    stats.buffered += static_cast<int64_t>(queue_.size());
    // The input's counters as of the producer's last step (the input itself belongs to the
    // producer thread).
    stats.skipped_errors += input_stats_.skipped_errors;
    stats.consumer_wait_ns += input_stats_.consumer_wait_ns;
    stats.buffered += input_stats_.buffered;
  }

 private:
  struct Item {
    Element element;
    std::exception_ptr error;
  };

  // The producer thread's body: nothing may escape a thread, so a failure outside an element
  // (out of memory while queueing) ends the stream with that error.
  void run() {
    try {
      produce();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.clear();  // frees memory; the error is what the consumer needs now
      queue_.push_back(Item{Element{}, std::current_exception()});
      finished_ = true;
      ready_.notify_all();
    }
  }

  void produce() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_.wait(
            lock, [&] { return stop_ || static_cast<int>(queue_.size()) < node_.options_.buffer; });
        if (stop_) break;
      }
      Item item;
      bool end = false;
      try {
        std::optional<Element> e = input_->next();
        if (!e) {
          end = true;
        } else {
          item.element = std::move(*e);
          if (node_.options_.device && node_.options_.device->type != DeviceType::kCPU) {
            to_device(item.element);
          }
        }
      } catch (...) {
        item.error = std::current_exception();
      }
      IteratorStats input_stats;
      input_->collect_stats(input_stats);
      std::lock_guard<std::mutex> lock(mutex_);
      input_stats_ = input_stats;
      if (end) break;
      queue_.push_back(std::move(item));
      ready_.notify_one();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    ready_.notify_all();
  }

  // Copies on the engine (asynchronous: the arrays handed out are ordered after their copies
  // by their vars); the host arrays are released once the copies have read them.
  void to_device(Element& e) {
    const Device device = *node_.options_.device;
    try {
      for (NDArray& a : e.arrays) a = a.copy_to(device);
    } catch (...) {
      detail::rethrow_as_data_error("prefetch(" + to_string(device) + ")", e.index, e.origin);
    }
  }

  const PrefetchNode& node_;
  std::unique_ptr<Iterator> input_;  // used by the producer thread only
  mutable std::mutex mutex_;
  std::condition_variable ready_;  // an item was queued, or the producer finished
  std::condition_variable space_;  // an item was taken, or stop_
  std::deque<Item> queue_;
  bool finished_ = false;
  bool stop_ = false;
  int64_t wait_ns_ = 0;
  IteratorStats input_stats_;
  std::thread producer_;
};

std::unique_ptr<Iterator> PrefetchNode::make_iterator(const IterContext& ctx) const {
  return std::make_unique<PrefetchIterator>(*this, ctx);
}

}  // namespace

Dataset Dataset::prefetch(PrefetchOptions options) const {
  return Dataset(std::make_shared<PrefetchNode>(node_, std::move(options)));
}

}  // namespace weft::data
