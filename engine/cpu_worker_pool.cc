// The ready queue and the CPU worker pool.
#include <algorithm>
#include <chrono>

#include "base/profiler.h"
#include "engine/backoff.h"
#include "engine/cpu_budget.h"
#include "engine/worker_pool.h"

namespace weft::detail {

namespace {
thread_local const WorkerPool* t_current_pool = nullptr;
thread_local int t_worker_index = -1;

bool heap_less(const auto& a, const auto& b) {
  // Max-heap on priority; among equal priorities the earlier sequence comes first.
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.sequence > b.sequence;
}
}  // namespace

ReadyQueue::ReadyQueue(int budget) : budget_(budget), stub_(std::make_unique<OprBlock>()) {
  tail_.store(stub_.get(), std::memory_order_relaxed);
  head_.store(stub_.get(), std::memory_order_relaxed);
}

OprBlock* ReadyQueue::exchange_tail(OprBlock* node) {
  node->next_ready.store(nullptr, std::memory_order_relaxed);
  // seq_cst: pairs with the sleeper's seq_cst increment of sleepers_ and its load of tail_
  // (Note [Spinning and wake-ups]).
  return tail_.exchange(node, std::memory_order_seq_cst);
}

void ReadyQueue::link(OprBlock* previous, OprBlock* node) {
  // release: the consumer that reads this link sees the operation's contents.
  previous->next_ready.store(node, std::memory_order_release);
}

void ReadyQueue::push_node(OprBlock* node) { link(exchange_tail(node), node); }

bool ReadyQueue::has_work() const {
  // Empty means: the consumer position is the stub, nothing is linked behind it, and no push has
  // moved tail_ off it. A pushed operation moves tail_ at once (seq_cst). The consumer position
  // covers the case where the consumer put the stub back behind operations whose links are still
  // being written (tail_ is the stub again although operations are queued).
  OprBlock* stub = stub_.get();
  return head_.load(std::memory_order_seq_cst) != stub ||
         tail_.load(std::memory_order_seq_cst) != stub ||
         stub->next_ready.load(std::memory_order_acquire) != nullptr ||
         heap_size_.load(std::memory_order_seq_cst) > 0;
}

void ReadyQueue::wake_one() {
  std::lock_guard<std::mutex> lock(sleep_mutex_);
  wake_.notify_one();
}

void ReadyQueue::push(OprBlock* op) {
  if (op->priority == 0) {
    push_node(op);
  } else {
    std::lock_guard<std::mutex> lock(heap_mutex_);
    heap_.push_back({op->priority, sequence_++, op});
    std::push_heap(heap_.begin(), heap_.end(), [](auto& a, auto& b) { return heap_less(a, b); });
    heap_size_.fetch_add(1, std::memory_order_seq_cst);
  }
  if (sleepers_.load(std::memory_order_seq_cst) > 0 &&
      spinning_.load(std::memory_order_seq_cst) == 0) {
    wake_one();
  }
}

// Vyukov's pop, for one consumer at a time. Returns null when empty or when a producer is
// between its exchange and its link (the caller retries).
OprBlock* ReadyQueue::try_pop_fifo() {
  OprBlock* stub = stub_.get();
  OprBlock* head = head_.load(std::memory_order_relaxed);
  OprBlock* next = head->next_ready.load(std::memory_order_acquire);
  if (head == stub) {
    if (next == nullptr) return nullptr;
    head_.store(next, std::memory_order_seq_cst);
    head = next;
    next = next->next_ready.load(std::memory_order_acquire);
  }
  if (next != nullptr) {
    head_.store(next, std::memory_order_seq_cst);
    return head;
  }
  if (head != tail_.load(std::memory_order_acquire)) return nullptr;
  push_node(stub);  // head is the last element: put the stub behind it, then take head
  next = head->next_ready.load(std::memory_order_acquire);
  if (next != nullptr) {
    head_.store(next, std::memory_order_seq_cst);
    return head;
  }
  return nullptr;
}

OprBlock* ReadyQueue::try_take() {
  auto take_heap = [&](bool positive_only) -> OprBlock* {
    if (heap_size_.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(heap_mutex_);
    if (heap_.empty() || (positive_only && heap_.front().priority <= 0)) return nullptr;
    std::pop_heap(heap_.begin(), heap_.end(), [](auto& a, auto& b) { return heap_less(a, b); });
    OprBlock* op = heap_.back().op;
    heap_.pop_back();
    heap_size_.fetch_sub(1, std::memory_order_seq_cst);
    return op;
  };
  if (OprBlock* op = take_heap(true)) return op;
  {
    std::lock_guard<detail::SpinLock> lock(consumer_lock_);
    if (OprBlock* op = try_pop_fifo()) return op;
  }
  return take_heap(false);
}

OprBlock* ReadyQueue::pop(const std::function<void(bool)>& on_idle) {
  Backoff backoff;  // Note [Link in flight]
  for (;;) {
    if (OprBlock* op = try_take()) {
      if (sleepers_.load(std::memory_order_seq_cst) > 0 &&
          spinning_.load(std::memory_order_seq_cst) == 0 && has_work()) {
        wake_one();  // more queued and nobody spinning: pass it on
      }
      return op;
    }
    if (has_work()) {
      // Queued but nothing could be taken: a producer is between its two stores (or a push
      // landed just now). Back off rather than retry at once.
      if (backoff.giving_way()) {
        stalled_waits_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics only
        if (backoff.gave_way() % 8 == 0) on_idle(false);
      }
      backoff.pause();
      continue;
    }
    backoff.reset();
    if (spin_for_work(on_idle)) continue;
    on_idle(true);
    std::unique_lock<std::mutex> lock(sleep_mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    while (!has_work() && !stopping_.load(std::memory_order_acquire)) wake_.wait(lock);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    if (!has_work() && stopping_.load(std::memory_order_acquire)) return nullptr;
  }
}

bool ReadyQueue::spin_for_work(const std::function<void(bool)>& on_idle) {
  // Note [Spinning and wake-ups]: new work usually arrives within microseconds, and a futex
  // sleep and wake-up cost more than that, so a worker spins (pause instructions only: it
  // never yields, which would hand its core to whatever else is queued there and come back a
  // time slice later) for at most kSpinTime before it sleeps. Not at all while other processes
  // use the process's cores (Note [Thread budget] in engine/cpu_budget.h): there a spinning
  // worker takes the core from a thread with real work, ours or theirs.
  if (cores_contended(budget_)) return false;
  spinning_.fetch_add(1, std::memory_order_seq_cst);
  on_idle(false);
  bool found = false;
  const auto until = std::chrono::steady_clock::now() + kSpinTime;
  for (int spin = 1;; ++spin) {
    if (has_work()) {
      found = true;
      break;
    }
    Backoff::cpu_relax();
    if (spin % 64 == 0) {
      if (std::chrono::steady_clock::now() >= until) break;
      if (spin % 1024 == 0) on_idle(false);
    }
  }
  spinning_.fetch_sub(1, std::memory_order_seq_cst);
  return found;
}

void ReadyQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stopping_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
}

CpuWorkerPool::CpuWorkerPool(OperationRunner* runner, int num_threads, std::string lane_prefix,
                             int budget)
    : runner_(runner), lane_prefix_(std::move(lane_prefix)), queue_(budget) {
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

int current_worker_index() { return t_worker_index; }

void CpuWorkerPool::worker_main(int index) {
  t_current_pool = this;
  t_worker_index = index;
  Profiler::global().set_thread_lane(lane_prefix_ + " " + std::to_string(index));
  RunContext context{Device::cpu(), Stream{Device::cpu(), nullptr}, index};
  std::function<void(bool)> on_idle = [this](bool sleep) { runner_->worker_idle(sleep); };
  while (OprBlock* op = queue_.pop(on_idle)) {
    context.device = op->device;
    context.stream.device = op->device;
    runner_->run(op, context);
  }
  t_current_pool = nullptr;
  t_worker_index = -1;
}

}  // namespace weft::detail
