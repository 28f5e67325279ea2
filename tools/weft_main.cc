// The `weft` command: subcommands for demonstrations and, later, graph replay and planning.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <limits>
#include <string>
#include <vector>

#include "base/build_config.h"
#include "devices/device_api.h"
#include "ops/kernel_libraries.h"
#include "ops/op_listing.h"
#include "ops/op_schema.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/demo.h"

namespace {

// "weft 0.1.0; kernels: oneDNN 2.6.3 (cpu, OpenMP), CUDA off; 16 CPU cores".
std::string version_line() {
  return std::string("weft ") + WEFT_VERSION_STRING +
         "; kernels: " + weft::describe_kernel_libraries() + "; " +
         std::to_string(weft::cpu_core_count()) + " CPU cores";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft: asynchronous dataflow execution engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return version_line(); });

  weft::tools::DemoOptions demo;
  CLI::App* demo_cmd = app.add_subcommand("demo", "Run a tiled matrix product through the engine");
  demo_cmd->add_option("--size", demo.size, "Matrix size N (N x N)")
      ->transform(weft::tools::integer_in(1, 16384));
  demo_cmd->add_option("--tiles", demo.tiles, "Tiles per side (must divide N)")
      ->transform(weft::tools::integer_in(1, 1024));
  demo_cmd
      ->add_option("--workers", demo.workers,
                   "CPU worker threads (0: WEFT_CPU_WORKERS or all cores)")
      ->transform(weft::tools::integer_in(0, 4096));
  demo_cmd->add_option("--repeats", demo.repeats, "Repetitions (best is reported)")
      ->transform(weft::tools::integer_in(1, 100000));
  demo_cmd->add_option("--seed", demo.seed, "Seed of the input values")
      ->transform(weft::tools::integer_in(0, std::numeric_limits<uint32_t>::max()));
  demo_cmd->add_option("--profile", demo.profile_path, "Write a Chrome trace JSON here");

  CLI::App* version_cmd = app.add_subcommand("version", "Print version and build configuration");

  bool ops_brief = false, ops_backward = false, ops_json = false;
  std::string ops_name;
  CLI::App* ops_cmd =
      app.add_subcommand("ops", "List the registered operators with inputs, params and defaults");
  ops_cmd->add_option("name", ops_name, "Show only this operator (name or alias)");
  ops_cmd->add_flag("--brief", ops_brief, "One line per operator");
  ops_cmd->add_flag("--backward", ops_backward, "Include the _backward_* operators");
  ops_cmd->add_flag("--json", ops_json,
                    "Print the operator schema as JSON (what the C ABI's weft_op_schema gives)");
  std::vector<std::string> ops_plugins;
  weft::tools::add_plugin_option(*ops_cmd, ops_plugins);

  std::vector<weft::tools::Command> commands;
  commands.push_back(weft::tools::add_info_command(app));
  commands.push_back(weft::tools::add_plan_command(app));
  commands.push_back(weft::tools::add_replay_command(app));
  commands.push_back(weft::tools::add_model_command(app));
#ifdef WEFT_HAVE_SERVE
  commands.push_back(weft::tools::add_serve_command(app));
#endif

  CLI11_PARSE(app, argc, argv);
  try {
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    if (demo_cmd->parsed()) return weft::tools::run_demo(demo);
    if (ops_cmd->parsed()) {
      weft::tools::load_plugins(ops_plugins);
      if (ops_json) {
        const std::string text =
            ops_name.empty() ? weft::registry_schema_json(ops_backward, 1)
                             : weft::op_schema_json(weft::op_schema(weft::get_op(ops_name)), 1);
        std::printf("%s\n", text.c_str());
      } else if (!ops_name.empty()) {
        std::printf("%s\n", weft::describe_op(weft::get_op(ops_name), true).c_str());
      } else {
        std::printf("%s", weft::describe_registry(!ops_brief, ops_backward).c_str());
      }
      return 0;
    }
    if (version_cmd->parsed()) {
      std::printf("%s\n", version_line().c_str());
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
