// The graph executor's cached node operations (one engine operation per node, or per bulk
// segment), its CUDA graph capture, and the pushing of a run (see executor_impl.h).
#include <algorithm>

#include "graph/executor_impl.h"

namespace weft::graph::executor_detail {

void ExecutorImpl::build_runs() {
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
  runs_.clear();
  runs_.reserve(g.nodes.size());
  num_forward_runs_ = 0;
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    if (n.is_variable()) continue;
    NodeRun r;
    r.nid = nid;
    r.name = n.op->name();
    const Device dev = node_device_[nid];
    r.device = dev;
    // A copy node between devices (Note [Mixed placement]): the bytes move on the GPU's copy
    // stream of the direction.
    if (placement_.copy_nodes > 0 && r.name == "_copy" && n.inputs.size() == 1 &&
        node_device_[n.inputs[0].node] != dev) {
      r.copy_from = node_device_[n.inputs[0].node];
      const bool to_gpu = dev.type != DeviceType::kCPU;
      r.device = to_gpu ? dev : *r.copy_from;
      r.property = to_gpu ? FnProperty::kCopyToDevice : FnProperty::kCopyFromDevice;
    } else {
      WEFT_CHECK_AS(NotImplemented, OpKernel::of(*n.op, dev.type).valid())
          << "bind: node " << nid << " ('" << n.name << "'): op " << n.op->name()
          << " has no kernel on " << weft::to_string(dev);
    }
    if (dev.type == DeviceType::kCUDA) r.temp_allocator = &Runtime::get().allocator(dev);
    r.time_ops = options_.time_ops;
    if (streams_.num_streams > 1 && dev.type == DeviceType::kCUDA && !r.copy_from) {
      r.stream = stream_base_ + streams_.node_stream[nid];
    }
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
      const Device in_dev = node_device_[n.inputs[i].node];
      if (auto it = head_arrays_.find(eid); it != head_arrays_.end()) {
        var = it->second.var();
        ptr = it->second.raw_data();
      } else if (auto off = off_arena_.find(eid); off != off_arena_.end()) {
        var = off->second.var();
        ptr = off->second.raw_data();
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
      r.in.emplace_back(ptr, in_dev, inferred_.dtypes[eid], inferred_.shapes[eid]);
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
      } else if (auto off = off_arena_.find(eid); off != off_arena_.end()) {
        r.writes.push_back(off->second.var());
        ptr = off->second.raw_data();
      } else {
        const int32_t b = plan_.entry_buffer[eid];
        WEFT_CHECK_AS(InternalError, b >= 0) << "bind: entry " << eid << " has no memory";
        r.writes.push_back(buffer_vars_[b]);
        for (int32_t p : prior[b]) r.writes.push_back(buffer_vars_[p]);
        ptr = base + plan_.entry_offset[eid];
        if (plan_.entry_inplace_of[eid] >= 0) req = OpReq::kInplace;
      }
      r.out.emplace_back(ptr, dev, inferred_.dtypes[eid], inferred_.shapes[eid]);
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
    } else if (auto ws = off_arena_workspace_.find(nid); ws != off_arena_workspace_.end()) {
      r.workspace = ws->second.raw_data();
      r.workspace_bytes = plan_.workspace_bytes[nid];
      r.writes.push_back(ws->second.var());
    }
    // Kernel, state and resources (Note [One call path] in ops/op_call.cc); the workspace is
    // the plan's (above), sized from the same requests.
    if (!r.copy_from) {
      r.call = OpCall::make(*n.op_attrs, dev, in_shapes, in_types, out_shapes);
      if (r.call.resources.random) {
        RandomResource& rnd = Runtime::get().random(dev);
        r.random = &rnd.state;
        r.device_seed_ok = r.call.resources.device_seed;
        r.random_train_only = r.call.resources.train_only;
        r.writes.push_back(rnd.var);
      }
    } else {
      r.call.attrs = n.op_attrs.get();
      r.call.device = dev;
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
  setup_capture();
}

namespace {

// The kernel of `_random_seed_next` on `device`, applied in place to one seed word.
SeedAdvance seed_advance(DeviceType device) {
  const Op& op = get_op("_random_seed_next");
  const FCompute* fc = op.compute(device);
  WEFT_CHECK_AS(NotImplemented, fc != nullptr)
      << "_random_seed_next has no kernel on " << weft::to_string(Device{device, 0});
  auto attrs = std::make_shared<OpAttrs>(op.make_attrs({}, "seed_advance"));
  return [fc, attrs](uint64_t* word, const RunContext& rc) {
    static const Shape kOne{1};
    const TensorView v(word, rc.device, DType::kInt64, kOne);
    const OpReq req = OpReq::kInplace;
    OpContext ctx;
    ctx.run = rc;
    (*fc)(*attrs, ctx, std::span<const TensorView>(&v, 1), std::span<const OpReq>(&req, 1),
          std::span<const TensorView>(&v, 1));
  };
}

}  // namespace

// Note [CUDA graph capture]: new captures for every binding (the graphs hold the arena's
// addresses), when the graph can be captured at all: on a GPU, every node there, random
// resources only of ops that take a device seed (Note [Random numbers in captured graphs]) and
// no asynchronous kernel.
void ExecutorImpl::setup_capture() {
  if (inference_.capture || train_forward_.capture || train_backward_.capture) {
    engine_.wait_for_var(arena_var_);  // their last launches may still run
  }
  inference_ = CapturedRange{};
  train_forward_ = CapturedRange{};
  train_backward_ = CapturedRange{};
  DeviceAPI* api = DeviceAPI::try_get(options_.device.type);
  if (!options_.cuda_graph || options_.device.type != DeviceType::kCUDA ||
      placement_.fallback_nodes > 0 || options_.time_ops || api == nullptr || !api->can_capture()) {
    return;
  }
  for (const NodeRun& r : runs_) {
    if (r.call.kernel.async != nullptr || (r.random != nullptr && !r.device_seed_ok)) return;
  }
  inference_ = make_capture(0, num_forward_runs_, false);
  if (has_backward_) {
    train_forward_ = make_capture(0, num_forward_runs_, true);
    train_backward_ = make_capture(num_forward_runs_, runs_.size(), true);
  }
}

ExecutorImpl::CapturedRange ExecutorImpl::make_capture(size_t begin, size_t end, bool is_train) {
  CapturedRange c;
  for (size_t k = begin; k < end; ++k) {
    c.reads.insert(c.reads.end(), runs_[k].reads.begin(), runs_[k].reads.end());
    c.writes.insert(c.writes.end(), runs_[k].writes.begin(), runs_[k].writes.end());
  }
  std::sort(c.writes.begin(), c.writes.end());
  c.writes.erase(std::unique(c.writes.begin(), c.writes.end()), c.writes.end());
  std::erase_if(c.reads, [&](VarHandle v) {
    return std::binary_search(c.writes.begin(), c.writes.end(), v);
  });
  std::sort(c.reads.begin(), c.reads.end());
  c.reads.erase(std::unique(c.reads.begin(), c.reads.end()), c.reads.end());
  SeedAdvance advance;
  if (std::any_of(runs_.begin() + static_cast<ptrdiff_t>(begin),
                  runs_.begin() + static_cast<ptrdiff_t>(end), [is_train](const NodeRun& r) {
                    return r.random != nullptr && (is_train || !r.random_train_only);
                  })) {
    advance = seed_advance(options_.device.type);
  }
  c.capture = std::make_unique<GraphCapture>(
      options_.device, std::span<NodeRun>(runs_.data() + begin, end - begin), stream_plan(),
      Runtime::get().shared_allocator(options_.device), is_train, std::move(advance));
  return c;
}

// One engine operation for the whole range; node by node while the profiler records.
void ExecutorImpl::push_captured(CapturedRange& c) {
  GraphCapture* capture = c.capture.get();
  if (Profiler::global().enabled()) {
    const bool backward = &c == &train_backward_;
    if (backward) {
      push_range(backward_segments_, num_forward_runs_, runs_.size(), true);
    } else {
      push_range(forward_segments_, 0, num_forward_runs_, capture->is_train());
    }
    return;
  }
  Engine* engine = &engine_;
  // Always the same engine stream: the warm-up creates that stream's library handles (cuDNN,
  // cuBLAS), which capture could not create.
  ComputeStreamScope stream(stream_base_);
  engine_.push_sync([capture, engine](const RunContext& rc) { capture->run(*engine, rc); },
                    options_.device, c.reads, c.writes, FnProperty::kNormal, 0, "cuda_graph");
}

// Groups runs_[begin, end) into segments (bulk_max_nodes).
std::vector<ExecutorImpl::SegmentRun> ExecutorImpl::make_segments(size_t begin, size_t end) const {
  std::vector<SegmentNode> nodes;
  nodes.reserve(end - begin);
  for (size_t k = begin; k < end; ++k) {
    const NodeRun& r = runs_[k];
    SegmentNode n;
    n.async = r.call.kernel.async != nullptr || r.copy_from;  // copies between devices go alone
    // Segments never span devices: a CPU node of a GPU graph gets a stream of its own kind.
    n.stream = r.device == options_.device ? r.stream : -2;
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
void ExecutorImpl::push_range(std::vector<SegmentRun>& segments, size_t begin, size_t end,
                              bool is_train) {
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
    ComputeStreamScope stream(first->stream);
    engine_.push_sync(
        [first, last, is_train, engine](const RunContext& rc) {
          for (NodeRun* r = first; r != last; ++r) r->run(is_train, *engine, rc);
        },
        first->device, s.reads, s.writes, FnProperty::kNormal, 0, s.name);
  }
}

void ExecutorImpl::push(NodeRun& r, bool is_train) {
  NodeRun* rp = &r;
  Engine* engine = &engine_;
  ComputeStreamScope stream(r.stream);
  if (r.call.kernel.async != nullptr) {
    engine_.push_async(
        [rp, is_train, engine](const RunContext& rc, CallbackOnComplete done) {
          rp->run(is_train, *engine, rc, &done);
        },
        r.device, r.reads, r.writes, r.property, 0, r.name);
    return;
  }
  engine_.push_sync(
      [rp, is_train, engine](const RunContext& rc) { rp->run(is_train, *engine, rc); }, r.device,
      r.reads, r.writes, r.property, 0, r.name);
}

}  // namespace weft::graph::executor_detail
