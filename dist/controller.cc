// The coordinator thread (controller.h).
//
// Note [Negotiation by name]
// An engine runs an operation when its inputs are ready, so two processes running the same
// program start their collectives in different orders; a transport collective must be entered in
// the same order everywhere. As in Horovod, every collective carries a name and ranks agree
// through rank 0: each rank's coordinator sends rank 0 the collectives that became ready on it;
// once every rank has sent a key, rank 0 puts it in the schedule it sends to all ranks, and every
// rank (rank 0 too) runs the scheduled collectives in that order. A key is "<name>#<use>", the
// use-th push of that name on the rank, counted in program order, so a name can be reused step
// after step. Rank 0 compares what the ranks sent for a key (kind, type, shape, operation, root)
// and schedules an error naming the tensor and the ranks that differ instead of running it.
//
// Among collectives ready at once rank 0 orders by priority, then by when the key first reached
// it. Allreduces of one element type and transport operation are fused: packed into one buffer of
// at most fusion_bytes, reduced by one call and unpacked. While other keys are still partially
// issued, rank 0 holds small ready allreduces up to cycle_ms so that more of them join a buffer;
// when nothing else is in flight it schedules at once, so a lone collective pays no cycle.
// Collectives of GPU arrays are negotiated, ordered and fused the same way (never in one batch
// with CPU arrays); at their turn in the schedule they go to NCCL, which launches them on the
// engine operations' streams without waiting (controller_gpu.cc, Note [Collectives on GPU
// streams] in nccl_transport.cc).
//
// Liveness: ranks send rank 0 a message at least every heartbeat period and rank 0 sends them
// one. A rank that has not been heard from for timeout_s (killed, stopped, stuck outside weft)
// fails the group: rank 0 tells the others, and every pending and later collective fails with a
// DistError naming the rank. A key that some ranks have not issued within timeout_s fails alone,
// naming the ranks that did not issue it (a rank that hangs in user code, or a program whose ranks
// issue different collectives).
#include "dist/controller.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "dist/wire.h"

namespace weft::dist::detail {

namespace {

using namespace std::chrono_literals;
constexpr auto kHeartbeat = 20ms;

enum class Response : uint8_t { kRun, kError, kFatal, kShutdown };

// Whether two allreduces may share a fused batch: CPU arrays that the transport reduces alike
// (mean sums, then divides per tensor), or GPU arrays of the same operation (NCCL averages).
bool same_reduction(const Meta& a, const Meta& b) {
  if (a.gpu != b.gpu) return false;
  return a.gpu ? a.op == b.op : transport_op(a.op) == transport_op(b.op);
}

}  // namespace

struct Controller::Entry {
  Meta meta;
  int first_rank = 0;
  std::vector<char> have;
  int count = 0;
  Clock::time_point first_seen;
  Clock::time_point ready_at;
  uint64_t seq = 0;
  std::string error;
};

Controller::Controller(std::unique_ptr<Transport> transport, const Options& options)
    : transport_(std::move(transport)), options_(options) {
  rank_ = transport_->rank();
  size_ = transport_->size();
  auto now = Clock::now();
  last_heard_.assign(static_cast<size_t>(size_), now);
  stopping_.assign(static_cast<size_t>(size_), 0);
  last_from_root_ = now;
  thread_ = std::thread([this] { loop(); });
}

Controller::~Controller() { stop(); }

void Controller::submit(Request request) {
  std::unique_lock lock(mu_);
  if (!failure_.empty() || stopped_ || stop_requested_) {
    std::string why = !failure_.empty() ? failure_ : "dist: the process group was shut down";
    lock.unlock();
    request.done(std::make_exception_ptr(DistError(describe(request.meta) + ": " + why)));
    return;
  }
  incoming_.push_back(std::move(request));
  lock.unlock();
  cv_.notify_one();
}

void Controller::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stop_requested_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  bool failed;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    failed = !failure_.empty();
  }
  gpu_.reset();  // the NCCL communicator goes before MPI
  // After a failure a peer may be gone, and MPI_Finalize would wait for it.
  if (!failed) transport_->finalize();
}

Stats Controller::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Controller::loop() {
  // Note [Coordinator polling]: while collectives are in flight the thread polls without
  // sleeping (yielding the core) for up to kSpin after the last progress, since a sleep costs a
  // timer slack of ~50 us per round trip, a third of a 1 MiB allreduce here; then it backs off to
  // sleeps of up to 50 us. It also keeps polling for kSpin after its last collective ran, so
  // back-to-back collectives find it awake. Idle, it sleeps until a submit wakes it or a heartbeat
  // is due.
  constexpr auto kSpin = 2ms;
  auto backoff = 0us;
  bool spin = false;
  auto last_progress = Clock::now();
  for (;;) {
    std::vector<Request> fresh;
    bool stopping;
    bool failed;
    std::string failure;
    {
      std::unique_lock lock(mu_);
      if (incoming_.empty() && !stop_requested_) {
        if (spin) {
          lock.unlock();
          std::this_thread::yield();
          lock.lock();
        } else if (backoff > 0us) {
          cv_.wait_for(lock, backoff);
        }
      }
      fresh.swap(incoming_);
      stopping = stop_requested_;
      failed = !failure_.empty();
      if (failed) failure = failure_;
    }
    if (failed) {
      abort_gpu(failure);
      for (auto& r : fresh) fail_local_request(r);
      if (stopping) return;
      spin = false;
      backoff = std::chrono::duration_cast<std::chrono::microseconds>(kHeartbeat);
      continue;
    }
    bool active = !fresh.empty();
    bool done = false;
    try {
      done = rank_ == 0 ? step_root(fresh, stopping, &active) : step_peer(fresh, stopping, &active);
      if (poll_gpu()) active = true;
    } catch (const std::exception& e) {
      fail_everything(std::string("dist: rank ") + std::to_string(rank_) + ": " + e.what());
    }
    if (done) return drain_gpu();
    bool busy = !pending_.empty() || !table_.empty() || (gpu_ && gpu_->busy());
    auto now = Clock::now();
    if (active) last_progress = now;
    spin = now - last_progress < kSpin;
    if (active) {
      backoff = 0us;
    } else if (busy) {
      backoff = std::min<std::chrono::microseconds>(backoff * 2 + 2us, 50us);
    } else {
      backoff = rank_ == 0 && size_ > 1
                    ? std::chrono::microseconds(static_cast<int64_t>(options_.cycle_ms * 1000))
                    : std::chrono::duration_cast<std::chrono::microseconds>(kHeartbeat);
    }
  }
}

// Moves the fresh requests into pending_ and returns their descriptions.
static std::vector<Meta> adopt(std::vector<Request>& fresh, std::map<std::string, Request>& pending,
                               std::vector<Request>* rejected) {
  std::vector<Meta> metas;
  for (auto& r : fresh) {
    if (pending.count(r.meta.key) != 0) {  // the same name and use twice: two pushing threads
      rejected->push_back(std::move(r));
      continue;
    }
    metas.push_back(r.meta);
    std::string key = r.meta.key;
    pending.emplace(std::move(key), std::move(r));
  }
  return metas;
}

void Controller::reject_duplicates(std::vector<Request>& rejected) {
  for (auto& r : rejected) {
    r.done(std::make_exception_ptr(DistError(describe(r.meta) + ": issued twice on rank " +
                                             std::to_string(rank_) +
                                             " before the first finished; give collectives pushed "
                                             "from several threads distinct names")));
  }
}

void Controller::note(int rank, const Meta& meta, Clock::time_point now) {
  auto it = table_.find(meta.key);
  if (it == table_.end()) {
    auto e = std::make_unique<Entry>();
    e->meta = meta;
    e->first_rank = rank;
    e->have.assign(static_cast<size_t>(size_), 0);
    e->first_seen = now;
    e->seq = next_seq_++;
    it = table_.emplace(meta.key, std::move(e)).first;
  }
  Entry& e = *it->second;
  if (e.have[static_cast<size_t>(rank)]) return;
  e.have[static_cast<size_t>(rank)] = 1;
  ++e.count;
  e.meta.priority = std::max(e.meta.priority, meta.priority);
  if (e.error.empty()) {
    std::string diff = difference(e.meta, e.first_rank, meta, rank);
    if (!diff.empty()) e.error = describe(meta) + ": ranks disagree: " + diff;
  }
  if (e.count == size_) e.ready_at = now;
}

bool Controller::step_root(std::vector<Request>& fresh, bool stopping, bool* active) {
  auto now = Clock::now();
  std::vector<Request> rejected;
  for (const Meta& m : adopt(fresh, pending_, &rejected)) note(0, m, now);
  reject_duplicates(rejected);
  stopping_[0] = stopping && pending_.empty();
  last_heard_[0] = now;

  std::string message;
  for (int r = 1; r < size_; ++r) {
    while (transport_->try_recv(r, &message)) {
      *active = true;
      last_heard_[static_cast<size_t>(r)] = now;
      Reader in(message);
      stopping_[static_cast<size_t>(r)] = in.get<uint8_t>();
      auto n = in.get<uint32_t>();
      for (uint32_t i = 0; i < n; ++i) note(r, get_meta(in), now);
    }
  }
  const auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.timeout_s));
  for (int r = 1; r < size_; ++r) {
    auto silent = now - last_heard_[static_cast<size_t>(r)];
    if (silent > timeout) {
      std::ostringstream why;
      why << "dist: rank " << r << " stopped answering: nothing from its coordinator for "
          << std::chrono::duration<double>(silent).count() << " s (timeout " << options_.timeout_s
          << " s; the process died, was stopped, or is "
          << "stuck outside weft)";
      Writer w;
      w.put<uint32_t>(1);
      w.put<uint8_t>(static_cast<uint8_t>(Response::kFatal));
      w.put<uint32_t>(0);
      w.put_string(why.str());
      std::string fatal = w.take();
      for (int p = 1; p < size_; ++p) {
        if (p != r) transport_->send(p, fatal);
      }
      fail_everything(why.str());
      return false;
    }
  }

  Writer w;
  uint32_t responses = 0;
  auto put_error = [&](const std::string& key, const std::string& why) {
    w.put<uint8_t>(static_cast<uint8_t>(Response::kError));
    w.put<uint32_t>(1);
    w.put_string(key);
    w.put_string(why);
    ++responses;
  };
  // Keys some ranks have not issued within the timeout fail alone.
  std::vector<Entry*> ready;
  bool partial = false;
  for (auto it = table_.begin(); it != table_.end();) {
    Entry& e = *it->second;
    if (e.count < size_ && now - e.first_seen > timeout) {
      std::vector<int> missing, present;
      for (int r = 0; r < size_; ++r)
        (e.have[static_cast<size_t>(r)] ? present : missing).push_back(r);
      std::ostringstream why;
      why << describe(e.meta) << ": " << ranks_text(missing) << " did not issue it within "
          << options_.timeout_s << " s (" << ranks_text(present) << " did)";
      put_error(e.meta.key, why.str());
      it = table_.erase(it);
      continue;
    }
    if (e.count == size_) {
      ready.push_back(&e);
    } else {
      partial = true;
    }
    ++it;
  }
  std::sort(ready.begin(), ready.end(), [](const Entry* a, const Entry* b) {
    return a->meta.priority != b->meta.priority ? a->meta.priority > b->meta.priority
                                                : a->seq < b->seq;
  });
  // Fusion hold: small ready allreduces wait (up to cycle_ms) for more while others are in flight.
  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(options_.cycle_ms));
  auto bytes_of = payload_bytes;
  bool hold = false;
  if (partial && options_.fusion_bytes > 0) {
    size_t small_bytes = 0;
    Clock::time_point oldest = now;
    for (Entry* e : ready) {
      if (e->error.empty() && e->meta.kind == Kind::kAllreduce &&
          bytes_of(e->meta) < options_.fusion_bytes) {
        small_bytes += bytes_of(e->meta);
        oldest = std::min(oldest, e->ready_at);
      }
    }
    hold = small_bytes > 0 && small_bytes < options_.fusion_bytes && now - oldest < cycle;
  }
  std::vector<std::string> done_keys;
  std::vector<char> used(ready.size(), 0);
  for (size_t i = 0; i < ready.size(); ++i) {
    if (used[i]) continue;
    Entry& e = *ready[i];
    if (!e.error.empty()) {
      put_error(e.meta.key, e.error);
      done_keys.push_back(e.meta.key);
      continue;
    }
    bool fusable = e.meta.kind == Kind::kAllreduce && bytes_of(e.meta) < options_.fusion_bytes;
    if (fusable && hold) continue;
    std::vector<std::string> group{e.meta.key};
    if (fusable) {
      size_t total = bytes_of(e.meta);
      for (size_t j = i + 1; j < ready.size(); ++j) {
        const Entry& f = *ready[j];
        if (used[j] || !f.error.empty() || f.meta.kind != Kind::kAllreduce ||
            f.meta.dtype != e.meta.dtype || !same_reduction(e.meta, f.meta) ||
            total + bytes_of(f.meta) > options_.fusion_bytes) {
          continue;
        }
        total += bytes_of(f.meta);
        used[j] = 1;
        group.push_back(f.meta.key);
      }
    }
    w.put<uint8_t>(static_cast<uint8_t>(Response::kRun));
    w.put<uint32_t>(static_cast<uint32_t>(group.size()));
    for (const auto& k : group) {
      w.put_string(k);
      done_keys.push_back(k);
    }
    w.put_string("");
    ++responses;
  }
  for (const auto& k : done_keys) table_.erase(k);
  bool everyone_stopping =
      table_.empty() && std::all_of(stopping_.begin(), stopping_.end(), [](char c) { return c; });
  if (everyone_stopping) {
    w.put<uint8_t>(static_cast<uint8_t>(Response::kShutdown));
    w.put<uint32_t>(0);
    w.put_string("");
    ++responses;
  }
  if (responses == 0 && now - last_sent_ < kHeartbeat) return false;
  // The schedule: a count, then the responses (the heartbeat is an empty schedule).
  Writer head;
  head.put<uint32_t>(responses);
  std::string body = head.take() + w.take();
  for (int r = 1; r < size_; ++r) transport_->send(r, body);
  last_sent_ = now;
  if (responses > 0) *active = true;
  return execute(body);
}

bool Controller::step_peer(std::vector<Request>& fresh, bool stopping, bool* active) {
  auto now = Clock::now();
  std::vector<Request> rejected;
  std::vector<Meta> metas = adopt(fresh, pending_, &rejected);
  reject_duplicates(rejected);
  bool stopping_now = stopping && pending_.empty();
  if (!metas.empty() || now - last_sent_ >= kHeartbeat || stopping_now != peer_stopping_sent_) {
    Writer w;
    w.put<uint8_t>(stopping_now ? 1 : 0);
    w.put<uint32_t>(static_cast<uint32_t>(metas.size()));
    for (const Meta& m : metas) put_meta(w, m);
    transport_->send(0, w.take());
    last_sent_ = now;
    peer_stopping_sent_ = stopping_now;
  }
  std::string message;
  while (transport_->try_recv(0, &message)) {
    last_from_root_ = Clock::now();
    if (message.size() > sizeof(uint32_t)) *active = true;
    if (execute(message)) return true;
  }
  auto silent = Clock::now() - last_from_root_;
  // Rank 0 may itself wait a whole timeout for another rank before it answers.
  if (silent > std::chrono::duration<double>(2 * options_.timeout_s + 1)) {
    std::ostringstream why;
    why << "dist: rank 0 (the coordinator) stopped answering: nothing from it for "
        << std::chrono::duration<double>(silent).count() << " s (timeout " << options_.timeout_s
        << " s; the process died, was stopped, or is stuck outside weft)";
    fail_everything(why.str());
  }
  return false;
}

bool Controller::execute(const std::string& message) {
  Reader in(message);
  auto n = in.get<uint32_t>();
  {
    std::lock_guard lock(mu_);
    stats_.cycles += 1;  // one schedule from rank 0 (an empty one is a heartbeat)
  }
  for (uint32_t i = 0; i < n; ++i) {
    auto type = static_cast<Response>(in.get<uint8_t>());
    std::vector<std::string> keys(in.get<uint32_t>());
    for (auto& k : keys) k = in.get_string();
    std::string why = in.get_string();
    switch (type) {
      case Response::kRun:
        run_group(keys);
        break;
      case Response::kError:
        for (const auto& k : keys) {
          auto it = pending_.find(k);
          if (it == pending_.end()) continue;  // this rank never issued it
          Request r = std::move(it->second);
          pending_.erase(it);
          r.done(std::make_exception_ptr(DistError(why)));
        }
        break;
      case Response::kFatal:
        fail_everything(why);
        return false;
      case Response::kShutdown:
        return true;
    }
  }
  return false;
}

void Controller::run_group(const std::vector<std::string>& keys) {
  std::vector<Request> group;
  group.reserve(keys.size());
  for (const auto& k : keys) {
    auto it = pending_.find(k);
    if (it == pending_.end()) {
      throw InternalError("dist: rank 0 scheduled '" + k + "', which rank " +
                          std::to_string(rank_) + " never issued");
    }
    group.push_back(std::move(it->second));
    pending_.erase(it);
  }
  if (group.front().meta.gpu) return run_gpu(group);
  std::exception_ptr error;
  size_t payload = 0;
  try {
    Request& first = group.front();
    const Meta& m = first.meta;
    const size_t count = first.in_bytes / dtype_size(m.dtype);
    switch (m.kind) {
      case Kind::kAllreduce:
        if (group.size() == 1) {
          if (first.in != first.out) std::memcpy(first.out, first.in, first.in_bytes);
          transport_->allreduce(first.out, count, m.dtype, transport_op(m.op));
          if (m.op == ReduceOp::kMean) divide_by(first.out, count, m.dtype, size_);
          payload = first.in_bytes;
        } else {
          for (const auto& r : group) payload += r.in_bytes;
          if (fusion_buffer_.size() < payload) fusion_buffer_.resize(payload);
          char* buf = fusion_buffer_.data();
          size_t offset = 0;
          for (const auto& r : group) {
            std::memcpy(buf + offset, r.in, r.in_bytes);
            offset += r.in_bytes;
          }
          transport_->allreduce(buf, payload / dtype_size(m.dtype), m.dtype, transport_op(m.op));
          offset = 0;
          for (const auto& r : group) {
            std::memcpy(r.out, buf + offset, r.in_bytes);
            if (r.meta.op == ReduceOp::kMean) {
              divide_by(r.out, r.in_bytes / dtype_size(m.dtype), m.dtype, size_);
            }
            offset += r.in_bytes;
          }
        }
        break;
      case Kind::kBroadcast:
        transport_->broadcast(first.out, first.out_bytes, m.root);
        break;
      case Kind::kAllgather:
        transport_->allgather(first.in, first.out, first.in_bytes);
        break;
      case Kind::kReduceScatter: {
        const size_t out_count = first.out_bytes / dtype_size(m.dtype);
        transport_->reduce_scatter(first.in, first.out, out_count, m.dtype, transport_op(m.op));
        if (m.op == ReduceOp::kMean) divide_by(first.out, out_count, m.dtype, size_);
        break;
      }
      case Kind::kBarrier:
        break;  // every rank issuing it is the barrier
    }
  } catch (const DistError& e) {
    error = std::current_exception();
    std::lock_guard lock(mu_);
    if (failure_.empty()) failure_ = e.what();  // the transport failed: the group is unusable
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard lock(mu_);
    stats_.collectives += static_cast<int64_t>(group.size());
    stats_.transport_calls += 1;
    if (group.size() > 1) stats_.fused_batches += 1;
    if (group.front().meta.kind == Kind::kAllreduce)
      stats_.bytes_reduced += static_cast<int64_t>(payload);
  }
  for (auto& r : group) r.done(error);
}

void Controller::fail_local_request(Request& r) {
  std::string why;
  {
    std::lock_guard lock(mu_);
    why = failure_;
  }
  r.done(std::make_exception_ptr(DistError(describe(r.meta) + ": " + why)));
}

void Controller::fail_everything(const std::string& why) {
  std::vector<Request> incoming;
  {
    std::lock_guard lock(mu_);
    if (failure_.empty()) failure_ = why;
    incoming.swap(incoming_);
  }
  for (auto& [key, r] : pending_) fail_local_request(r);
  pending_.clear();
  table_.clear();
  abort_gpu(why);
  for (auto& r : incoming) fail_local_request(r);
}

}  // namespace weft::dist::detail
