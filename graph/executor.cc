// The graph executor: binding (inference, gradient pass, memory plan, arena, cached engine
// operations) and running (pushing the cached operations).
#include "graph/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "base/profiler.h"
#include "devices/device_api.h"
#include "graph/executor_impl.h"
#include "graph/fuse.h"
#include "graph/gradient.h"
#include "graph/graph_capture.h"
#include "graph/placement.h"
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

namespace executor_detail {

// The graph that runs: forward (+ backward when any gradient is requested), or the forward
// with inference rewrites.
void ExecutorImpl::build_exec_graph() {
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
  place_nodes();
  num_forward_nodes_ =
      has_backward_ ? grad_info_.num_forward_nodes : static_cast<uint32_t>(exec_.nodes.size());
  use_layouts_ = options_.layouts && !has_backward_ && layouts_available() &&
                 options_.device.type == DeviceType::kCPU;
  if (use_layouts_) base_ = exec_;
}

// Note [Mixed placement]
// On a GPU, an inference graph with nodes whose op has no CUDA kernel (a foreign operator
// registered for the CPU only) runs those nodes on the CPU: graph::place_devices adds a `_copy`
// node on every edge between devices (variables stay on the GPU; heads come back to it). A copy
// node is an engine operation of the GPU's copy streams (kCopyToDevice / kCopyFromDevice) that
// moves the bytes with DeviceAPI::copy; CPU nodes are CPU operations, ordered with the GPU ones
// by their variables like any mixed imperative work. The arena holds the GPU's entries only: the
// CPU nodes' outputs and workspaces are arrays of their own (GraphPlanOptions::off_arena). Such
// a graph is not captured as a CUDA graph. Training binds are not placed (the gradient pass's
// node numbering is not remapped yet): a missing kernel there is refused at bind, naming it.
void ExecutorImpl::place_nodes() {
  node_device_.assign(exec_.nodes.size(), options_.device);
  placement_ = PlacementInfo{};
  if (options_.device.type == DeviceType::kCPU || has_backward_) return;
  bool missing = false;
  for (const Node& n : exec_.nodes) {
    missing = missing || (n.op && !n.op->has_kernel(options_.device.type));
  }
  if (!missing) return;
  PlacementOptions po;
  po.target = options_.device;
  po.fallbacks = {Device::cpu()};
  Placement p = place_devices(exec_, po);
  exec_ = std::move(p.graph);
  node_device_ = std::move(p.node_device);
  placement_.fallback_nodes = p.fallback_nodes;
  placement_.copy_nodes = p.copy_nodes;
}

bool ExecutorImpl::setup(const InferInputs& inputs) {
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
    node_device_.assign(exec_.nodes.size(), options_.device);
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
      WEFT_CHECK_AS(ShapeError, a.shape() == shape) << "bind: array for '" << name << "' has shape "
                                                    << a.shape() << ", the graph needs " << shape;
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
  // Note [Stream plans]: on a GPU the nodes are spread over the engine's compute streams, and
  // the memory plan keeps buffers that may be alive on two streams at once apart.
  streams_ = StreamPlan{};
  if (options_.device.type == DeviceType::kCUDA) {
    const int k = options_.streams > 0
                      ? options_.streams
                      : std::max(Runtime::get().config().engine.gpu_compute_streams, 1);
    if (k > 1) {
      streams_ = plan_streams(g, k);
      plan_options.streams = &streams_;
    }
  }
  plan_options.device = options_.device.type;
  if (placement_.fallback_nodes > 0) {
    plan_options.off_arena.resize(g.nodes.size());
    plan_options.node_devices.resize(g.nodes.size());
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
      plan_options.off_arena[nid] = node_device_[nid] != options_.device;
      plan_options.node_devices[nid] = node_device_[nid].type;
    }
  }
  plan_ = plan_memory(g, inferred_, plan_options);
  // Note [Mixed placement]: what the fallback nodes write, on their own device.
  off_arena_.clear();
  off_arena_workspace_.clear();
  for (uint32_t nid = 0; nid < g.nodes.size() && placement_.fallback_nodes > 0; ++nid) {
    if (g.nodes[nid].is_variable() || node_device_[nid] == options_.device) continue;
    for (int o = 0; o < g.nodes[nid].num_outputs(); ++o) {
      const uint32_t eid = g.entry_id(nid, o);
      if (head_arrays_.count(eid)) continue;
      off_arena_[eid] =
          NDArray::empty(inferred_.shapes[eid], inferred_.dtypes[eid], node_device_[nid]);
    }
    if (plan_.workspace_bytes[nid] > 0) {
      off_arena_workspace_[nid] =
          NDArray::empty(Shape({static_cast<int64_t>(plan_.workspace_bytes[nid])}), DType::kUInt8,
                         node_device_[nid]);
    }
  }
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

}  // namespace executor_detail

std::unique_ptr<Executor> Executor::bind(std::shared_ptr<const Graph> graph,
                                         const BindOptions& options,
                                         std::map<std::string, NDArray, std::less<>> args,
                                         std::map<std::string, NDArray, std::less<>> aux) {
  WEFT_CHECK(graph != nullptr) << "bind: no graph";
  return std::make_unique<executor_detail::ExecutorImpl>(std::move(graph), options, std::move(args),
                                                         std::move(aux));
}

}  // namespace weft::graph
