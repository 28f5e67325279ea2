// The graph executor: binding (inference, gradient pass, memory plan, arena, cached engine
// operations) and running (pushing the cached operations).
#include "graph/executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "base/profiler.h"
#include "devices/device_api.h"
#include "graph/executor_run.h"
#include "graph/fuse.h"
#include "graph/gradient.h"
#include "graph/segments.h"
#include "memory/arena.h"
#include "ndarray/runtime.h"

namespace weft::graph {

std::vector<uint32_t> label_variables(const Graph& g) {
  std::vector<bool> label(g.nodes.size(), false);
  for (const Node& n : g.nodes) {
    if (!n.op) continue;
    const std::vector<std::string> names = n.op->input_names(*n.op_attrs);
    for (size_t i = 0; i < n.inputs.size() && i < names.size(); ++i) {
      if (names[i] == "label" && g.nodes[n.inputs[i].node].is_variable())
        label[n.inputs[i].node] = true;
    }
  }
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < g.nodes.size(); ++i) {
    if (label[i]) out.push_back(i);
  }
  return out;
}

namespace {

using executor_detail::NodeRun;
using executor_detail::OccupancyMap;

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
    // kernel on the GPU pool's streams (the engine orders them across streams), the arena comes
    // from the device's pool, and kernels take scratch memory beyond the planned workspace from
    // that pool on their stream. Graphs whose nodes lack a CUDA kernel are refused at bind
    // (build_runs names the node); mixed placement with copy nodes is not built yet.
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
    push_range(forward_segments_, 0, num_forward_runs_, is_train);
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
    push_range(backward_segments_, num_forward_runs_, runs_.size(), true);
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
  void build_exec_graph() {
    const Graph& fwd = *forward_graph_;
    num_forward_heads_ = fwd.heads.size();
    std::vector<uint32_t> wrt;
    const std::vector<uint32_t> labels = label_variables(fwd);
    for (uint32_t nid : fwd.argument_nodes()) {
      if (std::binary_search(labels.begin(), labels.end(), nid)) continue;
      if (req_of(fwd.nodes[nid].name) != GradReq::kNull) wrt.push_back(nid);
    }
    if (!wrt.empty()) {
      GradientOptions go;
      go.wrt = wrt;
      grad_info_ = build_gradient(fwd, go);
      exec_ = grad_info_.graph;
      wrt_ = wrt;
      has_backward_ = true;
    } else if (options_.fuse) {
      exec_ = fuse_for_inference(fwd);
    } else {
      exec_ = fwd;
    }
    num_forward_nodes_ =
        has_backward_ ? grad_info_.num_forward_nodes : static_cast<uint32_t>(exec_.nodes.size());
    use_layouts_ = options_.layouts && !has_backward_ && layouts_available() &&
                   options_.device.type == DeviceType::kCPU;
    if (use_layouts_) base_ = exec_;
  }

  bool setup(const InferInputs& inputs) {
    // With layout propagation the graph that runs depends on the shapes (each convolution's
    // format does): it is made again from the rewritten graph `base_` for every setup.
    if (use_layouts_) exec_ = base_;
    const Graph& g = exec_;
    // Inference: the caller's input shapes, plus the shapes of arrays already bound.
    InferInputs in = inputs;
    for (const auto& [name, arr] : user_arrays_) {
      if (!in.shapes.count(name)) in.fixed_shapes[name] = arr.shape();
    }
    if (has_backward_) {
      // Head gradients have their heads' shapes: infer the forward graph first.
      InferResult f = infer_shapes_types(*forward_graph_, in, true);
      for (size_t h = 0; h < grad_info_.head_grad_nodes.size(); ++h) {
        const NodeEntry& e = forward_graph_->heads[h];
        const std::string& name = g.nodes[grad_info_.head_grad_nodes[h]].name;
        in.fixed_shapes[name] = f.shapes[forward_graph_->entry_id(e)];
        in.dtypes[name] = f.dtypes[forward_graph_->entry_id(e)];
      }
    }
    inferred_ = infer_shapes_types(g, in, true);
    inputs_ = inputs;
    layouts_.clear();
    layout_stats_ = LayoutStats{};
    if (use_layouts_) {
      LayoutPlan lp = propagate_layouts(exec_, inferred_);
      exec_ = std::move(lp.graph);
      inferred_ = std::move(lp.inferred);
      layouts_ = std::move(lp.layouts);
      layout_stats_ = lp.stats;
      num_forward_nodes_ = static_cast<uint32_t>(exec_.nodes.size());
    }

    // Arrays for variables: the caller's, those bound before when their shape still fits, or new.
    // Earlier arrays are found by name: node ids change when layout propagation inserts nodes.
    std::map<std::string, NDArray, std::less<>> previous;
    for (size_t nid = 0; nid < var_arrays_.size(); ++nid) {
      if (!var_arrays_[nid].is_none()) previous[var_names_[nid]] = var_arrays_[nid];
    }
    std::vector<NDArray> arrays(g.nodes.size());
    var_names_.assign(g.nodes.size(), std::string());
    const std::vector<uint32_t> labels = label_variables(g);
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
      if (!g.nodes[nid].is_variable()) continue;
      const std::string& name = g.nodes[nid].name;
      const Shape& shape = inferred_.shapes[g.entry_id(nid, 0)];
      const DType dtype = inferred_.dtypes[g.entry_id(nid, 0)];
      var_names_[nid] = name;
      const NDArray* prev = nullptr;
      if (auto it = previous.find(name); it != previous.end()) prev = &it->second;
      NDArray a;
      if (auto it = user_arrays_.find(name); it != user_arrays_.end()) {
        a = it->second;
        WEFT_CHECK_AS(ShapeError, a.shape() == shape)
            << "bind: array for '" << name << "' has shape " << a.shape() << ", the graph needs "
            << shape;
        WEFT_CHECK(a.dtype() == dtype)
            << "bind: array for '" << name << "' has dtype " << dtype_name(a.dtype())
            << ", the graph needs " << dtype_name(dtype);
      } else if (prev && prev->shape() == shape && prev->dtype() == dtype) {
        a = *prev;
      } else {
        const bool head_grad = has_backward_ && nid >= num_forward_nodes_;
        a = head_grad ? NDArray::ones(shape, dtype, options_.device)
                      : NDArray::zeros(shape, dtype, options_.device);
      }
      arrays[nid] = a;
    }
    var_arrays_ = std::move(arrays);

    // Gradient arrays.
    std::map<std::string, NDArray, std::less<>> grads;
    add_temps_.clear();
    for (size_t k = 0; k < wrt_.size(); ++k) {
      const std::string& name = g.nodes[wrt_[k]].name;
      const uint32_t eid = g.entry_id(grad_info_.grads[k]);
      NDArray& old = grads_[name];
      grads[name] =
          (!old.is_none() && old.shape() == inferred_.shapes[eid])
              ? old
              : NDArray::zeros(inferred_.shapes[eid], inferred_.dtypes[eid], options_.device);
    }
    grads_ = std::move(grads);

    // Head arrays (outputs and gradients live outside the arena).
    head_arrays_.clear();
    outputs_.clear();
    for (size_t h = 0; h < g.heads.size(); ++h) {
      const uint32_t eid = g.entry_id(g.heads[h]);
      if (g.nodes[g.heads[h].node].is_variable()) {
        head_arrays_[eid] = var_arrays_[g.heads[h].node];
      } else if (!head_arrays_.count(eid)) {
        if (h >= num_forward_heads_) {
          const std::string& name = g.nodes[wrt_[h - num_forward_heads_]].name;
          if (req_of(name) == GradReq::kAdd) {
            NDArray tmp =
                NDArray::empty(inferred_.shapes[eid], inferred_.dtypes[eid], options_.device);
            add_temps_.push_back({name, tmp});
            head_arrays_[eid] = tmp;
          } else {
            head_arrays_[eid] = grads_.at(name);
          }
        } else {
          head_arrays_[eid] =
              NDArray::empty(inferred_.shapes[eid], inferred_.dtypes[eid], options_.device);
        }
      }
      if (h < num_forward_heads_) outputs_.push_back(head_arrays_[eid]);
    }

    // Memory plan and arena.
    GraphPlanOptions plan_options;
    if (!layouts_.empty()) {
      for (const LayoutRef& l : layouts_) plan_options.entry_bytes.push_back(l ? l->bytes() : 0);
      plan_options.layouts = layouts_;
    }
    plan_ = plan_memory(g, inferred_, plan_options);
    bool reused = false;
    if (!arena_) {
      // A shared pool: the arena may outlive the runtime (Note [Executor lifetime]).
      arena_ = std::make_shared<Arena>(Runtime::get().shared_allocator(options_.device),
                                       std::max<size_t>(plan_.plan.arena_bytes, 64));
    } else {
      reused = !arena_->reserve(std::max<size_t>(plan_.plan.arena_bytes, 64));
    }
    build_runs();
    return reused;
  }

  void release_vars() {
    for (VarHandle v : buffer_vars_) {
      engine_.delete_var(v, [arena = arena_](const RunContext&) {});
    }
    buffer_vars_.clear();
  }

  void build_runs() {
    const Graph& g = exec_;
    release_vars();
    const auto nbuf = plan_.buffers.size();
    for (size_t b = 0; b < nbuf; ++b) buffer_vars_.push_back(engine_.new_var());

    // Which earlier buffers each buffer's memory held last (the writer must wait for their
    // readers): a sweep in order of first use over an address-interval map.
    std::vector<std::vector<int32_t>> prior(nbuf);
    {
      std::vector<int32_t> order(nbuf);
      for (size_t b = 0; b < nbuf; ++b) order[b] = static_cast<int32_t>(b);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return plan_.buffers[a].first < plan_.buffers[b].first;
      });
      OccupancyMap occ;
      for (int32_t b : order) {
        const size_t off = plan_.plan.offsets[b];
        const size_t bytes = std::max<size_t>(plan_.buffers[b].bytes, 1);
        prior[b] = occ.take(off, off + bytes, b);
      }
    }

    char* base = static_cast<char*>(arena_->base());
    RandomResource& rnd = Runtime::get().random(options_.device);
    runs_.clear();
    runs_.reserve(g.nodes.size());
    num_forward_runs_ = 0;
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
      const Node& n = g.nodes[nid];
      if (n.is_variable()) continue;
      NodeRun r;
      r.nid = nid;
      r.name = n.op->name();
      r.attrs = n.op_attrs.get();
      r.compute = n.op->compute(options_.device.type);
      r.async = r.compute ? nullptr : n.op->async_compute(options_.device.type);
      r.stateful = r.compute || r.async ? nullptr : n.op->stateful_compute(options_.device.type);
      if (options_.device.type == DeviceType::kCUDA) {
        r.temp_allocator = &Runtime::get().allocator(options_.device);
      }
      WEFT_CHECK_AS(NotImplemented, r.compute || r.stateful || r.async)
          << "bind: node " << nid << " ('" << n.name << "'): op " << n.op->name()
          << " has no kernel on " << weft::to_string(options_.device);
      r.time_ops = options_.time_ops;
      std::vector<int> mutate;
      if (const auto& fm = n.op->attr<FMutateInputs>()) mutate = fm(*n.op_attrs);

      std::vector<Shape> in_shapes;
      std::vector<DType> in_types;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const uint32_t eid = g.entry_id(n.inputs[i]);
        in_shapes.push_back(inferred_.shapes[eid]);
        in_types.push_back(inferred_.dtypes[eid]);
        VarHandle var = nullptr;
        void* ptr = nullptr;
        uint64_t sid = 0;
        if (auto it = head_arrays_.find(eid); it != head_arrays_.end()) {
          var = it->second.var();
          ptr = it->second.raw_data();
        } else if (g.nodes[n.inputs[i].node].is_variable()) {
          const NDArray& a = var_arrays_[n.inputs[i].node];
          var = a.var();
          ptr = a.raw_data();
          sid = a.storage_id();
        } else {
          const int32_t b = plan_.entry_buffer[eid];
          WEFT_CHECK_AS(InternalError, b >= 0) << "bind: entry " << eid << " has no memory";
          var = buffer_vars_[b];
          ptr = base + plan_.entry_offset[eid];
        }
        r.in.emplace_back(ptr, options_.device, inferred_.dtypes[eid], inferred_.shapes[eid]);
        r.in_vars.push_back(var);
        r.storage_ids.push_back(sid);
        const bool mutated =
            std::find(mutate.begin(), mutate.end(), static_cast<int>(i)) != mutate.end();
        (mutated ? r.writes : r.reads).push_back(var);
      }
      r.versions.assign(r.in_vars.size(), 0);
      r.reads.push_back(arena_var_);
      if (!layouts_.empty()) {
        bool any = false;
        for (const NodeEntry& e : n.inputs) {
          r.in_layouts.push_back(layouts_[g.entry_id(e)]);
          any = any || r.in_layouts.back();
        }
        for (int o = 0; o < n.num_outputs(); ++o) {
          r.out_layouts.push_back(layouts_[g.entry_id(nid, o)]);
          any = any || r.out_layouts.back();
        }
        if (any) {
          for (const LayoutRef& l : r.in_layouts) r.in_layout_ptrs.push_back(l.get());
          for (const LayoutRef& l : r.out_layouts) r.out_layout_ptrs.push_back(l.get());
        } else {
          r.in_layouts.clear();
          r.out_layouts.clear();
        }
      }

      std::vector<Shape> out_shapes;
      for (int o = 0; o < n.num_outputs(); ++o) {
        const uint32_t eid = g.entry_id(nid, o);
        out_shapes.push_back(inferred_.shapes[eid]);
        void* ptr = nullptr;
        OpReq req = OpReq::kWrite;
        if (auto it = head_arrays_.find(eid); it != head_arrays_.end()) {
          r.writes.push_back(it->second.var());
          ptr = it->second.raw_data();
        } else {
          const int32_t b = plan_.entry_buffer[eid];
          WEFT_CHECK_AS(InternalError, b >= 0) << "bind: entry " << eid << " has no memory";
          r.writes.push_back(buffer_vars_[b]);
          for (int32_t p : prior[b]) r.writes.push_back(buffer_vars_[p]);
          ptr = base + plan_.entry_offset[eid];
          if (plan_.entry_inplace_of[eid] >= 0) req = OpReq::kInplace;
        }
        r.out.emplace_back(ptr, options_.device, inferred_.dtypes[eid], inferred_.shapes[eid]);
        r.req.push_back(req);
      }
      // In-place identity ops (Reshape, Flatten, ...) have nothing to compute.
      if (const auto& fid = n.op->attr<FInplaceIdentity>();
          fid && n.num_outputs() == 1 && !r.in.empty()) {
        const auto& opts = n.op->attr<FInplaceOption>();
        const std::vector<bool> ident = fid(*n.op_attrs);
        if (opts) {
          const auto pairs = opts(*n.op_attrs);
          for (size_t k = 0; k < pairs.size() && k < ident.size(); ++k) {
            if (ident[k] && pairs[k].second == 0 && r.in[pairs[k].first].data == r.out[0].data)
              r.identity = true;
          }
        }
      }
      if (plan_.workspace_buffer[nid] >= 0) {
        const int32_t b = plan_.workspace_buffer[nid];
        r.workspace = base + plan_.workspace_offset[nid];
        r.workspace_bytes = plan_.workspace_bytes[nid];
        r.writes.push_back(buffer_vars_[b]);
        for (int32_t p : prior[b]) r.writes.push_back(buffer_vars_[p]);
      }
      if (const auto& fr = n.op->attr<FResourceRequest>()) {
        for (const ResourceRequest& q : fr(*n.op_attrs, in_shapes, out_shapes)) {
          if (q.kind == ResourceRequest::Kind::kRandom) {
            r.random = &rnd.state;
            r.writes.push_back(rnd.var);
          }
        }
      }
      if (r.stateful) {
        const auto& create = n.op->attr<FCreateOpState>();
        WEFT_CHECK_AS(InternalError, static_cast<bool>(create))
            << "op " << n.op->name() << ": no FCreateOpState";
        r.state = create(*n.op_attrs, options_.device, in_shapes, in_types);
      }
      // A variable both read and written counts as a write; drop duplicates for the engine.
      std::sort(r.writes.begin(), r.writes.end());
      r.writes.erase(std::unique(r.writes.begin(), r.writes.end()), r.writes.end());
      std::erase_if(r.reads, [&](VarHandle v) {
        return std::binary_search(r.writes.begin(), r.writes.end(), v);
      });
      std::sort(r.reads.begin(), r.reads.end());
      r.reads.erase(std::unique(r.reads.begin(), r.reads.end()), r.reads.end());
      if (nid < num_forward_nodes_) ++num_forward_runs_;
      runs_.push_back(std::move(r));
    }
    forward_segments_ = make_segments(0, num_forward_runs_);
    backward_segments_ = make_segments(num_forward_runs_, runs_.size());
  }

  // A run of nodes pushed as one engine operation (Note [Bulk segments]).
  struct SegmentRun {
    size_t begin = 0, end = 0;  // indices into runs_
    std::vector<VarHandle> reads, writes;
    std::string name;  // the members' op names, for the engine's profiler
  };

  // Groups runs_[begin, end) into segments (bulk_max_nodes).
  std::vector<SegmentRun> make_segments(size_t begin, size_t end) const {
    std::vector<SegmentNode> nodes;
    nodes.reserve(end - begin);
    for (size_t k = begin; k < end; ++k) {
      const NodeRun& r = runs_[k];
      SegmentNode n;
      n.async = r.async != nullptr;
      n.reads = r.reads;
      n.writes = r.writes;
      for (size_t i = 0; i < r.in_vars.size(); ++i) {
        if (r.in_vars[i] && r.storage_ids[i] != 0) n.keyed_ins.push_back(r.in_vars[i]);
      }
      nodes.push_back(std::move(n));
    }
    SegmentOptions so;
    so.max_nodes = std::max<uint32_t>(options_.bulk_max_nodes, 1);
    std::vector<SegmentRun> out;
    for (Segment& s : build_segments(nodes, so)) {
      SegmentRun sr;
      sr.begin = begin + s.begin;
      sr.end = begin + s.end;
      sr.reads = std::move(s.reads);
      sr.writes = std::move(s.writes);
      for (size_t k = sr.begin; k < sr.end; ++k) {
        if (k > sr.begin) sr.name += '+';
        sr.name += runs_[k].name;
      }
      out.push_back(std::move(sr));
    }
    return out;
  }

  // Pushes runs_[begin, end): by segment, or node by node while the profiler records (so the
  // trace shows every node) or when bulking is off.
  void push_range(std::vector<SegmentRun>& segments, size_t begin, size_t end, bool is_train) {
    if (options_.bulk_max_nodes <= 1 || Profiler::global().enabled()) {
      for (size_t k = begin; k < end; ++k) push(runs_[k], is_train);
      return;
    }
    for (SegmentRun& s : segments) {
      if (s.end - s.begin == 1) {
        push(runs_[s.begin], is_train);
        continue;
      }
      NodeRun* first = &runs_[s.begin];
      NodeRun* last = first + (s.end - s.begin);
      Engine* engine = &engine_;
      engine_.push_sync(
          [first, last, is_train, engine](const RunContext& rc) {
            for (NodeRun* r = first; r != last; ++r) r->run(is_train, *engine, rc);
          },
          options_.device, s.reads, s.writes, FnProperty::kNormal, 0, s.name);
    }
  }

  void push(NodeRun& r, bool is_train) {
    NodeRun* rp = &r;
    Engine* engine = &engine_;
    if (r.async != nullptr) {
      engine_.push_async(
          [rp, is_train, engine](const RunContext& rc, CallbackOnComplete done) {
            rp->run(is_train, *engine, rc, &done);
          },
          options_.device, r.reads, r.writes, FnProperty::kNormal, 0, r.name);
      return;
    }
    engine_.push_sync(
        [rp, is_train, engine](const RunContext& rc) { rp->run(is_train, *engine, rc); },
        options_.device, r.reads, r.writes, FnProperty::kNormal, 0, r.name);
  }

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

}  // namespace

std::unique_ptr<Executor> Executor::bind(std::shared_ptr<const Graph> graph,
                                         const BindOptions& options,
                                         std::map<std::string, NDArray, std::less<>> args,
                                         std::map<std::string, NDArray, std::less<>> aux) {
  WEFT_CHECK(graph != nullptr) << "bind: no graph";
  return std::make_unique<ExecutorImpl>(std::move(graph), options, std::move(args), std::move(aux));
}

}  // namespace weft::graph
