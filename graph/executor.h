// The executor: binds a static graph to an invocation context (device, input shapes or batch
// size, argument and auxiliary arrays, grad_req per argument), plans memory once, allocates the
// arena and caches one engine operation per node. forward()/backward() push them and return.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/infer.h"
#include "graph/layout.h"
#include "graph/plan.h"
#include "graph/streams.h"
#include "ndarray/ndarray.h"

namespace weft::graph {

struct BindOptions {
  Device device = Device::cpu();
  /// Shapes of inputs that have no array in `args` (data, labels), and the batch size.
  InferInputs inputs;
  /// grad_req per argument name; missing names get `default_grad_req`. Any kWrite/kAdd makes the
  /// executor build the backward graph (gradient pass) and plan forward + backward together.
  std::map<std::string, GradReq, std::less<>> grad_req;
  GradReq default_grad_req = GradReq::kNull;
  /// Inference-time rewrites (BatchNorm folded into the preceding convolution, ReLU fused as a
  /// post-op) when no gradient is requested. Results equal the unfused graph within rounding.
  bool fuse = true;
  /// Layout propagation (graph/layout.h) when no gradient is requested and the build has oneDNN:
  /// activations stay in the formats the convolutions choose from one op to the next, with
  /// reorder nodes only where an op needs plain data and at the graph's edges. Results equal the
  /// plain run within rounding. false keeps every entry plain.
  bool layouts = true;
  /// Record the time spent in each node (op_times()).
  bool time_ops = false;
  /// Bulk execution (Note [Bulk segments] in graph/segments.cc): up to this many consecutive
  /// nodes of a chain are pushed as one engine operation. 1 pushes every node alone. While the
  /// profiler records, nodes are pushed alone so the trace shows each one.
  uint32_t bulk_max_nodes = 16;
  /// On a GPU: the compute streams of the stream plan (Note [Stream plans] in graph/streams.h);
  /// independent branches run on different streams and the memory plan keeps buffers alive on
  /// different streams at the same time apart. 0 = the engine's compute streams for the device;
  /// 1 = one stream (chosen by the engine per node). Ignored on the CPU.
  int streams = 0;
  /// On a GPU: each forward (and each backward of a training bind) is one engine operation,
  /// captured into a CUDA graph on its second run and replayed with one launch after (Note
  /// [CUDA graph capture] in graph/graph_capture.cc). Rebinding (reshape) captures again. Graphs
  /// with random resources, asynchronous kernels or nodes placed on the CPU, runs with time_ops,
  /// and passes pushed while the profiler records run node by node as without it.
  bool cuda_graph = true;
};

/// Mixed placement (Note [Mixed placement] in graph/executor.cc): nodes that run on a fallback
/// device because their op has no kernel on the bound one, and the copy nodes added for them.
struct PlacementInfo {
  int fallback_nodes = 0;
  int copy_nodes = 0;
};

/// What CUDA graph capture did for an executor (Executor::cuda_graph()).
struct CudaGraphInfo {
  bool enabled = false;   ///< forwards in inference mode go through capture
  bool captured = false;  ///< a graph is captured and launched
  int64_t launches = 0;   ///< launches of the captured graph
  std::string failure;    ///< why capture failed (the executor then stays eager)
};

/// Time spent per op name over every run since bind (when BindOptions::time_ops).
struct OpTime {
  std::string op;
  int64_t calls = 0;
  double total_ms = 0;
};

/// Variables fed to an op input named "label" (loss heads): filled with zeros when not given.
std::vector<uint32_t> label_variables(const Graph& graph);

/// A graph bound to the runtime's engine and a planned arena. Call from one thread at a time.
///
/// Lifetime (docs/LIFETIMES.md): the executor uses the runtime current at bind. It may outlive
/// shutdown() or Runtime::reset(); it can then only be destroyed (forward/backward/reshape throw
/// Error), and its arena, arrays and pool are freed safely whenever that happens.
class Executor {
 public:
  /// Binds `graph`. Arrays given in `args`/`aux` (by variable name) are used as they are (shapes
  /// must agree with inference); missing arguments and auxiliary states are allocated (zeros) —
  /// fill them through arg()/aux(). Loss heads' label inputs are allocated as zeros.
  /// Throws ShapeError/ValueError naming the node or variable at fault.
  static std::unique_ptr<Executor> bind(std::shared_ptr<const Graph> graph,
                                        const BindOptions& options,
                                        std::map<std::string, NDArray, std::less<>> args = {},
                                        std::map<std::string, NDArray, std::less<>> aux = {});
  virtual ~Executor() = default;

  /// Pushes the forward pass (training mode when `is_train`); returns at once.
  virtual void forward(bool is_train = false) = 0;
  /// Pushes the backward pass. `head_grads` per head (empty: ones; loss heads need none).
  virtual void backward(const std::vector<NDArray>& head_grads = {}) = 0;
  /// Rebinds for new input shapes (another batch size); reuses the arena when the new plan fits.
  /// Arguments whose shapes do not change are kept. Returns whether the arena was reused.
  virtual bool reshape(const InferInputs& inputs) = 0;

  /// The head outputs (valid after forward(); reading waits).
  virtual const std::vector<NDArray>& outputs() const = 0;
  virtual NDArray arg(std::string_view name) const = 0;
  virtual NDArray aux(std::string_view name) const = 0;
  /// The gradient array of an argument (none when its grad_req is null).
  virtual NDArray grad(std::string_view name) const = 0;
  virtual std::vector<std::string> arg_names() const = 0;
  virtual std::vector<std::string> aux_names() const = 0;

  /// The graph actually run (after the gradient pass and rewrites), its inference and its plan.
  virtual const Graph& exec_graph() const = 0;
  virtual const InferResult& inferred() const = 0;
  virtual const MemoryPlan& memory_plan() const = 0;
  /// The stream plan of exec_graph() (null when the executor runs without one: on the CPU, or
  /// with one stream).
  virtual const StreamPlan* stream_plan() const = 0;
  /// What mixed placement did (all zero when every node runs on the bound device).
  virtual PlacementInfo placement() const = 0;
  /// The state of CUDA graph capture (BindOptions::cuda_graph).
  virtual CudaGraphInfo cuda_graph() const = 0;
  /// Inferred shapes of the forward heads.
  virtual std::vector<Shape> output_shapes() const = 0;
  virtual std::vector<OpTime> op_times() const = 0;
  /// What layout propagation did for the current shapes (all zero when it did not run).
  virtual LayoutStats layout_stats() const = 0;
  /// Per entry id of exec_graph(): its layout (null = plain); empty when propagation did not run.
  virtual const std::vector<LayoutRef>& entry_layouts() const = 0;
};

}  // namespace weft::graph
