// `weft model`: builds one of the bundled models with the symbolic API and saves its graph JSON
// (MXNet >= 1.0 layout), printing the input shapes to replay it with.
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "graph/json.h"
#include "graph/models.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace weft::tools {

Command add_model_command(CLI::App& app) {
  struct Options {
    std::string name;
    std::string output;
    int64_t batch = 1;
    bool list = false;
  };
  auto o = std::make_shared<Options>();
  Command c;
  c.app =
      app.add_subcommand("model",
                         "Build a bundled model (mlp, resnet18, resnet50, mobilenetv2, lstm_lm, "
                         "lstm_lm_fused) and save its graph JSON");
  c.app->add_option("name", o->name, "Model name");
  c.app->add_option("-o,--output", o->output,
                    "Where to write the JSON (default: <name>-symbol.json)");
  c.app->add_option("--batch", o->batch, "Batch size of the printed input shapes")
      ->transform(integer_in(1, std::numeric_limits<int32_t>::max()));
  c.app->add_flag("--list", o->list, "List the bundled models");
  c.run = [o] {
    if (o->list || o->name.empty()) {
      for (const std::string& n : graph::models::model_names()) std::printf("%s\n", n.c_str());
      return o->name.empty() && !o->list ? 2 : 0;
    }
    graph::Symbol sym = graph::models::build(o->name);
    const std::string path = o->output.empty() ? o->name + "-symbol.json" : o->output;
    if (auto parent = std::filesystem::path(path).parent_path(); !parent.empty()) {
      std::filesystem::create_directories(parent);
    }
    sym.save(path);
    const graph::InferInputs in = graph::models::default_inputs(o->name, o->batch);
    const graph::Graph g = sym.to_graph();
    std::printf("model %s: %zu nodes, %zu arguments, %zu auxiliary states -> %s\n", o->name.c_str(),
                g.nodes.size(), g.list_arguments().size(), g.list_auxiliary_states().size(),
                path.c_str());
    std::printf("inputs:");
    for (const auto& [name, shape] : in.shapes) {
      std::string s;
      for (int i = 0; i < shape.ndim(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
      std::printf(" --input %s=%s", name.c_str(), s.c_str());
    }
    std::printf("\n");
    return 0;
  };
  return c;
}

}  // namespace weft::tools
