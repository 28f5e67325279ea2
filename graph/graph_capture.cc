// CUDA graph capture of a bound executor's inference forward (see graph_capture.h).
#include "graph/graph_capture.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "base/error.h"
#include "memory/allocator.h"

namespace weft::graph::executor_detail {

// Note [CUDA graph capture]
// An executor bound on a GPU with static shapes pushes each forward (and backward) as a single
// engine operation (its reads and writes are the union of its nodes'). The body runs the nodes
// itself over the stream plan's streams: plan stream 0 is the engine worker's stream, the others
// are streams the capture owns. A fork event puts them behind the worker's stream (which the
// engine already made wait for the inputs), each node waits for its plan's event edges, and join
// events bring every stream back; the worker's stream, where the engine records its marks, waits
// for the whole pass (the streams are the capture's own: Note [Capture streams]).
//
// - First run (warm-up): eager, so that every lazy setup happens outside capture: cuDNN/cuBLAS
//   handles of each stream, algorithm choice, pool growth. The scratch memory each node asks of
//   its temp allocator beyond the planned workspace is measured, per stream.
// - Second run: capture. Scratch now comes from one buffer per stream, sized by the warm-up and
//   reset at every node: nodes of one stream run one after another in the graph, so they may
//   share it, and nothing in the graph touches the pool (whose frees record and query events,
//   which capture forbids). The captured graph is then launched for this run.
// - Later runs: one cudaGraphLaunch on the worker's stream.
//
// Capture runs in thread-local mode: a kernel that synchronises, allocates device memory or
// queries an event breaks it, and end_capture says so. Then the run is redone eagerly, and the
// executor stays eager (in one operation per forward) until it is bound again; failure() keeps
// the reason. Rebinding (reshape) builds a new capture: the graph holds the old arena's
// addresses. Arrays bound to the executor keep their memory, so new input values written into
// them (copy_to) are what the next launch reads.
//
// The executor captures the inference forward and, for a training bind, the training forward
// and the backward as two more graphs (each with its own state). It refuses capture for graphs
// with asynchronous kernels, with random nodes whose op cannot take a device seed (below), and
// with nodes placed on the CPU (executor_build.cc).
//
// Note [Random numbers in captured graphs]
// A random kernel normally draws its seed from the device's generator on the host when it is
// launched; a replay would repeat the numbers drawn at capture. So inside a capture the seed
// lives on the device. The capture owns one 64-bit word of device memory; every pass first
// advances it with `_random_seed_next` (word += a Weyl step, one thread), as the first node on
// stream 0 before the fork, so in a graph the advance is the graph's first node and every replay
// moves the word on without the host. The k-th random node of the pass reads the word when it
// runs and seeds itself with seed_word::combine(word, k) (OpContext::device_seed and
// seed_offset; ops/defs/seed_word.h). The word starts from one draw of the device's generator
// on the host in the first pass, and is drawn again (before the next pass or launch, outside any
// capture) after Runtime::seed reseeds the generator, so `seed` makes runs reproducible as it
// does without graphs; eager passes of the capture (the warm-up, a fallback after a failed
// capture) use the word the same way, so pass n draws the same numbers whether it was launched
// from a graph or not. Passes pushed node by node while the profiler records draw from the
// generator on the host instead and leave the word alone. An op opts in with
// ResourceRequest::device_seed (Dropout); others (RReLU) keep their graphs eager. One that draws
// in training only (ResourceRequest::train_only: Dropout with mode=training) is no random node
// of an inference pass, which then needs no word.
class CaptureScratch final : public Allocator {
 public:
  CaptureScratch(Allocator* pool, Device device, int streams)
      : pool_(pool), device_(device), cap_(static_cast<size_t>(streams), 0) {
    buffers_.resize(static_cast<size_t>(streams));
  }

  // Starts a node on plan stream `s`: measuring (forward to the pool, count) or from the buffer.
  void begin_node(int s, bool measure) {
    current_ = s;
    measure_ = measure;
    used_ = 0;
  }
  size_t used() const { return used_; }

  // Reserves `bytes` per stream from the pool (before capture starts).
  void reserve(int s, size_t bytes, const Stream& stream) {
    cap_[s] = bytes;
    buffers_[s] = bytes ? pool_->allocate_on(bytes, stream, kAlign) : DataPtr();
  }

  DataPtr allocate(size_t bytes, size_t alignment) override {
    return allocate_on(bytes, current_stream(device_), alignment);
  }
  DataPtr allocate_on(size_t bytes, const Stream& stream, size_t alignment) override {
    const size_t align = std::max(alignment, kAlign);
    if (measure_) {
      used_ = round_up(used_, align) + std::max<size_t>(bytes, 1);
      return pool_->allocate_on(bytes, stream, alignment);
    }
    const size_t offset = round_up(used_, align);
    WEFT_CHECK_AS(OutOfMemory, offset + std::max<size_t>(bytes, 1) <= cap_[current_])
        << "CUDA graph capture: a node asked for " << bytes << " bytes of scratch memory beyond "
        << "the " << cap_[current_] << " its stream used in the warm-up run";
    used_ = offset + std::max<size_t>(bytes, 1);
    char* base = static_cast<char*>(buffers_[current_].get());
    return DataPtr(base + offset, bytes, device_, nullptr, [](void*, void*, size_t) noexcept {});
  }
  Device device() const override { return device_; }
  std::string name() const override { return "capture-scratch(" + to_string(device_) + ")"; }

 private:
  static constexpr size_t kAlign = 256;
  static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
  Allocator* pool_;
  Device device_;
  std::vector<size_t> cap_;
  std::vector<DataPtr> buffers_;
  int current_ = 0;
  bool measure_ = true;
  size_t used_ = 0;
};

GraphCapture::GraphCapture(Device device, std::span<NodeRun> runs, const StreamPlan* plan,
                           std::shared_ptr<Allocator> pool, bool is_train, SeedAdvance advance)
    : device_(device),
      api_(DeviceAPI::get(device.type)),
      runs_(runs),
      plan_(plan && plan->num_streams > 1 ? plan : nullptr),
      pool_(std::move(pool)),
      num_streams_(plan_ ? plan_->num_streams : 1),
      is_train_(is_train),
      advance_(std::move(advance)) {
  WEFT_CHECK(api_->can_capture()) << "CUDA graph capture: " << to_string(device)
                                  << " cannot capture streams";
  for (size_t k = 0; k < runs_.size(); ++k) {
    const NodeRun& r = runs_[k];
    if (r.random != nullptr && (is_train_ || !r.random_train_only)) random_runs_.push_back(k);
  }
  WEFT_CHECK(random_runs_.empty() || static_cast<bool>(advance_))
      << "CUDA graph capture: " << random_runs_.size() << " random nodes and no seed advance";
  // Every stream the runs use is the capture's own (Note [Capture streams]).
  for (int s = 0; s < num_streams_; ++s) streams_.push_back(api_->create_stream(device));
  if (plan_) {
    // Events after the producers other streams wait for, within these runs only: a producer
    // outside them (a forward node, for the backward's capture) is done before the pass starts.
    std::vector<bool> inside(plan_->node_stream.size(), false);
    for (const NodeRun& r : runs_) inside[r.nid] = true;
    event_index_.assign(plan_->node_stream.size(), -1);
    for (const NodeRun& r : runs_) {
      for (uint32_t u : plan_->waits[r.nid]) {
        if (inside[u] && event_index_[u] < 0) {
          event_index_[u] = static_cast<int32_t>(after_.size());
          after_.push_back(api_->create_event(device));
        }
      }
    }
    fork_ = api_->create_event(device);
    for (int s = 1; s < num_streams_; ++s) join_.push_back(api_->create_event(device));
  }
  entry_ = api_->create_event(device);
  exit_ = api_->create_event(device);
  done_ = api_->create_event(device);
  scratch_ = std::make_unique<CaptureScratch>(pool_.get(), device, num_streams_);
  need_.assign(static_cast<size_t>(num_streams_), 0);
  if (!random_runs_.empty()) {
    seed_word_ = pool_->allocate_on(sizeof(uint64_t), streams_[0], 256);
  }
}

// Note [Random numbers in captured graphs]: the word's start, drawn from the generator on the
// first pass and again after Runtime::seed reseeded it, copied on `stream` outside any capture.
// The copy may read seed_init_ only when it runs, so a redraw first waits for earlier passes.
void GraphCapture::load_seed(const Stream& stream) {
  if (random_runs_.empty()) return;
  RandomState& generator = *runs_[random_runs_[0]].random;
  if (seeded_ && generator.reseeds == reseeds_seen_) return;
  if (seeded_) done_.synchronize();
  seed_init_ = generator.engine();
  reseeds_seen_ = generator.reseeds;
  seeded_ = true;
  api_->copy(seed_word_.get(), device_, &seed_init_, Device::cpu(), sizeof(uint64_t), stream);
}

GraphCapture::~GraphCapture() {
  // The last run's work may still be on the device: wait for it before freeing what it uses.
  try {
    done_.synchronize();
    for (const Stream& s : streams_) api_->synchronize(s);
  } catch (...) {
    // A device error belongs to the run that caused it; the capture is going away.
  }
  if (graph_ != nullptr) api_->destroy_graph(device_, graph_);
  scratch_.reset();    // the pool records these frees on stream 0, still alive here
  seed_word_.reset();  // likewise: it was allocated on stream 0
  for (const Stream& s : streams_) api_->destroy_stream(s);
}

std::string GraphCapture::failure() const {
  std::lock_guard<std::mutex> lock(failure_mutex_);
  return failure_;
}

// Note [Capture streams]
// The nodes never run on the engine worker's stream itself: other threads record events on an
// engine stream at any time (the engine's lazy marks for a waiter, the pool's free events), and
// during a capture such an event would become part of the graph, or make its waiter join the
// capture. So the capture owns its streams, stream 0 included, and meets the worker's stream
// only outside any capture: an eager run waits for it at the start (entry) and is waited for at
// the end (exit); a captured graph is launched on it. Stream 0 also runs the warm-up, which
// creates the library handles the capture then finds.
void GraphCapture::run_nodes(Engine& engine, const RunContext& rc, Mode mode) {
  const Stream& main = streams_[0];
  if (mode != Mode::kCapture) {
    entry_.record(rc.stream);
    entry_.block(main);
  }
  if (!random_runs_.empty()) {
    if (mode != Mode::kCapture) load_seed(main);  // a graph's launch loads it before (run())
    CurrentStreamScope current(main);
    advance_(static_cast<uint64_t*>(seed_word_.get()), RunContext{rc.device, main, rc.worker});
  }
  if (num_streams_ > 1) {
    fork_.record(main);
    for (int s = 1; s < num_streams_; ++s) fork_.block(streams_[static_cast<size_t>(s)]);
  }
  for (NodeRun& r : runs_) {
    const int s = plan_ ? plan_->node_stream[r.nid] : 0;
    const Stream& stream = streams_[static_cast<size_t>(s)];
    if (plan_) {
      for (uint32_t u : plan_->waits[r.nid]) {
        if (event_index_[u] >= 0) after_[static_cast<size_t>(event_index_[u])].block(stream);
      }
    }
    const RunContext node_rc{rc.device, stream, rc.worker};
    CurrentStreamScope current(stream);
    Allocator* pool = r.temp_allocator;
    if (mode != Mode::kEager) {
      scratch_->begin_node(s, mode == Mode::kMeasure);
      r.temp_allocator = scratch_.get();
    }
    const auto random_it =
        std::find(random_runs_.begin(), random_runs_.end(), static_cast<size_t>(&r - runs_.data()));
    if (random_it != random_runs_.end()) {
      r.device_seed = static_cast<const uint64_t*>(seed_word_.get());
      r.seed_offset = static_cast<uint64_t>(random_it - random_runs_.begin());
    }
    try {
      r.run(is_train_, engine, node_rc);
    } catch (...) {
      r.temp_allocator = pool;
      r.device_seed = nullptr;
      throw;
    }
    r.temp_allocator = pool;
    r.device_seed = nullptr;
    if (mode == Mode::kMeasure) need_[s] = std::max(need_[s], scratch_->used());
    if (plan_ && event_index_[r.nid] >= 0)
      after_[static_cast<size_t>(event_index_[r.nid])].record(stream);
  }
  for (int s = 1; s < num_streams_; ++s) {
    join_[static_cast<size_t>(s - 1)].record(streams_[static_cast<size_t>(s)]);
    join_[static_cast<size_t>(s - 1)].block(main);
  }
  if (mode != Mode::kCapture) {
    exit_.record(main);
    exit_.block(rc.stream);
  }
}

void GraphCapture::run(Engine& engine, const RunContext& rc) {
  switch (state_.load(std::memory_order_relaxed)) {
    case State::kWarmUp:
      run_nodes(engine, rc, Mode::kMeasure);
      state_.store(State::kCapture, std::memory_order_relaxed);
      break;
    case State::kEager:
      run_nodes(engine, rc, Mode::kEager);
      break;
    case State::kCapture: {
      const Stream& main = streams_[0];
      for (int s = 0; s < num_streams_; ++s) scratch_->reserve(s, need_[s], main);
      try {
        api_->begin_capture(main);
        try {
          run_nodes(engine, rc, Mode::kCapture);
        } catch (...) {
          try {
            void* broken = api_->end_capture(main);
            api_->destroy_graph(device_, broken);
          } catch (...) {
            // Expected: the capture is invalid. The kernel's error is the one to report.
          }
          throw;
        }
        graph_ = api_->end_capture(main);
        state_.store(State::kCaptured, std::memory_order_relaxed);
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(failure_mutex_);
          failure_ = e.what();
        }
        state_.store(State::kEager, std::memory_order_relaxed);
        for (int s = 0; s < num_streams_; ++s) scratch_->reserve(s, 0, main);
        run_nodes(engine, rc, Mode::kEager);  // this run still has to happen
        break;
      }
      [[fallthrough]];
    }
    case State::kCaptured:
      load_seed(rc.stream);  // the graph advances the word first, on the same stream
      api_->launch_graph(graph_, rc.stream);
      launches_.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  done_.record(rc.stream);
}

}  // namespace weft::graph::executor_detail
