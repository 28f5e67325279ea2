// Subcommands of the `weft` program. Each adds itself to the app and returns what runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace weft::tools {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  ///< returns the exit code
};

Command add_info_command(CLI::App& app);    // tools/cmd_info.cc
Command add_plan_command(CLI::App& app);    // tools/cmd_plan.cc
Command add_replay_command(CLI::App& app);  // tools/cmd_replay.cc
Command add_model_command(CLI::App& app);   // tools/cmd_model.cc
#ifdef WEFT_HAVE_SERVE
Command add_serve_command(CLI::App& app);  // tools/cmd_serve.cc
#endif

}  // namespace weft::tools
