// `weft plan GRAPH.json`: the static memory plan of an MXNet graph for given input shapes (the
// forward graph, or forward + backward with --train): every buffer's offset and lifetime, then
// the arena against the lower bound and the no-reuse total; with --streams N, for a multi-stream
// plan.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "graph/executor.h"
#include "graph/gradient.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "graph/plan.h"
#include "graph/streams.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/replay_util.h"

namespace weft::tools {
namespace {

struct PlanCommandOptions {
  std::string graph;
  std::vector<std::string> plugins;
  std::vector<std::string> inputs;
  int64_t batch = -1;
  bool train = false;
  bool baseline = false;
  int streams = 1;
};

// The graph to plan and its inference results: the forward graph, or with `train` the gradient
// graph with respect to every argument that is neither a given input nor a loss head's label
// (what `weft replay --train` binds).
struct PlannedGraph {
  graph::Graph graph;
  graph::InferResult inferred;
  size_t num_wrt = 0;
};

PlannedGraph prepare(const graph::Graph& forward, const graph::InferInputs& inputs, bool train) {
  PlannedGraph out;
  if (!train) {
    out.graph = forward;
    out.inferred = graph::infer_shapes_types(forward, inputs, true);
    return out;
  }
  const std::vector<uint32_t> labels = graph::label_variables(forward);
  graph::GradientOptions go;
  for (uint32_t nid : forward.argument_nodes()) {
    if (std::binary_search(labels.begin(), labels.end(), nid)) continue;
    if (inputs.shapes.count(forward.nodes[nid].name)) continue;
    go.wrt.push_back(nid);
  }
  WEFT_CHECK(!go.wrt.empty())
      << "--train: the graph has no learned parameters (every argument is an input or a "
         "label)";
  graph::GradientGraph grad = graph::build_gradient(forward, go);
  // Head gradients take their heads' shapes and types.
  const graph::InferResult f = graph::infer_shapes_types(forward, inputs, true);
  graph::InferInputs in = inputs;
  for (size_t h = 0; h < grad.head_grad_nodes.size(); ++h) {
    if (grad.head_grad_nodes[h] < 0) continue;
    const uint32_t eid = forward.entry_id(forward.heads[h]);
    const std::string& name = grad.graph.nodes[grad.head_grad_nodes[h]].name;
    in.fixed_shapes[name] = f.shapes[eid];
    in.dtypes[name] = f.dtypes[eid];
  }
  out.num_wrt = go.wrt.size();
  out.graph = std::move(grad.graph);
  out.inferred = graph::infer_shapes_types(out.graph, in, true);
  return out;
}

int run_plan(const PlanCommandOptions& o) {
  try {
    WEFT_CHECK(o.batch == -1 || o.batch > 0) << "--batch must be positive, got " << o.batch;
    load_plugins(o.plugins);  // before the graph: it may use the plugins' operators
    const graph::Graph forward = graph::load_json_file(o.graph);
    graph::InferInputs inputs;
    inputs.batch = o.batch;
    for (const std::string& text : o.inputs) {
      const InputSpec spec = parse_input_spec(text);
      WEFT_CHECK(forward.find_variable(spec.name) >= 0)
          << "--input " << text << ": " << o.graph << " has no variable '" << spec.name << "'";
      WEFT_CHECK(spec.shape.has_value())
          << "--input " << text << ": weft plan takes shapes (NAME=1x3x224x224), not files";
      WEFT_CHECK(inputs.shapes.count(spec.name) == 0)
          << "--input " << text << ": '" << spec.name << "' is given twice";
      inputs.shapes[spec.name] = *spec.shape;
    }
    const PlannedGraph pg = prepare(forward, inputs, o.train);

    graph::GraphPlanOptions options;
    options.baseline = o.baseline;
    // A multi-stream plan (Note [Stream plans]): what the executor on a GPU runs with.
    graph::StreamPlan streams;
    if (o.streams > 1) {
      streams = graph::plan_streams(pg.graph, o.streams);
      options.streams = &streams;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const graph::MemoryPlan mp = graph::plan_memory(pg.graph, pg.inferred, options);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    graph::check_buffer_plan(mp.buffers, mp.plan, options.plan);

    std::printf("%s: %zu nodes%s, %u entries\n", o.graph.c_str(), pg.graph.nodes.size(),
                o.train ? (" (forward + backward, gradients of " + std::to_string(pg.num_wrt) +
                           " arguments)")
                              .c_str()
                        : " (forward)",
                pg.graph.num_entries());
    std::printf("planner: %s, %.2f ms\n",
                o.baseline ? "block sharing (MXNet-style baseline)" : "weft", ms);
    if (o.streams > 1) {
      std::printf("streams: %d of %d used, %d event edges for %d cross-stream dependencies\n",
                  streams.streams_used, o.streams, streams.event_edges, streams.cross_edges);
    }
    std::fputs(graph::describe_plan(pg.graph, mp).c_str(), stdout);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "weft plan: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanCommandOptions>();
  Command c;
  c.app = app.add_subcommand(
      "plan", "Plan the memory of an MXNet graph: offsets, lifetimes, arena vs lower bound");
  CLI::App* a = c.app;
  a->add_option("graph", o->graph, "MXNet symbol JSON file")->required();
  add_plugin_option(*a, o->plugins);
  a->add_option("--input", o->inputs,
                "NAME=SHAPE, e.g. data=1x3x224x224 or data=(1,3,224,224); repeatable");
  a->add_option("--batch", o->batch, "Batch size (replaces the first dimension of the inputs)")
      ->transform(integer_in(1, std::numeric_limits<int32_t>::max()));
  a->add_flag("--train", o->train, "Plan forward + backward (gradients of the learned parameters)");
  a->add_flag("--baseline", o->baseline, "Use MXNet-style block sharing instead of weft's planner");
  a->add_option("--streams", o->streams,
                "Plan for N concurrent GPU streams (branches on different streams never share "
                "memory)")
      ->transform(integer_in(1, 64));
  c.run = [o] { return run_plan(*o); };
  return c;
}

}  // namespace weft::tools
