// The process group and the collectives as engine operations (dist.h).
#include "dist/dist.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>

#include "base/env.h"
#include "dist/controller.h"
#include "dist/gpu_collectives.h"
#include "ndarray/runtime.h"

namespace weft::dist {

using detail::Controller;
using detail::Kind;
using detail::Meta;
using detail::Request;

Options Options::from_environment() {
  Options o;
  Environment env = read_environment();
  if (env.dist_timeout_s) o.timeout_s = *env.dist_timeout_s;
  if (env.dist_fusion_bytes) o.fusion_bytes = static_cast<size_t>(*env.dist_fusion_bytes);
  if (env.dist_cycle_ms) o.cycle_ms = *env.dist_cycle_ms;
  return o;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMean:
      return "mean";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kProd:
      return "prod";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view name) {
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd}) {
    if (name == reduce_op_name(op)) return op;
  }
  throw ValueError("dist: unknown reduce op '" + std::string(name) +
                   "' (expected sum, mean, max, min or prod)");
}

namespace {

struct Group {
  std::mutex mu;
  std::unique_ptr<Controller> controller;
  bool finalized = false;
  bool atexit_registered = false;
  std::map<std::string, uint64_t, std::less<>> uses;  // per name, in program order
  std::map<int, uint64_t> auto_names;                 // per kind: "<kind>.<n>"
  // Collectives pushed and not yet completed: shutdown waits for them.
  std::mutex inflight_mu;
  std::condition_variable inflight_cv;
  int64_t inflight = 0;
};

Group& group() {
  static Group* g = new Group();  // never destroyed: collectives may complete during exit
  return *g;
}

Controller& controller() {
  Group& g = group();
  std::lock_guard lock(g.mu);
  if (!g.controller) throw Error("dist: call weft::dist::init() first");
  return *g.controller;
}

void at_exit() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft dist: leaving the process group at exit: %s\n", e.what());
  }
}

// The key of the next use of `name` ("<kind>.<n>" when empty).
std::string next_key(Kind kind, const std::string& name) {
  Group& g = group();
  std::lock_guard lock(g.mu);
  std::string base = name;
  if (base.empty()) {
    base = std::string(detail::kind_name(kind)) + "." +
           std::to_string(g.auto_names[static_cast<int>(kind)]++);
  }
  uint64_t use = g.uses[base]++;
  return base + "#" + std::to_string(use);
}

// "allreduce 'w'", or "allreduce (unnamed)": a collective in messages before it has a key.
std::string label(const char* what, const std::string& name) {
  return std::string(what) + (name.empty() ? " (unnamed)" : " '" + name + "'");
}

void check_array(const NDArray& a, const std::string& label, const char* role) {
  if (a.is_none()) throw ValueError("dist: " + label + ": the " + role + " array is none");
  const Device device = a.device();
  if (device.type == DeviceType::kCPU) return;
  if (device.type != DeviceType::kCUDA || !detail::have_nccl()) {
    throw NotImplemented("dist: " + label + ": the " + role + " array is on " + to_string(device) +
                         "; " +
                         (device.type == DeviceType::kCUDA
                              ? "this build has no NCCL (GPU arrays need CUDA, MPI and NCCL at "
                                "configure: WEFT_USE_NCCL)"
                              : "collectives take CPU and CUDA arrays"));
  }
}

// One device per collective; GPU arrays on this process's GPU, of a type NCCL carries.
void check_devices(const NDArray& in, const NDArray& out, const std::string& label,
                   int local_rank) {
  if (in.device() != out.device()) {
    throw ValueError("dist: " + label + ": the input is on " + to_string(in.device()) +
                     " and the output on " + to_string(out.device()) +
                     "; a collective takes CPU arrays or GPU arrays, not both (copy one first)");
  }
  if (in.device().type != DeviceType::kCUDA) return;
  const Device gpu = detail::process_gpu(local_rank);
  if (in.device() != gpu) {
    throw ValueError("dist: " + label + ": the arrays are on " + to_string(in.device()) +
                     ", but this process's collectives use " + to_string(gpu) + " (local rank " +
                     std::to_string(local_rank) +
                     "; one GPU per process: cuda:<local rank modulo the visible GPUs>)");
  }
  if (!detail::nccl_supports(in.dtype())) {
    throw ValueError("dist: " + label + ": NCCL cannot carry " + dtype_name(in.dtype()) +
                     " arrays (float32, float64, float16, bfloat16 and the 8-, 32- and 64-bit "
                     "integers it can)");
  }
}

void push(Kind kind, const NDArray& in, const NDArray& out, ReduceOp op, int root,
          const CollectiveOptions& options) {
  const char* what = detail::kind_name(kind);
  Controller& c = controller();
  const std::string tensor = label(what, options.name);
  check_array(in, tensor, "input");
  check_array(out, tensor, "output");
  if (in.dtype() != out.dtype()) {
    throw ValueError("dist: " + tensor + ": input is " + dtype_name(in.dtype()) + ", output is " +
                     dtype_name(out.dtype()));
  }
  check_devices(in, out, tensor, c.transport().local_rank());
  // Note [Collectives on GPU streams] (nccl_transport.cc): a GPU collective is an operation on
  // the arrays' GPU, so that the body gets the stream its inputs are ordered on.
  const bool gpu = in.device().type == DeviceType::kCUDA;
  Meta meta;
  meta.key = next_key(kind, options.name);
  meta.kind = kind;
  meta.dtype = in.dtype();
  meta.op = op;
  meta.root = root;
  meta.priority = options.priority;
  meta.gpu = gpu;
  meta.shape.assign(in.shape().begin(), in.shape().end());
  Group& g = group();
  {
    std::lock_guard lock(g.inflight_mu);
    ++g.inflight;
  }
  std::vector<VarHandle> reads;
  if (!in.shares_storage_with(out)) reads.push_back(in.var());
  std::vector<VarHandle> writes{out.var()};
  auto fn = [&c, meta = std::move(meta), in, out](const RunContext& rc, CallbackOnComplete done) {
    Request r;
    r.meta = meta;
    r.in = in.raw_data();
    r.out = out.raw_data();
    r.in_bytes = in.nbytes();
    r.out_bytes = out.nbytes();
    r.stream = rc.stream;
    // The arrays stay alive (and their memory ours) until the collective has run.
    r.done = [done, in, out](std::exception_ptr error) {
      done(error);
      Group& g = group();
      std::lock_guard lock(g.inflight_mu);
      if (--g.inflight == 0) g.inflight_cv.notify_all();
    };
    c.submit(std::move(r));
  };
  try {
    // GPU: a normal operation, so it runs on one of the GPU's workers, which own the streams.
    Runtime::get().engine().push_async(std::move(fn), gpu ? in.device() : Device::cpu(), reads,
                                       writes, gpu ? FnProperty::kNormal : FnProperty::kAsync,
                                       options.priority, what);
  } catch (...) {
    std::lock_guard lock(g.inflight_mu);
    --g.inflight;
    throw;
  }
}

}  // namespace

void init(const Options& options) {
  Group& g = group();
  std::lock_guard lock(g.mu);
  if (g.controller) return;
  if (g.finalized) {
    throw Error("dist: init() after shutdown(): MPI cannot be initialised twice in one process");
  }
  WEFT_CHECK(options.timeout_s > 0)
      << "dist: timeout_s must be positive, got " << options.timeout_s;
  WEFT_CHECK(options.cycle_ms > 0) << "dist: cycle_ms must be positive, got " << options.cycle_ms;
  Environment env = read_environment();
  std::unique_ptr<detail::Transport> transport;
  if (env.mpi_launcher || (detail::have_mpi() && env.world_size && *env.world_size > 1)) {
    transport = detail::make_mpi_transport();
  } else {
    transport = detail::make_single_transport();
  }
  if (env.world_size && *env.world_size != transport->size()) {
    throw ValueError(
        "dist: WEFT_WORLD_SIZE=" + std::to_string(*env.world_size) + " but the " +
        transport->name() + " group has " + std::to_string(transport->size()) +
        " processes (start the processes with mpirun -np N, or unset WEFT_WORLD_SIZE)");
  }
  if (env.rank && *env.rank != transport->rank()) {
    throw ValueError("dist: WEFT_RANK=" + std::to_string(*env.rank) + " but the " +
                     transport->name() + " group gives this process rank " +
                     std::to_string(transport->rank()));
  }
  g.controller = std::make_unique<Controller>(std::move(transport), options);
  if (!g.atexit_registered) {
    g.atexit_registered = true;
    std::atexit(at_exit);
  }
}

bool initialized() {
  Group& g = group();
  std::lock_guard lock(g.mu);
  return g.controller != nullptr;
}

void shutdown() {
  Group& g = group();
  {
    std::unique_lock lock(g.inflight_mu);
    g.inflight_cv.wait(lock, [&] { return g.inflight == 0; });
  }
  std::unique_ptr<Controller> c;
  {
    std::lock_guard lock(g.mu);
    if (!g.controller) return;
    c = std::move(g.controller);
    g.finalized = true;
  }
  c->stop();
}

int rank() { return controller().transport().rank(); }
int size() { return controller().transport().size(); }
int local_rank() { return controller().transport().local_rank(); }
int local_size() { return controller().transport().local_size(); }
std::string backend() { return controller().transport().name(); }
Stats stats() { return controller().stats(); }

void allreduce(const NDArray& in, const NDArray& out, ReduceOp op,
               const CollectiveOptions& options) {
  if (!in.is_none() && !out.is_none() && in.shape() != out.shape()) {
    throw ShapeError("dist: allreduce '" + options.name + "': input shape " +
                     in.shape().to_string() + " differs from output shape " +
                     out.shape().to_string());
  }
  push(Kind::kAllreduce, in, out, op, 0, options);
}

void broadcast(const NDArray& array, int root, const CollectiveOptions& options) {
  int n = size();
  if (root < 0 || root >= n) {
    throw ValueError("dist: broadcast '" + options.name + "': root " + std::to_string(root) +
                     " is not a rank of a group of " + std::to_string(n));
  }
  push(Kind::kBroadcast, array, array, ReduceOp::kSum, root, options);
}

void allgather(const NDArray& in, const NDArray& out, const CollectiveOptions& options) {
  int n = size();
  if (!in.is_none() && !out.is_none()) {
    bool ok = in.ndim() >= 1 && out.ndim() == in.ndim() && out.shape()[0] == n * in.shape()[0];
    for (int i = 1; ok && i < in.ndim(); ++i) ok = in.shape()[i] == out.shape()[i];
    if (!ok) {
      throw ShapeError("dist: allgather '" + options.name + "': output shape " +
                       out.shape().to_string() + " is not the input's " + in.shape().to_string() +
                       " with its first dimension times the group size " + std::to_string(n));
    }
  }
  push(Kind::kAllgather, in, out, ReduceOp::kSum, 0, options);
}

void reduce_scatter(const NDArray& in, const NDArray& out, ReduceOp op,
                    const CollectiveOptions& options) {
  int n = size();
  if (!in.is_none() && !out.is_none()) {
    bool ok = out.ndim() >= 1 && out.ndim() == in.ndim() && in.shape()[0] == n * out.shape()[0];
    for (int i = 1; ok && i < in.ndim(); ++i) ok = in.shape()[i] == out.shape()[i];
    if (!ok) {
      throw ShapeError("dist: reduce_scatter '" + options.name + "': input shape " +
                       in.shape().to_string() + " is not the output's " + out.shape().to_string() +
                       " with its first dimension times the group size " + std::to_string(n));
    }
  }
  push(Kind::kReduceScatter, in, out, op, 0, options);
}

void barrier(const CollectiveOptions& options) {
  Controller& c = controller();
  if (inside_engine_operation()) throw Error("dist: barrier() inside an engine operation");
  Request r;
  r.meta.key = next_key(Kind::kBarrier, options.name);
  r.meta.kind = Kind::kBarrier;
  r.meta.priority = options.priority;
  auto result = std::make_shared<std::promise<void>>();
  auto future = result->get_future();
  r.done = [result](std::exception_ptr error) {
    if (error) {
      result->set_exception(error);
    } else {
      result->set_value();
    }
  };
  c.submit(std::move(r));
  future.get();
}

void allreduce_gradients(const std::vector<std::pair<std::string, NDArray>>& grads) {
  // The first gradients produced are the last layers'; the last produced are needed first by the
  // next forward, so priority grows along the list.
  for (size_t i = 0; i < grads.size(); ++i) {
    const auto& [name, grad] = grads[i];
    allreduce(grad, grad, ReduceOp::kMean, CollectiveOptions{"grad." + name, static_cast<int>(i)});
  }
}

void broadcast_parameters(const std::vector<std::pair<std::string, NDArray>>& params, int root) {
  for (const auto& [name, p] : params) broadcast(p, root, CollectiveOptions{"param." + name, 0});
}

}  // namespace weft::dist
