// Internals of the graph executor (graph/executor.cc): one node's cached engine operation
// (NodeRun) and the address-interval map that orders the reuse of arena memory (OccupancyMap).
// Private to the executor; not part of the graph layer's API.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "devices/device_api.h"
#include "engine/engine.h"
#include "ndarray/kernel_scope.h"
#include "ndarray/runtime.h"
#include "ops/op.h"
#include "ops/op_call.h"

namespace weft::graph::executor_detail {

using Clock = std::chrono::steady_clock;

// One node's cached engine operation: its views, requests, variables and resources.
struct NodeRun {
  uint32_t nid = 0;
  std::string name;  // op name, for the engine's profiler and op_times()
  // The kernel, its state and resources (Note [One call path] in ops/op_call.cc); an
  // asynchronous kernel completes through the engine's callback.
  OpCall call;
  std::vector<TensorView> in, out;
  std::vector<OpReq> req;
  std::vector<VarHandle> reads, writes;
  std::vector<VarHandle> in_vars;     // per input, for versions
  std::vector<uint64_t> storage_ids;  // per input (0: not a bound array)
  std::vector<uint64_t> versions;     // per input, filled at run time
  // Per input / output: the layout (Note [Layout propagation]); empty when all are plain.
  std::vector<LayoutRef> in_layouts, out_layouts;
  std::vector<const MemoryLayout*> in_layout_ptrs, out_layout_ptrs;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  RandomState* random = nullptr;
  bool device_seed_ok = false;     // its random request allows a device seed (captured graphs)
  bool random_train_only = false;  // its op draws in training only
  // Set by a capture for the duration of the node's call (Note [Random numbers in captured
  // graphs]): the pass's seed word and the node's number among the pass's random nodes.
  const uint64_t* device_seed = nullptr;
  uint64_t seed_offset = 0;
  Allocator* temp_allocator = nullptr;  // a GPU's pool: CUDA kernels' scratch beyond `workspace`
  bool identity = false;                // in-place identity (FInplaceIdentity): nothing to compute
  int stream = -1;                      // the engine stream to pin (Note [Stream plans]), or -1
  Device device;                        // where the operation is pushed (Note [Mixed placement])
  FnProperty property = FnProperty::kNormal;
  std::optional<Device> copy_from;  // a copy node between devices: its input's device
  bool time_ops = false;
  double total_ms = 0;
  int64_t calls = 0;

  void run(bool is_train, Engine& engine, const RunContext& rc,
           CallbackOnComplete* on_complete = nullptr) {
    if (identity) {
      if (on_complete != nullptr) (*on_complete)();
      return;
    }
    if (copy_from) {  // Note [Mixed placement]: on the GPU's copy stream of the direction
      const TensorView& src = in[0];
      const TensorView& dst = out[0];
      const size_t bytes = static_cast<size_t>(src.size()) * dtype_size(src.dtype());
      DeviceAPI::get(DeviceType::kCUDA)
          ->copy(dst.data, dst.device, src.data, src.device, bytes, rc.stream);
      return;
    }
    OpContext ctx;
    ctx.run = rc;
    ctx.is_train = is_train;
    ctx.workspace = workspace;
    ctx.workspace_bytes = workspace_bytes;
    ctx.random = random;
    ctx.device_seed = device_seed;
    ctx.seed_offset = seed_offset;
    ctx.temp_allocator = temp_allocator;
    for (size_t i = 0; i < in_vars.size(); ++i)
      versions[i] = in_vars[i] ? engine.var_version(in_vars[i]) : 0;
    ctx.input_storage_ids = storage_ids.data();
    ctx.input_versions = versions.data();
    if (!in_layout_ptrs.empty()) {
      ctx.input_layouts = in_layout_ptrs.data();
      ctx.output_layouts = out_layout_ptrs.data();
    }
    KernelScope scope(Runtime::get());
    ctx.num_threads = scope.threads();
    const auto t0 = time_ops ? Clock::now() : Clock::time_point();
    // time_ops counts an asynchronous kernel's launch only.
    call.run(ctx, {in.data(), in.size()}, {req.data(), req.size()}, {out.data(), out.size()},
             on_complete);
    if (time_ops) {
      total_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      ++calls;
    }
  }
};

// Disjoint address intervals, each remembering the buffer that last occupied it.
class OccupancyMap {
 public:
  // Returns the distinct buffers that occupied [begin, end) before, then records `id` there.
  std::vector<int32_t> take(size_t begin, size_t end, int32_t id) {
    std::vector<int32_t> prior;
    auto it = map_.upper_bound(begin);
    if (it != map_.begin()) --it;
    std::vector<std::pair<size_t, Span>> keep;
    while (it != map_.end() && it->first < end) {
      const size_t s = it->first;
      const Span sp = it->second;
      if (sp.end <= begin) {
        ++it;
        continue;
      }
      if (std::find(prior.begin(), prior.end(), sp.id) == prior.end()) prior.push_back(sp.id);
      if (s < begin) keep.push_back({s, Span{begin, sp.id}});
      if (sp.end > end) keep.push_back({end, Span{sp.end, sp.id}});
      it = map_.erase(it);
    }
    for (auto& [s, sp] : keep) map_[s] = sp;
    map_[begin] = Span{end, id};
    return prior;
  }

 private:
  struct Span {
    size_t end;
    int32_t id;
  };
  std::map<size_t, Span> map_;
};

}  // namespace weft::graph::executor_detail
