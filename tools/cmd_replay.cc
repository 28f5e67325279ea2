// `weft replay`: load an MXNet graph, bind it, run it, report latency, the plan and the top
// operators; optionally save or compare outputs and save the weights used.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/profiler.h"
#include "graph/executor.h"
#include "graph/init_values.h"
#include "graph/json.h"
#include "graph/precision.h"
#include "ndarray/io.h"
#include "ndarray/runtime.h"
#include "ndarray/serialize.h"
#include "ops/kernel_libraries.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/replay_util.h"

namespace weft::tools {
namespace {

struct ReplayOptions {
  std::string graph;
  std::vector<std::string> plugins;
  std::string params;
  std::vector<std::string> inputs;
  int64_t batch = -1;
  std::string device = "cpu";
  int warmup = 2;
  int iters = 10;
  bool train = false;
  std::string profile;
  std::string save_outputs;
  std::string save_params;
  std::string save_grads;
  std::string compare;
  double rtol = 1e-4;
  double atol = 1e-5;
  std::string dtype = "float32";
  // Whether --rtol / --atol were given (else a reduced precision picks its own defaults).
  const CLI::Option* rtol_option = nullptr;
  const CLI::Option* atol_option = nullptr;
  uint64_t seed = 0;
  bool no_fuse = false;
  bool no_bulk = false;
  bool no_cuda_graph = false;
  int streams = 0;
  bool no_layout = false;
  bool quiet = false;
  bool dump = false;
};

// Note [Reduced-precision replay]
// `--dtype bf16|fp16` runs the graph in a 16-bit float type: graph::plan_precision types the
// data inputs and lets inference carry the type to the weights, while BatchNorm's gamma, beta
// and moving statistics and every index or label input stay float32 (Note [Reduced-precision
// binds] in graph/precision.cc). The weights are drawn (or loaded) in float32 exactly as for a
// float32 replay, then cast once into the bound arrays (graph::cast_array, on the host); outputs
// are cast back to float32 for printing, saving and --compare, whose default tolerances are
// graph::precision_tolerance's. The conv+BN+activation fusion is float32-only, so the graph runs
// unfused (cuDNN convolutions in the 16-bit type use the tensor cores). On the CPU the first
// kernel without the type refuses it, naming op, node and type.

// `src` as `dtype` on `device` (graph::cast_array).
NDArray cast_on(const NDArray& src, DType dtype, Device device) {
  return graph::cast_array(src, dtype, device);
}

bool is_16bit(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

int run_replay(const ReplayOptions& o) {
  std::printf("kernels: %s\n", describe_kernel_libraries().c_str());
  std::fflush(stdout);
  const Device device = runnable_device("--device", o.device);
  DType precision = DType::kFloat32;
  try {
    precision = graph::parse_precision(o.dtype);
  } catch (const ValueError& e) {
    WEFT_THROW(ValueError) << "--dtype " << o.dtype << ": " << e.what();
  }
  const bool reduced = precision != DType::kFloat32;
  WEFT_CHECK(o.save_grads.empty() || o.train)
      << "--save-grads " << o.save_grads << ": gradients exist only with --train";
  load_plugins(o.plugins);  // before the graph: it may use the plugins' operators
  Runtime::get().seed(o.seed);
  graph::JsonInfo info;
  auto g = std::make_shared<graph::Graph>(graph::load_json_file(o.graph, &info));
  std::map<std::string, int> ops;
  int op_nodes = 0;
  for (const auto& n : g->nodes) {
    if (n.op) {
      ++ops[n.op->name()];
      ++op_nodes;
    }
  }
  std::printf(
      "loaded %s: MXNet symbol JSON, layout %s, version %d.%d.%d%s, %zu nodes (%d ops of %zu "
      "kinds), %zu heads\n",
      o.graph.c_str(), info.layout.c_str(), info.mxnet_version / 10000,
      info.mxnet_version / 100 % 100, info.mxnet_version % 100, info.upgraded ? " (upgraded)" : "",
      g->nodes.size(), op_nodes, ops.size(), g->heads.size());

  // Inputs: shapes or .npy files; batch size.
  graph::BindOptions bo;
  bo.device = device;
  bo.inputs.batch = o.batch;
  bo.fuse = !o.no_fuse && !reduced;  // the fused convolution is float32-only
  if (o.no_bulk) bo.bulk_max_nodes = 1;
  bo.cuda_graph = !o.no_cuda_graph;
  bo.streams = o.streams;
  // A captured forward is one launch: its nodes cannot be timed one by one.
  bo.time_ops = !(device.type == DeviceType::kCUDA && bo.cuda_graph);
  bo.layouts = !o.no_layout && !reduced;              // (oneDNN formats: float32 CPU binds)
  std::map<std::string, NDArray, std::less<>> given;  // input arrays from .npy
  for (const std::string& text : o.inputs) {
    const InputSpec spec = parse_input_spec(text);
    WEFT_CHECK(g->find_variable(spec.name) >= 0)
        << "--input " << text << ": the graph has no variable '" << spec.name << "'";
    WEFT_CHECK(bo.inputs.shapes.count(spec.name) == 0)
        << "--input " << text << ": '" << spec.name << "' is given twice";
    if (spec.shape) {
      bo.inputs.shapes[spec.name] = *spec.shape;
      continue;
    }
    NDArray a;
    try {
      a = load_npy_array(spec.file);
    } catch (const Error& e) {
      WEFT_THROW(ValueError) << "--input " << text << ": " << e.what();
    }
    WEFT_CHECK(o.batch <= 0 || (a.shape().ndim() >= 1 && a.shape()[0] == o.batch))
        << "--input " << text << ": the file has shape " << a.shape().to_string()
        << ", whose first dimension is not --batch " << o.batch;
    bo.inputs.shapes[spec.name] = a.shape();
    given[spec.name] = a;
  }

  // Weights: from --params, else deterministic from the seed.
  std::map<std::string, NDArray, std::less<>> args, aux, loaded_f32;
  std::set<std::string> from_file;
  if (!o.params.empty()) {
    LoadedArrays loaded = load_arrays(o.params);
    for (size_t i = 0; i < loaded.names.size(); ++i) {
      auto [kind, name] = split_param_name(loaded.names[i]);
      if (g->find_variable(name) < 0) continue;
      // In reduced precision the bound arrays have the types inference gives; the file's
      // float32 values are cast into them after binding.
      (reduced ? loaded_f32 : kind == "aux" ? aux : args)[name] = loaded.arrays[i];
      from_file.insert(name);
    }
    std::printf("params %s: %zu arrays used\n", o.params.c_str(), from_file.size());
  }
  const std::vector<uint32_t> labels = graph::label_variables(*g);
  if (o.train) bo.default_grad_req = GradReq::kWrite;
  for (uint32_t nid : labels) bo.grad_req[g->nodes[nid].name] = GradReq::kNull;
  for (const auto& [name, s] : bo.inputs.shapes) bo.grad_req[name] = GradReq::kNull;

  graph::PrecisionPlan precision_plan;
  if (reduced) {
    precision_plan = graph::plan_precision(*g, bo.inputs, precision);
    bo.inputs.dtypes = precision_plan.dtypes;
  }
  auto exec = graph::Executor::bind(g, bo, args, aux);

  // Fill what the file did not give: inputs (uniform in [-1, 1)), weights and statistics.
  const std::vector<std::string> aux_list = exec->aux_names();
  const std::set<std::string> aux_names(aux_list.begin(), aux_list.end());
  for (uint32_t nid : g->variable_nodes()) {
    const std::string& name = g->nodes[nid].name;
    const bool is_aux = aux_names.count(name) > 0;
    NDArray dst = is_aux ? exec->aux(name) : exec->arg(name);
    // Values given with --input FILE.npy first, always: labels included (a CTC loss or a
    // training step needs them), and before --params (the more specific flag wins).
    if (auto it = given.find(name); it != given.end()) {
      cast_on(it->second, dst.dtype(), dst.device()).copy_to(dst);
      continue;
    }
    if (auto it = loaded_f32.find(name); it != loaded_f32.end()) {
      WEFT_CHECK_AS(ShapeError, it->second.shape() == dst.shape())
          << "--params " << o.params << ": '" << name << "' has shape " << it->second.shape()
          << ", the graph needs " << dst.shape();
      cast_on(it->second, dst.dtype(), dst.device()).copy_to(dst);
      continue;
    }
    if (from_file.count(name)) continue;
    // Labels nobody gave stay zero: the forward pass of a loss layer ignores them (FORMATS.md
    // 1.7), so inference needs none.
    if (std::binary_search(labels.begin(), labels.end(), nid)) continue;
    const bool is_input = bo.inputs.shapes.count(name) > 0;
    WEFT_CHECK(o.params.empty() || is_input)
        << "--params " << o.params << " has no array for '" << name << "' (expected arg:" << name
        << " or aux:" << name << ")";
    // Each variable's values depend only on the seed and its name, so a run with --params (and
    // the same seed) sees the same inputs as the run that saved them.
    if (is_16bit(dst.dtype())) {
      // The float32 values a float32 replay draws, cast once (Note [Reduced-precision replay]).
      NDArray f32 = NDArray::empty(dst.shape(), DType::kFloat32, Device::cpu());
      graph::init_variable_seeded(o.seed, name, is_input, f32);
      cast_on(f32, dst.dtype(), dst.device()).copy_to(dst);
      continue;
    }
    graph::init_variable_seeded(o.seed, name, is_input, dst);
  }
  if (reduced) {
    std::printf(
        "precision: %s: %d variables cast once, %zu kept float32 (BatchNorm parameters, "
        "labels, indices); conv+BN fusion off\n",
        dtype_name(precision), precision_plan.cast, precision_plan.kept_float32.size());
  }
  // The outputs as float32 (the graph's own in float32 replays).
  auto outputs_f32 = [&] {
    std::vector<NDArray> out;
    for (const NDArray& h : exec->outputs()) {
      out.push_back(is_16bit(h.dtype()) ? cast_on(h, DType::kFloat32, Device::cpu()) : h);
    }
    return out;
  };

  if (o.dump) {
    std::printf("%s",
                graph::dump(exec->exec_graph(), &exec->inferred().shapes, &exec->inferred().dtypes)
                    .c_str());
  }
  std::printf("outputs:");
  const auto out_shapes = exec->output_shapes();
  const auto out_names = g->list_outputs();
  for (size_t h = 0; h < out_shapes.size(); ++h) {
    std::printf("%s %s %s", h ? "," : "", out_names[h].c_str(), out_shapes[h].to_string().c_str());
    if (h >= 8 && out_shapes.size() > 10) {
      std::printf(", ... (%zu heads)", out_shapes.size());
      break;
    }
  }
  std::printf("\n");
  if (const graph::LayoutStats ls = exec->layout_stats(); ls.entries > 0 || ls.reorders > 0) {
    std::printf(
        "layouts: %zu entries in oneDNN formats (%.2f MiB padding), %zu reorders (%zu to "
        "plain, %zu from plain)\n",
        ls.entries, ls.padded_bytes / 1048576.0, ls.reorders, ls.to_plain, ls.from_plain);
  }
  const auto& plan = exec->memory_plan().plan;
  std::printf(
      "memory plan: arena %.2f MiB, lower bound %.2f MiB, no reuse %.2f MiB (arena/lower bound "
      "%.3f)%s\n",
      plan.arena_bytes / 1048576.0, plan.lower_bound / 1048576.0, plan.no_reuse / 1048576.0,
      plan.ratio(), o.train ? ", forward + backward" : "");

  auto run_once = [&] {
    try {
      exec->forward(o.train);
      if (o.train) exec->backward();
      for (const NDArray& out : exec->outputs()) out.wait_to_read();
      waitall();
    } catch (const Error& e) {
      if (!reduced || device.type != DeviceType::kCPU) throw;
      try {
        waitall();  // the skipped operations' record, so that nothing is reported twice
      } catch (const Error&) {
      }
      // The kernel's message names op, node and type (Note [Reduced-precision replay]).
      WEFT_THROW(NotImplemented) << "--dtype " << o.dtype << " on the CPU: " << e.what()
                                 << " (16-bit kernels run on a GPU: --device cuda:N)";
    }
  };
  for (int i = 0; i < o.warmup; ++i) run_once();
  const auto warm_times = exec->op_times();
  if (!o.profile.empty()) {
    Profiler::global().clear();
    Profiler::global().start();
  }
  std::vector<double> ms;
  ProgressBar bar(o.iters, !o.quiet && interactive_terminal());
  for (int i = 0; i < o.iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run_once();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    bar.update(i + 1);
  }
  if (!o.profile.empty()) {
    Profiler::global().stop();
    Profiler::global().write_chrome_trace(o.profile);
    std::printf("profile: %s\n", o.profile.c_str());
  }
  if (!ms.empty()) {
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    const double p90 = sorted[std::min(sorted.size() - 1,
                                       static_cast<size_t>(std::ceil(0.9 * sorted.size())) - 1)];
    const int64_t batch = out_shapes.empty() || out_shapes[0].ndim() < 1 ? 1 : out_shapes[0][0];
    std::printf(
        "latency: median %.3f ms, p90 %.3f ms over %d iterations (%d warm-up); throughput %.1f "
        "samples/s\n",
        median, p90, o.iters, o.warmup, batch * 1000.0 / median);
    // Top operators by time over the timed iterations.
    auto times = exec->op_times();
    std::map<std::string, graph::OpTime> warm;
    for (const auto& t : warm_times) warm[t.op] = t;
    double total = 0;
    for (auto& t : times) {
      t.total_ms -= warm[t.op].total_ms;
      t.calls -= warm[t.op].calls;
      total += t.total_ms;
    }
    std::sort(times.begin(), times.end(),
              [](const auto& a, const auto& b) { return a.total_ms > b.total_ms; });
    if (!bo.time_ops) {
      std::printf(
          "top operators: not timed (a CUDA graph runs each forward; --no-cuda-graph "
          "times every node)\n");
    } else {
      std::printf("top operators (kernel time per iteration):\n");
    }
    for (size_t i = 0; i < times.size() && i < 8; ++i) {
      if (times[i].calls == 0) continue;
      std::printf("  %-24s %9.3f ms  %5.1f%%  %lld calls\n", times[i].op.c_str(),
                  times[i].total_ms / o.iters, total > 0 ? 100.0 * times[i].total_ms / total : 0.0,
                  static_cast<long long>(times[i].calls / o.iters));
    }
    if (const graph::StreamPlan* sp = exec->stream_plan()) {
      std::printf("streams: %d of %d used, %d event edges\n", sp->streams_used, sp->num_streams,
                  sp->event_edges);
    }
    if (const graph::PlacementInfo pi = exec->placement(); pi.fallback_nodes > 0) {
      std::printf("placement: %d nodes on the CPU (no kernel on %s), %d copy nodes\n",
                  pi.fallback_nodes, to_string(device).c_str(), pi.copy_nodes);
    }
    if (const graph::CudaGraphInfo cg = exec->cuda_graph(); cg.enabled) {
      if (cg.captured) {
        std::printf("cuda graph: captured, %lld launches\n", static_cast<long long>(cg.launches));
      } else {
        std::printf("cuda graph: not captured%s%s\n", cg.failure.empty() ? "" : ": ",
                    cg.failure.c_str());
      }
    }
    std::printf("replay median_ms=%.3f p90_ms=%.3f\n", median, p90);
  }

  if (!o.save_params.empty()) {
    std::vector<std::pair<std::string, NDArray>> out;
    for (const std::string& name : exec->arg_names()) {
      if (bo.inputs.shapes.count(name)) continue;
      const int64_t nid = g->find_variable(name);
      if (std::binary_search(labels.begin(), labels.end(), static_cast<uint32_t>(nid))) continue;
      out.push_back({"arg:" + name, exec->arg(name)});
    }
    for (const std::string& name : exec->aux_names())
      out.push_back({"aux:" + name, exec->aux(name)});
    save_arrays(o.save_params, out);
    std::printf("saved %zu parameter arrays to %s\n", out.size(), o.save_params.c_str());
  }
  if (!o.save_grads.empty()) {
    std::vector<std::pair<std::string, NDArray>> out;
    for (const std::string& name : exec->arg_names()) {
      auto req = bo.grad_req.find(name);
      if (req != bo.grad_req.end() && req->second == GradReq::kNull) continue;
      NDArray grad = exec->grad(name);
      if (grad.is_none()) continue;
      out.push_back({"grad:" + name, grad});
    }
    save_arrays(o.save_grads, out);
    std::printf("saved %zu gradient arrays to %s\n", out.size(), o.save_grads.c_str());
  }
  if (!o.save_outputs.empty()) {
    std::filesystem::create_directories(o.save_outputs);
    const std::vector<NDArray> outs = outputs_f32();
    for (size_t h = 0; h < outs.size(); ++h) {
      save_npy_array(
          (std::filesystem::path(o.save_outputs) / (std::to_string(h) + ".npy")).string(), outs[h]);
    }
    std::printf("saved %zu outputs to %s\n", exec->outputs().size(), o.save_outputs.c_str());
  }
  if (!o.compare.empty()) {
    const bool rtol_given = o.rtol_option != nullptr && o.rtol_option->count() > 0;
    const bool atol_given = o.atol_option != nullptr && o.atol_option->count() > 0;
    const graph::Tolerance tol =
        reduced ? graph::precision_tolerance(precision) : graph::Tolerance{o.rtol, o.atol};
    const double rtol = rtol_given ? o.rtol : tol.rtol;
    const double atol = atol_given ? o.atol : tol.atol;
    const CompareResult c = compare_outputs(outputs_f32(), o.compare, rtol, atol);
    std::printf("%s\n", c.message.c_str());
    if (!c.ok) return 3;
  }
  return 0;
}

}  // namespace

// More timed or warm-up iterations than anyone waits for (and than the timing vector should hold).
constexpr int64_t kMaxIters = 10'000'000;

Command add_replay_command(CLI::App& app) {
  auto o = std::make_shared<ReplayOptions>();
  Command c;
  c.app = app.add_subcommand(
      "replay", "Load an MXNet graph JSON, bind it and run it; report latency and the plan");
  CLI::App* a = c.app;
  a->add_option("graph", o->graph, "MXNet symbol JSON file")->required();
  add_plugin_option(*a, o->plugins);
  a->add_option("--params", o->params, "MXNet .params file with arg:/aux: arrays");
  a->add_option("--input", o->inputs, "NAME=SHAPE (1x3x224x224) or NAME=FILE.npy; repeatable");
  a->add_option("--batch", o->batch, "Batch size (replaces the first dimension of the inputs)")
      ->transform(integer_in(1, std::numeric_limits<int32_t>::max()));
  a->add_option("--device", o->device, "cpu or cuda:N")->check(device_text());
  a->add_option("--warmup", o->warmup, "Untimed iterations first")
      ->transform(integer_in(0, kMaxIters));
  a->add_option("--iters", o->iters, "Timed iterations")->transform(integer_in(1, kMaxIters));
  a->add_flag("--train", o->train, "Training mode: forward(is_train) and backward");
  a->add_option("--profile", o->profile, "Write a Chrome trace of the timed iterations");
  a->add_option("--save-outputs", o->save_outputs, "Write head k as DIR/k.npy");
  a->add_option("--save-params", o->save_params, "Write the weights used as an MXNet .params file");
  a->add_option("--save-grads", o->save_grads,
                "With --train: write the gradients of the last iteration as grad:NAME arrays "
                "(MXNet .params format)");
  a->add_option("--compare", o->compare,
                "Compare the heads with DIR/k.npy; exit 3 when they differ");
  o->rtol_option = a->add_option("--rtol", o->rtol,
                                 "Relative tolerance of --compare (default 1e-4; "
                                 "bf16 5e-2, fp16 1e-2)")
                       ->check(non_negative_finite());
  o->atol_option = a->add_option("--atol", o->atol,
                                 "Absolute tolerance of --compare (default 1e-5; "
                                 "bf16 5e-2, fp16 1e-2)")
                       ->check(non_negative_finite());
  a->add_option("--dtype", o->dtype,
                "float32, bf16 or fp16: run the graph in that type (weights cast once; BatchNorm "
                "parameters, labels and indices stay float32; outputs compared as float32; the "
                "CPU's kernels refuse 16-bit types, naming the op)");
  a->add_option("--seed", o->seed, "Seed of the weight and input initialisation")
      ->transform(unsigned_integer());
  a->add_flag("--no-fuse", o->no_fuse, "Run the graph as written (no conv+BN+ReLU fusion)");
  a->add_flag(
      "--no-layout", o->no_layout,
      "Keep every tensor in the plain layout (no oneDNN blocked formats between operators)");
  a->add_flag("--no-cuda-graph", o->no_cuda_graph,
              "On a GPU: push every node (or bulk segment) instead of capturing each inference "
              "forward as a CUDA graph");
  a->add_option("--streams", o->streams,
                "On a GPU: compute streams of the stream plan (0: the engine's; 1: one stream)")
      ->transform(integer_in(0, 64));
  a->add_flag("--no-bulk", o->no_bulk,
              "Push every node as its own engine operation (no bulk segments of chained nodes)");
  a->add_flag("--quiet", o->quiet, "No progress bar");
  a->add_flag("--dump", o->dump,
              "Print the graph that runs (after rewrites), with inferred shapes and types");
  c.run = [o] { return run_replay(*o); };
  return c;
}

}  // namespace weft::tools
