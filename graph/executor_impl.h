// The graph executor's implementation class (graph/executor.h), private to the graph layer:
// binding and setup in executor.cc, the cached node operations, CUDA graph capture and pushing
// in executor_build.cc.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/profiler.h"
#include "devices/device_api.h"
#include "graph/executor.h"
#include "graph/executor_run.h"
#include "graph/gradient.h"
#include "graph/graph_capture.h"
#include "graph/segments.h"
#include "memory/arena.h"
#include "ndarray/runtime.h"

namespace weft::graph::executor_detail {

class ExecutorImpl final : public Executor {
 public:
  ExecutorImpl(std::shared_ptr<const Graph> graph, const BindOptions& options,
               std::map<std::string, NDArray, std::less<>> args,
               std::map<std::string, NDArray, std::less<>> aux)
      : forward_graph_(std::move(graph)),
        options_(options),
        engine_(Runtime::get().engine()),
        generation_(Runtime::get().generation()) {
    // Note [Executor on a GPU]: one device per executor. On cuda:N every node runs its CUDA
    // kernel on the stream its stream plan names (Note [Stream plans]; the engine adds the
    // cross-stream waits from the variables), the arena comes from the device's pool, and
    // kernels take scratch memory beyond the planned workspace from that pool on their stream.
    // Inference forwards are captured as CUDA graphs (Note [CUDA graph capture]). Graphs whose
    // nodes lack a CUDA kernel are refused at bind (build_runs names the node); mixed placement
    // with copy nodes is not built yet (graph::place_devices shows the plan it would run).
    WEFT_CHECK_AS(NotImplemented, options_.device.type == DeviceType::kCPU ||
                                      (options_.device.type == DeviceType::kCUDA &&
                                       DeviceAPI::try_get(DeviceType::kCUDA) != nullptr))
        << "executor: device " << weft::to_string(options_.device)
        << " has no operator kernels in this build; bind on cpu (graph::place_devices shows the "
           "fallback plan)";
    for (auto& [k, v] : args) user_arrays_[k] = v;
    for (auto& [k, v] : aux) user_arrays_[k] = v;
    build_exec_graph();
    arena_var_ = engine_.new_var();
    setup(options_.inputs);
  }

  ~ExecutorImpl() override {
    // Note [Executor lifetime]: an executor may outlive the runtime it was bound under
    // (docs/LIFETIMES.md). Its variables then died with that runtime's engine, which drained
    // every operation first: there is nothing to wait for and nothing to delete. Its arena keeps
    // its pool alive (shared_allocator), and its arrays free their memory without the engine.
    if (!Runtime::is_current(generation_)) {
      buffer_vars_.clear();
      return;
    }
    try {
      engine_.wait_for_var(arena_var_);
    } catch (...) {
      // Errors belong to the outputs; the executor is going away.
    }
    release_vars();
    engine_.delete_var(arena_var_);
  }

  void forward(bool is_train) override {
    check_runtime("forward");
    // A fence: waits for every operation of the previous run (they all read arena_var_), so a
    // run never overwrites arena memory an earlier run still uses.
    engine_.push_sync([](const RunContext&) {}, options_.device, {}, {arena_var_},
                      FnProperty::kNormal, 0, "executor_fence");
    if (CapturedRange& c = is_train ? train_forward_ : inference_; c.capture) {
      push_captured(c);
    } else {
      push_range(forward_segments_, 0, num_forward_runs_, is_train);
    }
    ran_forward_train_ = is_train;
  }

  void backward(const std::vector<NDArray>& head_grads) override {
    check_runtime("backward");
    WEFT_CHECK(has_backward_)
        << "backward: the executor was bound without gradients (set grad_req)";
    WEFT_CHECK(head_grads.empty() || head_grads.size() == grad_info_.head_grad_nodes.size())
        << "backward: " << head_grads.size() << " head gradients for "
        << grad_info_.head_grad_nodes.size() << " heads";
    for (size_t h = 0; h < head_grads.size(); ++h) {
      if (head_grads[h].is_none()) continue;
      NDArray& dst = var_arrays_[grad_info_.head_grad_nodes[h]];
      WEFT_CHECK_AS(ShapeError, head_grads[h].shape() == dst.shape())
          << "backward: head gradient " << h << " has shape " << head_grads[h].shape()
          << ", the head has " << dst.shape();
      head_grads[h].copy_to(dst);
    }
    if (train_backward_.capture) {
      push_captured(train_backward_);
    } else {
      push_range(backward_segments_, num_forward_runs_, runs_.size(), true);
    }
    for (auto& [name, tmp] : add_temps_) {
      NDArray g = grads_.at(name);
      g += tmp;
    }
  }

  bool reshape(const InferInputs& inputs) override {
    check_runtime("reshape");
    engine_.wait_for_var(arena_var_);
    return setup(inputs);
  }

  const std::vector<NDArray>& outputs() const override { return outputs_; }
  NDArray arg(std::string_view name) const override { return lookup(name, false); }
  NDArray aux(std::string_view name) const override { return lookup(name, true); }
  NDArray grad(std::string_view name) const override {
    auto it = grads_.find(name);
    return it == grads_.end() ? NDArray() : it->second;
  }
  std::vector<std::string> arg_names() const override { return forward_graph_->list_arguments(); }
  std::vector<std::string> aux_names() const override {
    return forward_graph_->list_auxiliary_states();
  }
  const Graph& exec_graph() const override { return exec_; }
  const InferResult& inferred() const override { return inferred_; }
  const MemoryPlan& memory_plan() const override { return plan_; }
  PlacementInfo placement() const override { return placement_; }
  CudaGraphInfo cuda_graph() const override {
    CudaGraphInfo info;
    using State = executor_detail::GraphCapture::State;
    for (const CapturedRange* c : {&inference_, &train_forward_, &train_backward_}) {
      if (!c->capture) continue;
      info.enabled = true;
      info.captured = info.captured || c->capture->state() == State::kCaptured;
      info.launches += c->capture->launches();
      if (info.failure.empty()) info.failure = c->capture->failure();
    }
    return info;
  }
  const StreamPlan* stream_plan() const override {
    return streams_.num_streams > 1 ? &streams_ : nullptr;
  }
  std::vector<Shape> output_shapes() const override {
    std::vector<Shape> out;
    for (size_t h = 0; h < num_forward_heads_; ++h)
      out.push_back(inferred_.shapes[exec_.entry_id(exec_.heads[h])]);
    return out;
  }
  LayoutStats layout_stats() const override { return layout_stats_; }
  const std::vector<LayoutRef>& entry_layouts() const override { return layouts_; }
  std::vector<OpTime> op_times() const override {
    std::map<std::string, OpTime> by_op;
    for (const NodeRun& r : runs_) {
      OpTime& t = by_op[r.name];
      t.op = r.name;
      t.calls += r.calls;
      t.total_ms += r.total_ms;
    }
    std::vector<OpTime> out;
    for (auto& [k, v] : by_op) out.push_back(v);
    std::sort(out.begin(), out.end(),
              [](const OpTime& a, const OpTime& b) { return a.total_ms > b.total_ms; });
    return out;
  }

 private:
  NDArray lookup(std::string_view name, bool aux) const {
    const int64_t nid = exec_.find_variable(name);
    WEFT_CHECK(nid >= 0 && static_cast<uint32_t>(nid) < num_forward_nodes_)
        << (aux ? "aux" : "arg") << ": no variable called '" << name << "'";
    return var_arrays_[nid];
  }

  GradReq req_of(const std::string& name) const {
    auto it = options_.grad_req.find(name);
    return it == options_.grad_req.end() ? options_.default_grad_req : it->second;
  }

  // The graph that runs: forward (+ backward when any gradient is requested), or the forward
  // with inference rewrites.
  void build_exec_graph();
  void place_nodes();

  bool setup(const InferInputs& inputs);

  void release_vars() {
    for (VarHandle v : buffer_vars_) {
      engine_.delete_var(v, [arena = arena_](const RunContext&) {});
    }
    buffer_vars_.clear();
  }

  void build_runs();

  // Note [CUDA graph capture]: runs_[begin, end) pushed as one engine operation that captures
  // them, with the union of their variables.
  struct CapturedRange {
    std::unique_ptr<GraphCapture> capture;
    std::vector<VarHandle> reads, writes;
  };
  // New captures for every binding (the graphs hold the arena's addresses), where they can be.
  void setup_capture();
  CapturedRange make_capture(size_t begin, size_t end, bool is_train);
  void push_captured(CapturedRange& c);

  // A run of nodes pushed as one engine operation (Note [Bulk segments]).
  struct SegmentRun {
    size_t begin = 0, end = 0;  // indices into runs_
    std::vector<VarHandle> reads, writes;
    std::string name;  // the members' op names, for the engine's profiler
  };

  // Groups runs_[begin, end) into segments (bulk_max_nodes).
  std::vector<SegmentRun> make_segments(size_t begin, size_t end) const;

  // Pushes runs_[begin, end): by segment, or node by node while the profiler records (so the
  // trace shows every node) or when bulking is off.
  void push_range(std::vector<SegmentRun>& segments, size_t begin, size_t end, bool is_train);

  void push(NodeRun& r, bool is_train);

  // Throws when the runtime this executor was bound under is gone (Note [Executor lifetime]).
  void check_runtime(const char* what) const {
    WEFT_CHECK(Runtime::is_current(generation_))
        << "executor " << what << ": the runtime it was bound under was shut down or reset; bind "
        << "the graph again (an executor outliving its runtime may only be destroyed)";
  }

  std::shared_ptr<const Graph> forward_graph_;
  BindOptions options_;
  Engine& engine_;           // the engine of the runtime bound under
  uint64_t generation_ = 0;  // that runtime's generation
  std::map<std::string, NDArray, std::less<>> user_arrays_;
  Graph exec_;
  // Layout propagation (Note [Layout propagation]): the rewritten graph before the pass, the
  // layout of each entry of exec_ and the pass's figures.
  bool use_layouts_ = false;
  Graph base_;
  std::vector<LayoutRef> layouts_;
  LayoutStats layout_stats_;
  std::vector<std::string> var_names_;  // per node of exec_: the variable's name ("" for ops)
  GradientGraph grad_info_;
  std::vector<uint32_t> wrt_;
  bool has_backward_ = false;
  uint32_t num_forward_nodes_ = 0;
  size_t num_forward_heads_ = 0;
  InferInputs inputs_;
  InferResult inferred_;
  MemoryPlan plan_;
  StreamPlan streams_;
  // Mixed placement (Note [Mixed placement]): per node of exec_ its device, and the arrays of the
  // entries and workspaces of nodes that do not run on the bound device.
  std::vector<Device> node_device_;
  PlacementInfo placement_;
  std::unordered_map<uint32_t, NDArray> off_arena_;            // by entry id
  std::unordered_map<uint32_t, NDArray> off_arena_workspace_;  // by node id
  // The inference forward; with a backward pass, the training forward and the backward.
  CapturedRange inference_, train_forward_, train_backward_;
  // Executors start their stream plans on different engine streams, so that two executors on one
  // GPU (a server's instances) overlap too.
  int stream_base_ = next_stream_base_.fetch_add(1, std::memory_order_relaxed) & 0xffff;
  static inline std::atomic<int> next_stream_base_{0};
  std::shared_ptr<Arena> arena_;
  VarHandle arena_var_ = nullptr;
  std::vector<VarHandle> buffer_vars_;
  std::vector<NDArray> var_arrays_;
  std::unordered_map<uint32_t, NDArray> head_arrays_;
  std::vector<NDArray> outputs_;
  std::map<std::string, NDArray, std::less<>> grads_;
  std::vector<std::pair<std::string, NDArray>> add_temps_;
  std::vector<NodeRun> runs_;
  size_t num_forward_runs_ = 0;
  std::vector<SegmentRun> forward_segments_, backward_segments_;
  bool ran_forward_train_ = false;
};

}  // namespace weft::graph::executor_detail
