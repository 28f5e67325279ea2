// The ready queue and the CPU worker pool.
#include <algorithm>

#include "base/profiler.h"
#include "engine/worker_pool.h"

namespace weft::detail {

namespace {
thread_local const WorkerPool* t_current_pool = nullptr;

bool heap_less(const auto& a, const auto& b) {
  // Max-heap on priority; among equal priorities the earlier sequence comes first.
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.sequence > b.sequence;
}
}  // namespace

void ReadyQueue::push(OprBlock* op) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (op->priority == 0) {
      op->next_ready = nullptr;
      if (fifo_tail_ != nullptr) {
        fifo_tail_->next_ready = op;
      } else {
        fifo_head_ = op;
      }
      fifo_tail_ = op;
    } else {
      heap_.push_back({op->priority, sequence_++, op});
      std::push_heap(heap_.begin(), heap_.end(), [](auto& a, auto& b) { return heap_less(a, b); });
    }
    // relaxed: a hint only; the queue itself is read under the mutex.
    size_.fetch_add(1, std::memory_order_relaxed);
    // seq_cst load: ordered after the append by the mutex; a spinner that stops spinning either
    // is counted here or takes the lock after us and sees the operation (Note [Spinning and
    // wake-ups]).
    wake = sleepers_ > 0 && spinning_.load() == 0;
  }
  if (wake) wake_.notify_one();
}

bool ReadyQueue::take(OprBlock** out) {
  auto pop_heap = [&] {
    std::pop_heap(heap_.begin(), heap_.end(), [](auto& a, auto& b) { return heap_less(a, b); });
    *out = heap_.back().op;
    heap_.pop_back();
  };
  if (!heap_.empty() && heap_.front().priority > 0) {
    pop_heap();
  } else if (fifo_head_ != nullptr) {
    *out = fifo_head_;
    fifo_head_ = fifo_head_->next_ready;
    if (fifo_head_ == nullptr) fifo_tail_ = nullptr;
  } else if (!heap_.empty()) {
    pop_heap();
  } else {
    return false;
  }
  size_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

OprBlock* ReadyQueue::take_and_propagate() {
  std::unique_lock<std::mutex> lock(mutex_);
  OprBlock* op = nullptr;
  if (!take(&op)) return nullptr;
  // Work left and nobody spinning: pass the baton to a sleeper.
  bool wake = size_.load(std::memory_order_relaxed) > 0 && sleepers_ > 0 && spinning_.load() == 0;
  lock.unlock();
  if (wake) wake_.notify_one();
  return op;
}

OprBlock* ReadyQueue::pop() {
  if (size_.load(std::memory_order_relaxed) > 0) {
    if (OprBlock* op = take_and_propagate()) return op;
  }
  // Spin before sleeping: new work usually arrives within microseconds, and a futex sleep and
  // wake-up cost more than that.
  spinning_.fetch_add(1);
  for (int spin = 0; spin < kSpinRounds; ++spin) {
    if (size_.load(std::memory_order_relaxed) > 0) {
      spinning_.fetch_sub(1);  // before taking: a push after this wakes a sleeper if needed
      if (OprBlock* op = take_and_propagate()) return op;
      spinning_.fetch_add(1);
    }
    if (spin < kPauseRounds) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
  spinning_.fetch_sub(1);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    OprBlock* op;
    if (take(&op)) {
      bool wake = size_.load(std::memory_order_relaxed) > 0 && sleepers_ > 0 && spinning_.load() == 0;
      lock.unlock();
      if (wake) wake_.notify_one();
      return op;
    }
    if (stopping_) return nullptr;
    ++sleepers_;
    wake_.wait(lock);
    --sleepers_;
  }
}

void ReadyQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
}

CpuWorkerPool::CpuWorkerPool(OperationRunner* runner, int num_threads, std::string lane_prefix)
    : runner_(runner), lane_prefix_(std::move(lane_prefix)) {
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this, i] { worker_main(i); });
}

CpuWorkerPool::~CpuWorkerPool() { shutdown(); }

void CpuWorkerPool::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  queue_.shutdown();
  for (auto& thread : threads_) thread.join();
}

bool CpuWorkerPool::is_current_thread_worker() const { return t_current_pool == this; }

void CpuWorkerPool::worker_main(int index) {
  t_current_pool = this;
  Profiler::global().set_thread_lane(lane_prefix_ + " " + std::to_string(index));
  RunContext context{Device::cpu(), Stream{Device::cpu(), nullptr}, index};
  while (OprBlock* op = queue_.pop()) {
    context.device = op->device;
    context.stream.device = op->device;
    runner_->run(op, context);
  }
  t_current_pool = nullptr;
}

}  // namespace weft::detail
